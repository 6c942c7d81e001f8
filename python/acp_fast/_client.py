"""`Client`: the blocking client over the Rust core, and `_ClientBase`, what it shares with
`AsyncClient` (options, the core, the observer's callbacks, sessions, state). The calls are
`_calls`'s plans, which `Client` runs in place. No agent outlives the interpreter."""

from __future__ import annotations

import atexit
import errno
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from . import _calls, _convert, _core, _elicitation, _login, _shutdown, _spawn_args
from . import telemetry as _telemetry
from ._core import CLIENT_CLOSED, Update
from ._host import activity_callback, checked_capabilities
from ._options import (
    ClientInfo,
    _check_options,
    _check_type,
    _CoreOptions,
    _journal_epoch,
    host_side,
)
from ._session import Session, _SessionBase
from ._types import (
    DEFAULT_READER_LIMITS,
    DEFAULT_TRANSFER_LIMITS,
    ClientCapabilityConfig,
    Initialize,
    Modes,
    PermissionPolicy,
    PromptResult,
    ReaderLimits,
    ReaderStatus,
    TransferLimits,
)

_S = TypeVar("_S", bound=_SessionBase)

# Every live client, so that interpreter exit stops every agent (no orphans).
_live_clients: weakref.WeakSet[_ClientBase[Any]] = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def _close_live_clients() -> None:
    with _live_lock:
        clients = list(_live_clients)
    for client in clients:
        client.close()


# Close every client before `threading` joins non-daemon threads (which may be inside calls).
_shutdown.install(_close_live_clients)

if TYPE_CHECKING:
    from typing import Self

    from ._agent_spec import AgentSpec
    from .registry import AgentProfile


class _ClientBase(Generic[_S]):
    """What `Client` and `AsyncClient` share: options, the core, the observer's callbacks,
    sessions and state. The calls are `_calls`'s plans, each subclass runs them its way."""

    # AsyncClient: `on_permission` may return an awaitable.
    _asynchronous = False
    # The class of its sessions, as error messages name it.
    _session_kind = "Session"

    def __init__(
        self,
        command: str | os.PathLike[str],
        args: Sequence[str] = (),
        *,
        reader_limits: ReaderLimits = DEFAULT_READER_LIMITS,
        transfer_limits: TransferLimits = DEFAULT_TRANSFER_LIMITS,
        transport_epoch: int | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        client_info: ClientInfo | None = None,
        mcp_servers: Iterable[Any] = (),
        permission_policy: PermissionPolicy = PermissionPolicy(),  # noqa: B008 - frozen
        observer: object | None = None,
        durable: bool = False,
        stderr: Literal["discard", "inherit", "tail"] = "tail",
        stderr_tail_bytes: int = 64 * 1024,
        agent_id: str | None = None,
        session_state: Literal["off", "lenient", "strict"] = "off",
        cancel_grace: float = 5.0,
        capabilities: ClientCapabilityConfig | None = None,
        interrupt: Literal["raise", "cancel"] = "raise",
        telemetry: bool | None = None,
        unstable: bool = False,
        protocol: Literal["v1", "v2", "auto"] = "v1",
    ) -> None:
        """Validates the options and starts the agent (``start()`` then talks to it).

        Args:
            command: The agent's program (looked up on ``PATH`` as `subprocess` does), e.g.
                ``"gemini"``; `demo_agent_command()` gives the bundled demo agent's.
            args: The agent's arguments (a sequence of str, bytes or path-like, not a single
                string); may be given by position, as `subprocess.Popen`'s.
            reader_limits: The longest line accepted from the agent (`ReaderLimits`).
                Default `DEFAULT_READER_LIMITS` (2 MiB).
            transfer_limits: Caps on requests, replies and updates (`TransferLimits`).
                Default `DEFAULT_TRANSFER_LIMITS`.
            transport_epoch: A number above zero stamped on every `Update`, so that
                (epoch, sequence) names an update across runs. Default: when ``observer``
                is a journal (`acp_fast.journal`), one more than the highest epoch it holds
                (appended runs never collide; the journal's own ``transport_epoch``, which
                stamps its other records, is then set to it), else 1.
            cwd: The agent's working directory and the default session's cwd. Default: the
                host's current directory. A missing directory raises `FileNotFoundError`
                naming it.
            env: The agent's whole environment (a mapping of str). Default: the host's.
            client_info: What ``initialize`` reports as ``clientInfo``. Default
                ``ClientInfo()``: name "acp-fast" and the package's version.
            mcp_servers: MCP servers offered to every session the client opens:
                `McpServer` (stdio) or the typed ``acp_fast.model.McpServerStdio``,
                ``McpServerHttp`` and ``McpServerSse`` (HTTP and SSE need the agent's
                ``mcpCapabilities``, else `CapabilityError`).
            permission_policy: How permission requests are answered (`PermissionPolicy`);
                settable later through the ``permission_policy`` attribute. Default: deny.
            observer: Any object with some of the callbacks ``on_update(update)``,
                ``on_permission(request)``, ``on_permission_commit(request)``,
                ``on_activity(activity)``, ``on_sent(line)`` and ``on_received(line)`` (an
                `Observer`, a journal, your own class), or None. What it lacks is simply not
                called: replies, `TurnResult` and policy decisions work without it.
                ``on_elicitation(request)`` answers the agent's `ElicitationRequest` with an
                `ElicitationReply` (None declines); only with it does the client advertise
                ``clientCapabilities.elicitation``, and without it every elicitation is
                declined.
            durable: The audit rule: when True, an update or permission request that the
                observer has no ``on_update`` / ``on_permission_commit`` to record fails the
                call with `MissingDurableObserver` and stops the client. Default False.
            stderr: The agent's stderr: "tail" (default) keeps its last
                ``stderr_tail_bytes`` (`stderr_tail()`, and appended to the error raised when
                the agent exits, e.g. `ConnectError` from ``start()``); "inherit" passes the
                host's stderr; "discard" drops it.
            stderr_tail_bytes: The size of the stderr tail, in bytes (> 0). Default 64 KiB.
            agent_id: The agent's name in errors and records. Default: the command's base
                name.
            session_state: "off" (default), "lenient" or "strict": fold each session's
                updates into ``Session.state`` (an ``acp_fast.model.SessionState``);
                "strict" stops the client on an update it cannot decode.
            cancel_grace: Seconds a cancelled or timed-out turn may take to end (> 0).
                Default 5.
            capabilities: What the client serves to the agent (files, terminals), as
                `ClientCapabilityConfig`; None (default) advertises nothing.
            interrupt: Ctrl-C (KeyboardInterrupt) during a turn on the main thread: "raise"
                (default) raises it and stops the client; "cancel" cancels the turn first
                (one ``session/cancel``, pending permission requests answered cancelled) and
                the turn returns with the agent's stop reason; a second Ctrl-C within 2 s
                raises and stops the client. `Session.prompt` may override it per turn.
            telemetry: OpenTelemetry spans and metrics for this client (`acp_fast.telemetry`):
                True on, False off, None (default) as `acp_fast.telemetry.instrument()` set
                for every client (off unless called). Needs the ``otel`` extra; without it,
                True warns once and records nothing.
            unstable: Allow the calls of the schema's unstable part (``fork_session``,
                ``Session.set_title``, ``Session.status``), each still refused with
                `CapabilityError` unless the agent advertises it. Default False: they raise
                `CapabilityError` naming this option.
            protocol: The ACP version to speak: "v1" (default), "v2" (the v2 preview; an
                agent that answers 1 fails `start` with `AgentProtocolError`) or "auto"
                (offer 2, go on in v1 when the agent answers 1, as the official SDKs do).
                ``protocol_version`` says what was agreed. The calls and results are the
                same in both; what v2 lacks raises `CapabilityError` naming the version
                (``load_session``: use ``resume_session(replay_from="start")``). v2 has no
                host side: "v2" with files or terminals in ``capabilities`` is a
                `ValueError`; with "auto" they are served only if the agent speaks v1
                (`serves_host`).

        Raises:
            TypeError: an option has the wrong type (the message names it and the type
                expected).
            ValueError: an option's value is out of range (`InvalidLimits` for limits).
            FileNotFoundError: ``command`` or ``cwd`` does not exist.
            CapacityOverflow: the reader's buffer could not be allocated.
        """
        self._core: _core.CoreClient | None = None
        # OpenTelemetry (acp_fast.telemetry): None when off; it observes through the observer.
        self._telemetry = _telemetry.for_client(telemetry)
        if self._telemetry is not None:
            observer = self._telemetry.observe(observer)
            env = _telemetry.agent_env(env)
        self._setup()
        client_info = _check_options(
            reader_limits,
            transfer_limits,
            permission_policy,
            client_info,
            capabilities,
            durable,
            agent_id,
            cancel_grace,
            session_state,
            interrupt,
            protocol,
        )
        if not isinstance(unstable, bool):
            raise TypeError(f"unstable must be a bool (got {unstable!r})")
        self._unstable = unstable
        self._interrupt = interrupt
        self._protocol = protocol
        self._session_state = session_state
        # Each open session's folded state (model.SessionState), by id.
        self._states: dict[str, Any] = {}
        spawn = _spawn_args.convert(command, args, env, cwd)
        self._cwd = spawn.cwd
        # The agent's command as started: a terminal login runs it again (`terminal_login`).
        self._spawn_args = spawn
        # A client made by `from_spec`: its agent's profile (each session asks the host).
        self._profile: AgentProfile | None = None
        self._mcp_servers = _convert.mcp_list(mcp_servers, "mcp_servers")
        self._policy = permission_policy
        self._capabilities = capabilities
        self._sessions: dict[str, _S] = {}
        self._default: _S | None = None
        self._cancel_grace = float(cancel_grace)
        self.agent_id = agent_id if agent_id is not None else os.path.basename(spawn.command)
        # `is not None`, not truthiness: an observer may be falsy (say, an empty journal).
        has = observer is not None
        journal_epoch = None
        if transport_epoch is None:
            journal_epoch = _journal_epoch(observer) if has else None
            transport_epoch = 1 if journal_epoch is None else journal_epoch
        on_update = getattr(observer, "on_update", None) if has else None
        on_permission = getattr(observer, "on_permission", None) if has else None
        on_commit = getattr(observer, "on_permission_commit", None) if has else None

        # The core builds the `PermissionRequest` and calls this with it.
        preview = _convert.permission_preview(on_permission, self._asynchronous)
        self._core = self._spawn(
            _CoreOptions(
                command=spawn.command,
                args=spawn.args,
                message_bytes=reader_limits.message_bytes,
                transfer_limits=transfer_limits,
                transport_epoch=transport_epoch,
                cwd=self._cwd,
                env=spawn.env,
                client_info=(client_info.name, client_info.title, client_info.version),
                mcp_servers=self._mcp_servers,
                permission_policy=permission_policy,
                on_update=on_update,
                permission_preview=preview,
                permission_commit=on_commit,
                on_sent=getattr(observer, "on_sent", None) if has else None,
                on_received=getattr(observer, "on_received", None) if has else None,
                fold=None if session_state == "off" else self._fold,
                stderr=stderr,
                stderr_tail_bytes=stderr_tail_bytes,
                agent_id=self.agent_id,
                cancel_grace=self._cancel_grace,
                capabilities=checked_capabilities(capabilities),
                on_activity=activity_callback(
                    getattr(observer, "on_activity", None) if has else None
                ),
                durable=durable,
                elicitation_preview=_elicitation.preview(
                    getattr(observer, "on_elicitation", None) if has else None,
                    self._asynchronous,
                    _policy_declines(weakref.ref(self)),
                ),
                protocol=protocol,
            )
        )
        if journal_epoch is not None:
            # The journal stamps its other records (sent lines, decisions) with this epoch
            # (an epoch given by the caller leaves the journal as the caller set it up).
            observer.transport_epoch = transport_epoch  # type: ignore[union-attr]
        with _live_lock:
            _live_clients.add(self)

    @classmethod
    def from_spec(cls, spec: AgentSpec, /, **options: Any) -> Self:
        """A client for `spec` (`acp_fast.AgentSpec`, e.g. ``AgentSpec.from_registry``): its
        command and arguments, its environment with the registry's and the profile's
        variables on top (`AgentSpec.environment`; an ``env=`` here replaces the spec's base
        environment, not those variables), its ``client_options`` with `options` over them.
        When the spec has a profile, each session the client opens is switched to the
        profile's ask mode when the agent offers it (see `Session.asks_permission`)."""
        merged = {**spec.client_options, **options}
        base = merged.pop("env", spec.env)
        env: Mapping[str, str] | None
        if spec.add_env:
            env = {**(os.environ if base is None else base), **spec.add_env}
        else:
            env = base
        client = cls(spec.command, spec.args, env=env, **merged)
        client._profile = spec.profile
        return client

    def _spawn(self, options: _CoreOptions) -> _core.CoreClient:
        """Starts the agent (the core spawns it); a missing cwd is named as such."""
        try:
            return _core.CoreClient(options)
        except (FileNotFoundError, NotADirectoryError) as error:
            # The spawn's error names the program even when the directory is what is missing.
            if self._cwd is not None and not os.path.isdir(self._cwd):
                raise FileNotFoundError(
                    errno.ENOENT,
                    "the agent's cwd does not exist or is not a directory",
                    self._cwd,
                ) from error
            raise

    def _fold(self, update: Update, mode_ids: list[str]) -> Any:
        """Folds an update routed to an open session, after ``on_update`` (model.md §7). In
        strict mode a decode or fold error propagates and stops the client, the state unchanged."""
        from . import model

        strict = self._session_state == "strict"
        state = self._states.get(update.session_id)
        if state is None:
            # v2's tool-call updates are upserts (the fold needs the agreed version).
            version = self._live.protocol_version or 1
            state = model.session_update_fold(mode_ids, protocol_version=version)
        self._states[update.session_id] = state.apply(
            model.decode_update(update.envelope, strict=strict), strict=strict
        )
        return None

    @property
    def _live(self) -> _core.CoreClient:
        if self._core is None:  # only when __init__ failed part-way
            raise RuntimeError("the client was not constructed")
        return self._core

    def _session_cwd(self, cwd: str | os.PathLike[str] | None) -> str:
        """A session's directory: `cwd`, else the client's, else the host's; absolute, UTF-8."""
        path = self._cwd if cwd is None else os.fspath(cwd)
        return os.path.abspath(_spawn_args.session_cwd(path))

    def _setup(self) -> None:
        """The driver's own state, made before the agent starts."""

    def _make_session(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> _S:
        raise NotImplementedError

    def _register_roots(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> None:
        """The session's roots for files and terminals (host.md §2), realpath'd now."""
        if self._capabilities is not None:
            self._live.host_roots(session_id, cwd, list(directories))

    def _opened(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> _S:
        session = self._make_session(session_id, cwd, directories)
        self._register_roots(session_id, cwd, directories)
        self._sessions[session_id] = session
        if self._default is None:
            self._default = session
        return session

    def _forget(self, session: _SessionBase) -> None:
        self._sessions.pop(session.session_id, None)
        self._states.pop(session.session_id, None)
        if self._core is not None and self._capabilities is not None:
            self._core.host_forget(session.session_id)

    def request_cancel(self) -> None:
        """Freezes, then kills, the agent, its process group and every descendant; returns at once.
        Any thread. The call in flight then fails as the agent's output ends; `close()` is
        still needed to reap the agent and release the client."""
        self._live.request_cancel()

    def close(self, *, grace: float = 0.0) -> None:
        raise NotImplementedError

    def __del__(self) -> None:
        # The core's own drop stops the agent too; this makes it happen at a predictable time.
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()

    # --- state ---------------------------------------------------------------------------

    @property
    def permission_policy(self) -> PermissionPolicy:
        """The `PermissionPolicy` later permission requests are decided by; assign a new one
        to change it (between calls; TypeError for anything but a `PermissionPolicy`)."""
        return self._policy

    @permission_policy.setter
    def permission_policy(self, policy: PermissionPolicy) -> None:
        _check_type(policy, PermissionPolicy, "permission_policy", "a PermissionPolicy")
        self._live.set_policy(policy)
        self._policy = policy

    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` of the agent's stderr, decoded leniently ("" unless
        ``stderr="tail"``, the default). Agent text: escape it before printing it to a
        terminal (``acp_fast._text.printable``)."""
        return self._live.stderr_tail()

    def reader_status(self) -> ReaderStatus:
        """A snapshot of the line reader (`ReaderStatus`): its limit, buffer, longest line
        seen, rejected lines and whether reading has stopped."""
        s = self._live.reader_status()
        return ReaderStatus(
            s.phase,
            s.message_bytes,
            s.storage_bytes,
            s.buffered_bytes,
            s.high_water_message_bytes,
            s.rejected_message_count,
            s.terminal,
        )

    @property
    def agent_error(self) -> str | None:
        """The message of the latest JSON-RPC error answer from the agent, if any."""
        return self._live.agent_error

    @property
    def protocol(self) -> str:
        """The ``protocol`` the client was made with: "v1", "v2" or "auto"."""
        return self._protocol

    @property
    def protocol_version(self) -> int | None:
        """The ACP version the agent agreed to in ``initialize`` (1 or 2); None before
        `start` has its answer."""
        return self._live.protocol_version

    @property
    def serves_host(self) -> bool:
        """True when the agent was offered the host side (files and terminals, from
        ``capabilities``) and the client serves it: only in ACP v1. False before `start`,
        without such capabilities, or when v2 was agreed (v2 has no ``fs/*`` or
        ``terminal/*``: the agent's requests for them are answered "method not found")."""
        return self.protocol_version == 1 and bool(host_side(self._capabilities))

    @property
    def initialize(self) -> Initialize:
        """The agent's answer to ``initialize`` (`Initialize`); empty before `start`."""
        return _convert.initialize(self._live.initialize_info())

    def _terminal_login(self, method_id: str) -> _login.TerminalLogin:
        """The checked terminal login of `method_id` (see `Client.terminal_login`)."""
        info = self.initialize
        if info.protocol_version == 0:
            raise RuntimeError("terminal_login needs the agent's initialize answer: start() first")
        spawn = self._spawn_args
        return _login.login_for(
            info.raw,
            method_id,
            command=spawn.command,
            args=spawn.args,
            env=None if spawn.env is None else dict(spawn.env),
            cwd=spawn.cwd,
            agent_id=self.agent_id,
        )

    @property
    def modes(self) -> Modes:
        """The default session's modes (empty without one)."""
        if self._default is None:
            return Modes()
        return self._default.modes

    @property
    def session_id(self) -> str | None:
        """The default session's id (None before one is open)."""
        return None if self._default is None else self._default.session_id

    @property
    def pid(self) -> int | None:
        """The agent's process id (also its process group's); None once the client is
        closed."""
        return self._live.pid

    @property
    def next_update_sequence(self) -> int:
        """The ``update_sequence`` the next update will get (updates are numbered from 1)."""
        return self._live.next_update_sequence

    @property
    def default_session(self) -> _S | None:
        """The first session opened (by `start` or a ``new_session``/``load_session``), which
        the client's own ``prompt`` calls use; None before."""
        return self._default

    @property
    def sessions(self) -> tuple[_S, ...]:
        """Open sessions, in opening order."""
        return tuple(s for s in self._sessions.values() if not s.closed)

    def session(self, session_id: str) -> _S:
        """The open session with this id; KeyError when none is open."""
        session = self._sessions.get(session_id)
        if session is None or session.closed:
            raise KeyError(session_id)
        return session

    def _check_usable(self) -> None:
        """RuntimeError for a call on a closed client (a mistake of the caller, not the
        agent's: not `AgentProtocolError`)."""
        core = self._core
        if core is None or core.closed:
            raise RuntimeError(CLIENT_CLOSED)

    def _default_session(self) -> _S:
        self._check_usable()
        if self._default is None or self._default.closed:
            if self._default is None and self._live.initialize_info() is None:
                raise RuntimeError("the client is not started: call start() first")
            raise RuntimeError(
                "no session is open: the default session was closed or start(new_session="
                "False) opened none; call new_session() or use a Session's prompt()"
            )
        return self._default

    def _turn_interrupt(self, interrupt: str | None) -> str:
        if interrupt is None:
            return self._interrupt
        if interrupt not in ("raise", "cancel"):
            raise ValueError(f'interrupt must be "raise" or "cancel" (got {interrupt!r})')
        return interrupt

    def _session_args(
        self,
        cwd: str | os.PathLike[str] | None,
        mcp_servers: Iterable[Any] | None,
        additional_directories: Iterable[str],
    ) -> tuple[str, list[tuple[Any, ...]] | None, tuple[str, ...]]:
        """A session call's directory, MCP servers (None: the client's) and extra directories."""
        path = self._session_cwd(cwd)
        servers = None if mcp_servers is None else [_convert.mcp_tuple(s) for s in mcp_servers]
        return path, servers, tuple(os.fspath(d) for d in additional_directories)

    def __repr__(self) -> str:
        core = self._core
        name = type(self).__name__
        if core is None:
            return f"<acp_fast.{name} (not constructed)>"
        state = "closed" if core.closed else f"pid={core.pid}"
        return f"<acp_fast.{name} {state} session_id={self.session_id!r}>"


def _policy_declines(ref: weakref.ref[Any]) -> Any:
    """The client's current `decline_elicitations` (it may be given a new policy), through a
    weak reference: the core holds this, and must not keep the client alive."""

    def declines() -> tuple[Any, ...]:
        client = ref()
        return () if client is None else tuple(client._policy.decline_elicitations)

    return declines


class Client(_ClientBase[Session]):
    """One agent process: one ``initialize``, any number of sessions.

    ```python
    import acp_fast as acp

    with acp.Client(*acp.demo_agent_command()) as client:   # or acp.Client("gemini", ["--acp"])
        client.start()
        print(client.prompt("What does this repo do?"))
    ```

    The constructor validates the options, allocates the reader's buffer
    (``message_bytes + 1`` bytes) and starts the agent in a process group of its own; `start`
    opens the conversation and, by default, the default session. Every option has a default
    but ``command``; see ``__init__`` for each. Calls run one at a time; `request_cancel`,
    `close` and `Session.cancel` may be called from any thread. Calls before `start` or
    after `close` raise `RuntimeError`; `AgentProtocolError` means the agent misbehaved.

    A client belongs to the process that made it: after ``os.fork()`` the child cannot use it
    (calls raise `AgentProtocolError`, `close()` does nothing), and the parent's is unaffected.
    Interpreter exit (and, through a guard process, any death of the host) stops every agent.
    """

    def _make_session(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> Session:
        return Session(self, session_id, cwd, directories)

    # --- calls ---------------------------------------------------------------------------

    def start(self, *, new_session: bool = True, timeout: float | None = None) -> None:
        """Sends ``initialize`` (the version ``protocol`` offers; `protocol_version` then says
        what was agreed), then ``session/new`` in the client's ``cwd``, which becomes the
        default session.

        Args:
            new_session: False: only ``initialize`` (then, say, `authenticate` and
                `new_session`).
            timeout: Seconds the handshake may take (> 0); then the agent is stopped and
                `ConnectError` raised. None: no limit.

        Raises:
            ConnectError: the handshake failed: an error answer, another protocol version,
                the agent exiting (its stderr tail in the message), the timeout; -32000
                "authentication required" leaves the client usable.
            RuntimeError: the client is closed or was already started.
        """
        _calls.run(self, _calls.start(self, new_session, timeout))

    def new_session(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> Session:
        """Opens a session (``session/new``); the first one opened becomes the default.

        Args:
            cwd: The session's directory (absolute once resolved). Default: the client's.
            mcp_servers: MCP servers for this session (as the client's ``mcp_servers``).
                None: the client's.
            additional_directories: Extra absolute directories the session may use (needs
                the agent's ``sessionCapabilities.additionalDirectories``).
            system_prompt: Instructions for the agent's system prompt (``systemPrompt``, one
                text block), written only when given; `CapabilityError` unless the agent
                advertises ``sessionCapabilities.systemPrompt`` (and, for "override",
                ``systemPrompt.mode.override``). None (default): nothing is written.
            system_prompt_mode: "append" (default: added to the agent's own instructions) or
                "override" (replaces its built-in default instructions).
        """
        plan = _calls.new_session(
            self, cwd, mcp_servers, additional_directories, system_prompt, system_prompt_mode
        )
        return _calls.run(self, plan)

    def load_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> Session:
        """Loads a session (``session/load``, needs ``loadSession``): every update the agent
        replays is numbered, delivered and routed to it before this returns.

        Args:
            session_id: The session to load (from `list_sessions` or an earlier run).
            cwd: As for `new_session`.
            mcp_servers: As for `new_session`.
            additional_directories: As for `new_session`.
            system_prompt: As for `new_session`.
            system_prompt_mode: As for `new_session`.
        """
        plan = _calls.load_session(
            self,
            session_id,
            cwd,
            mcp_servers,
            additional_directories,
            False,
            system_prompt,
            system_prompt_mode,
        )
        return _calls.run(self, plan)

    def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
        replay_from: Literal["start"] | None = None,
    ) -> Session:
        """Resumes a session (``session/resume``). Arguments as `load_session`, and:

        Args:
            replay_from: None (default): the agent replays nothing. "start" (ACP v2, the
                agent's ``session.resume`` capability): the agent replays the session from its
                start, and every replayed update is numbered, delivered and routed to it
                before this returns, as `load_session` does in v1. In v1 it raises
                `CapabilityError` (use `load_session`).
        """
        plan = _calls.load_session(
            self,
            session_id,
            cwd,
            mcp_servers,
            additional_directories,
            True,
            system_prompt,
            system_prompt_mode,
            replay_from,
        )
        return _calls.run(self, plan)

    def fork_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> Session:
        """Forks a session (``session/fork``, unstable): a new session from ``session_id``'s
        context (the agent's, open here or not), opened as `new_session` opens one. Needs the
        client made with ``unstable=True`` and the agent's ``sessionCapabilities.fork``, else
        `CapabilityError`. ``cwd``: default the client's; the other arguments as for
        `new_session`."""
        plan = _calls.fork_session(
            self,
            session_id,
            cwd,
            mcp_servers,
            additional_directories,
            system_prompt,
            system_prompt_mode,
        )
        return _calls.run(self, plan)

    def list_sessions(self, cwd: str | os.PathLike[str] | None = None) -> tuple[Any, ...]:
        """Every session the agent lists (``session/list``, all pages, in its order), as
        ``acp_fast.model.SessionInfo``; ``cwd`` keeps those of one directory."""
        return _calls.run(self, _calls.list_sessions(self, cwd))

    def delete_session(self, session_id: str) -> None:
        """`session/delete`; an open handle for it is then closed locally."""
        _calls.run(self, _calls.delete_session(self, session_id))

    def authenticate(self, method_id: str) -> None:
        """`authenticate` with one of `initialize.auth_methods` (not a terminal method)."""
        _calls.run(self, _calls.authenticate(self, method_id))

    def terminal_login(self, method_id: str, *, timeout: float | None = None) -> int:
        """Runs the agent's terminal login method `method_id` (an `initialize.auth_methods`
        entry of type "terminal", offered to a client made with
        ``ClientCapabilityConfig(auth_terminal=True)``) on this process's terminal and waits
        for it: the agent's command again, with the method's arguments and variables. Returns
        its exit status (0: logged in; a death by signal is ``-signum``). The running agent
        does not see the new credentials: close this client and start another.

        The method is the agent's text and is checked first (`acp_fast._login`: bounded, no
        dynamic-loader variables, the program found with this client's PATH). The login runs
        in a process group of its own, the terminal's foreground while it runs; whatever it
        leaves in that group is stopped when it ends, or on `timeout` (seconds; then
        `subprocess.TimeoutExpired`).

        Raises:
            CapabilityError: the agent offers no terminal method `method_id`.
            AgentProtocolError: the method is malformed or asks for what is refused.
            RuntimeError: the client was not started.
        """
        return _login.run_login(self._terminal_login(method_id), timeout=timeout)

    def logout(self) -> None:
        """``logout`` (needs the agent's ``auth.logout`` capability)."""
        _calls.run(self, _calls.logout(self))

    def drain(self, timeout: float = 0.0) -> int:
        """Reads and handles what the agent sent between calls, for up to ``timeout`` seconds
        (0: only what is already readable); returns the number of updates delivered."""
        return self._live.drain(timeout)

    def prompt(self, text: str, *, timeout: float | None = None) -> str:
        """Sends one text prompt to the default session and returns the reply text.

        Args:
            text: The prompt (a str).
            timeout: Seconds the turn may take (> 0); then it is cancelled and `TurnTimeout`
                raised. None: no limit.
        """
        return _calls.run(self, _calls.prompt(self, text, timeout))

    def prompt_detailed(self, text: str, *, timeout: float | None = None) -> PromptResult:
        """Sends one text prompt to the default session; returns the reply, the stop reason
        and any overflow record (`PromptResult`). Arguments as `prompt`."""
        return _calls.run(self, _calls.prompt_detailed(self, text, timeout))

    def prompt_content(
        self, blocks: Iterable[Any], *, timeout: float | None = None
    ) -> PromptResult:
        """Sends one prompt of content blocks (`Text`, `Image`, `Audio`, `TextResource`,
        `BlobResource`, `ResourceLink` or typed ``acp_fast.model`` blocks), in order, to the
        default session; the agent's prompt capabilities are not checked here (they are by
        `Session.prompt`). Returns a `PromptResult`."""
        return _calls.run(self, _calls.prompt_content(self, blocks, timeout))

    def close(self, *, grace: float = 0.0) -> None:
        """Stops the agent's group and reaps the agent. Idempotent; any thread. With ``grace``
        > 0 the agent's stdin is closed first, and the agent and the processes of its group
        have that long to exit by themselves (what it started may still be persisting a
        session after the agent exited); whatever is left is then killed."""
        if self._core is not None:
            self._core.close(grace)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- state ---------------------------------------------------------------------------

"""`Client`: the typed facade over the Rust core. It validates options, turns records into the
frozen data classes of `_types`, and makes sure no agent outlives the interpreter."""

from __future__ import annotations

import atexit
import errno
import json
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

from . import _core, _interrupt, _shutdown, _spawn_args
from . import telemetry as _telemetry
from ._core import CLIENT_CLOSED, Update
from ._errors import (
    ConnectError,
    TurnTimeout,
)
from ._host import activity_callback, capability_tuple
from ._options import (
    _check_type,
    _CoreOptions,
    _journal_epoch,
    _mcp_list,
    _observer_answer,
    content_tuple,
    mcp_tuple,
)
from ._session import Session, _SessionBase, check_timeout, content_tuples, turn_result
from ._types import (
    DEFAULT_READER_LIMITS,
    DEFAULT_TRANSFER_LIMITS,
    AuthMethod,
    ClientCapabilityConfig,
    ClientInfo,
    Initialize,
    Modes,
    PermissionPolicy,
    PermissionRequest,
    PromptResult,
    ReaderLimits,
    ReaderStatus,
    Text,
    TransferLimits,
    TurnResult,
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


class _ClientBase(Generic[_S]):
    """What `Client` and `AsyncClient` share: options, the core, the observer's callbacks,
    sessions and state. The calls live in the subclasses."""

    # AsyncClient: `on_permission` may return an awaitable.
    _asynchronous = False

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
        _check_type(reader_limits, ReaderLimits, "reader_limits", "a ReaderLimits")
        _check_type(transfer_limits, TransferLimits, "transfer_limits", "a TransferLimits")
        _check_type(permission_policy, PermissionPolicy, "permission_policy", "a PermissionPolicy")
        if client_info is None:
            client_info = ClientInfo()
        _check_type(client_info, ClientInfo, "client_info", "a ClientInfo or None")
        if capabilities is not None:
            _check_type(
                capabilities, ClientCapabilityConfig, "capabilities", "a ClientCapabilityConfig"
            )
        _check_type(durable, bool, "durable", "a bool")
        if agent_id is not None:
            _check_type(agent_id, str, "agent_id", "a str or None")
        if isinstance(cancel_grace, bool) or not isinstance(cancel_grace, (int, float)):
            raise TypeError(
                f"cancel_grace must be a number of seconds (got {type(cancel_grace).__name__})"
            )
        if session_state not in ("off", "lenient", "strict"):
            raise ValueError(
                f'session_state must be "off", "lenient" or "strict" (got {session_state!r})'
            )
        if interrupt not in ("raise", "cancel"):
            raise ValueError(f'interrupt must be "raise" or "cancel" (got {interrupt!r})')
        self._interrupt = interrupt
        self._session_state = session_state
        # Each open session's folded state (model.SessionState), by id.
        self._states: dict[str, Any] = {}
        spawn = _spawn_args.convert(command, args, env, cwd)
        self._cwd = spawn.cwd
        self._mcp_servers = _mcp_list(mcp_servers, "mcp_servers")
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

        preview = None
        if on_permission is not None:
            asked = on_permission
            deferrable = self._asynchronous
            if deferrable:
                import inspect  # the asyncio facade's import (inspect loads ~40 modules)

            # The core builds the `PermissionRequest` and calls this with it.
            def preview(request: PermissionRequest) -> Any:
                reply = asked(request)
                if deferrable and inspect.isawaitable(reply):
                    return reply  # the core waits for it while reading goes on
                return _observer_answer(reply)

        try:
            self._core = _core.CoreClient(
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
                    capabilities=capability_tuple(capabilities),
                    on_activity=activity_callback(
                        getattr(observer, "on_activity", None) if has else None
                    ),
                    durable=durable,
                )
            )
        except (FileNotFoundError, NotADirectoryError) as error:
            # The spawn's error names the program even when the directory is what is missing.
            if self._cwd is not None and not os.path.isdir(self._cwd):
                raise FileNotFoundError(
                    errno.ENOENT,
                    "the agent's cwd does not exist or is not a directory",
                    self._cwd,
                ) from error
            raise
        if journal_epoch is not None:
            # The journal stamps its other records (sent lines, decisions) with this epoch
            # (an epoch given by the caller leaves the journal as the caller set it up).
            observer.transport_epoch = transport_epoch  # type: ignore[union-attr]
        with _live_lock:
            _live_clients.add(self)

    def _fold(self, update: Update, mode_ids: list[str]) -> Any:
        """Folds an update routed to an open session, after ``on_update`` (model.md §7). In
        strict mode a decode or fold error propagates and stops the client, the state unchanged."""
        from . import model

        strict = self._session_state == "strict"
        state = self._states.get(update.session_id)
        if state is None:
            state = model.session_update_fold(mode_ids)
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

    def _turn_result(
        self, session_id: str, status: str, payload: Any, timeout: float | None, typed: bool
    ) -> TurnResult:
        """A prompt's `(status, payload)` from the core as a `TurnResult` or `TurnTimeout`."""
        if status == "timeout":
            raise TurnTimeout(
                f"the turn on session {session_id!r} did not end within {timeout} s "
                f"and its cancel grace of {self._cancel_grace} s; its answer will be dropped",
                session_id=session_id,
                timeout=float(timeout or 0.0),
                cancel_grace=self._cancel_grace,
            )
        # The wave-1 calls return a PromptResult: nothing of the turn's record is decoded for them.
        result = turn_result(payload, typed=typed)
        if status == "late":
            raise TurnTimeout(
                f"the turn on session {session_id!r} did not end within {timeout} s; "
                f"it was cancelled and ended with {result.stop_reason!r} (see .result)",
                session_id=session_id,
                timeout=float(timeout or 0.0),
                cancel_grace=self._cancel_grace,
                result=result,
            )
        return result

    def _list_result(self, raw: list[str]) -> tuple[Any, ...]:
        from . import model

        return tuple(model.SessionInfo.from_json(json.loads(item), strict=False) for item in raw)

    def request_cancel(self) -> None:
        """Sends SIGTERM, then SIGKILL, to the agent's whole process group; returns at once.
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
    def initialize(self) -> Initialize:
        """The agent's answer to ``initialize`` (`Initialize`); empty before `start`."""
        info = self._live.initialize_info()
        if info is None:
            return Initialize()
        methods, agent_info, raw = info.auth_methods, info.agent_info, info.raw
        from . import model

        raw_object = json.loads(raw)
        capabilities = raw_object.get("agentCapabilities") if isinstance(raw_object, dict) else None
        if not isinstance(capabilities, dict):
            capabilities = {}
        return Initialize(
            protocol_version=info.protocol_version,
            load_session=info.load_session,
            prompt_image=info.prompt_image,
            prompt_audio=info.prompt_audio,
            prompt_embedded_content=info.prompt_embedded_content,
            auth_methods=tuple(AuthMethod(*m) for m in methods),
            agent_info=None if agent_info is None else json.loads(agent_info),
            raw=raw_object,
            agent_capabilities=model.AgentCapabilities.from_json(capabilities, strict=False),
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
        servers = None if mcp_servers is None else [mcp_tuple(s) for s in mcp_servers]
        return path, servers, tuple(os.fspath(d) for d in additional_directories)

    def __repr__(self) -> str:
        core = self._core
        name = type(self).__name__
        if core is None:
            return f"<acp_fast.{name} (not constructed)>"
        state = "closed" if core.closed else f"pid={core.pid}"
        return f"<acp_fast.{name} {state} session_id={self.session_id!r}>"


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
        """Sends ``initialize`` (protocol version 1), then ``session/new`` in the client's
        ``cwd``, which becomes the default session.

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
        self._check_usable()
        check_timeout(timeout)
        cwd = _spawn_args.session_cwd(self._cwd)
        try:
            # The core raises ConnectError itself (and stops the client unless -32000).
            session_id = self._live.start(cwd, new_session, timeout).run()
        except ConnectError as failure:
            _telemetry.started(self, failure)
            raise
        _telemetry.started(self)
        if session_id is not None:
            self._opened(session_id, cwd, ())

    def new_session(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
    ) -> Session:
        """Opens a session (``session/new``); the first one opened becomes the default.

        Args:
            cwd: The session's directory (absolute once resolved). Default: the client's.
            mcp_servers: MCP servers for this session (as the client's ``mcp_servers``).
                None: the client's.
            additional_directories: Extra absolute directories the session may use (needs
                the agent's ``sessionCapabilities.additionalDirectories``).
        """
        path, servers, directories = self._session_args(cwd, mcp_servers, additional_directories)
        session_id = self._live.new_session(path, servers, list(directories)).run()
        return self._opened(session_id, path, directories)

    def load_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
    ) -> Session:
        """Loads a session (``session/load``, needs ``loadSession``): every update the agent
        replays is numbered, delivered and routed to it before this returns.

        Args:
            session_id: The session to load (from `list_sessions` or an earlier run).
            cwd: As for `new_session`.
            mcp_servers: As for `new_session`.
            additional_directories: As for `new_session`.
        """
        return self._load(session_id, cwd, mcp_servers, additional_directories, resume=False)

    def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
    ) -> Session:
        """Resumes a session (``session/resume``): the agent replays nothing. Arguments as
        `load_session`."""
        return self._load(session_id, cwd, mcp_servers, additional_directories, resume=True)

    def _load(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None,
        mcp_servers: Iterable[Any] | None,
        additional_directories: Iterable[str],
        *,
        resume: bool,
    ) -> Session:
        path, servers, directories = self._session_args(cwd, mcp_servers, additional_directories)
        self._register_roots(session_id, path, directories)  # a replay may use files
        self._live.load_session(session_id, path, servers, list(directories), resume).run()
        return self._opened(session_id, path, directories)

    def list_sessions(self, cwd: str | os.PathLike[str] | None = None) -> tuple[Any, ...]:
        """Every session the agent lists (``session/list``, all pages, in its order), as
        ``acp_fast.model.SessionInfo``; ``cwd`` keeps those of one directory."""
        path = None if cwd is None else os.path.abspath(os.fspath(cwd))
        return self._list_result(self._live.list_sessions(path).run())

    def delete_session(self, session_id: str) -> None:
        """`session/delete`; an open handle for it is then closed locally."""
        self._live.delete_session(session_id).run()
        session = self._sessions.get(session_id)
        if session is not None:
            session._mark_closed()

    def authenticate(self, method_id: str) -> None:
        """`authenticate` with one of `initialize.auth_methods` (not a terminal method)."""
        self._live.authenticate(method_id).run()

    def logout(self) -> None:
        """``logout`` (needs the agent's ``auth.logout`` capability)."""
        self._live.logout().run()

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
        return self.prompt_detailed(text, timeout=timeout).response

    def prompt_detailed(self, text: str, *, timeout: float | None = None) -> PromptResult:
        """Sends one text prompt to the default session; returns the reply, the stop reason
        and any overflow record (`PromptResult`). Arguments as `prompt`."""
        if not isinstance(text, str):
            raise TypeError(
                f"the prompt must be a str (got {type(text).__name__}); for content blocks "
                "use prompt_content() or Session.prompt()"
            )
        return self.prompt_content([Text(text)], timeout=timeout)

    def prompt_content(
        self, blocks: Iterable[Any], *, timeout: float | None = None
    ) -> PromptResult:
        """Sends one prompt of content blocks (`Text`, `Image`, `Audio`, `TextResource`,
        `BlobResource`, `ResourceLink` or typed ``acp_fast.model`` blocks), in order, to the
        default session; the agent's prompt capabilities are not checked here (they are by
        `Session.prompt`). Returns a `PromptResult`."""
        session = self._default_session()
        turn = session._turn(blocks, timeout=timeout, gated=False, typed=False)
        return PromptResult(turn.response, turn.stop_reason, turn.overflow)

    def _run_turn(
        self,
        session: Session,
        blocks: str | Iterable[Any],
        timeout: float | None,
        gated: bool,
        typed: bool = True,
        interrupt: str = "raise",
    ) -> TurnResult:
        tuples = content_tuples(blocks, content_tuple)
        core = self._live
        session_id = session.session_id
        scope = _telemetry.turn(self, session_id, blocks)
        with scope as record:
            meta = scope.meta()  # the turn's trace context, when telemetry is on
            if interrupt == "cancel":
                with _interrupt.cancelling(lambda: core.cancel(session_id)):
                    status, payload = core.prompt(session_id, tuples, timeout, gated, meta).run()
            else:
                status, payload = core.prompt(session_id, tuples, timeout, gated, meta).run()
            return record(self._turn_result(session_id, status, payload, timeout, typed))

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

"""`Client`: the typed facade over the Rust core. It validates options, turns records into the
frozen data classes of `_types`, and makes sure no agent outlives the interpreter."""

from __future__ import annotations

import atexit
import json
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from . import _core, _shutdown, _spawn_args
from . import telemetry as _telemetry
from ._core import Update
from ._errors import AgentProtocolError, ConnectError, TurnTimeout
from ._host import activity_callback, capability_tuple
from ._session import Session, _SessionBase, content_tuples, turn_result
from ._types import (
    Audio,
    AuthMethod,
    BlobResource,
    ClientCapabilityConfig,
    ClientInfo,
    ContentBlock,
    Image,
    Initialize,
    McpServer,
    Modes,
    PermissionOutcome,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    PromptResult,
    ReaderLimits,
    ReaderStatus,
    ResourceLink,
    Text,
    TextResource,
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


def _observer_answer(reply: object) -> tuple[str, str, str, str] | None:
    """`on_permission`'s answer as the core reads it: ("reply", outcome, option id, option kind)
    or ("outcome", decision, option id, reason); None abstains."""
    if reply is None:
        return None
    if isinstance(reply, PermissionReply):
        return ("reply", reply.outcome, reply.option_id, reply.option_kind)
    if isinstance(reply, PermissionOutcome):
        return ("outcome", reply.decision.value, reply.option_id or "", reply.reason or "")
    raise TypeError(
        "on_permission must return a PermissionReply, a PermissionOutcome or None "
        f"(got {type(reply).__name__})"
    )


def content_tuple(block: ContentBlock) -> tuple[Any, ...]:
    match block:
        case Text(text=text):
            return ("text", text)
        case Image(mime_type=mime, data=data, uri=uri):
            return ("image", mime, data, uri)
        case Audio(mime_type=mime, data=data, uri=uri):
            return ("audio", mime, data, uri)
        case TextResource(uri=uri, text=text, mime_type=mime):
            return ("resource_text", uri, text, mime)
        case BlobResource(uri=uri, blob=blob, mime_type=mime):
            return ("resource_blob", uri, blob, mime)
        case ResourceLink(
            uri=uri, name=name, mime_type=mime, title=title, description=desc, size=size
        ):
            return ("resource_link", uri, name, mime, title, desc, size)
    raise TypeError(f"not a content block: {block!r}")


@dataclass(frozen=True)
class _CoreOptions:
    """Everything `_core.CoreClient` reads, by name; it validates each value itself, so every
    limit's message lives in one place (the Rust binding)."""

    command: str
    args: list[str]
    message_bytes: object
    transfer_limits: TransferLimits
    transport_epoch: object
    cwd: str | None
    env: list[tuple[str, str]] | None
    client_info: tuple[str, str, str]
    mcp_servers: list[tuple[Any, ...]]
    permission_policy: PermissionPolicy
    on_update: Any
    permission_preview: Any
    permission_commit: Any
    on_sent: Any
    on_received: Any
    fold: Any
    stderr: str
    stderr_tail_bytes: object
    agent_id: str
    cancel_grace: float
    #: None (advertise nothing), else `_host.capability_tuple`'s tuple (host.md §1).
    capabilities: tuple[Any, ...] | None = None
    on_activity: Any = None


def mcp_tuple(server: Any) -> tuple[Any, ...]:
    """`acp.McpServer` (stdio) or a typed model server (stdio, http, sse) as the core's tuple."""
    if isinstance(server, McpServer):
        return (
            "stdio",
            server.name,
            server.command,
            list(server.args),
            [(e.name, e.value) for e in server.env],
        )
    kind = getattr(server, "type", None)
    headers = [(h.name, h.value) for h in getattr(server, "headers", ()) or ()]
    if kind in ("http", "sse"):
        return (kind, server.name, server.url, headers)
    env = [(e.name, e.value) for e in getattr(server, "env", ()) or ()]
    return ("stdio", server.name, server.command, list(server.args), env)


def _connect_failure(error: AgentProtocolError) -> bool:
    """The handshake failures `start()` reports as `ConnectError` (design §6): an error answer,
    another protocol version, the output ending, the timeout. Other faults (invalid JSON, an
    unexpected message) stay plain `AgentProtocolError`, as in wave 1."""
    if not getattr(error, "_acp_handshake", False):
        return False  # a usage error (closed, forked, stopped), raised before anything was sent
    text = str(error)
    return error.code is not None or any(
        marker in text
        for marker in ("output ended", "protocol version", "protocolVersion", "start() timed out")
    )


class _ClientBase(Generic[_S]):
    """What `Client` and `AsyncClient` share: options, the core, the observer's callbacks,
    sessions and state. The calls live in the subclasses."""

    # AsyncClient: `on_permission` may return an awaitable.
    _asynchronous = False

    def __init__(
        self,
        command: str,
        *,
        args: Sequence[str] = (),
        reader_limits: ReaderLimits,
        transfer_limits: TransferLimits,
        transport_epoch: int,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        client_info: ClientInfo = ClientInfo(),  # noqa: B008 - frozen, shared safely
        mcp_servers: Iterable[Any] = (),
        permission_policy: PermissionPolicy = PermissionPolicy(),  # noqa: B008
        observer: object | None = None,
        stderr: Literal["discard", "inherit", "tail"] = "discard",
        stderr_tail_bytes: int = 64 * 1024,
        agent_id: str | None = None,
        session_state: Literal["off", "lenient", "strict"] = "off",
        cancel_grace: float = 5.0,
        capabilities: ClientCapabilityConfig | None = None,
        telemetry: bool | None = None,
    ) -> None:
        self._core: _core.CoreClient | None = None
        # OpenTelemetry (acp_fast.telemetry): None when off; it observes through the observer.
        self._telemetry = _telemetry.for_client(telemetry)
        if self._telemetry is not None:
            observer = self._telemetry.observe(observer)
            env = _telemetry.agent_env(env)
        self._setup()
        if isinstance(args, str):
            raise TypeError("args must be a sequence of strings, not a string")
        if session_state not in ("off", "lenient", "strict"):
            raise ValueError(
                f'session_state must be "off", "lenient" or "strict" (got {session_state!r})'
            )
        self._session_state = session_state
        # Each open session's folded state (model.SessionState), by id.
        self._states: dict[str, Any] = {}
        spawn = _spawn_args.convert(command, args, env, cwd)
        self._cwd = spawn.cwd
        self._mcp_servers = [mcp_tuple(s) for s in mcp_servers]
        self._policy = permission_policy
        self._capabilities = capabilities
        self._sessions: dict[str, _S] = {}
        self._default: _S | None = None
        self._cancel_grace = float(cancel_grace)
        self.agent_id = agent_id if agent_id is not None else os.path.basename(os.fspath(command))
        # `is not None`, not truthiness: an observer may be falsy (say, an empty journal).
        has = observer is not None
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
            )
        )
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

    def _connect_error(self, error: AgentProtocolError) -> ConnectError:
        text = str(error)
        if error.code == -32000:
            methods = ", ".join(m.id for m in self.initialize.auth_methods) or "none offered"
            text += (
                f" (authentication required: the agent offers {methods}; call "
                "start(new_session=False), authenticate(method_id), then new_session())"
            )
        return ConnectError(
            text, agent_id=self.agent_id, code=error.code, message=error.message, data=error.data
        )

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
        """SIGTERM then SIGKILL to the agent's whole process group; returns at once."""
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
        return self._policy

    @permission_policy.setter
    def permission_policy(self, policy: PermissionPolicy) -> None:
        self._live.set_policy(policy)
        self._policy = policy

    def stderr_tail(self) -> str:
        """The last `stderr_tail_bytes` of the agent's stderr ("" unless ``stderr="tail"``)."""
        return self._live.stderr_tail()

    def reader_status(self) -> ReaderStatus:
        return ReaderStatus(*self._live.reader_status())

    @property
    def agent_error(self) -> str | None:
        """The message of the latest JSON-RPC error answer from the agent, if any."""
        return self._live.agent_error

    @property
    def initialize(self) -> Initialize:
        info = self._live.initialize_info()
        if info is None:
            return Initialize()
        version, load_session, image, audio, embedded, methods, agent_info, raw = info
        from . import model

        raw_object = json.loads(raw)
        capabilities = raw_object.get("agentCapabilities") if isinstance(raw_object, dict) else None
        if not isinstance(capabilities, dict):
            capabilities = {}
        return Initialize(
            protocol_version=version,
            load_session=load_session,
            prompt_image=image,
            prompt_audio=audio,
            prompt_embedded_content=embedded,
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
        return None if self._default is None else self._default.session_id

    @property
    def pid(self) -> int | None:
        return self._live.pid

    @property
    def next_update_sequence(self) -> int:
        return self._live.next_update_sequence

    @property
    def default_session(self) -> _S | None:
        return self._default

    @property
    def sessions(self) -> tuple[_S, ...]:
        """Open sessions, in opening order."""
        return tuple(s for s in self._sessions.values() if not s.closed)

    def session(self, session_id: str) -> _S:
        session = self._sessions.get(session_id)
        if session is None or session.closed:
            raise KeyError(session_id)
        return session

    def _default_session(self) -> _S:
        if self._default is None or self._default.closed:
            raise AgentProtocolError("no session is open: call start() before sending a prompt")
        return self._default

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

    The constructor validates the limits, allocates the reader's buffer (``message_bytes + 1``
    bytes) and starts the agent in a session of its own; `start` opens the conversation and, by
    default, the default session. Calls run one at a time; `request_cancel`, `close` and
    `Session.cancel` may be called from any thread.

    ``stderr`` is "discard" (the default), "inherit" (the host's stderr), or "tail": the core
    drains the agent's stderr into a ring buffer of ``stderr_tail_bytes``, readable with
    `stderr_tail()` and appended to the `AgentProtocolError` raised when the agent's output ends.

    A client belongs to the process that made it: after ``os.fork()`` the child cannot use it
    (calls raise `AgentProtocolError`, `close()` does nothing), and the parent's is unaffected.
    """

    def _make_session(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> Session:
        return Session(self, session_id, cwd, directories)

    # --- calls ---------------------------------------------------------------------------

    def start(self, *, new_session: bool = True, timeout: float | None = None) -> None:
        """Sends `initialize` (protocol version 1), then `session/new` in `cwd`, which becomes
        the default session. Handshake failures raise `ConnectError`."""
        cwd = _spawn_args.session_cwd(self._cwd)
        try:
            session_id = self._live.start(cwd, new_session, timeout)
        except AgentProtocolError as error:
            if not _connect_failure(error):
                raise
            failure = self._connect_error(error)
            if error.code != -32000 and not self._live.stopped:
                # Only "authentication required" leaves a usable client (design §6).
                self._live.stop(
                    f"start() failed ({error}); only close() is accepted (and request_cancel())",
                    failure,
                )
            _telemetry.started(self, failure)
            raise failure from error
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
        """Opens a session (`session/new`); the first one opened becomes the default."""
        path, servers, directories = self._session_args(cwd, mcp_servers, additional_directories)
        session_id = self._live.new_session(path, servers, list(directories))
        return self._opened(session_id, path, directories)

    def load_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
    ) -> Session:
        """Loads a session (`session/load`): every update the agent replays is numbered,
        delivered and routed to it before this returns."""
        return self._load(session_id, cwd, mcp_servers, additional_directories, resume=False)

    def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
    ) -> Session:
        """Resumes a session (`session/resume`): the agent replays nothing."""
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
        self._live.load_session(session_id, path, servers, list(directories), resume)
        return self._opened(session_id, path, directories)

    def list_sessions(self, cwd: str | os.PathLike[str] | None = None) -> tuple[Any, ...]:
        """Every session the agent lists (all pages, in its order)."""
        path = None if cwd is None else os.path.abspath(os.fspath(cwd))
        return self._list_result(self._live.list_sessions(path))

    def delete_session(self, session_id: str) -> None:
        """`session/delete`; an open handle for it is then closed locally."""
        self._live.delete_session(session_id)
        session = self._sessions.get(session_id)
        if session is not None:
            session._mark_closed()

    def authenticate(self, method_id: str) -> None:
        """`authenticate` with one of `initialize.auth_methods` (not a terminal method)."""
        self._live.authenticate(method_id)

    def logout(self) -> None:
        self._live.logout()

    def drain(self, timeout: float = 0.0) -> int:
        """Reads and handles what the agent sent between calls, for up to ``timeout`` seconds
        (0: only what is already readable); returns the number of updates delivered."""
        return self._live.drain(timeout)

    def prompt(self, text: str, *, timeout: float | None = None) -> str:
        """Sends one text prompt to the default session and returns the reply text."""
        return self.prompt_detailed(text, timeout=timeout).response

    def prompt_detailed(self, text: str, *, timeout: float | None = None) -> PromptResult:
        """Sends one text prompt; returns the reply, stop reason and any overflow record."""
        return self.prompt_content([Text(text)], timeout=timeout)

    def prompt_content(
        self, blocks: Iterable[Any], *, timeout: float | None = None
    ) -> PromptResult:
        """Sends one prompt of content blocks, in order, to the default session (ungated, as
        in wave 1)."""
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
    ) -> TurnResult:
        with _telemetry.turn(self, session.session_id, blocks) as record:
            status, payload = self._live.prompt(
                session.session_id, content_tuples(blocks, content_tuple), timeout, gated
            )
            return record(self._turn_result(session.session_id, status, payload, timeout, typed))

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

"""`Client`: the typed facade over the Rust core. It validates options, turns records into the
frozen data classes of `_types`, and makes sure no agent outlives the interpreter."""

from __future__ import annotations

import atexit
import json
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from . import _core, _shutdown, _spawn_args
from ._errors import CapacityOverflow, InvalidLimits
from ._types import (
    Audio,
    AuthMethod,
    BlobResource,
    ClientInfo,
    ContentBlock,
    Image,
    Initialize,
    McpServer,
    Mode,
    Modes,
    Overflow,
    OverflowKind,
    PermissionOption,
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
)

_U64_MAX = 2**64 - 1

# Every live client, so that interpreter exit stops every agent (no orphans).
_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def _close_live_clients() -> None:
    with _live_lock:
        clients = list(_live_clients)
    for client in clients:
        client.close()


_shutdown.install(_close_live_clients)


def _positive(name: str, value: object, maximum: int = _U64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLimits(f"{name} must be an int (got {type(value).__name__})")
    if value <= 0:
        raise InvalidLimits(f"{name} must be above zero (got {value})")
    if value > maximum:
        raise InvalidLimits(f"{name} must be at most {maximum} (got {value})")
    return value


_PermissionTuple = tuple[
    str, str, str, str, str, str, str, str, list[tuple[str, str, str]], str, Any
]


_new = object.__new__


def _permission_request(record: _PermissionTuple) -> PermissionRequest:
    # Filling __dict__ directly skips the frozen dataclasses' per-field object.__setattr__
    # (8 us -> 3 us a request, measured); the instances are the same as __init__ makes.
    (
        session_id,
        tool_call_id,
        title,
        tool_kind,
        status,
        outcome,
        option_id,
        option_kind,
        options,
        envelope,
        request_id,
    ) = record
    choices = []
    for choice_id, name, kind in options:
        choice = _new(PermissionOption)
        choice.__dict__.update(option_id=choice_id, name=name, kind=kind)
        choices.append(choice)
    request = _new(PermissionRequest)
    request.__dict__.update(
        session_id=session_id,
        tool_call_id=tool_call_id,
        title=title,
        tool_kind=tool_kind,
        status=status,
        outcome=outcome,
        option_id=option_id,
        option_kind=option_kind,
        options=tuple(choices),
        envelope=envelope,
        request_id=request_id,
    )
    return request


def _content_tuple(block: ContentBlock) -> tuple[Any, ...]:
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


class Client:
    """One agent process and one ACP session.

    The constructor validates the limits, allocates the reader's buffer (``message_bytes + 1``
    bytes) and starts the agent in a session of its own; `start` opens the conversation. Calls
    run one at a time; `request_cancel` and `close` may be called from any thread.

    ``stderr`` is "discard" (the default), "inherit" (the host's stderr), or "tail": the core
    drains the agent's stderr into a ring buffer of ``stderr_tail_bytes``, readable with
    `stderr_tail()` and appended to the `AgentProtocolError` raised when the agent's output ends.

    A client belongs to the process that made it: after ``os.fork()`` the child cannot use it
    (calls raise `AgentProtocolError`, `close()` does nothing), and the parent's is unaffected.
    """

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
        mcp_servers: Iterable[McpServer] = (),
        permission_policy: PermissionPolicy = PermissionPolicy(),  # noqa: B008
        observer: object | None = None,
        stderr: Literal["discard", "inherit", "tail"] = "discard",
        stderr_tail_bytes: int = 64 * 1024,
    ) -> None:
        self._core: _core.CoreClient | None = None
        if isinstance(args, str):
            raise TypeError("args must be a sequence of strings, not a string")
        limits = transfer_limits
        request_bytes = _positive("transfer_limits.request_bytes", limits.request_bytes)
        response_bytes = _positive("transfer_limits.response_bytes", limits.response_bytes)
        update_bytes = _positive("transfer_limits.update_bytes", limits.update_bytes)
        update_count = _positive("transfer_limits.update_count", limits.update_count)
        segments = _positive(
            "transfer_limits.response_segment_count", limits.response_segment_count
        )
        epoch = transport_epoch
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 < epoch <= _U64_MAX:
            raise InvalidLimits(f"transport_epoch must be a nonzero u64 int (got {epoch!r})")
        message_bytes = reader_limits.message_bytes
        if isinstance(message_bytes, bool) or not isinstance(message_bytes, int):
            raise InvalidLimits("reader_limits.message_bytes must be an int")
        if message_bytes <= 0:
            raise InvalidLimits(
                f"reader_limits.message_bytes must be above zero (got {message_bytes})"
            )
        if message_bytes >= _U64_MAX:
            raise CapacityOverflow(
                f"the reader's buffer of reader_limits.message_bytes + 1 ({message_bytes} + 1) "
                "bytes cannot be allocated; nothing was started"
            )
        spawn = _spawn_args.convert(command, args, env, cwd)
        self._cwd = spawn.cwd
        on_update = getattr(observer, "on_update", None) if observer is not None else None
        on_permission = getattr(observer, "on_permission", None) if observer else None
        on_commit = getattr(observer, "on_permission_commit", None) if observer else None

        preview = None
        if on_permission is not None:
            asked = on_permission

            def preview(record: _PermissionTuple) -> tuple[str, str, str] | None:
                reply = asked(_permission_request(record))
                if reply is None:
                    return None
                if not isinstance(reply, PermissionReply):
                    raise TypeError(
                        "on_permission must return a PermissionReply or None "
                        f"(got {type(reply).__name__})"
                    )
                return (reply.outcome, reply.option_id, reply.option_kind)

        commit = None
        if on_commit is not None:
            committed = on_commit

            def commit(record: _PermissionTuple) -> None:
                committed(_permission_request(record))

        self._core = _core.CoreClient(
            spawn.command,
            spawn.args,
            message_bytes,
            request_bytes,
            response_bytes,
            update_bytes,
            update_count,
            segments,
            epoch,
            self._cwd,
            spawn.env,
            (client_info.name, client_info.title, client_info.version),
            [
                (s.name, s.command, list(s.args), [(e.name, e.value) for e in s.env])
                for s in mcp_servers
            ],
            list(permission_policy.allowed_tool_kinds),
            list(permission_policy.allowed_title_prefixes),
            on_update,
            preview,
            commit,
            stderr,
            _positive("stderr_tail_bytes", stderr_tail_bytes),
        )
        with _live_lock:
            _live_clients.add(self)

    @property
    def _live(self) -> _core.CoreClient:
        if self._core is None:  # only when __init__ failed part-way
            raise RuntimeError("the client was not constructed")
        return self._core

    # --- calls ---------------------------------------------------------------------------

    def start(self) -> None:
        """Sends `initialize` (protocol version 1), then `session/new` in `cwd`."""
        self._live.start(_spawn_args.session_cwd(self._cwd))

    def prompt(self, text: str) -> str:
        """Sends one text prompt and returns the reply text."""
        return self.prompt_detailed(text).response

    def prompt_detailed(self, text: str) -> PromptResult:
        """Sends one text prompt; returns the reply, stop reason and any overflow record."""
        return self.prompt_content([Text(text)])

    def prompt_content(self, blocks: Iterable[ContentBlock]) -> PromptResult:
        """Sends one prompt of content blocks, in order."""
        response, stop_reason, overflow = self._live.prompt(
            [_content_tuple(block) for block in blocks]
        )
        record = None
        if overflow is not None:
            kind, admitted_bytes, admitted_segments, withheld = overflow
            record = Overflow(OverflowKind(kind), admitted_bytes, admitted_segments, withheld)
        return PromptResult(response=response, stop_reason=stop_reason, overflow=record)

    def request_cancel(self) -> None:
        """SIGTERM then SIGKILL to the agent's whole process group; returns at once."""
        self._live.request_cancel()

    def close(self) -> None:
        """Stops the agent's group and reaps the agent. Idempotent; any thread."""
        if self._core is not None:
            self._core.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # The core's own drop stops the agent too; this makes it happen at a predictable time.
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()

    # --- state ---------------------------------------------------------------------------

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
        return Initialize(
            protocol_version=version,
            load_session=load_session,
            prompt_image=image,
            prompt_audio=audio,
            prompt_embedded_content=embedded,
            auth_methods=tuple(AuthMethod(*m) for m in methods),
            agent_info=None if agent_info is None else json.loads(agent_info),
            raw=json.loads(raw),
        )

    @property
    def modes(self) -> Modes:
        current, available = self._live.modes_info()
        return Modes(current=current, available=tuple(Mode(*m) for m in available))

    @property
    def session_id(self) -> str | None:
        return self._live.session_id

    @property
    def pid(self) -> int | None:
        return self._live.pid

    @property
    def next_update_sequence(self) -> int:
        return self._live.next_update_sequence

    def __repr__(self) -> str:
        core = self._core
        if core is None:
            return "<acp_fast.Client (not constructed)>"
        state = "closed" if core.closed else f"pid={core.pid}"
        return f"<acp_fast.Client {state} session_id={core.session_id!r}>"

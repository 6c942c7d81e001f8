"""`Session`: a handle on one ACP session of a client. Its calls are the client's calls (one at
a time per client); `cancel()` may come from any thread. Attributes show the latest state the
connection knows (new/load/resume results, `set_*` answers and the session's updates)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ._types import (
    Mode,
    ModelOption,
    Models,
    Modes,
    Overflow,
    OverflowKind,
    Text,
    TurnResult,
)

if TYPE_CHECKING:
    from ._client import Client, _ClientBase


def content_tuples(
    content: str | Iterable[Any], convert: Callable[[Any], tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """A prompt's blocks as the core's tuples: `str` is one text block; typed model blocks (any
    object with ``to_json()``) are written as they encode themselves."""
    if isinstance(content, str):
        return [("text", content)]
    if isinstance(content, (bytes, bytearray, Mapping)) or not isinstance(content, Iterable):
        # A dict would iterate its keys: say what a prompt is instead.
        raise TypeError(
            "the prompt must be a str or a sequence of content blocks (acp_fast.Text, Image, "
            f"...; or acp_fast.model blocks), not {type(content).__name__}"
        )
    blocks: list[tuple[Any, ...]] = []
    for block in content:
        if isinstance(block, str):
            blocks.append(("text", block))
            continue
        to_json = getattr(block, "to_json", None)
        if to_json is not None and not isinstance(block, Text):
            blocks.append(("raw", json.dumps(to_json(), separators=(",", ":"), ensure_ascii=False)))
        else:
            blocks.append(convert(block))
    return blocks


def _decode_list(raw: str | None, kind: str) -> tuple[Any, ...] | None:
    """A JSON array of the agent's as typed `acp_fast.model` objects (lenient: what real agents
    send must not fail a call); items that cannot be read at all are left out."""
    if raw is None:
        return None
    value = json.loads(raw)
    if not isinstance(value, list):
        return ()
    from . import model

    cls = getattr(model, kind)
    decoded = []
    for item in value:
        try:
            decoded.append(cls.from_json(item, strict=False))
        except model.ProtocolDecodeError:
            continue
    return tuple(decoded)


def turn_result(payload: Any, *, typed: bool = True) -> TurnResult:
    """The core's `Turn` record as a `TurnResult`; with ``typed`` False the record of the turn
    (tool calls, plan, commands, usage) is left out rather than decoded."""
    response, stop_reason, overflow = payload.response, payload.stop_reason, payload.overflow
    session_id, tool_calls, plan = payload.session_id, payload.tool_calls, payload.plan
    commands, usage = payload.available_commands, payload.usage
    current_mode_id = payload.current_mode_id
    record = None
    if overflow is not None:
        kind, admitted_bytes, admitted_segments, withheld = overflow
        record = Overflow(OverflowKind(kind), admitted_bytes, admitted_segments, withheld)
    typed_usage = None
    calls: tuple[Any, ...] = ()
    if not typed:
        tool_calls, plan, commands, usage = [], None, None, None
    from . import _json

    # The agent's values, nested as deep as it liked: deeper than the bound reads as null.
    tool_calls = [_json.prune(call) for call in tool_calls or ()]
    plan, commands, usage = (None if v is None else _json.prune(v) for v in (plan, commands, usage))
    if tool_calls:
        calls = _decode_list("[" + ",".join(tool_calls) + "]", "ToolCall") or ()
    if usage is not None:
        from . import model

        try:
            typed_usage = model.UsageUpdate.from_json(json.loads(usage), strict=False)
        except model.ProtocolDecodeError:
            typed_usage = None
    return TurnResult(
        response=response,
        stop_reason=stop_reason,
        overflow=record,
        session_id=session_id,
        tool_calls=calls,
        plan=_decode_list(plan, "PlanEntry"),
        available_commands=_decode_list(commands, "AvailableCommand"),
        current_mode_id=current_mode_id or None,
        usage=typed_usage,
    )


def check_timeout(timeout: object) -> None:
    """A call's ``timeout``: None or a positive number of seconds. A str or a bool is a
    `TypeError` naming the option (a comparison would say only "'>' not supported", and True
    would pass as one second)."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(
            f"timeout must be a number of seconds or None (got {type(timeout).__name__} "
            f"{timeout!r})"
        )
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds (got {timeout!r})")


class _SessionBase:
    """What `Session` and `AsyncSession` share: identity, attributes, `cancel()`. Every
    attribute is read-only (sessions.md): it shows the latest state the connection knows."""

    _kind = "Session"

    def __init__(
        self,
        client: _ClientBase[Any],
        session_id: str,
        cwd: str,
        additional_directories: tuple[str, ...],
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._cwd = cwd
        self._directories = additional_directories
        self._closed = False
        self._last: Any = None

    @property
    def session_id(self) -> str:
        """The session's id, as the agent named it."""
        return self._session_id

    @property
    def cwd(self) -> str:
        """The session's working directory (absolute), as sent to the agent."""
        return self._cwd

    @property
    def additional_directories(self) -> tuple[str, ...]:
        """The extra directories sent with the session (absolute)."""
        return self._directories

    def _info(self) -> Any:
        if not self._closed:
            info = self._client._live.session_info(self.session_id)
            if info is not None:
                self._last = info
        return self._last

    # --- attributes ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the session was closed (by `close`, ``delete_session`` or the client)."""
        return self._closed

    @property
    def modes(self) -> Modes:
        """The session's current mode and the modes it offers (`Modes`)."""
        info = self._info()
        if info is None:
            return Modes()
        current, available = info.modes
        return Modes(current=current, available=tuple(Mode(*m) for m in available))

    @property
    def models(self) -> Models:
        """The session's current model and the models it offers (`Models`)."""
        info = self._info()
        if info is None:
            return Models()
        current, available = info.models
        return Models(current=current, available=tuple(ModelOption(*m) for m in available))

    @property
    def config_options(self) -> tuple[Any, ...]:
        """The session's config options (``acp_fast.model.SessionConfigOption``)."""
        info = self._info()
        if info is None:
            return ()
        return _decode_list(info.config_options, "SessionConfigOption") or ()

    @property
    def available_commands(self) -> tuple[Any, ...]:
        """The slash commands the agent offers (``acp_fast.model.AvailableCommand``)."""
        info = self._info()
        return () if info is None else (_decode_list(info.commands, "AvailableCommand") or ())

    @property
    def state(self) -> Any:
        """The folded `acp_fast.model.SessionState` of this session's updates; None while the
        client's ``session_state`` is "off"."""
        client = self._client
        if client._session_state == "off":
            return None
        state = client._states.get(self.session_id)
        if state is None:
            from . import model

            state = model.session_update_fold(m.id for m in self.modes.available)
        return state

    # --- calls ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"session {self.session_id!r} is closed")

    def _check_turn(self, timeout: float | None) -> None:
        """What a turn checks before anything is written (either client)."""
        self._check_open()
        check_timeout(timeout)

    def cancel(self) -> None:
        """Cancels the turn in flight (one `session/cancel`; pending permission requests are
        answered `cancelled`); the turn returns with the agent's stop reason. Any thread; never
        blocks or raises; does nothing without a turn in flight."""
        core = self._client._core
        if core is not None and not self._closed:
            core.cancel(self.session_id)

    def _mark_closed(self) -> None:
        self._info()
        self._closed = True
        self._client._forget(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<acp_fast.{self._kind} {self.session_id!r} {state}>"


class Session(_SessionBase):
    """One ACP session; made by `Client.start`, `new_session`, `load_session` or
    `resume_session`, never directly. Equality is identity."""

    _client: Client

    def prompt(
        self,
        content: str | Iterable[Any],
        *,
        timeout: float | None = None,
        interrupt: Literal["raise", "cancel"] | None = None,
    ) -> TurnResult:
        """One turn; returns its `TurnResult` (the reply, stop reason, tool calls, plan ...).

        Args:
            content: A str (one text block), or a sequence of content blocks: `Text`,
                `Image`, `Audio`, `TextResource`, `BlobResource`, `ResourceLink`, str items,
                or typed ``acp_fast.model`` blocks. Image, audio and embedded resources need
                the agent's prompt capabilities (`CapabilityError` otherwise, nothing
                written).
            timeout: Seconds the turn may take (> 0); then it is cancelled, given
                ``cancel_grace`` to end, and `TurnTimeout` raised. None: no limit.
            interrupt: Ctrl-C during this turn: "raise" or "cancel" (see the client's
                ``interrupt``); None: the client's.
        """
        return self._turn(content, timeout=timeout, gated=True, interrupt=interrupt)

    def _turn(
        self,
        content: str | Iterable[Any],
        *,
        timeout: float | None,
        gated: bool,
        typed: bool = True,
        interrupt: str | None = None,
    ) -> TurnResult:
        self._check_turn(timeout)
        client = self._client
        mode = client._turn_interrupt(interrupt)
        return client._run_turn(self, content, timeout, gated, typed, mode)

    def set_mode(self, mode_id: str) -> None:
        """Switches the session's mode (``session/set_mode``) to one of `modes`."""
        self._check_open()
        self._client._live.set_mode(self.session_id, mode_id).run()

    def set_config_option(self, config_id: str, value: str | bool) -> tuple[Any, ...]:
        """Sets a config option; returns the session's config options afterwards."""
        self._check_open()
        options = self._client._live.set_config_option(self.session_id, config_id, value).run()
        return _decode_list(options, "SessionConfigOption") or ()

    def set_model(self, model_id: str) -> None:
        """Through the ``"model"`` config option, else the legacy ``session/set_model``."""
        self._check_open()
        self._client._live.set_model(self.session_id, model_id).run()

    def close(self) -> None:
        """Closes the session (``session/close`` when the agent advertises it; locally
        either way). Idempotent."""
        if self._closed:
            return
        self._info()
        core = self._client._core
        try:
            if core is not None and not core.closed:
                core.close_session(self.session_id).run()
        finally:
            self._mark_closed()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

"""`Session`: a handle on one ACP session of a client. Its calls are the client's calls (one at
a time per client); `cancel()` may come from any thread. Attributes show the latest state the
connection knows (new/load/resume results, `set_*` answers and the session's updates)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from . import _calls
from ._calls import ClientLike
from ._convert import decode_list
from ._types import Mode, ModelOption, Models, Modes, TurnResult


class _SessionBase:
    """What `Session` and `AsyncSession` share: identity, attributes, `cancel()`. Every
    attribute is read-only (sessions.md): it shows the latest state the connection knows."""

    _kind = "Session"

    def __init__(
        self,
        client: ClientLike[Any],
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
    def asks_permission(self) -> bool | None:
        """Whether the agent sends its permission requests to the host in the session's
        current mode: False in a mode where it decides by itself (claude-agent-acp's
        ``auto``, codex-acp's "Auto review"), so the policy and ``on_permission`` decide
        nothing; None when that is not known (a client not made by ``from_spec`` with a
        profile, or a mode the profile does not know). See the registry guide."""
        profile = self._client._profile
        return None if profile is None else profile.asks_in(self.modes.current or None)

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
        return (
            () if info is None else (decode_list(info.config_options, "SessionConfigOption") or ())
        )

    @property
    def available_commands(self) -> tuple[Any, ...]:
        """The slash commands the agent offers (``acp_fast.model.AvailableCommand``)."""
        info = self._info()
        return () if info is None else (decode_list(info.commands, "AvailableCommand") or ())

    @property
    def state(self) -> Any:
        """The folded `acp_fast.model.SessionState` of this session's updates; None while the
        client's ``session_state`` is "off". The same view in ACP v1 and v2 (v2's message
        upserts replace a message's text, its tool-call updates announce new calls); v2's
        ``state.activity`` is the session's "running" / "idle" / "requires_action"."""
        client = self._client
        if client._session_state == "off":
            return None
        state = client._states.get(self.session_id)
        if state is None:
            from . import model

            version = client._live.protocol_version or 1
            state = model.session_update_fold(
                (m.id for m in self.modes.available), protocol_version=version
            )
        return state

    # --- calls ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"session {self.session_id!r} is closed")

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
        plan = _calls.turn(self, content, timeout, gated=True, interrupt=interrupt)
        return _calls.run(self._client, plan)

    def set_mode(self, mode_id: str) -> None:
        """Switches the session's mode (``session/set_mode``) to one of `modes`."""
        _calls.run(self._client, _calls.set_mode(self, mode_id))

    def set_config_option(self, config_id: str, value: str | bool) -> tuple[Any, ...]:
        """Sets a config option; returns the session's config options afterwards."""
        return _calls.run(self._client, _calls.set_config_option(self, config_id, value))

    def set_model(self, model_id: str) -> None:
        """Through the ``"model"`` config option, else the legacy ``session/set_model``."""
        _calls.run(self._client, _calls.set_model(self, model_id))

    def set_title(self, title: str) -> str:
        """Sets the session's title (``session/set_title``, unstable): the title the agent
        stored (it may trim or shorten it). Needs ``unstable=True`` and the agent's
        ``sessionCapabilities.title``, else `CapabilityError`."""
        return _calls.run(self._client, _calls.set_title(self, title))

    def status(self) -> str:
        """The agent's status of the session (``session/status``, unstable): "open" (in its
        memory), "saved" (it can load or resume it) or another value the agent sent (treat it
        as "saved"). Needs ``unstable=True`` and ``sessionCapabilities.status``, else
        `CapabilityError`."""
        return _calls.run(self._client, _calls.session_status(self))

    def steer(self, content: str | Iterable[Any]) -> str:
        """Sends ``content`` (as `prompt` takes it) into this session's running turn over the
        ``_session/steering`` extension; returns the agent's outcome ("injected", or
        "promptRequired" when no turn was running: nothing was sent to the model). Needs
        ``unstable=True`` and the agent's ``_meta.steering.supported``, else
        `CapabilityError`. A turn holds this blocking client, so call ``steer()`` from another
        thread while ``prompt()`` runs: the request is handed to the turn, written while it
        runs, and its answer handed back (`AgentProtocolError` if the turn ends or the client
        closes before the agent answers, or after 30 s). With no turn running it is an
        ordinary call."""
        core = self._client._live
        return _calls.run(self._client, _calls.steer(self, content, core.steer_running))

    def close(self) -> None:
        """Closes the session (``session/close`` when the agent advertises it; locally
        either way). Idempotent."""
        _calls.run(self._client, _calls.close_session(self))

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

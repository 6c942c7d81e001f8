"""Each client call written once, as a plan that both clients run.

A plan is a generator: it checks and converts the arguments, yields one `CoreCall` (what to ask
the Rust core) at each point it needs the core's answer, receives that answer (or the core's
error, thrown in at the yield), and returns the call's result. `Client` runs plans with `run`
below (the core call made in place, blocking); `AsyncClient` with its ``_run`` (the same call
begun on the event loop, then awaited). Those two runners are the only places a plan's core
call is made, so every rule of a call (checks, order, error mapping, telemetry, what is
recorded afterwards) lives here once.

The generator costs one frame per call, never per update: updates go from the core to the
observer without passing through here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from . import _interrupt, _spawn_args
from . import telemetry as _telemetry
from ._agent_spec import ask_mode_to_set
from ._convert import content_tuples, decode_list, session_infos, turn_result
from ._errors import CapabilityError, ConnectError, TurnTimeout
from ._options import host_side
from ._text import printable
from ._types import Initialize, Modes, PromptResult, Text, TurnResult

if TYPE_CHECKING:
    from ._core import CoreClient
    from .registry import AgentProfile

_T = TypeVar("_T")


class CoreCall(NamedTuple):
    """One call of the core that a plan needs answered: the core's method ``name`` with
    ``args``. ``turn`` is the session id when the call is a prompt turn (a cancelled asyncio
    task then cancels the turn and waits for its end, instead of giving the call up). A tuple:
    one is made per call, so it is the cheapest record to make."""

    name: str
    args: tuple[Any, ...]
    turn: str | None = None


#: A call's plan: yields `CoreCall`s, is sent their values, returns the call's result.
Plan = Generator[CoreCall, Any, _T]


class SessionLike(Protocol):
    """What a plan uses of a session (`Session` or `AsyncSession`)."""

    @property
    def session_id(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def _client(self) -> ClientLike[Any]: ...
    def _check_open(self) -> None: ...
    def _info(self) -> Any: ...
    def _mark_closed(self) -> None: ...
    @property
    def modes(self) -> Modes: ...


_S = TypeVar("_S", bound=SessionLike)


class ClientLike(Protocol[_S]):
    """What a plan uses of a client (`Client` or `AsyncClient`)."""

    @property
    def agent_id(self) -> str: ...
    @property
    def initialize(self) -> Initialize: ...
    @property
    def _live(self) -> CoreClient: ...
    @property
    def _core(self) -> CoreClient | None: ...
    @property
    def _cwd(self) -> str | None: ...
    @property
    def _cancel_grace(self) -> float: ...
    @property
    def _sessions(self) -> dict[str, _S]: ...
    @property
    def _telemetry(self) -> Any: ...
    @property
    def _session_kind(self) -> str: ...
    @property
    def _session_state(self) -> str: ...
    @property
    def _states(self) -> dict[str, Any]: ...
    @property
    def _profile(self) -> AgentProfile | None: ...
    @property
    def _unstable(self) -> bool: ...
    @property
    def _capabilities(self) -> Any: ...
    @property
    def protocol(self) -> str: ...
    def _forget(self, session: Any) -> None: ...
    def _check_usable(self) -> None: ...
    def _default_session(self) -> _S: ...
    def _turn_interrupt(self, interrupt: str | None) -> str: ...
    def _session_args(
        self,
        cwd: str | os.PathLike[str] | None,
        mcp_servers: Iterable[Any] | None,
        additional_directories: Iterable[str],
    ) -> tuple[str, list[tuple[Any, ...]] | None, tuple[str, ...]]: ...
    def _register_roots(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> None: ...
    def _opened(self, session_id: str, cwd: str, directories: tuple[str, ...]) -> _S: ...


# --- the blocking runner ----------------------------------------------------------------------


def run(client: ClientLike[Any], plan: Plan[_T]) -> _T:
    """Runs a plan to its end, making each core call in place (`Client`'s runner)."""
    try:
        call = plan.send(None)
        while True:
            try:
                value = getattr(client._live, call.name)(*call.args).run()
            except BaseException as error:  # the plan decides (KeyboardInterrupt included)
                call = plan.throw(error)
            else:
                call = plan.send(value)
    except StopIteration as stop:
        result: _T = stop.value
        return result


# --- checks -----------------------------------------------------------------------------------


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


# --- the client's calls -----------------------------------------------------------------------


def start(client: ClientLike[Any], new_session: bool, timeout: float | None) -> Plan[None]:
    """``initialize`` then, with ``new_session``, ``session/new`` in the client's cwd (the
    default session); a handshake failure is a `ConnectError` and stops the client."""
    client._check_usable()
    check_timeout(timeout)
    cwd = _spawn_args.session_cwd(client._cwd)
    try:
        # One core call: initialize, then session/new, under the core's start deadline. The
        # core raises ConnectError itself (with the authentication hint on -32000) and stops
        # the client unless the agent asked for authentication (design §6).
        session_id = yield CoreCall("start", (cwd, new_session, timeout))
    except ConnectError as failure:
        _telemetry.started(client, failure)
        raise
    _telemetry.started(client)
    _note_host_side(client)
    if session_id is not None:
        yield from ask_host(client, client._opened(session_id, cwd, ()))


def _note_host_side(client: ClientLike[Any]) -> None:
    """With ``protocol="auto"`` an agent that agrees to ACP v2 is not offered the files and
    terminals ``capabilities`` asked to serve (v2 has none): say so once, on the
    ``acp_fast`` logger (``client.serves_host`` is False), rather than let the host believe
    it serves them."""
    if client.protocol == "v1":
        return
    served = host_side(client._capabilities)
    if served and client._live.protocol_version == 2:
        logging.getLogger("acp_fast").warning(
            "agent %s agreed to ACP v2, which has no host side: %s in capabilities are not "
            'offered to it (use protocol="v1" to serve them)',
            printable(client.agent_id),
            ", ".join(served),
        )


SYSTEM_PROMPT_MODES = ("append", "override")


def system_prompt_arg(system_prompt: object, mode: object) -> tuple[str, str] | None:
    """``system_prompt`` / ``system_prompt_mode`` as the core takes them: None (nothing is
    written), else ``(mode, text)``. The agent's capability is checked by the core."""
    if system_prompt is None:
        return None
    if not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str or None (got {type(system_prompt).__name__})")
    if not system_prompt:
        # The schema forbids an empty prompt; an agent may refuse the session for it.
        raise ValueError("system_prompt must not be empty (None writes no system prompt)")
    if mode not in SYSTEM_PROMPT_MODES:
        raise ValueError(f'system_prompt_mode must be "append" or "override" (got {mode!r})')
    return (str(mode), system_prompt)


def new_session(
    client: ClientLike[_S],
    cwd: str | os.PathLike[str] | None,
    mcp_servers: Iterable[Any] | None,
    additional_directories: Iterable[str],
    system_prompt: str | None = None,
    system_prompt_mode: str = "append",
) -> Plan[_S]:
    """``session/new``; the first session opened becomes the default. A system prompt is
    written only when given, and refused (`CapabilityError`) unless the agent advertises its
    mode."""
    prompt_arg = system_prompt_arg(system_prompt, system_prompt_mode)
    path, servers, directories = client._session_args(cwd, mcp_servers, additional_directories)
    session_id = yield CoreCall("new_session", (path, servers, list(directories), prompt_arg))
    session = client._opened(session_id, path, directories)
    yield from ask_host(client, session)
    return session


def load_session(
    client: ClientLike[_S],
    session_id: str,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: Iterable[Any] | None,
    additional_directories: Iterable[str],
    resume: bool,
    system_prompt: str | None = None,
    system_prompt_mode: str = "append",
    replay_from: str | None = None,
) -> Plan[_S]:
    """``session/load`` (replayed updates delivered before it returns) or ``session/resume``
    (with ``replay_from="start"``, ACP v2's ``replayFrom``: replayed likewise); a system
    prompt as for `new_session`."""
    replay = check_replay_from(replay_from)
    prompt_arg = system_prompt_arg(system_prompt, system_prompt_mode)
    path, servers, directories = client._session_args(cwd, mcp_servers, additional_directories)
    client._register_roots(session_id, path, directories)  # a replay may use files
    args: tuple[Any, ...] = (session_id, path, servers, list(directories), resume, prompt_arg)
    if replay:  # the core refuses it in ACP v1 (CapabilityError: use load_session)
        args += (True,)
    yield CoreCall("load_session", args)
    session = client._opened(session_id, path, directories)
    yield from ask_host(client, session)
    return session


def check_replay_from(replay_from: object) -> bool:
    """``resume_session``'s ``replay_from``: None (nothing replayed) or "start" (every
    update from the session's start); True for "start"."""
    if replay_from is None:
        return False
    if replay_from != "start":
        raise ValueError(f'replay_from must be None or "start" (got {replay_from!r})')
    return True


# --- unstable calls (schema.unstable.json; `Client(unstable=True)`) ----------------------------


def check_unstable(client: ClientLike[Any], call: str) -> None:
    """An unstable call on a client made without ``unstable=True``: `CapabilityError`."""
    if not client._unstable:
        raise CapabilityError(
            f"{call} is an unstable ACP call: make the client with unstable=True to use it "
            "(the agent must also advertise it)",
            capability="unstable",
            agent_id=client.agent_id,
        )


def fork_session(
    client: ClientLike[_S],
    session_id: str,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: Iterable[Any] | None,
    additional_directories: Iterable[str],
    system_prompt: str | None = None,
    system_prompt_mode: str = "append",
) -> Plan[_S]:
    """``session/fork`` (unstable, ``sessionCapabilities.fork``): a new session from
    ``session_id``'s context, opened as `new_session` opens one."""
    check_unstable(client, "fork_session")
    if not isinstance(session_id, str) or not session_id:
        raise TypeError(f"session_id must be a non-empty str (got {session_id!r})")
    prompt_arg = system_prompt_arg(system_prompt, system_prompt_mode)
    path, servers, directories = client._session_args(cwd, mcp_servers, additional_directories)
    args = (session_id, path, servers, list(directories), prompt_arg)
    new_id = yield CoreCall("fork_session", args)
    session = client._opened(new_id, path, directories)
    yield from ask_host(client, session)
    return session


def set_title(session: SessionLike, title: str) -> Plan[str]:
    """``session/set_title`` (unstable, ``sessionCapabilities.title``): the title the agent
    stored (it may normalise it), else the one sent."""
    check_unstable(session._client, "set_title")
    session._check_open()
    if not isinstance(title, str):
        raise TypeError(f"title must be a str (got {type(title).__name__})")
    raw = yield CoreCall("set_title", (session.session_id, title))
    stored = _json_object(raw).get("title")
    return stored if isinstance(stored, str) else title


def session_status(session: SessionLike) -> Plan[str]:
    """``session/status`` (unstable, ``sessionCapabilities.status``): "open", "saved", or the
    agent's other value as sent (the schema says to treat one not recognised as "saved"); a
    missing or non-string status reads as "saved"."""
    check_unstable(session._client, "status")
    session._check_open()
    raw = yield CoreCall("session_status", (session.session_id,))
    status = _json_object(raw).get("status")
    return status if isinstance(status, str) else "saved"


# An outcome is one of a few short words; a longer one is the agent's text, cut to this.
_OUTCOME_LIMIT = 256


def steer(
    session: SessionLike,
    content: str | Iterable[Any],
    running: Callable[[str, list[tuple[Any, ...]]], str | None] | None = None,
) -> Plan[str]:
    """``_session/steering`` (the extension claude-agent-acp and codex-acp advertise in
    ``initialize``'s ``_meta.steering.supported``): ``content`` into the session's running
    turn, always with ``idleBehavior: "promptRequired"``. The answer's ``outcome``: "injected"
    (claude-agent-acp), "promptRequired" (no turn was running, nothing sent to the model) or
    the agent's other word, at most 256 characters; a non-string outcome reads as ""."""
    check_unstable(session._client, "steer")
    session._check_open()
    tuples = content_tuples(content)
    # The blocking client: a turn on another thread holds the client; `running` hands the
    # request to that turn's pump and waits for its answer (None: no call runs).
    raw = None if running is None else running(session.session_id, tuples)
    if raw is None:
        raw = yield CoreCall("steer", (session.session_id, tuples))
    outcome = _json_object(raw).get("outcome")
    return outcome[:_OUTCOME_LIMIT] if isinstance(outcome, str) else ""


def _json_object(raw: str) -> dict[str, Any]:
    import json

    from . import _json

    value = json.loads(_json.prune(raw))
    return value if isinstance(value, dict) else {}


def ask_host(client: ClientLike[Any], session: SessionLike) -> Plan[None]:
    """A client made from a spec with a profile (`from_spec`): switch a session it opened to
    the mode in which the agent sends its permission requests to the host, when the agent
    offers that mode and the session is not in it already."""
    modes = session.modes
    offered = [mode.id for mode in modes.available]
    wanted = ask_mode_to_set(client._profile, modes.current, offered)
    if wanted is not None:
        yield CoreCall("set_mode", (session.session_id, wanted))


def list_sessions(
    client: ClientLike[Any], cwd: str | os.PathLike[str] | None
) -> Plan[tuple[Any, ...]]:
    """``session/list``, every page; ``cwd`` keeps those of one directory."""
    path = None if cwd is None else os.path.abspath(os.fspath(cwd))
    raw = yield CoreCall("list_sessions", (path,))
    return session_infos(raw)


def delete_session(client: ClientLike[Any], session_id: str) -> Plan[None]:
    """``session/delete``; an open handle for it is then closed locally."""
    yield CoreCall("delete_session", (session_id,))
    session = client._sessions.get(session_id)
    if session is not None:
        session._mark_closed()


def authenticate(client: ClientLike[Any], method_id: str) -> Plan[None]:
    yield CoreCall("authenticate", (method_id,))


def logout(client: ClientLike[Any]) -> Plan[None]:
    yield CoreCall("logout", ())


def prompt(client: ClientLike[Any], text: str, timeout: float | None) -> Plan[str]:
    """One text prompt to the default session; the reply text."""
    result = yield from prompt_detailed(client, text, timeout)
    return result.response


def prompt_detailed(
    client: ClientLike[Any], text: str, timeout: float | None
) -> Plan[PromptResult]:
    """One text prompt to the default session; its `PromptResult`."""
    if not isinstance(text, str):
        raise TypeError(
            f"the prompt must be a str (got {type(text).__name__}); for content blocks "
            f"use prompt_content() or {client._session_kind}.prompt()"
        )
    return (yield from prompt_content(client, [Text(text)], timeout))


def prompt_content(
    client: ClientLike[Any], blocks: Iterable[Any], timeout: float | None
) -> Plan[PromptResult]:
    """Content blocks to the default session, ungated and with nothing of the turn's record
    decoded (the wave-1 calls); its `PromptResult`."""
    session = client._default_session()
    turn_ = yield from turn(session, blocks, timeout, gated=False, typed=False)
    return PromptResult(turn_.response, turn_.stop_reason, turn_.overflow)


# --- a session's calls ------------------------------------------------------------------------


def turn(
    session: SessionLike,
    content: str | Iterable[Any],
    timeout: float | None,
    *,
    gated: bool,
    typed: bool = True,
    interrupt: str | None = None,
) -> Plan[TurnResult]:
    """One ``session/prompt`` turn. ``gated``: the agent's prompt capabilities are checked;
    ``typed``: the turn's record is decoded; ``interrupt``: Ctrl-C's meaning (None: the
    client's)."""
    session._check_open()
    check_timeout(timeout)
    client = session._client
    mode = client._turn_interrupt(interrupt)
    tuples = content_tuples(content)
    session_id = session.session_id
    scope = _telemetry.turn(client, session_id, content)
    with scope as record:
        meta = scope.meta()  # the turn's trace context, when telemetry is on
        call = CoreCall("prompt", (session_id, tuples, timeout, gated, meta), turn=session_id)
        if mode == "cancel":
            core = client._live
            # The core's cancel wakes an asyncio client's loop through its waker.
            with _interrupt.cancelling(lambda: core.cancel(session_id)):
                status, payload = yield call
        else:
            status, payload = yield call
        return record(turn_outcome(client, session_id, status, payload, timeout, typed))


def turn_outcome(
    client: ClientLike[Any],
    session_id: str,
    status: str,
    payload: Any,
    timeout: float | None,
    typed: bool,
) -> TurnResult:
    """A prompt's `(status, payload)` from the core as a `TurnResult` or `TurnTimeout`."""
    grace = client._cancel_grace
    if status == "timeout":
        raise TurnTimeout(
            f"the turn on session {session_id!r} did not end within {timeout} s "
            f"and its cancel grace of {grace} s; its answer will be dropped",
            session_id=session_id,
            timeout=float(timeout or 0.0),
            cancel_grace=grace,
        )
    # The wave-1 calls return a PromptResult: nothing of the turn's record is decoded for them.
    result = turn_result(payload, typed=typed)
    if status == "late":
        raise TurnTimeout(
            f"the turn on session {session_id!r} did not end within {timeout} s; "
            f"it was cancelled and ended with {result.stop_reason!r} (see .result)",
            session_id=session_id,
            timeout=float(timeout or 0.0),
            cancel_grace=grace,
            result=result,
        )
    return result


def set_mode(session: SessionLike, mode_id: str) -> Plan[None]:
    session._check_open()
    yield CoreCall("set_mode", (session.session_id, mode_id))


def set_model(session: SessionLike, model_id: str) -> Plan[None]:
    session._check_open()
    yield CoreCall("set_model", (session.session_id, model_id))


def set_config_option(
    session: SessionLike, config_id: str, value: str | bool
) -> Plan[tuple[Any, ...]]:
    """Sets a config option; the session's config options afterwards."""
    session._check_open()
    options = yield CoreCall("set_config_option", (session.session_id, config_id, value))
    return decode_list(options, "SessionConfigOption") or ()


def close_session(session: SessionLike) -> Plan[None]:
    """``session/close`` when the client is open (the core sends it only when the agent
    advertises it); the handle is closed locally either way. Idempotent."""
    if session.closed:
        return
    session._info()
    core = session._client._core
    try:
        if core is not None and not core.closed:
            yield CoreCall("close_session", (session.session_id,))
    finally:
        session._mark_closed()

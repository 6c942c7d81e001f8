"""OpenTelemetry spans and metrics for clients (fleet.md §2), through ``opentelemetry-api``
only (the ``acp-fast[otel]`` extra): the library never configures an SDK or exporter.

Off by default. ``Client(..., telemetry=True)`` turns it on for one client,
`instrument()` for every client made afterwards (``telemetry=False`` still opts one out).
Without ``opentelemetry-api`` installed both are a no-op with one warning.

What a client records (GenAI semantic conventions, Development status):

- a span ``invoke_agent {agent name}`` (kind CLIENT) per ``session/prompt`` turn;
- a span ``execute_tool {title or kind}`` (INTERNAL, child of the turn) per tool call the
  agent announced, from ``tool_call`` to its ``completed``/``failed`` update (or the end of
  the turn), and one per ``fs/*``/``terminal/*`` request the client served;
- an event ``acp.permission`` on the turn's span per permission decision;
- histograms ``gen_ai.invoke_agent.duration``, ``gen_ai.execute_tool.duration``,
  ``acp_fast.turn.updates``, ``acp_fast.turn.bytes``, ``acp_fast.turn.time_to_first_update``,
  ``acp_fast.agent.start.duration`` and ``acp_fast.pool.claim.duration``.

Message content (prompt, reply, tool arguments and results) is recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``. Agents the client spawns
with an explicit ``env`` get the host's ``OTEL_*`` variables the caller did not set.
The turn's ``traceparent``/``tracestate`` go in ``params._meta`` of ``session/prompt`` (ACP's
meta-propagation convention; the core writes them as escaped strings).

The per-update path is one call and two tests (a turn awaiting its first update, a tool call's
update); the turn's update count is the core's, read once per turn; spans, attributes and
metrics are made per turn, per tool call and per permission, never per update.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ._settings import (
    CAPTURE_CONTENT_ENV,
    COUNT_BUCKETS,
    DURATION_BUCKETS,
    MAX_PERMISSION_EVENTS,
    Record,
    _lock,
    _settings,
)

_T = TypeVar("_T")

if TYPE_CHECKING:
    from ._record import ClientTelemetry, TurnScope


__all__ = [
    "CAPTURE_CONTENT_ENV",
    "COUNT_BUCKETS",
    "DURATION_BUCKETS",
    "MAX_PERMISSION_EVENTS",
    "agent_env",
    "available",
    "instrument",
    "is_instrumented",
    "uninstrument",
]


def instrument(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Turns telemetry on for every client made from now on (``telemetry=False`` on a client
    still turns it off there). The providers default to OpenTelemetry's global ones."""
    with _lock:
        _settings.instrumented = True
        _settings.providers = (tracer_provider, meter_provider)
        _settings.generation += 1


def uninstrument() -> None:
    """Undoes `instrument()` for clients made from now on."""
    with _lock:
        _settings.instrumented = False
        _settings.providers = (None, None)
        _settings.generation += 1


def is_instrumented() -> bool:
    return _settings.instrumented


def available() -> bool:
    """Whether ``opentelemetry-api`` can be imported (warns once when it cannot)."""
    from ._otel import load

    return load() is not None


def enabled(flag: bool | None) -> bool:
    """A client's ``telemetry`` option: True/False as given, None follows `instrument()`."""
    return _settings.instrumented if flag is None else bool(flag)


def for_client(flag: bool | None) -> ClientTelemetry | None:
    """The recorder of one client, or None when telemetry is off or the API is missing. The
    recorder's module (and OpenTelemetry) is imported only here, when telemetry is on."""
    if not enabled(flag):
        return None
    from ._record import for_client as make

    return make()


def record_claim(seconds: float, client_options: Mapping[str, Any]) -> None:
    """A pool claim's duration, when its clients are instrumented."""
    if enabled(client_options.get("telemetry")):
        from ._otel import record_claim as record

        record(seconds)


def agent_env(env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """The environment of a spawned agent: with an explicit ``env``, the host's ``OTEL_*``
    variables the caller did not set are added (None inherits them anyway)."""
    if env is None:
        return None
    merged = dict(env)
    for name, value in os.environ.items():
        if name.startswith("OTEL_") and name not in merged:
            merged[name] = value
    return merged


# --- the client's wiring: one line each where the client calls them ----------------------------


class _NoScope:
    __slots__ = ()

    def __enter__(self) -> Record:
        return _identity

    def __exit__(self, *exc_info: object) -> None:
        return None

    def meta(self) -> list[tuple[str, str]]:
        """No trace context to send."""
        return []


def _identity(result: _T) -> _T:
    return result


_NO_SCOPE = _NoScope()


def turn(client: Any, session_id: str, content: Any) -> _NoScope | TurnScope:
    """The scope of one prompt turn of ``client`` (nothing when its telemetry is off):
    ``with turn(...) as record: return record(result)``."""
    record = client._telemetry
    if record is None:
        return _NO_SCOPE
    from ._record import TurnScope

    return TurnScope(record, client, session_id, content)


def started(client: Any, error: BaseException | None = None) -> None:
    """After a client's ``start()`` (``error``: it failed)."""
    record = client._telemetry
    if record is not None:
        record.started_safe(client, error)

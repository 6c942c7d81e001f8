"""OpenTelemetry as the recorder uses it, imported only when telemetry is on: the API's tracer
and instruments (made once per `instrument()` setting) and the bounded attribute helpers."""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from .. import _core
from ._settings import (
    _MAX_ATTRIBUTE,
    CAPTURE_CONTENT_ENV,
    COUNT_BUCKETS,
    DURATION_BUCKETS,
    _settings,
)

_log = logging.getLogger("acp_fast.telemetry")
_lock = threading.Lock()
_warned = False
#: The tracer and instruments, and the settings generation they were made for.
_api: Any = None  # False: looked for and missing; else the _Api
_api_generation = -1


@dataclass
class _Api:
    """The API's modules and this library's tracer and instruments (made once)."""

    trace: Any
    propagate: Any
    context: Any
    tracer: Any
    invoke_duration: Any
    tool_duration: Any
    turn_updates: Any
    turn_bytes: Any
    first_update: Any
    start_duration: Any
    claim_duration: Any


def load() -> _Api | None:
    """The API's tracer and instruments for the current settings; None without the API."""
    global _api, _api_generation, _warned
    api = _api
    if api is not None and _api_generation == _settings.generation:
        return api if isinstance(api, _Api) else None
    with _lock:
        if _api is not None and _api_generation == _settings.generation:
            return _api if isinstance(_api, _Api) else None
        _api_generation = _settings.generation
        try:
            from opentelemetry import context, metrics, propagate, trace
        except ImportError:
            _api = False
            if not _warned:
                _warned = True
                warnings.warn(
                    "acp-fast telemetry is on but opentelemetry-api is not installed: nothing "
                    "is recorded. Install it with: pip install 'acp-fast[otel]'",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return None
        __version__ = _core.__version__
        tracer_provider, meter_provider = _settings.providers
        tracer = trace.get_tracer("acp_fast", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("acp_fast", __version__, meter_provider=meter_provider)

        def histogram(name: str, unit: str, text: str, buckets: list[float]) -> Any:
            return meter.create_histogram(
                name, unit=unit, description=text, explicit_bucket_boundaries_advisory=buckets
            )

        d, c = list(DURATION_BUCKETS), list(COUNT_BUCKETS)
        _api = _Api(
            trace=trace,
            propagate=propagate,
            context=context,
            tracer=tracer,
            invoke_duration=histogram(
                "gen_ai.invoke_agent.duration", "s", "Duration of an agent's prompt turn", d
            ),
            tool_duration=histogram(
                "gen_ai.execute_tool.duration", "s", "Duration of a tool call", d
            ),
            turn_updates=histogram("acp_fast.turn.updates", "{update}", "Updates in a turn", c),
            turn_bytes=histogram(
                "acp_fast.turn.bytes", "By", "UTF-8 bytes of a turn's reply text", c
            ),
            first_update=histogram(
                "acp_fast.turn.time_to_first_update",
                "s",
                "From writing session/prompt to the turn's first update",
                d,
            ),
            start_duration=histogram(
                "acp_fast.agent.start.duration",
                "s",
                "From spawning an agent to the end of its start() (initialize)",
                d,
            ),
            claim_duration=histogram(
                "acp_fast.pool.claim.duration", "s", "A pool claim, from asking to an agent", d
            ),
        )
        return _api if isinstance(_api, _Api) else None


def _text(value: object, default: str) -> str:
    return value if isinstance(value, str) else default


def _capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


def _bounded(text: str) -> str:
    return text if len(text) <= _MAX_ATTRIBUTE else text[:_MAX_ATTRIBUTE] + "…"


def _bounded_text(value: Any) -> Any:
    """A str attribute bounded; anything else (None) as it is."""
    return _bounded(value) if isinstance(value, str) else value


def _json(value: Any) -> str:
    try:
        return _bounded(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    except (TypeError, ValueError):
        return ""


def record_claim(seconds: float) -> None:
    api = load()
    if api is not None:
        api.claim_duration.record(seconds)


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for block in content:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append({"type": "text", "content": text})
        else:
            parts.append({"type": type(block).__name__})
    return parts


def _safe(record: Any) -> Any:
    """``record`` made harmless: telemetry never stops the client it observes."""

    def safe(value: Any) -> None:
        try:
            record(value)
        except Exception:
            _log.exception("acp-fast telemetry: recording failed")

    return safe

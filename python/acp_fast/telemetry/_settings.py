"""What `acp_fast.telemetry` shares with its recorder: the settings `instrument()` made, the
bounds and the instruments' bucket boundaries (a leaf: the recorder and the package both import
it, neither imports the other back)."""

from __future__ import annotations

import threading
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")


class Record(Protocol):
    """What ``with turn(...) as record`` gives: ``record(result)`` returns ``result``."""

    def __call__(self, result: _T, /) -> _T: ...


#: The standard opt-in variable for message content.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: The GenAI conventions' boundaries for operation durations (seconds).
DURATION_BUCKETS: tuple[float, ...] = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
#: Counts and sizes (updates, bytes): the conventions' token-usage boundaries (powers of 4).
COUNT_BUCKETS: tuple[float, ...] = tuple(float(4**i) for i in range(14))
#: Permission events per turn: the SDK's default limit of events per span (it drops the rest
#: anyway, after building them); the turn's `acp.permission.count` still counts every one.
MAX_PERMISSION_EVENTS = 128
#: Bounds on what one attribute may hold (agent text is hostile: never unbounded).
_MAX_ATTRIBUTE = 64 * 1024
_MAX_OPEN_TOOLS = 1024


class _Settings:
    """What `instrument()` set; ``generation`` tells the recorder to make its tracer again."""

    def __init__(self) -> None:
        self.instrumented = False
        self.providers: tuple[Any, Any] = (None, None)
        self.generation = 0


_settings = _Settings()
_lock = threading.Lock()

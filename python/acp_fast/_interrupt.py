"""Ctrl-C during a turn with ``interrupt="cancel"`` (first-use.md §1): the first SIGINT trips
the cancel latch of every such turn in flight (one ``session/cancel`` each, pending permission
requests answered ``cancelled``) and the turns end with the agent's stop reason; a second SIGINT
within `SECOND_WITHIN` seconds goes to the handler that was installed before (by default
`KeyboardInterrupt`, which stops the client as with ``interrupt="raise"``).

Python runs signal handlers in the main thread only, so the handler is installed only by turns
that run there (a blocking `Client` called from the main thread, or an `AsyncClient` whose loop
runs there); elsewhere Ctrl-C behaves as it always does. One handler serves every turn in
flight, installed when the first one begins and put back when the last one ends, so concurrent
turns on one event loop cannot leave a stale handler behind.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: A second Ctrl-C within this many seconds of the one that cancelled stops the client.
SECOND_WITHIN = 2.0

# The cancel callables of the turns in flight, by token; touched only on the main thread (the
# handler runs there too, between two bytecodes, and only reads it).
_active: dict[int, Callable[[], None]] = {}
_previous: Any = None
_last_cancel = -SECOND_WITHIN - 1.0


def _handler(signum: int, frame: FrameType | None) -> None:
    global _last_cancel
    now = time.monotonic()
    if _active and now - _last_cancel > SECOND_WITHIN:
        _last_cancel = now
        for cancel in list(_active.values()):
            cancel()
        return
    _last_cancel = -SECOND_WITHIN - 1.0
    previous = _previous
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:  # SIG_DFL, or a handler installed from C (None): what Python does by default
        raise KeyboardInterrupt


@contextmanager
def cancelling(cancel: Callable[[], None]) -> Iterator[None]:
    """While the body runs (a turn), the first Ctrl-C calls `cancel` instead of raising."""
    global _previous, _last_cancel
    if threading.current_thread() is not threading.main_thread() or (
        not _active and signal.getsignal(signal.SIGINT) is None
    ):
        # Not the main thread, or a handler installed from C that could not be put back.
        yield
        return
    token = id(cancel)
    while token in _active:  # distinct tokens even for equal bound methods
        token += 1
    if not _active:
        # A Ctrl-C that cancelled an earlier turn is not the first of two for this one.
        _last_cancel = -SECOND_WITHIN - 1.0
        current = signal.getsignal(signal.SIGINT)
        if current is not _handler:
            _previous = current
            signal.signal(signal.SIGINT, _handler)
    _active[token] = cancel
    try:
        yield
    finally:
        del _active[token]
        if not _active and signal.getsignal(signal.SIGINT) is _handler:
            # Only ours is put back: a handler someone installed meanwhile stays.
            signal.signal(signal.SIGINT, _previous)
            _previous = None

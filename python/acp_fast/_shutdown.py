"""What stops agents when the host ends.

- Interpreter exit joins non-daemon threads *before* `atexit` runs, so a thread blocked in a
  call on an agent that never answers would hang the exit forever: the close-all runs from
  `threading`'s own exit hook, before that join.
- Any death of the host (SIGKILL, the OOM killer, an abort in native code): the guard process,
  started with the first agent (`acp_os::supervisor`), sees its pipe from the host close and
  kills every registered group. It is this interpreter run with ``-I -S`` on the `_core`
  extension itself, so `pip install` ships nothing more. `guard_pid()` is None when agents run
  unguarded (no `sys.executable`, or the guard could not be started).
- A daemon thread inside a call when the close-all ends it gets the call's error and goes on
  (its `except`, or `threading.excepthook` printing the traceback to sys.stderr). Python does not
  wait for daemon threads, so that write could still hold the stderr buffer's lock when the
  interpreter finalises: CPython 3.13+ aborts there ("Fatal Python error: _enter_buffered_busy").
  So the close-all waits, up to `DAEMON_WAIT` seconds, for the daemon threads it found inside a
  call to finish.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from . import _core

# Loads `_core` from its file without importing the package or importlib (the guard needs
# nothing else): 9 ms of CPU once per host, against 15 ms through importlib.util.
_GUARD = (
    "import sys, _imp\n"
    "class Spec: name = 'acp_fast._core'; origin = sys.argv[1]\n"
    "core = _imp.create_dynamic(Spec)\n"
    "_imp.exec_dynamic(core)\n"
    "core._serve_guard()\n"
)


def _launcher() -> list[str] | None:
    core = getattr(_core, "__file__", None)
    # An embedding program (uWSGI, say) may set sys.executable to itself: run nothing else.
    if not core or not os.path.basename(sys.executable or "").startswith("python"):
        return None
    return [sys.executable, "-I", "-S", "-c", _GUARD, core]


_core._set_guard_launcher(_launcher())


def guard_pid() -> int | None:
    """The pid of this process's guard (started with the first agent), or None."""
    return _core._guard_pid()


_close_all: Callable[[], None] | None = None

# How long the close-all waits for the daemon threads whose calls it ended (they only have to
# unwind and report; one that keeps working past this is the program's own daemon).
DAEMON_WAIT = 1.0
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _daemons_in_calls() -> list[threading.Thread]:
    """The daemon threads (other than this one) whose stack is inside this package now."""
    frames = sys._current_frames()
    found = []
    for thread in threading.enumerate():
        if not thread.daemon or thread is threading.current_thread():
            continue
        frame = frames.get(thread.ident) if thread.ident is not None else None
        while frame is not None:
            if frame.f_code.co_filename.startswith(_PACKAGE):
                found.append(thread)
                break
            frame = frame.f_back
    return found


def _closing_all(close_all: Callable[[], None]) -> Callable[[], None]:
    def close_all_and_wait() -> None:
        woken = _daemons_in_calls()
        close_all()
        deadline = time.monotonic() + DAEMON_WAIT
        for thread in woken:
            thread.join(max(0.0, deadline - time.monotonic()))

    return close_all_and_wait


def install(close_all: Callable[[], None]) -> None:
    """Runs `close_all` when the main thread ends, before non-daemon threads are joined, and
    before any other of `threading`'s exit hooks (they run last-registered first): one that
    `concurrent.futures` registers on import joins the pool's workers, and would wait forever
    for a worker inside a call. So hooks registered later are put before ours."""
    global _close_all
    register = getattr(threading, "_register_atexit", None)
    if register is None or _close_all is not None:
        return
    hook = _closing_all(close_all)
    try:
        register(hook)
    except RuntimeError:  # imported during interpreter shutdown: atexit still closes all
        return
    _close_all = hook

    def register_before_ours(func: Callable[..., object], *args: object, **kwargs: object) -> None:
        register(func, *args, **kwargs)
        _keep_first()

    threading._register_atexit = register_before_ours  # type: ignore[attr-defined]


def _keep_first() -> None:
    hooks = getattr(threading, "_threading_atexits", None)
    if not hooks or getattr(hooks[-1], "func", None) is _close_all:
        return
    for hook in hooks:
        if getattr(hook, "func", None) is _close_all:
            hooks.remove(hook)
            hooks.append(hook)
            return

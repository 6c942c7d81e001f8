"""The interpreter finalising while a thread is inside the core: the two crashes the first
binary wheels had, each made deterministic here (test_host.py's interpreter-exit cases hit them
only by timing).

1. A daemon thread that leaves the core (the GIL released) after finalisation began: CPython
   < 3.14 ends it with `pthread_exit`, whose forced unwind (glibc's libgcc_s) runs through our
   Rust frames. With an unwinder of its own linked in (zig's libunwind in place of libgcc_s) the
   extension crashed there (SIGSEGV). Fixed in crates/acp-fast-py/build.rs.
2. A call on a daemon thread that the shutdown close-all ends with an error: the thread printed
   its traceback to sys.stderr while the main thread finalised; on 3.13/3.14 finalisation could
   find the stderr buffer's lock held by that thread ("Fatal Python error:
   _enter_buffered_busy"). Fixed in python/acp_fast/_shutdown.py.
"""

from __future__ import annotations

from conftest import INIT_RESULT, NEW_RESULT

from .kit import kill, run_child

QUIET_AGENT = (
    f"read l; echo '{INIT_RESULT}'; read l; echo '{NEW_RESULT}'; while :; do sleep 1; done"
)

LEAVES_LATE = """
import acp_fast._client
client = make(sys.argv[1])
client.start()
report(agent=client.pid)
# Out of the shutdown close-all's reach, so nothing wakes the drain early: it returns to Python
# only once finalisation has begun (the guard still kills the agent when this process ends).
acp_fast._client._live_clients.discard(client)

class SlowFlush:
    # CPython flushes sys.stdout once finalisation began (no thread but this one may take the
    # GIL any more); sleeping there releases the GIL, so the drain below returns meanwhile and
    # its thread must be ended by the interpreter.
    def __init__(self, inner):
        self.inner = inner

    def write(self, text):
        return self.inner.write(text)

    def flush(self, sleep=time.sleep):
        self.inner.flush()
        if sys.is_finalizing():
            sleep(0.6)

sys.stdout = SlowFlush(sys.stdout)
threading.Thread(target=client.drain, args=(0.2,), daemon=True).start()
"""


def test_a_daemon_thread_leaving_the_core_during_finalisation() -> None:
    """The interpreter ends the thread (pthread_exit before 3.14, a parked thread since) while
    its stack holds Rust frames: the process exits normally, without a signal."""
    done, reports = run_child(LEAVES_LATE, QUIET_AGENT)
    for report in reports:
        kill(report["agent"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Fatal Python error" not in done.stderr, done.stderr[-3000:]


ENDED_BY_EXIT = """
client = make(sys.argv[1])
client.start()

def blocked():
    try:
        client.prompt("never answered")
    except acp.AcpError as error:
        # What a daemon thread does with the error takes a moment; it writes through the
        # buffered sys.stderr, as threading.excepthook does with a traceback.
        time.sleep(0.3)
        sys.stderr.write(f"thread saw {type(error).__name__}\\n")
        sys.stderr.flush()

threading.Thread(target=blocked, daemon=True).start()
time.sleep(0.2)  # the prompt is waiting in the core
report(agent=client.pid)
"""

SILENT_AGENT = (
    f"read l; echo '{INIT_RESULT}'; read l; echo '{NEW_RESULT}'; read l; while :; do sleep 1; done"
)


def test_the_exit_close_lets_the_daemon_threads_it_woke_finish() -> None:
    """The shutdown close-all ends a call blocked on a daemon thread; the thread's own handling
    (a pause, then a write to sys.stderr) completes before the interpreter finalises, so no
    thread holds a buffered stream's lock then (CPython 3.13+ aborted on that)."""
    done, reports = run_child(ENDED_BY_EXIT, SILENT_AGENT)
    for report in reports:
        kill(report["agent"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Fatal Python error" not in done.stderr, done.stderr[-3000:]
    assert "thread saw " in done.stderr, done.stderr[-3000:]

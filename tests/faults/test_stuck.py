"""The agent never answers, ignores SIGTERM and starts processes, some of which leave its process
group (setsid): `request_cancel()` or `close()` from another thread, or SIGINT to the host, end
the call within 0.5 s, and `close()` leaves nothing alive that Linux lets the library find.

What killing reaches (docs/reliability.md): the agent's whole process group, and every process
descended from the agent as /proc shows it just before the kill, even one that called setsid().
It cannot reach a process that was re-parented away (to init or a subreaper) before close(),
because its parent had already exited: Linux keeps no link from the agent to it.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import acp_fast as acp
import procinfo
import pytest
from conftest import (
    SETSID,
    agent,
    chunk_line,
    emit,
    limits,
    read_lines,
    sq,
    stop_line,
    wait_for,
)

from .kit import Watch, alive, merged, proc_table, rss_bytes, run_child, stubborn, write_pid


def prompt_logged(log: Path) -> bool:
    return any('"method":"session/prompt"' in line for line in read_lines(log))


def start_stubborn(watch: Watch, prompt_action: str = ":") -> tuple[acp.Client, Path, list[int]]:
    pid_file = watch.pid_file("family.pid")
    log = watch.pid_file("received.jsonl")
    client = watch.client(stubborn(pid_file, log, prompt_action))
    client.start()
    pids = watch.wait_pids(pid_file, 3)
    assert client.pid is not None
    for pid in pids:
        assert alive(pid)
    return client, log, pids


def in_other_thread(delay_until: Callable[[], bool], action: Callable[[], None]) -> list[float]:
    """Runs `action` in a thread once `delay_until()` holds (and 0.1 s more); returns a list that
    receives the monotonic time just before the action."""
    stamps: list[float] = []

    def run() -> None:
        wait_for(delay_until, 5.0)
        time.sleep(0.1)
        stamps.append(time.monotonic())
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return stamps


@pytest.mark.parametrize("method", ["request_cancel", "close"])
def test_never_answers_stopped_from_another_thread(watch: Watch, method: str) -> None:
    client, log, family = start_stubborn(watch, emit(chunk_line("thinking")))
    rescue = threading.Timer(10.0, client.close)
    rescue.start()
    stamps = in_other_thread(lambda: prompt_logged(log), getattr(client, method))
    try:
        with pytest.raises(acp.AgentProtocolError) as caught:
            client.prompt("never answered")
        failed_at = time.monotonic()
    finally:
        rescue.cancel()
    assert stamps, "the stopping thread never ran"
    assert failed_at - stamps[0] < 0.5, f"the call ended {failed_at - stamps[0]:.3f} s late"
    assert f"{method}()" in str(caught.value), "the error names who stopped the agent"
    # request_cancel() and close() both reach the group and the setsid helper with its child.
    for pid in family:
        assert wait_for(lambda p=pid: not alive(p), 1.0), f"{pid} outlived {method}()"
    watch.assert_updates(["thinking"])
    watch.assert_clean()


def test_close_kills_term_ignoring_agent_and_setsid_descendants(watch: Watch) -> None:
    client, _, family = start_stubborn(watch)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 1.0
    for pid in family:
        assert wait_for(lambda p=pid: not alive(p), 1.0), f"{pid} outlived close()"
    watch.assert_clean()


def test_close_reaches_a_deep_setsid_chain(watch: Watch) -> None:
    """A chain agent -> setsid -> setsid -> sleep, each link still the parent of the next."""
    pid_file = watch.pid_file("chain.pid")
    inner = write_pid(pid_file) + "; exec sleep 100"
    middle = write_pid(pid_file) + f"; {SETSID} sh -c {sq(inner)} & wait"
    outer = write_pid(pid_file) + f"; {SETSID} sh -c {sq(middle)} & wait"
    script = f"trap '' TERM\n{SETSID} sh -c {sq(outer)} &\n" + agent(None, ":")
    client = watch.client(script)
    client.start()
    chain = watch.wait_pids(pid_file, 3)
    assert len({_session(pid) for pid in chain}) == 3, "each link is a session of its own"
    watch.assert_clean()


def test_double_fork_escape_is_out_of_reach(watch: Watch) -> None:
    """The documented limit: a process that double-forks and calls setsid(), whose parent then
    exits, is re-parented away before close() runs; nothing in /proc links it to the agent. The
    library reaches everything else and returns promptly."""
    pid_file = watch.pid_file("escape.pid")
    daemon = write_pid(pid_file) + "; exec sleep 100"
    script = (
        f"({SETSID} sh -c {sq(daemon)} &) \n"
        f"while [ ! -s {sq(str(pid_file))} ]; do sleep 0.01; done\n"
        f"sleep 100 & {write_pid(pid_file, '$!')}\n" + agent(None, ":")
    )
    client = watch.client(script)
    client.start()
    escaped, sibling = watch.wait_pids(pid_file, 2)
    watch.out_of_reach(escaped)
    assert client.pid is not None
    assert escaped not in _descendants(client.pid)
    started = time.monotonic()
    watch.assert_clean()
    assert time.monotonic() - started < 1.0
    assert not alive(sibling)


def _session(pid: int) -> int:
    return procinfo.session(pid)


def _descendants(root: int) -> set[int]:
    table = proc_table()
    found: set[int] = set()
    queue = [root]
    while queue:
        parent = queue.pop()
        for pid, (_, ppid, _, _) in table.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                queue.append(pid)
    return found


# SIGINT must be delivered to a main thread blocked in a call: run in a child interpreter so a
# KeyboardInterrupt raised in the wrong place cannot end the pytest run.
SIGINT_PROGRAM = """
signal.signal(signal.SIGINT, signal.default_int_handler)
pid_file = sys.argv[2]
client = make(sys.argv[1])
client.start()
while len(open(pid_file).read().split()) < 3:
    time.sleep(0.01)
family = [client.pid] + [int(p) for p in open(pid_file).read().split()]
report(family=family)
fired = {}

def interrupt():
    fired["at"] = time.monotonic()
    os.kill(os.getpid(), signal.SIGINT)

threading.Timer(0.3, interrupt).start()
rescue = threading.Timer(5.0, client.close)
rescue.daemon = True
rescue.start()
try:
    try:
        client.prompt("never answered")
        report(raised=None)
    except KeyboardInterrupt:
        report(raised="KeyboardInterrupt", elapsed=time.monotonic() - fired["at"])
    except BaseException as error:
        report(raised=type(error).__name__)
    rescue.cancel()
    try:
        client.prompt("again")
    except acp.AgentProtocolError as error:
        report(after=str(error))
    began = time.monotonic()
    client.close()
    report(close_elapsed=time.monotonic() - began)
except KeyboardInterrupt:
    report(stray=True)
"""


def test_sigint_ends_a_never_answered_prompt(watch: Watch) -> None:
    pid_file = watch.pid_file("family.pid")
    pid_file.write_text("")
    done, reports = run_child(SIGINT_PROGRAM, stubborn(pid_file), str(pid_file))
    report = merged(reports)
    if "family" in report:
        watch.track(*report["family"])
    assert done.returncode == 0, done.stderr
    assert "stray" not in report
    assert report["raised"] == "KeyboardInterrupt"
    assert report["elapsed"] < 0.5, f"KeyboardInterrupt came {report['elapsed']:.3f} s late"
    assert "only close() is accepted" in report["after"]
    assert report["close_elapsed"] < 1.0
    for pid in report["family"]:
        assert wait_for(lambda p=pid: not alive(p), 2.0), f"{pid} outlived close()"
    watch.assert_clean()


@pytest.mark.parametrize("method", ["request_cancel", "close"])
def test_flooding_agent_stopped_from_another_thread(watch: Watch, method: str) -> None:
    """The agent streams updates without end (the reader is never idle): stopping it from
    another thread still ends the call within 0.5 s, and the observer saw an unbroken run."""
    flood = f"while :; do printf '%s\\n' {sq(chunk_line('f'))}; done"
    client = watch.client(agent(None, flood), transfer_limits=_many_updates())
    client.start()
    stamps = in_other_thread(lambda: len(watch.journal.updates) > 1000, getattr(client, method))
    rescue = threading.Timer(10.0, client.close)
    rescue.start()
    try:
        with pytest.raises(acp.AgentProtocolError):
            client.prompt("flood me")
        failed_at = time.monotonic()
    finally:
        rescue.cancel()
    assert stamps, "the stopping thread never ran"
    assert failed_at - stamps[0] < 0.5, f"the call ended {failed_at - stamps[0]:.3f} s late"
    count = len(watch.journal.updates)
    assert count > 1000
    watch.assert_updates(["f"] * count)
    watch.assert_clean()


def _many_updates() -> acp.TransferLimits:
    return limits(update_count=10**9, response_segment_count=10**9, response_bytes=10**9)


PERMISSION_REQUEST = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "p",
        "method": "session/request_permission",
        "params": {
            "sessionId": "acp-test",
            "toolCall": {"toolCallId": "t", "title": "run", "kind": "execute"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
        },
    },
    separators=(",", ":"),
)


def fail_after(seconds: int) -> Callable[[], None]:
    """SIGALRM turns a call that never returns into a failure; returns the undo."""

    def wedged(signum: int, frame: object) -> None:
        raise AssertionError(f"the call was still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, wedged)
    signal.alarm(seconds)

    def undo() -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

    return undo


def _writes_then_reads(count: int) -> str:
    """An agent script: `count` permission requests written before it reads a line, then the
    answers read, then the prompt answered."""
    line = f"printf '%s\\n' {sq(PERMISSION_REQUEST)}"
    writes = f"i=0; while [ $i -lt {count} ]; do {line}; i=$((i+1)); done"
    reads = f"head -n {count} > /dev/null; {emit(stop_line(2))}"
    return f"{writes}; {reads}"


def _prompt_served(client: acp.Client) -> None:
    """Starts the client and prompts once; the prompt must end (with no reply) within 60 s."""
    client.start()
    undo = fail_after(60)
    try:
        assert client.prompt("go") == ""
    finally:
        undo()


def test_an_agent_that_writes_all_its_requests_before_it_reads_is_served(watch: Watch) -> None:
    """20,000 permission requests (5 MB, more than the pipe and the reader hold) written before
    the agent reads a line: the client's answers fill the agent's stdin long before that, so
    the client must read on while its write waits, or both wait forever."""
    count = 20_000
    _prompt_served(watch.client(agent(None, _writes_then_reads(count))))
    assert len(watch.journal.permissions) == count


def test_each_line_written_to_a_full_stdin_is_tapped_once(watch: Watch) -> None:
    """As above, with the wire tap: an answer whose write found the agent's stdin full (and
    waited, reading on) is reported to `on_sent` once, when first tried, not again each time
    the write is retried."""
    count = 20_000

    class Tapping:
        def __init__(self) -> None:
            self.permissions = 0
            self.sent: list[str] = []

        def on_update(self, update: acp.Update) -> None:
            pass

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            self.permissions += 1

        def on_sent(self, line: str) -> None:
            self.sent.append(line)

    tapping = Tapping()
    _prompt_served(watch.client(agent(None, _writes_then_reads(count)), observer=tapping))
    answers = [line for line in tapping.sent if '"id":"p"' in line]
    assert tapping.permissions == count
    assert len(answers) == count, f"{len(answers) - count} answers tapped twice"


def test_a_turn_timeout_ends_the_call_while_the_agent_does_not_read_its_stdin(
    watch: Watch,
) -> None:
    """The agent floods permission requests and never reads again, so the client's answers
    fill its stdin while it waits for the client to read: a pipe deadlock. The turn's timeout
    still ends the call (`TurnTimeout` after the cancel grace), the answers queued for the
    agent stay bounded (the asyncio driver, which reads while it waits to write, stops reading
    at 8 MiB queued), and close() ends the agent."""
    flood = f"while :; do printf '%s\\n' {sq(PERMISSION_REQUEST)}; done"

    class Counting:  # keeps no records, so memory shows the client's own
        permissions = 0

        def on_update(self, update: acp.Update) -> None:
            pass

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            Counting.permissions += 1

    client = watch.client(agent(None, flood), cancel_grace=0.3, observer=Counting())
    client.start()
    session = client.default_session
    assert session is not None

    before = rss_bytes()
    undo = fail_after(60)
    try:
        with pytest.raises(acp.TurnTimeout):
            session.prompt("go", timeout=3.0)
    finally:
        undo()
    grown = rss_bytes() - before
    assert Counting.permissions, "the requests read before the pipes filled were answered"
    # Without the bound: 114 MiB more here (measured); with it about 32 (8 MiB of queued lines,
    # the reader, and the heap the 90,000 freed PermissionRequests left).
    assert grown < 64 << 20, f"{grown >> 20} MiB more after 3 s of a flood nobody takes"
    client.close()
    watch.assert_clean()

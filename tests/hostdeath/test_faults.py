"""The process faults of issue 13, point 5, each with its reproducer; the CLI stopped by SIGTERM
and SIGHUP mid-turn; 1,000 clients in a row; a host killed by the OOM killer."""

from __future__ import annotations

import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import acp_fast as acp
import pytest
from acp_fast.demo_agent import find_file_name
from conftest import TEST_TRANSFER_LIMITS, agent, chunk_line, emit, is_dead, read_lines, wait_for

from tests.faults.kit import child_env, family, fd_table, kill, merged, run_child

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")


def make(command: str, **options: object) -> acp.Client:
    return acp.Client(
        command,
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=TEST_TRANSFER_LIMITS,
        transport_epoch=1,
        **options,  # type: ignore[arg-type]
    )


def written(path: Path) -> bytes:
    assert wait_for(lambda: path.exists() and path.read_bytes().endswith(b"\0"), 5.0)
    return path.read_bytes()


# --- interpreter exit with a non-daemon thread inside a call -------------------------------


@pytest.mark.parametrize(
    "runner",
    [
        "threading.Thread(target=client.start).start()",
        # concurrent.futures, imported after acp_fast, joins its workers in an exit hook too.
        "from concurrent.futures import ThreadPoolExecutor\n"
        "ThreadPoolExecutor(1).submit(client.start)",
    ],
    ids=["thread", "pool"],
)
def test_exit_does_not_wait_for_a_thread_inside_a_call(runner: str) -> None:
    """`threading` joins non-daemon threads before atexit runs: the agents are stopped first,
    so the call returns (with an error) and the interpreter exits."""
    program = (
        "import threading, acp_fast as acp\n"
        "limits = acp.TransferLimits(request_bytes=1024, response_bytes=1024, "
        "update_bytes=1024, update_count=8, response_segment_count=8)\n"
        "client = acp.Client('sleep', args=['1000'], reader_limits=acp.DEFAULT_READER_LIMITS, "
        "transfer_limits=limits, transport_epoch=1)\n"
        "print(client.pid, flush=True)\n"
        f"{runner}\n"
        "raise SystemExit\n"
    )
    host = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, env=child_env()
    )
    assert host.stdout is not None
    pid = int(host.stdout.readline())
    try:
        assert host.wait(timeout=20) == 0
        assert wait_for(lambda: is_dead(pid), 5.0)
    finally:
        host.kill()
        host.wait()
        kill(pid)


# --- args, env and cwd as subprocess takes them ------------------------------------------


def test_env_follows_subprocess_rules(tmp_path: Path) -> None:
    out = tmp_path / "env"
    raw = os.fsdecode(b"caf\xe9")  # a surrogate-escaped value, as os.environ holds it
    env = dict(os.environ, ACP_RAW=raw)
    env.pop("FOO", None)
    env[b"FOO"] = b"x"  # type: ignore[index]
    script = f'printf "%s|%s|%s\\0" "$FOO" "$ACP_RAW" "$(env | grep -c "^b.FOO")" > {out}'
    with make("/bin/sh", args=["-c", script], env=env):
        assert written(out) == b"x|caf\xe9|0\0"
    for bad, error in [
        ({"A": None}, TypeError),
        ({"A=B": "x"}, ValueError),
        ({"": "x"}, ValueError),
        ({"A": "x\0y"}, ValueError),
        ({1: "x"}, TypeError),
    ]:
        with pytest.raises(error):
            make("/bin/true", env=bad)


def test_args_and_cwd_take_bytes_and_surrogates(tmp_path: Path) -> None:
    folder = tmp_path / os.fsdecode(b"dir\xff")
    folder.mkdir()
    out = tmp_path / "args"
    args = ["-c", f'printf "%s|%s|%s\\0" "$1" "$2" "$PWD" > {out}', "sh", b"b\xfe", "s\udcfd"]
    with make("/bin/sh", args=args, cwd=os.fsencode(folder)):
        assert written(out) == b"b\xfe|s\xfd|" + os.fsencode(folder) + b"\0"
    with pytest.raises(TypeError):
        make("/bin/true", args=[1])
    with pytest.raises(TypeError):
        make("/bin/true", args=b"-c")
    with pytest.raises(ValueError):
        make("/bin/true", args=["a\0b"])
    with pytest.raises(TypeError):
        make("/bin/true", cwd=3)


def test_session_cwd_that_cannot_be_sent_is_named(tmp_path: Path) -> None:
    """session/new carries the cwd as a JSON string: a non-UTF-8 host directory is refused by
    name instead of being sent altered; a deleted one is named too."""
    bad = tmp_path / os.fsdecode(b"d\xff")
    bad.mkdir()
    gone = tmp_path / "gone"
    gone.mkdir()
    here = os.getcwd()
    answers = agent(None, ":")
    try:
        os.chdir(bad)
        with make("/bin/sh", args=["-c", answers]) as client:
            with pytest.raises(ValueError, match="not valid UTF-8"):
                client.start()
        os.chdir(gone)
        gone.rmdir()
        with make("/bin/sh", args=["-c", answers]) as client:
            with pytest.raises(FileNotFoundError, match="current directory no longer exists"):
                client.start()
    finally:
        os.chdir(here)


# --- stderr="tail" and a process that escaped with the agent's stderr -----------------------


def test_close_leaves_no_thread_or_fd_when_stderr_is_held(tmp_path: Path) -> None:
    """Each agent double-forks a setsid() process holding its stderr: close() still returns
    with exactly the threads and descriptors the host had before."""
    pids = tmp_path / "escaped"
    escape = f"(setsid sh -c 'echo $$ >> {pids}; exec sleep 1000' &); echo started >&2"
    # Compare task ids, not counts: a thread another test left (say, a journal's flusher) may
    # end meanwhile, which is not what this test is about; none may be added.
    threads, fds = set(os.listdir("/proc/self/task")), set(fd_table())
    try:
        for _ in range(10):
            clients = [
                make("/bin/sh", args=["-c", escape + "; exec sleep 1000"], stderr="tail")
                for _ in range(20)
            ]
            for client in clients:
                client.close()
            assert set(os.listdir("/proc/self/task")) <= threads
            assert set(fd_table()) == fds
    finally:
        for line in read_lines(pids):
            kill(int(line))


def test_close_returns_while_an_escaped_process_floods_stderr(tmp_path: Path) -> None:
    """The holder writes to the agent's stderr without pause: close() still returns (it takes
    at most 1 MiB more), with the threads and descriptors of before."""
    pids = tmp_path / "escaped"
    flood = f"(setsid sh -c 'echo $$ >> {pids}; exec yes flood >&2' &); exec sleep 1000"
    # Compare task ids, not counts: a thread another test left (say, a journal's flusher) may
    # end meanwhile, which is not what this test is about; none may be added.
    threads, fds = set(os.listdir("/proc/self/task")), set(fd_table())
    try:
        client = make("/bin/sh", args=["-c", flood], stderr="tail")
        assert wait_for(lambda: "flood" in client.stderr_tail(), 5.0)
        client.close()
        assert set(os.listdir("/proc/self/task")) <= threads
        assert set(fd_table()) == fds
    finally:
        for line in read_lines(pids):
            kill(int(line))


# --- signal dispositions ---------------------------------------------------------------------


def test_the_agent_starts_with_default_signals(tmp_path: Path) -> None:
    """A host started in a shell's background ignores SIGINT and SIGQUIT; a host may block
    signals: the agent gets neither."""
    out = tmp_path / "status"
    ignored = (signal.SIGINT, signal.SIGQUIT, signal.SIGUSR2)
    saved = {signum: signal.signal(signum, signal.SIG_IGN) for signum in ignored}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGWINCH})
    try:
        script = f"grep -E '^Sig(Ign|Blk)' /proc/self/status > {out}; printf '\\0' >> {out}"
        client = make("/bin/sh", args=["-c", script])
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    with client:
        status = written(out).decode().rstrip("\0")
    fields = dict(line.split(":\t") for line in status.splitlines())
    assert int(fields["SigIgn"], 16) == 0, status
    assert int(fields["SigBlk"], 16) == 0, status


# --- the demo agent's file-name rule ---------------------------------------------------------


def test_file_name_rule_is_linear_and_unchanged() -> None:
    """The rule is the old regex search's (checked on 50,000 random texts); a 10 MB one-token
    prompt, which the quadratic search never finished, is answered (bounded by the test's
    alarm)."""
    old = re.compile(r"[\w./-]*\w\.[A-Za-z]+\b")
    word = re.compile(r"\bfiles?\b", re.IGNORECASE)

    def reference(text: str) -> str | None:
        found = old.search(text)
        if found:
            return found.group(0)
        return "notes.txt" if word.search(text) else None

    rng = random.Random(13)
    for _ in range(50_000):
        text = "".join(rng.choice("ab.Z9_/- é\nfile") for _ in range(rng.randint(0, 16)))
        assert find_file_name(text) == reference(text), text
    assert find_file_name("a" * 10_000_000) is None
    assert find_file_name("-" * 5_000_000 + " " + "x" * 5_000_000 + " c.txt") == "c.txt"


# --- the CLI stopped mid-turn ------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_cli_stopped_mid_turn(signum: int, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = agent(
        None,
        f"sleep 1000 & echo $! > {pids}; echo $$ >> {pids}; {emit(chunk_line('working'))}",
    )
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "acp_fast",
            "run",
            "--agent",
            f"/bin/sh -c {shlex.quote(script)}",
            "hi",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert cli.stdout is not None
    try:
        assert cli.stdout.read(len("working")) == "working"  # mid-turn
        assert wait_for(lambda: len(read_lines(pids)) == 2, 5.0)
        family_pids = {int(pid) for pid in read_lines(pids)}
        for pid in list(family_pids):
            family_pids |= family(pid)
        cli.send_signal(signum)
        assert cli.wait(timeout=20) == 128 + signum
        assert wait_for(lambda: all(is_dead(pid) for pid in family_pids), 5.0)
    finally:
        cli.kill()
        cli.communicate()
        for pid in read_lines(pids):
            kill(int(pid))


# --- 1,000 clients -------------------------------------------------------------------------


THOUSAND = """
from acp_fast import _shutdown

def new():
    return acp.Client("/bin/cat", reader_limits=acp.DEFAULT_READER_LIMITS,
                      transfer_limits=LIMITS, transport_epoch=1)

def fds():
    return sorted(os.listdir("/proc/self/fd"))

new().close()  # the guard is running
guard = _shutdown.guard_pid()
before, threads = fds(), len(os.listdir("/proc/self/task"))
for _ in range(1000):
    new().close()
deadline = time.monotonic() + 5
while open(f"/proc/{guard}/comm").read().strip() != "acp-guard 0" and time.monotonic() < deadline:
    time.sleep(0.01)
after = fds()
report(guard=guard, same_guard=_shutdown.guard_pid() == guard, fds=after == before,
       threads=len(os.listdir("/proc/self/task")) == threads,
       watched=open(f"/proc/{guard}/comm").read().strip(),
       fds_seen=[before, after,
                 {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in set(after) - set(before)
                  if os.path.exists(f"/proc/self/fd/{fd}")}],
       threads_seen=[threads, sorted(open(f"/proc/self/task/{t}/comm").read().strip()
                                     for t in os.listdir("/proc/self/task"))])
"""


def test_a_thousand_clients_leave_no_state() -> None:
    """Started and closed in a row (in a child interpreter, so its state is the one measured):
    the guard watches nothing afterwards (its process name shows the count), and the host holds
    the same descriptors and threads."""
    done, reports = run_child(THOUSAND, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    report = merged(reports)
    assert report["guard"] is not None and report["same_guard"]
    # What differs is in the message: a leak names its descriptors and threads.
    assert report["fds"], report["fds_seen"]
    assert report["threads"], report["threads_seen"]
    assert report["watched"] == "acp-guard 0"


# --- the OOM killer ------------------------------------------------------------------------


def _memory_cgroup(tmp_name: str) -> Path | None:
    """A fresh memory cgroup (v2 or v1) this process may create and enter, or None."""
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")):
        limit = "memory.max" if root.name == "cgroup" else "memory.limit_in_bytes"
        if not (root / ("cgroup.procs")).exists():
            continue
        group = root / tmp_name
        try:
            group.mkdir()
        except OSError:
            continue
        if (group / limit).exists():
            return group
        group.rmdir()
    return None


def test_a_host_killed_by_the_oom_killer(tmp_path: Path) -> None:
    group = _memory_cgroup(f"acp-fast-oom-{os.getpid()}")
    if group is None:
        pytest.skip(
            "no memory cgroup can be created here (cgroup v2 not delegated, v1 read-only): "
            "the OOM killer cannot be aimed at a test host; SIGKILL stands in for it"
        )
    limit = "memory.max" if (group / "memory.max").exists() else "memory.limit_in_bytes"
    program = (
        "import os, sys, time, acp_fast as acp\n"
        "limits = acp.TransferLimits(request_bytes=1024, response_bytes=1024, "
        "update_bytes=1024, update_count=8, response_segment_count=8)\n"
        "client = acp.Client('/bin/sh', args=['-c', 'sleep 1000 & sleep 1000'], "
        "reader_limits=acp.DEFAULT_READER_LIMITS, transfer_limits=limits, transport_epoch=1)\n"
        "print(client.pid, flush=True)\n"
        "sys.stdin.readline()\n"
        "hog = []\n"
        "while True: hog.append(bytearray(1 << 20))\n"
    )
    host = subprocess.Popen(
        [sys.executable, "-c", program],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert host.stdin is not None and host.stdout is not None
    pids: set[int] = set()
    try:
        pid = int(host.stdout.readline())
        pids = family(pid)
        # Only the host enters the limited group: its agent and guard were started outside.
        (group / limit).write_text(str(200 << 20))
        (group / "cgroup.procs").write_text(str(host.pid))
        host.stdin.write("go\n")
        host.stdin.flush()
        assert host.wait(timeout=30) == -signal.SIGKILL
        assert wait_for(lambda: all(is_dead(p) for p in pids), 5.0)
    finally:
        host.kill()
        host.wait()
        for p in pids:
            kill(p)
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def test_thread_leftover_check() -> None:
    """No helper thread of this module's tests is left running."""
    assert all(t.daemon or t is threading.main_thread() for t in threading.enumerate())


# --- the guard's own faults ------------------------------------------------------------------

GUARD_FAULTS = """
from acp_fast import _core, _shutdown

def new():
    return acp.Client("/bin/cat", reader_limits=acp.DEFAULT_READER_LIMITS,
                      transfer_limits=LIMITS, transport_epoch=1)

def pipe_fds():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if int(fd) > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                found.append(int(fd))
        except OSError:
            pass
    return found

first = new()
guard = _shutdown.guard_pid()
first.close()
# The host closes the guard's pipe (its one pipe left) behind the library's back; a file takes
# its number.
(guard_fd,) = pipe_fds()
os.close(guard_fd)
path = sys.argv[1]
opened = os.open(path, os.O_WRONLY | os.O_CREAT)
reused = os.dup2(opened, guard_fd)
os.close(opened)
second = new()
second_guard = _shutdown.guard_pid()
second.close()
os.close(reused)
# The guard killed with SIGKILL: the next agent gets a new guard.
os.kill(second_guard, signal.SIGKILL)
time.sleep(0.1)
third = new()
third_guard = _shutdown.guard_pid()
report(reused_fd=reused == guard_fd, file_size=os.path.getsize(path), first=guard,
       second=second_guard, third=third_guard, third_agent=third.pid)
third.close()
"""


def test_the_guard_survives_its_own_faults(tmp_path: Path) -> None:
    """A host that closes the guard's pipe (the number then reused by a file) and a guard
    killed with SIGKILL: no record lands in the file, and the next agent starts a new guard."""
    done, reports = run_child(GUARD_FAULTS, str(tmp_path / "reused"))
    assert done.returncode == 0, done.stderr[-3000:]
    report = merged(reports)
    assert report["reused_fd"]
    assert report["file_size"] == 0
    assert len({report["first"], report["second"], report["third"]}) == 3

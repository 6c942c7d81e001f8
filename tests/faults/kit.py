"""Helpers of the fault suite: a `Watch` that owns a test's clients and proves, at the end, that
no process of any agent's group or descendants is alive and that no file descriptor leaked;
process-table reading; child interpreters for host-level faults (signals, fork, exit).

Every case follows the same pattern::

    def test_x(watch: Watch) -> None:
        client = watch.client(script)           # observer: watch.journal
        ...                                     # the fault and its documented outcome
        watch.assert_updates(["a", "b"])        # every update sent before the fault, in order
        watch.assert_clean()                    # close(): no process alive, no fd leaked
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import acp_fast as acp
import procinfo
from conftest import (
    SETSID,
    TEST_CLIENT_INFO,
    TEST_TRANSFER_LIMITS,
    V2_LIFECYCLE,
    Journal,
    ShWire,
    agent,
    client_class,
    content_of,
    is_dead,
    protocol_option,
    read_lines,
    sq,
    wait_for,
)

# --- the process table -------------------------------------------------------------------------


def proc_table() -> dict[int, tuple[str, int, int, int]]:
    """pid -> (state, ppid, process group, session) of every process."""
    return procinfo.process_table()


def family(root: int) -> set[int]:
    """The agent `root`, every process of its group or session, and every descendant of any of
    them (by parent links), as the process table shows them now."""
    table = proc_table()
    members = {
        pid
        for pid, (_, _, group, session) in table.items()
        if pid == root or group == root or session == root
    }
    children: dict[int, list[int]] = {}
    for pid, (_, parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found = set(members)
    queue = list(members)
    while queue:
        for child in children.get(queue.pop(), []):
            if child not in found:
                found.add(child)
                queue.append(child)
    return found


def alive(pid: int) -> bool:
    """Running or sleeping: not gone and not a zombie (a zombie counts as dead)."""
    return not is_dead(pid)


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- file descriptors --------------------------------------------------------------------------


def fd_table() -> dict[int, str]:
    """This process's open descriptors and what they point at."""
    return procinfo.open_fds()


def rss_bytes() -> int:
    return procinfo.rss_bytes()


def thread_count() -> int:
    return procinfo.thread_count()


# --- the watch ---------------------------------------------------------------------------------


class Watch:
    """Owns a test's clients; remembers every process of their agents' families."""

    def __init__(self, tmp_path: Path, driver: str = "blocking", protocol: str = "v1") -> None:
        self.tmp_path = tmp_path
        self.driver = driver
        self.protocol = protocol
        #: The shell agents' lines in this version (faults both versions share use it).
        self.wire = ShWire(protocol)
        self.journal = Journal()
        self.clients: list[acp.Client] = []
        self.agents: list[int] = []
        self.pids: set[int] = set()
        self.escaped: set[int] = set()
        self.fds = fd_table()

    def client(
        self, script: str | None = None, *, command: str = "/bin/sh", **overrides: Any
    ) -> acp.Client:
        """A client running `/bin/sh -c script` with the test options and `self.journal` as
        observer; any keyword replaces that constructor argument."""
        options: dict[str, Any] = {
            "args": ["-c", script] if script is not None else [],
            "reader_limits": acp.DEFAULT_READER_LIMITS,
            "transfer_limits": TEST_TRANSFER_LIMITS,
            "transport_epoch": 1,
            "client_info": TEST_CLIENT_INFO,
            "observer": self.journal,
            **protocol_option(self.protocol),
        }
        options.update(overrides)
        client = client_class(self.driver)(command, **options)
        self.clients.append(client)
        pid = client.pid
        assert pid is not None
        self.agents.append(pid)
        self.note()
        return client

    def note(self) -> None:
        """Remembers every process now in the family of any agent of this test (call it once
        the agent has started what it starts)."""
        for pid in self.agents:
            self.pids |= family(pid)

    def track(self, *pids: int) -> None:
        self.pids.update(pids)

    def out_of_reach(self, *pids: int) -> None:
        """Processes the library documents it cannot reach (re-parented away before close());
        the test kills them itself."""
        self.escaped.update(pids)

    def pid_file(self, name: str) -> Path:
        return self.tmp_path / name

    def wait_pids(self, path: Path, count: int = 1, timeout: float = 5.0) -> list[int]:
        """The first `count` pids an agent wrote to `path` (one a line), tracked."""
        assert wait_for(lambda: len(read_lines(path)) >= count, timeout), (
            f"the agent wrote {len(read_lines(path))} of {count} pids to {path.name}"
        )
        pids = [int(line) for line in read_lines(path)[:count]]
        self.track(*pids)
        self.note()
        return pids

    def assert_updates(self, texts: Iterable[str]) -> None:
        """The observer saw exactly these updates (their text), in order, numbered 1, 2, …
        (beside v2's turn lifecycle, numbered among them)."""
        expected = list(texts)
        assert [u.text for u in content_of(self.journal.updates)] == expected
        updates = list(self.journal.updates)
        # v2's idle after a fault that failed the call: AsyncClient's reader goes on reading
        # (v1's prompt answer there is no update); numbered after the fault's line.
        while updates and updates[-1].session_update in V2_LIFECYCLE:
            updates.pop()
        assert [u.update_sequence for u in updates] == list(range(1, len(updates) + 1))

    def close_all(self) -> None:
        self.note()
        for client in self.clients:
            client.close()

    def assert_clean(self, timeout: float = 2.0) -> None:
        """close() every client; then no process of any agent's family may be alive (zombies
        count as dead) and this process must hold exactly the descriptors it held before."""
        self.close_all()
        for client in self.clients:
            assert client.pid is None
        survivors = [
            pid
            for pid in sorted(self.pids - self.escaped)
            if not wait_for(lambda p=pid: is_dead(p), timeout)
        ]
        assert not survivors, f"alive after close(): {describe(survivors)}"
        self.assert_no_fd_leak()

    def assert_no_fd_leak(self, timeout: float = 1.0) -> None:
        # A stderr drain thread lets go of its pipe when the pipe ends, a moment after the kill.
        wait_for(lambda: set(fd_table()) == set(self.fds), timeout)
        now = fd_table()
        leaked = {fd: target for fd, target in now.items() if fd not in self.fds}
        lost = {fd: target for fd, target in self.fds.items() if fd not in now}
        assert not leaked and not lost, f"descriptors leaked {leaked}, lost {lost}"

    def cleanup(self) -> None:
        """Teardown: whatever the test left, the machine gets back."""
        for client in self.clients:
            try:
                client.close()
            except Exception:
                pass
        for pid in self.pids | self.escaped:
            if pid != os.getpid() and alive(pid):
                kill(pid)
        # Let drain threads release pipes those processes held, so that a failure here does not
        # show up as a lost descriptor in the next test.
        wait_for(lambda: set(fd_table()) == set(self.fds), 1.0)


def describe(pids: Iterable[int]) -> str:
    table = proc_table()
    parts = []
    for pid in pids:
        command = procinfo.command_line(pid)
        state = table.get(pid)
        parts.append(f"{pid} {state} {command!r}")
    return "; ".join(parts)


# --- agents ------------------------------------------------------------------------------------


def write_pid(path: Path | str, pid: str = "$$") -> str:
    """Shell code appending a pid (default: the shell's own) to `path`."""
    return f"printf '%s\\n' {pid} >> {sq(str(path))}"


def stubborn(pid_file: Path | str, log: Path | None = None, prompt_action: str = ":") -> str:
    """An agent that ignores SIGTERM and starts, before answering anything:
    - a `sleep` in its own group (pid line 1),
    - a helper that calls setsid() (pid line 2), which starts a child of its own (pid line 3),
    and never exits by itself (not even when its stdin closes)."""
    helper = write_pid(pid_file) + "; sleep 100 & " + write_pid(pid_file, "$!") + "; wait"
    return (
        "trap '' TERM\n"
        f"sleep 100 & {write_pid(pid_file, '$!')}\n"
        f'while [ "$(wc -l < {sq(str(pid_file))})" -lt 1 ]; do sleep 0.01; done\n'
        f"{SETSID} sh -c {sq(helper)} &\n"
        + agent(log, prompt_action)
        + "while :; do sleep 1; done\n"
    )


def cat(path: Path) -> str:
    """Shell code writing a file's bytes verbatim to stdout (for lines printf cannot make)."""
    return f"cat {sq(str(path))}"


def raw_file(watch: Watch, name: str, data: bytes) -> Path:
    path = watch.tmp_path / name
    path.write_bytes(data)
    return path


# --- child interpreters ------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(acp.__file__)))
    env = dict(os.environ)
    # The tests' folder too: child programs inspect processes through `procinfo`.
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root, tests, *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


CHILD_PRELUDE = textwrap.dedent(
    """
    import faulthandler, json, os, signal, sys, threading, time
    import acp_fast as acp

    faulthandler.dump_traceback_later(20, exit=True)  # a wedged child ends, with a traceback
    LIMITS = acp.TransferLimits(
        request_bytes=1 << 20, response_bytes=1 << 20, update_bytes=1 << 20,
        update_count=1024, response_segment_count=1024,
    )

    def make(script, **options):
        options.setdefault("observer", acp.Observer(on_update=lambda update: None))
        return acp.Client(
            "/bin/sh", args=["-c", script], reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=LIMITS, transport_epoch=1, **options,
        )

    def report(**values):
        print(json.dumps(values), flush=True)
    """
)


def run_child(
    program: str, *args: str, timeout: float = 25.0
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Runs `CHILD_PRELUDE + program` in a fresh interpreter; returns the process and every
    JSON object it printed (one a line)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(program), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        stdin=subprocess.DEVNULL,
    )
    reports = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            reports.append(json.loads(line))
    return done, reports


def merged(reports: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in reports:
        result.update(item)
    return result


def elapsed_since(start: float) -> float:
    return time.monotonic() - start

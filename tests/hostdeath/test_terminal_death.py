"""The host-death guard covers terminals (design/host.md §3): a host whose agent created a
terminal running a program that ignores SIGTERM, with grandchildren (one in the terminal's
group, one that left it with setsid()), is SIGKILLed, so nothing of the host runs its cleanup;
the guard must kill the terminal's whole process group and its descendants."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import is_dead

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")

HOST = Path(__file__).with_name("terminal_host.py")


def group_members(pgid: int) -> list[int]:
    """Live processes in process group `pgid` (/proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def test_sigkilled_host_leaves_no_terminal_process(tmp_path: Path) -> None:
    host = subprocess.Popen(
        [sys.executable, str(HOST), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: dict[str, int] = {}
    try:
        assert host.stdout is not None
        ready, _, _ = select.select([host.stdout], [], [], 30)
        line = host.stdout.readline() if ready else ""
        if not line:
            host.kill()
            pytest.fail(f"the host did not create its terminal: {host.communicate()[1][-2000:]}")
        pids = json.loads(line)
        leader = pids["leader"]
        assert os.getpgid(leader) == leader  # the terminal leads its own group
        assert os.getsid(pids["setsid"]) == pids["setsid"]  # this one left the group
        assert {leader, pids["child"]} <= set(group_members(leader))
        assert not any(is_dead(pid) for pid in pids.values())

        host.send_signal(signal.SIGKILL)
        host.wait()
        died = time.monotonic()
        give_up = time.monotonic() + 10  # generous; no speed is asserted
        while time.monotonic() < give_up:
            if not group_members(leader) and all(is_dead(pid) for pid in pids.values()):
                break
            time.sleep(0.02)
        print(f"terminal processes gone {(time.monotonic() - died) * 1000:.0f} ms after death")
        left = {name: pid for name, pid in pids.items() if not is_dead(pid)}
        assert left == {}, f"outlived the SIGKILLed host: {left}"
        assert group_members(leader) == []
    finally:
        if host.poll() is None:
            host.kill()
        host.communicate()
        for pid in pids.values():
            for kill in (os.kill, os.killpg):  # the terminal's group holds its `sleep` too
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

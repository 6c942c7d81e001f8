"""No agent outlives its host: a host process with three clients and a terminal is killed (or
dies) each way the issue lists, 20 times each; within 1 s of its death no process of theirs may
be alive (zombies count as dead). The 20 hosts of a case run side by side to keep the suite
short; the measured times are printed (pytest -s)."""

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

from tests.faults.kit import family

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")

HOST = Path(__file__).with_name("host.py")
REPEATS = 20
HOW = ["SIGTERM", "SIGHUP", "SIGINT", "SIGKILL", "exit", "raise", "abort"]


def start_hosts(
    how: str, tmp_path: Path, count: int, protocol: str = "v1"
) -> list[subprocess.Popen[str]]:
    hosts = []
    for i in range(count):
        folder = tmp_path / str(i)
        folder.mkdir()
        hosts.append(
            subprocess.Popen(
                [sys.executable, str(HOST), how, str(folder), protocol],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return hosts


def read_ready(host: subprocess.Popen[str], deadline: float) -> dict[str, list[int]]:
    assert host.stdout is not None
    ready, _, _ = select.select([host.stdout], [], [], max(0.0, deadline - time.monotonic()))
    line = host.stdout.readline() if ready else ""
    if not line:
        host.kill()
        _, err = host.communicate()
        pytest.fail(f"host {host.pid} did not start its clients: {err[-2000:]}")
    report: dict[str, list[int]] = json.loads(line)
    return report


def everything(report: dict[str, list[int]]) -> set[int]:
    """The reported pids and, for each group, its members and descendants as /proc shows."""
    pids = set(report["pids"])
    for group in report["groups"]:
        pids |= family(group)
    return pids


def sweep(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.mark.parametrize("how", HOW)
def test_no_agent_outlives_its_host(how: str, tmp_path: Path, protocol: str) -> None:
    hosts = start_hosts(how, tmp_path, REPEATS, protocol)
    deadline = time.monotonic() + 25
    families = [everything(read_ready(host, deadline)) for host in hosts]
    try:
        for host in hosts:
            if how.startswith("SIG"):
                host.send_signal(getattr(signal, how))
            else:
                assert host.stdin is not None
                host.stdin.write("go\n")
                host.stdin.flush()
        died: list[float | None] = [None] * len(hosts)
        gone: list[float | None] = [None] * len(hosts)
        give_up = time.monotonic() + 10  # generous: the guarantee is checked on measured times
        while time.monotonic() < give_up and not all(gone):
            now = time.monotonic()
            for i, host in enumerate(hosts):
                if died[i] is None and host.poll() is not None:
                    died[i] = now
                if died[i] is not None and gone[i] is None:
                    if all(is_dead(pid) for pid in families[i]):
                        gone[i] = now
            time.sleep(0.005)
        for i, host in enumerate(hosts):
            assert died[i] is not None, f"host {host.pid} did not die of {how}"
            left = sorted(pid for pid in families[i] if not is_dead(pid))
            assert gone[i] is not None, f"{how}: processes outlived host {host.pid}: {left}"
        delays = [g - d for g, d in zip(gone, died, strict=True)]  # type: ignore[operator]
        print(f"{how}: all gone {max(delays) * 1000:.0f} ms (worst of {len(hosts)}) after death")
        assert max(delays) <= 1.0
    finally:
        for host, pids in zip(hosts, families, strict=True):
            host.kill()
            host.communicate()
            sweep(pids)

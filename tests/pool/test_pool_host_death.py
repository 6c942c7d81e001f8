"""No agent of a pool outlives its host: a host with warm spares, a claimed client and spares
still in their handshake is killed with SIGKILL (no Python code runs); within a generous bound
every agent and its group is dead (the clients' host-death guard, as tests/hostdeath/)."""

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

HOST = Path(__file__).with_name("pool_host.py")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sigkill_of_the_host_leaves_no_agent(kind: str) -> None:
    host = subprocess.Popen(
        [sys.executable, str(HOST), kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: set[int] = set()
    try:
        assert host.stdout is not None
        ready, _, _ = select.select([host.stdout], [], [], 30.0)
        line = host.stdout.readline() if ready else ""
        if not line:
            host.kill()
            pytest.fail(f"the host did not start its pools: {host.communicate()[1][-2000:]}")
        agents = json.loads(line)["pids"]
        assert len(agents) == 6
        for pid in agents:
            pids |= family(pid)
        assert not any(is_dead(pid) for pid in agents)
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        deadline = time.monotonic() + 5.0  # generous; tests/hostdeath measures the real delay
        while time.monotonic() < deadline and not all(is_dead(p) for p in pids):
            time.sleep(0.01)
        left = sorted(p for p in pids if not is_dead(p))
        assert not left, f"agents outlived their SIGKILLed host: {left}"
    finally:
        host.kill()
        host.communicate()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

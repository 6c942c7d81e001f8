"""tests/procinfo.py: its portable answers (psutil, what macOS uses) agree with /proc's."""

from __future__ import annotations

import os
import subprocess
import sys

import procinfo
import pytest
from conftest import wait_dead, wait_for

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="compares with /proc")


def test_portable_answers_match_proc() -> None:
    """A child in a session of its own, and a zombie: the same state, parent, group and session
    either way."""
    live = subprocess.Popen(["sleep", "30"], start_new_session=True)
    dead = subprocess.Popen(["true"])
    try:
        assert wait_dead(dead.pid)  # exited, not reaped: a zombie
        assert wait_for(lambda: procinfo.process_state(live.pid) == "S")  # asleep in sleep(1)
        proc, portable = procinfo.process_table(), procinfo.portable_table()
        assert proc[live.pid] == portable[live.pid] == ("S", os.getpid(), live.pid, live.pid)
        assert proc[dead.pid][0] == portable[dead.pid][0] == "Z"
        assert proc[dead.pid][1:] == portable[dead.pid][1:]
        for pid in (live.pid, dead.pid, os.getpid()):
            assert procinfo.process_state(pid) == procinfo.portable_state(pid)
        assert live.pid in procinfo.children(os.getpid())
        assert dead.pid not in procinfo.children(os.getpid())
    finally:
        live.kill()
        live.wait()
        dead.wait()
    assert procinfo.process_state(dead.pid) is procinfo.portable_state(dead.pid) is None

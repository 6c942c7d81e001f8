"""Ctrl-C fired at random moments of a flood stops the client every time (issue: 22 of 30
random SIGINTs landed in a callback and left the client accepting calls, desynchronised)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import AGENT, FULL_CAPABILITIES

CHILD = textwrap.dedent(
    """
    import json, os, random, signal, sys, threading, time
    import acp_fast as acp

    agent, config, log = sys.argv[1:4]
    random.seed(int(sys.argv[4]))
    outcomes = []

    class Observer:
        def on_update(self, update):
            # about 5 us of work, as a light journal would do
            end = time.perf_counter() + 5e-6
            while time.perf_counter() < end:
                pass

    for attempt in range(30):
        client = acp.Client(
            sys.executable, args=["-I", agent, config, log],
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=acp.TransferLimits(1 << 20, 1 << 20, 1 << 20, 1 << 40, 1 << 20),
            transport_epoch=1, observer=Observer(),
        )
        client.start()
        delay = random.uniform(0.005, 0.25)
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            client.prompt("flood 2000000")
            outcome = {"interrupted": False}
        except KeyboardInterrupt:
            outcome = {"interrupted": True}
            try:
                client.prompt("stream 1")
                outcome["after"] = "accepted"
            except acp.AgentProtocolError as error:
                outcome["after"] = str(error)
        timer.cancel()
        began = time.monotonic()
        client.close()
        outcome["close"] = time.monotonic() - began
        outcome["delay"] = delay
        outcomes.append(outcome)
    print(json.dumps(outcomes))
    """
)


def test_sigint_at_random_moments_of_a_flood_always_stops(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps({"initialize": {"protocolVersion": 1, "agentCapabilities": FULL_CAPABILITIES}})
    )
    program = tmp_path / "child.py"
    program.write_text(CHILD)
    done = subprocess.run(
        [sys.executable, str(program), str(AGENT), str(config), str(tmp_path / "log"), "7"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(outcomes) == 30
    interrupted = [o for o in outcomes if o["interrupted"]]
    assert len(interrupted) >= 25, outcomes  # a flood of 2,000,000 lasts far beyond 0.25 s
    for outcome in interrupted:
        assert "only close() is accepted" in outcome["after"], outcome
        assert outcome["close"] < 1.0

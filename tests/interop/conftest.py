"""Fixtures for the interop tests.

Real agents run only inside a network namespace whose one interface is loopback, so that nothing
they do can leave the machine (`scripts/run-interop.sh` makes one). Elsewhere, or without Node
or the installed agents, their tests are skipped with one line naming what is missing. The replay
tests need none of that and always run.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest

from .fake_models import FakeModelServer
from .support import (
    AGENTS,
    LIMITS,
    AgentSpec,
    Journal,
    Launch,
    agent_problem,
    describe,
    global_problem,
    kill_all,
    launch,
    missing_entry,
    plan_for,
    raw_lines,
    read_json_lines,
    tagged_processes,
    tapped,
)
from .v2_agents import REQUIRED, V2_AGENTS, V2Spec

DEFAULT_LIMIT = 30
MAX_LIMIT = 120


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"time_limit(seconds): this test's time guard (default 30, at most {MAX_LIMIT})"
    )


class AlarmTimeout(Exception):
    """Raised in the main thread when a test runs past its time limit."""


@pytest.fixture(autouse=True)
def _time_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Replaces the suite's 30 s guard for these tests: a real agent may take several seconds to
    start, so a test can ask for more with `@pytest.mark.time_limit(s)` (at most 120 s)."""
    marker = request.node.get_closest_marker("time_limit")
    seconds = min(int(marker.args[0]), MAX_LIMIT) if marker else DEFAULT_LIMIT

    def on_alarm(signum: int, frame: object) -> None:
        raise AlarmTimeout(f"test exceeded {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    faulthandler.dump_traceback_later(seconds + 60, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Run:
    """One started real agent: its client, the journal observing it, how it was started, and
    (when tapped) the files holding every line each way."""

    client: Any  # acp.Client, or acp.AsyncClient for the asyncio tests
    journal: Journal
    launch: Launch
    wire_in: Path | None = None
    wire_out: Path | None = None

    def sent(self) -> list[dict[str, Any]]:
        """Every line the client wrote to the agent so far (a tapped run only)."""
        assert self.wire_in is not None, "not a tapped run"
        return read_json_lines(self.wire_in)

    def received(self) -> list[str]:
        """Every line the agent wrote to the client so far, as written (a tapped run only)."""
        assert self.wire_out is not None, "not a tapped run"
        return raw_lines(self.wire_out)


class Harness:
    """Starts `spec` (against a fresh fake model server when it needs one) as often as a test
    asks; at teardown closes every client and kills whatever carries a run's tag. `protocol` is
    the clients' `protocol=` ("v1", "v2" or "auto"), from the test's `protocol` parameter."""

    def __init__(self, spec: AgentSpec | V2Spec, root: Path, protocol: str = "v1") -> None:
        self.spec = spec
        self.root = root
        self.protocol = protocol
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.server = FakeModelServer(plan_for(spec, self.cwd)).start() if spec.model_api else None
        self.runs: list[Run] = []

    def start(
        self,
        *,
        tap: bool = False,
        policy: acp.PermissionPolicy | None = None,
        limits: acp.TransferLimits = LIMITS,
        observer: Any = None,
        new_session: bool = True,
        asynchronous: bool = False,
        capabilities: acp.ClientCapabilityConfig | None = None,
        wrap: Callable[[Launch], Launch] | None = None,
    ) -> Run:
        """Constructs the client (the agent starts) and calls `start(new_session=...)`; with
        `asynchronous`, an `acp.AsyncClient`, whose `start()` the test awaits itself; `wrap`
        puts a program between client and agent (the transcript recorder)."""
        number = len(self.runs)
        spec = self.spec
        start = (
            spec.launch(self.root)
            if isinstance(spec, V2Spec)
            else launch(spec, self.root, self.server)
        )
        missing = missing_entry(start)
        if missing:
            pytest.fail(
                f"{self.spec.name} {self.spec.version} is installed but cannot start: {missing}"
            )
        if wrap is not None:
            start = wrap(start)
        wire_in = wire_out = None
        if tap:
            wire_in = self.root / f"wire-{number}-in.jsonl"
            wire_out = self.root / f"wire-{number}-out.jsonl"
            start = tapped(start, wire_in, wire_out)
        journal = Journal()
        # "v1" is the default: those runs construct the client exactly as before v2.
        versioned = {} if self.protocol == "v1" else {"protocol": self.protocol}
        client = (acp.AsyncClient if asynchronous else acp.Client)(
            start.command,
            args=start.args,
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=limits,
            transport_epoch=number + 1,
            cwd=start.cwd,
            env=start.env,
            permission_policy=policy or acp.PermissionPolicy(),
            observer=observer or journal,
            capabilities=capabilities,
            **versioned,
        )
        run = Run(client, journal, start, wire_in, wire_out)
        self.runs.append(run)
        if not asynchronous:
            client.start(new_session=new_session)
        return run

    def close(self) -> list[str]:
        """Closes every client; returns (and kills) any tagged process left behind."""
        for run in self.runs:
            run.client.close()
        leftovers: list[int] = []
        # close() has SIGKILLed them all; a process can still take a moment to be gone (a node
        # agent's large address space torn down on a loaded machine: once seen past 3 s, its
        # command line already empty). 10 s is the bound the fleet's no-orphan guarantee uses;
        # a process close() did not reach is still there after it.
        deadline = time.monotonic() + 10
        for run in self.runs:
            while tagged_processes(run.launch.tag) and time.monotonic() < deadline:
                time.sleep(0.05)
            leftovers += tagged_processes(run.launch.tag)
        described = describe(leftovers)
        kill_all(leftovers)
        if self.server is not None:
            self.server.stop()
        return described


def require(spec: AgentSpec | V2Spec) -> None:
    """Skips the test, saying what is missing, when `spec` cannot run here (a v2 agent under
    .ci/run fails instead: its build step must have made it)."""
    if isinstance(spec, V2Spec):
        problem = global_problem() or spec.problem()
        if problem and REQUIRED and not global_problem():
            pytest.fail(problem)
    else:
        problem = global_problem() or agent_problem(spec)
    if problem:
        pytest.skip(problem)


@pytest.fixture
def protocol(request: pytest.FixtureRequest) -> str:
    """The `protocol=` the harness's clients get: "v1" unless the test is parametrized with
    `@pytest.mark.parametrize("protocol", [...], indirect=True)`."""
    return str(getattr(request, "param", "v1"))


@pytest.fixture
def harness(request: pytest.FixtureRequest, tmp_path: Path, protocol: str) -> Iterator[Harness]:
    """A `Harness` for the agent named by the test's parameter (indirect parametrisation): a v1
    agent of `AGENTS` or a v2 agent of `V2_AGENTS`, driven with `protocol`."""
    spec: AgentSpec | V2Spec = AGENTS.get(request.param) or V2_AGENTS[request.param]
    require(spec)
    running = Harness(spec, tmp_path, protocol)
    try:
        yield running
    finally:
        leftovers = running.close()
    if leftovers:
        pytest.fail(f"{spec.name} left processes running after close(): {leftovers}")

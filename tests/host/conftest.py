"""Fixtures for the host tests: a client on the scripted host agent."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, TEST_TRANSFER_LIMITS, client_class, protocol_option

AGENT = Path(__file__).with_name("host_agent.py")


class Recorder:
    """An observer keeping everything: updates, permission previews and commits, activity."""

    def __init__(self, on_permission: Callable[[acp.PermissionRequest], Any] | None = None):
        self.updates: list[acp.Update] = []
        self.previews: list[acp.PermissionRequest] = []
        self.commits: list[acp.PermissionRequest] = []
        self.activity: list[Any] = []
        self.answer = on_permission
        self.log: Path | None = None  # every line the agent received

    def received(self) -> list[str]:
        assert self.log is not None
        return self.log.read_text().splitlines()

    def on_update(self, update: acp.Update) -> None:
        self.updates.append(update)

    def on_permission(self, request: acp.PermissionRequest) -> Any:
        self.previews.append(request)
        return None if self.answer is None else self.answer(request)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.commits.append(request)

    def on_activity(self, activity: Any) -> None:
        self.activity.append(activity)


def run_cli(
    tmp_path: Path, steps: list[dict[str, Any]], *flags: str, view: str = "plain"
) -> subprocess.CompletedProcess[str]:
    """`acp-fast run` on the scripted host agent in `tmp_path` (its log: tmp_path/agent.log)."""
    agent = shlex.join([sys.executable, "-I", str(AGENT), str(tmp_path / "agent.log")])
    command = [sys.executable, "-m", "acp_fast", "run", "--view", view, "--agent", agent]
    return subprocess.run(
        [*command, "--cwd", str(tmp_path), *flags, json.dumps(steps)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "500"},  # rich wraps at 80 columns without a terminal
    )


def run(target: acp.Client | acp.Session, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs one scripted turn; returns the answers the agent received, in order."""
    session = target.default_session if hasattr(target, "default_session") else target
    assert session is not None
    result = session.prompt(json.dumps(steps))
    answers: list[dict[str, Any]] = json.loads(result.response)
    return answers


MakeClient = Callable[..., tuple[acp.Client, Recorder]]


@pytest.fixture(params=["blocking", "async"])
def client_driver(request: pytest.FixtureRequest) -> str:
    """Every host rule runs against `Client` and `AsyncClient` (tests/aio_sync.py)."""
    return str(request.param)


@pytest.fixture
def host_protocol() -> str:
    """The ACP version of `make_host_client`: v1, as most host tests are of v1's host side
    (fs/*, terminal/*); a module of rules both versions share overrides it with `protocol`."""
    return "v1"


@pytest.fixture
def make_host_client(
    tmp_path: Path, client_driver: str, host_protocol: str
) -> Iterator[MakeClient]:
    clients: list[acp.Client] = []

    def make(
        recorder: Recorder | None = None, *, start: bool = True, **options: Any
    ) -> tuple[acp.Client, Recorder]:
        recorder = recorder or Recorder()
        settings: dict[str, Any] = {
            "reader_limits": acp.DEFAULT_READER_LIMITS,
            "transfer_limits": TEST_TRANSFER_LIMITS,
            "transport_epoch": 3,
            "client_info": TEST_CLIENT_INFO,
            "observer": recorder,
            "cwd": str(tmp_path),
            **protocol_option(host_protocol),
        }
        settings.update(options)
        log = tmp_path / f"agent{len(clients)}.log"
        recorder.log = log
        client = client_class(client_driver)(
            sys.executable, args=["-I", str(AGENT), str(log)], **settings
        )
        clients.append(client)
        if start:
            client.start()
        return client, recorder

    yield make
    for client in clients:
        client.close()

"""Fixtures for the v2 tests: a client (blocking, or asyncio behind `SyncOverAsync`) on the
scripted v2 agent (`v2_agent.py`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import client_class

AGENT = Path(__file__).with_name("v2_agent.py")


class Agent:
    """The scripted agent's script and the lines it received."""

    def __init__(self, directory: Path, script: dict[str, Any]) -> None:
        self.script_path = directory / "v2-script.json"
        self.log = directory / "v2-agent.log"
        self.script_path.write_text(json.dumps(script))
        self.log.write_text("")

    @property
    def args(self) -> list[str]:
        return [str(AGENT), str(self.script_path), str(self.log)]

    def received(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def methods(self) -> list[str]:
        return [m.get("method", "") for m in self.received()]


@pytest.fixture(params=["blocking", "async"])
def client_driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


V2Factory = Callable[..., tuple[Any, Agent]]


@pytest.fixture
def v2_client(tmp_path: Path, client_driver: str) -> Iterator[V2Factory]:
    """``v2_client(script=None, **options)``: a client on the scripted v2 agent (default
    ``protocol="v2"``), and its `Agent`; closed at teardown."""
    clients: list[Any] = []

    def factory(script: dict[str, Any] | None = None, **options: Any) -> tuple[Any, Agent]:
        agent = Agent(tmp_path, script or {})
        options.setdefault("protocol", "v2")
        options.setdefault("cwd", str(tmp_path))
        client = client_class(client_driver)(sys.executable, args=agent.args, **options)
        clients.append(client)
        return client, agent

    yield factory
    for client in clients:
        client.close()


def text(content: str, message_id: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": content},
    }


RUNNING = {"update": {"sessionUpdate": "state_update", "state": "running"}}


def idle(stop_reason: str | None = "end_turn") -> dict[str, Any]:
    body: dict[str, Any] = {"sessionUpdate": "state_update", "state": "idle"}
    if stop_reason is not None:
        body["stopReason"] = stop_reason
    return {"update": body}

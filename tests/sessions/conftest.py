"""Fixtures for the session tests: a client on the scripted multi-session agent."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, TEST_TRANSFER_LIMITS, Journal, protocol_option

AGENT = Path(__file__).with_name("session_agent.py")

FULL_CAPABILITIES = {
    "loadSession": True,
    "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
    "mcpCapabilities": {"http": True, "sse": True},
    "sessionCapabilities": {
        "resume": {},
        "list": {},
        "delete": {},
        "close": {},
        "additionalDirectories": {},
    },
    "auth": {"logout": {}},
}

MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}


def init_result(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"protocolVersion": 1, "agentCapabilities": capabilities or {}, **extra}


class Agent:
    """The scripted agent's configuration and the lines it received."""

    def __init__(self, directory: Path, config: dict[str, Any]) -> None:
        self.config_path = directory / "agent.json"
        self.log = directory / "agent.log"
        self.config_path.write_text(json.dumps(config))
        self.log.write_text("")

    def received(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def methods(self) -> list[str]:
        return [m.get("method", "<answer>") for m in self.received()]

    def raw_lines(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if line]


MakeClient = Callable[..., tuple[acp.Client, Agent]]


@pytest.fixture
def make_session_client(tmp_path: Path, journal: Journal, protocol: str) -> Iterator[MakeClient]:
    """`make(config, observer, **options)`: a client on the scripted agent, speaking `protocol`
    (the agent answers the version offered)."""
    clients: list[acp.Client] = []
    count = 0

    def make(
        config: dict[str, Any] | None = None, observer: object = journal, **options: Any
    ) -> tuple[acp.Client, Agent]:
        nonlocal count
        count += 1
        directory = tmp_path / f"agent{count}"
        directory.mkdir()
        config = {"initialize": init_result(FULL_CAPABILITIES), **(config or {})}
        agent = Agent(directory, config)
        settings: dict[str, Any] = {
            "reader_limits": acp.DEFAULT_READER_LIMITS,
            "transfer_limits": TEST_TRANSFER_LIMITS,
            "transport_epoch": 5,
            "client_info": TEST_CLIENT_INFO,
            "observer": observer,
            "cwd": str(tmp_path),
            **protocol_option(protocol),
        }
        settings.update(options)
        client = acp.Client(
            sys.executable,
            args=["-I", str(AGENT), str(agent.config_path), str(agent.log)],
            **settings,
        )
        clients.append(client)
        return client, agent

    yield make
    for client in clients:
        client.close()

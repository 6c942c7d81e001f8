"""Fixtures of the protocol-now tests: a client (blocking, or asyncio behind `SyncOverAsync`)
on the scripted `now_agent.py`, with the lines it was sent."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, Journal, client_class, kill_if_alive, wait_for

AGENT = str(Path(__file__).with_name("now_agent.py"))
LIMITS = acp.TransferLimits(
    request_bytes=1 << 25,
    response_bytes=1 << 22,
    update_bytes=1 << 25,
    update_count=1 << 20,
    response_segment_count=1 << 16,
)


def update(body: str, session_id: str = "s1") -> str:
    """A `session/update` line carrying the raw `body` update object."""
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
        + session_id
        + '","update":'
        + body
        + "}}"
    )


def chunk(text: str) -> str:
    return update(
        '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":'
        + json.dumps(text)
        + "}}"
    )


class Run:
    """A started client on the scripted agent; `sent()` the client's lines, parsed."""

    def __init__(self, client: Any, log: Path, observer: Journal) -> None:
        self.client = client
        self.log = log
        self.observer = observer

    def sent(self, method: str | None = None) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [m for m in lines if method is None or m.get("method") == method]

    def answer(self, request_id: object) -> dict[str, Any]:
        """The client's answer to the agent's request `request_id`, once the agent has read it
        (the agent logs what it reads on its own schedule)."""

        def found() -> list[dict[str, Any]]:
            return [m for m in self.sent() if m.get("id") == request_id and "method" not in m]

        wait_for(lambda: bool(found()), timeout=10.0)
        (only,) = found()
        return only


@pytest.fixture(params=["blocking", "async"])
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def agent(tmp_path: Path, driver: str) -> Iterator[Callable[..., Run]]:
    """`agent(turn=[...], agent_caps={...}, ..., client options)`: a started client."""
    clients: list[Any] = []

    def make(
        *,
        turn: list[str] = (),  # type: ignore[assignment]
        agent_caps: dict[str, Any] | None = None,
        prompt_result: dict[str, Any] | None = None,
        session: dict[str, Any] | None = None,
        status: object = None,
        title_answer: object = None,
        start: bool = True,
        **options: Any,
    ) -> Run:
        log = tmp_path / f"sent{len(clients)}.jsonl"
        log.touch()
        script = tmp_path / f"script{len(clients)}.json"
        script.write_text(
            json.dumps(
                {
                    "capabilities": agent_caps or {},
                    "turn": list(turn),
                    "prompt_result": prompt_result or {},
                    "session": session or {},
                    "status": {"status": "idle"} if status is None else status,
                    "log": str(log),
                    **({} if title_answer is None else {"title_answer": title_answer}),
                }
            )
        )
        observer = options.pop("observer", None) or Journal()
        settings: dict[str, Any] = {
            "args": [AGENT, str(script)],
            "reader_limits": acp.ReaderLimits(message_bytes=1 << 25),
            "transfer_limits": LIMITS,
            "transport_epoch": 1,
            "client_info": TEST_CLIENT_INFO,
            "observer": observer,
        }
        settings.update(options)
        client = client_class(driver)(sys.executable, **settings)
        clients.append(client)
        if start:
            client.start()
        return Run(client, log, observer)

    yield make
    for client in clients:
        pid = client.pid
        client.close()
        kill_if_alive(pid)

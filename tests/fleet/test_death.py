"""Telling an agent that died mid-turn from one that broke the protocol while alive (no Ray
cluster: the client's errors, and the host's body run directly, fresh and pooled). The fleet
on the cluster is in test_fleet.py (test_an_agent_that_dies_mid_turn_is_retried_elsewhere)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")

import acp_fast as acp
from acp_fast._async import AsyncClient
from acp_fast.fleet._death import agent_died
from acp_fast.fleet._host import Host

from .conftest import wait_gone
from .kit import DYING_AGENT, processes_running


async def _classify(text: str) -> tuple[str, str, bool, int]:
    client = AsyncClient(sys.executable, [DYING_AGENT], cwd=str(Path.cwd()))
    await client.start()
    pid = client.pid
    assert pid is not None
    try:
        assert client.default_session is not None
        await asyncio.wait_for(client.default_session.prompt(text), 30)
    except Exception as error:
        return type(error).__name__, str(error), await agent_died(error, pid), pid
    finally:
        await client.aclose()
    raise AssertionError(f"{text}: the turn completed")


@pytest.mark.parametrize(
    ("text", "error_type", "died", "says"),
    [
        ("exit", "AgentProtocolError", True, "exited with status 5"),
        ("kill", "AgentProtocolError", True, "was killed by signal 9"),
        # Alive and breaking the protocol: not a death, whatever its words.
        ("garbage", "AgentProtocolError", False, "unexpected message"),
        ("mute", "AgentProtocolError", False, "output ended"),
        ("spoof", "AgentProtocolError", False, "output ended"),
        ("refuse", "AgentProtocolError", False, "exited with status 1"),
    ],
)
def test_what_the_client_raises_is_told_apart(
    text: str, error_type: str, died: bool, says: str
) -> None:
    kind, message, verdict, pid = asyncio.run(_classify(text))
    assert (kind, verdict) == (error_type, died), message
    assert says in message
    assert wait_gone([pid]) == []


@pytest.mark.parametrize("pool", [None, {"min_idle": 1, "max_idle": 1}], ids=["fresh", "pooled"])
def test_the_host_names_a_death_agent_died_and_a_live_violation_by_its_type(
    tmp_path: Path, pool: dict[str, int] | None
) -> None:
    async def main() -> list[dict[str, object]]:
        spec = acp.AgentSpec(sys.executable, [DYING_AGENT])
        host = Host(0, spec, 2, str(tmp_path / "run"), pool)
        try:
            return [
                await asyncio.wait_for(host.run_task(f"t{i}", 1, str(tmp_path), prompts), 60)
                for i, prompts in enumerate(
                    (("hi", "kill"), ("hi", "garbage"), ("hi",), ("quit", "hi"))
                )
            ]
        finally:
            await host.shutdown()

    killed, garbled, fine, quit = asyncio.run(main())
    assert killed["error_type"] == "AgentDied", killed
    # The underlying error's text is kept.
    assert "the agent was killed by signal 9" in str(killed["message"])
    assert "output ended before the response to session/prompt" in str(killed["message"])
    assert killed["updates"] == 2  # the first turn's update, and the second's before it died
    assert garbled["error_type"] == "AgentProtocolError", garbled
    assert fine["ok"] is True, fine
    # Gone between two turns: the next prompt cannot be written (AgentTransportFailed), or its
    # answer never comes; either way the agent died.
    assert quit["error_type"] == "AgentDied", quit
    assert "exited with status 0" in str(quit["message"])
    assert wait_gone(processes_running(DYING_AGENT)) == []  # nor a pool's spare

"""Elicitations through a pool's relays (``claim_observers=True, elicitation=True``): whether a
spare advertises elicitation is fixed at its handshake, before any claim, so the pool says so;
each claim's observer answers its own agent's elicitations, and a claim without
``on_elicitation`` declines them. A pool that would never ask an ``on_elicitation`` refuses."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest

from tests.host.conftest import AGENT, Recorder
from tests.host.test_elicitation import form
from tests.pool.kit import options

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")


def plain_options(**more: Any) -> dict[str, Any]:
    kept = options(**more)
    del kept["observer"]
    return kept


class Asking(Recorder):
    """A claim's observer that answers each elicitation with the name it was given."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.asked: list[acp.ElicitationRequest] = []

    async def on_elicitation(self, request: acp.ElicitationRequest) -> acp.ElicitationReply:
        self.asked.append(request)
        await asyncio.sleep(0)
        return acp.ElicitationReply("accept", {"name": self.name})


def answers(result: acp.PromptResult) -> list[dict[str, Any]]:
    parsed: list[dict[str, Any]] = json.loads(result.response)
    return parsed


def test_each_claim_answers_its_own_agents_elicitations(tmp_path: Path) -> None:
    steps = json.dumps([{"request": form("who?")}])
    log = tmp_path / "agent.log"

    async def main() -> list[list[dict[str, Any]]]:
        pool = acp.AsyncPool(
            sys.executable, ["-I", str(AGENT), str(log)], client_options=plain_options(),
            min_idle=2, max_idle=2, max_total=3, claim_observers=True, elicitation=True,
        )  # fmt: skip
        got = []
        async with pool:
            await pool.start(wait=True)
            for observer in (Asking("Ada"), Recorder(), Asking("Grace")):
                async with pool.session(cwd=str(tmp_path), observer=observer) as session:
                    got.append(answers(await session.prompt(steps)))
                if isinstance(observer, Asking):
                    assert [r.message for r in observer.asked] == ["who?"]
        return got

    ada, nobody, grace = asyncio.run(main())
    assert [a["result"] for a in ada] == [{"action": "accept", "content": {"name": "Ada"}}]
    # A claim whose observer has no on_elicitation declines (the spare advertised it).
    assert [a["result"] for a in nobody] == [{"action": "decline"}]
    assert [a["result"] for a in grace] == [{"action": "accept", "content": {"name": "Grace"}}]
    lines = log.read_text().splitlines()
    initialize = [json.loads(line) for line in lines if '"initialize"' in line]
    assert initialize and all(
        m["params"]["clientCapabilities"]["elicitation"] == {"form": {}, "url": {}}
        for m in initialize
    )


def test_spares_without_elicitation_do_not_advertise_it(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    with acp.Pool(sys.executable, ["-I", str(AGENT), str(log)], client_options=plain_options(),
                  min_idle=1, max_idle=1, max_total=1, claim_observers=True) as pool:  # fmt: skip
        with pool.session(cwd=str(tmp_path), observer=Recorder()) as session:
            result = session.prompt(json.dumps([{"request": form("who?")}]))
    assert [a["result"] for a in answers(result)] == [{"action": "decline"}]
    initialize = next(json.loads(x) for x in log.read_text().splitlines() if '"initialize"' in x)
    assert "elicitation" not in initialize["params"]["clientCapabilities"]


def test_an_on_elicitation_the_pool_would_never_ask_is_refused(tmp_path: Path) -> None:
    agent = ["-I", str(AGENT), str(tmp_path / "agent.log")]
    with pytest.raises(ValueError, match="elicitation=True is for pools made with claim_obs"):
        acp.Pool(sys.executable, agent, elicitation=True)
    with pytest.raises(ValueError, match="client_options' observer has on_elicitation"):
        acp.AsyncPool(sys.executable, agent, claim_observers=True,
                      client_options=options(observer=Asking("x")))  # fmt: skip
    with acp.Pool(sys.executable, agent, client_options=plain_options(), min_idle=0,
                  claim_observers=True) as pool:  # fmt: skip
        with pytest.raises(ValueError, match="make the pool with elicitation=True"):
            pool.claim(observer=Asking("x"))
        assert pool.stats().claims == 0  # refused before anything was claimed
        # An observer whose on_elicitation is None has none, as a client reads it.
        quiet = Recorder()
        quiet.on_elicitation = None  # type: ignore[attr-defined]
        client = pool.claim(observer=quiet)
        pool.release(client)


def test_an_elicitation_before_any_claim_is_declined() -> None:
    # No session exists before a claim, so an agent asking is wrong; the relay declines, as a
    # relay detached between two claims does.
    from acp_fast.pool._relay import ElicitingRelay

    relay = ElicitingRelay()
    assert relay.on_elicitation(object()) is None
    observer = Asking("Ada")
    relay.attach(observer)
    assert relay._on_elicitation == observer.on_elicitation
    relay.detach()
    assert relay.on_elicitation(object()) is None

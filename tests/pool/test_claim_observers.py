"""Per-claim observers (``claim_observers=True``): a claim attaches the task's own observer (its
journal) to a spare started before the task existed; what the spare exchanged before (its
handshake) is replayed into it first, and nothing of another claim ever reaches it."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import journal
from acp_fast.pool import SpareOverflow
from acp_fast.pool._relay import HELD_CALLS
from conftest import Journal, wait_dead

from tests.pool.kit import DEMO, options, slow_args

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")


def plain_options(**more: Any) -> dict[str, Any]:
    kept = options(**more)
    del kept["observer"]
    return kept


def methods(path: Path, kind: journal.RecordKind) -> list[str]:
    lines = [json.loads(r.envelope) for r in journal.read(path) if r.kind == kind]
    return [message.get("method") or "answer" for message in lines]


def updates(path: Path) -> list[str]:
    return [r.envelope for r in journal.read(path) if r.kind == journal.RecordKind.UPDATE]


def test_each_claim_journals_its_own_agent_from_the_handshake(tmp_path: Path) -> None:
    async def main() -> list[int]:
        pool = acp.AsyncPool(sys.executable, DEMO, client_options=plain_options(),
                             min_idle=2, max_idle=2, max_total=4, claim_observers=True)  # fmt: skip
        pids = []
        async with pool:
            await pool.start(wait=True)
            for name in ("a", "b"):
                with journal.JsonlJournal(tmp_path / f"{name}.jsonl") as record:
                    async with pool.session(cwd=str(tmp_path), observer=record) as session:
                        turn = await session.prompt(f"hello {name}")
                        pids.append(session._client.pid)
                    assert turn.response == f"Hello! You said: hello {name}."
            assert pool.stats().hits == 2  # both were spares started before the claim
        return pids

    pids = asyncio.run(main())
    for name in ("a", "b"):
        path = tmp_path / f"{name}.jsonl"
        # The journal reads as if the agent had been started for the task: the handshake first.
        assert methods(path, journal.RecordKind.SENT)[:3] == ["initialize", "session/new",
                                                             "session/prompt"]  # fmt: skip
        numbers = [r.number for r in journal.read(path)]
        assert numbers == list(range(1, len(numbers) + 1))
        texts = updates(path)
        assert texts and all(f"hello {name}" in t for t in texts if "Thinking" in t)
        assert not any(f"hello {'b' if name == 'a' else 'a'}" in t for t in texts)
        epochs = {r.transport_epoch for r in journal.read(path)}
        assert epochs == {1}
    assert all(wait_dead(pid, 5.0) for pid in pids)


def test_the_blocking_pool_attaches_too(tmp_path: Path) -> None:
    with acp.Pool(sys.executable, DEMO, client_options=plain_options(), min_idle=1, max_idle=1,
                  max_total=2, claim_observers=True) as pool:  # fmt: skip
        pool.start(wait=True)
        with journal.JsonlJournal(tmp_path / "j.jsonl") as record:
            client = pool.claim(observer=record)
            session = client.new_session(str(tmp_path))
            assert session.prompt("hi").response == "Hello! You said: hi."
            pool.release(client)
    path = tmp_path / "j.jsonl"
    assert methods(path, journal.RecordKind.SENT)[:2] == ["initialize", "session/new"]
    assert updates(path)


def test_without_claim_observers_a_claim_observer_is_refused() -> None:
    async def main() -> None:
        async with acp.AsyncPool(sys.executable, DEMO, client_options=options(),
                                 min_idle=0) as pool:  # fmt: skip
            with pytest.raises(ValueError, match="claim_observers=True"):
                await pool.claim(observer=object())
            assert pool.stats().claims == 0  # refused before anything was claimed

    asyncio.run(main())


def test_a_journal_holding_the_spares_epoch_is_refused(tmp_path: Path) -> None:
    # Its records and the spare's updates would collide on (epoch, sequence).
    path = tmp_path / "old.jsonl"
    with acp.Client(sys.executable, DEMO, **plain_options(),
                    observer=journal.JsonlJournal(path)) as client:  # fmt: skip
        client.start()
        client.new_session(str(tmp_path)).prompt("hi")

    async def main() -> None:
        async with acp.AsyncPool(sys.executable, DEMO, client_options=plain_options(),
                                 min_idle=0, claim_observers=True) as pool:  # fmt: skip
            with journal.JsonlJournal(path) as old, pytest.raises(ValueError, match="epoch"):
                await pool.claim(observer=old)
            assert pool.stats().claims == 0

    asyncio.run(main())


def test_durable_clients_need_an_observer_that_records() -> None:
    async def main() -> None:
        async with acp.AsyncPool(sys.executable, DEMO, client_options=plain_options(durable=True),
                                 min_idle=0, claim_observers=True) as pool:  # fmt: skip
            with pytest.raises(ValueError, match="on_update or on_permission_commit"):
                await pool.claim(observer=object())

    asyncio.run(main())


def test_a_reused_agent_starts_each_claim_with_an_empty_record(tmp_path: Path) -> None:
    async def main() -> set[int | None]:
        pool = acp.AsyncPool(sys.executable, slow_args("--close"), client_options=plain_options(),
                             min_idle=1, max_idle=1, max_total=1, reuse=True,
                             claim_observers=True)  # fmt: skip
        pids = set()
        async with pool:
            for name in ("a", "b"):
                with journal.JsonlJournal(tmp_path / f"{name}.jsonl") as record:
                    async with pool.session(cwd=str(tmp_path), observer=record) as session:
                        await session.prompt(name)
                        pids.add(session._client.pid)
        return pids

    assert len(asyncio.run(main())) == 1  # the same agent served both
    first = methods(tmp_path / "a.jsonl", journal.RecordKind.SENT)
    second = methods(tmp_path / "b.jsonl", journal.RecordKind.SENT)
    assert first == ["initialize", "session/new", "session/prompt", "session/close"]
    assert second == ["session/new", "session/prompt", "session/close"]


FLOODER = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "initialize":
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}}), flush=True)
            note = {"jsonrpc": "2.0", "method": "x/noise", "params": {"n": "z" * 64}}
            for _ in range(COUNT):
                print(json.dumps(note), flush=True)
    """
)


def test_a_spare_that_floods_before_any_claim_is_stopped_not_buffered(tmp_path: Path) -> None:
    # Attack: an agent that writes without end while nobody has claimed it. The relay holds at
    # most HELD_CALLS messages / 1 MiB, then stops that client; the pool evicts it.
    script = tmp_path / "flooder.py"
    script.write_text(FLOODER.replace("COUNT", str(HELD_CALLS * 4)))

    async def main() -> None:
        pool = acp.AsyncPool(sys.executable, [str(script)], client_options=plain_options(),
                             min_idle=1, max_idle=1, max_total=2, claim_observers=True)  # fmt: skip
        async with pool:
            await pool.start(wait=True)
            (client,) = pool._state.idle and [pool._state.idle[0].client]
            pid = client.pid
            assert pid is not None
            deadline = asyncio.get_running_loop().time() + 10
            while not client._live.stopped and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.02)
            assert client._live.stopped, "the flooding spare was not stopped"
            with journal.JsonlJournal(tmp_path / "j.jsonl") as record:
                # The cold start that follows floods too: the claim says why it failed.
                with pytest.raises(SpareOverflow, match="before any task claimed it"):
                    async with pool.session(cwd=str(tmp_path), observer=record):
                        pass
            assert pool.stats().evicted >= 1
        assert wait_dead(pid, 5.0)

    asyncio.run(main())


def test_a_claimed_spares_journal_replays_like_a_fresh_agents(tmp_path: Path) -> None:
    # The journal begins with the replayed handshake, so the replay agent can play it back:
    # the same updates and reply as the recorded turn.
    path = tmp_path / "claimed.jsonl"
    with acp.Pool(sys.executable, DEMO, client_options=plain_options(), min_idle=1, max_idle=1,
                  max_total=2, claim_observers=True) as pool:  # fmt: skip
        pool.start(wait=True)
        with journal.JsonlJournal(path) as record:
            with pool.session(cwd=str(tmp_path), observer=record) as session:
                recorded = session.prompt("hello")
    seen = Journal()
    replayer = acp.Client(sys.executable, ["-m", "acp_fast.replay_agent", str(path)],
                          **plain_options(), observer=seen)  # fmt: skip
    with replayer:
        replayer.start()
        assert replayer.default_session is not None
        played = replayer.default_session.prompt("hello")
    assert played.response == recorded.response
    assert [u.envelope for u in seen.updates] == updates(path)


def test_what_a_spare_sent_before_its_claim_is_in_the_claims_journal_in_order(
    tmp_path: Path,
) -> None:
    # An agent that talks right after initialize (within the bound): every line reaches the
    # task's journal, in order, before the claim's own session/new.
    script = tmp_path / "chatty.py"
    script.write_text(FLOODER.replace("COUNT", "100"))

    async def main() -> None:
        pool = acp.AsyncPool(sys.executable, [str(script)], client_options=plain_options(),
                             min_idle=1, max_idle=1, max_total=2, claim_observers=True)  # fmt: skip
        async with pool:
            await pool.start(wait=True)
            await asyncio.sleep(0.2)  # the noise arrives while nobody has claimed the spare
            with journal.JsonlJournal(tmp_path / "j.jsonl") as record:
                client = await pool.claim(observer=record)
                pool.release(client)

    asyncio.run(main())
    records = list(journal.read(tmp_path / "j.jsonl"))
    kinds = [(r.kind, json.loads(r.envelope).get("method")) for r in records]
    assert kinds[0] == (journal.RecordKind.SENT, "initialize")
    noise = [k for k in kinds if k[1] == "x/noise"]
    assert len(noise) == 100
    numbers = [r.number for r in records]
    assert numbers == list(range(1, len(numbers) + 1))


class _Broken:
    """An observer that cannot record (a journal on a full disk)."""

    def __init__(self) -> None:
        self.calls = 0

    def on_sent(self, line: str) -> None:
        self.calls += 1
        raise OSError(28, "No space left on device")


def test_an_observer_that_fails_at_the_claim_closes_the_client_it_was_given() -> None:
    async def main() -> None:
        pool = acp.AsyncPool(sys.executable, DEMO, client_options=plain_options(),
                             min_idle=1, max_idle=1, max_total=2, claim_observers=True)  # fmt: skip
        async with pool:
            await pool.start(wait=True)
            spare = pool._state.idle[0].client
            with pytest.raises(OSError, match="No space"):
                await pool.claim(observer=_Broken())
            assert wait_dead(spare.pid, 5.0)  # closed, not left claimed by nobody
            assert pool.stats().claimed == 0
            client = await pool.claim()  # the pool goes on
            pool.release(client)

    asyncio.run(main())


def test_a_relay_whose_target_raised_still_forwards() -> None:
    # The replay into the target raised: later callbacks go to the target (which may raise
    # again), never back into the relay's own holder (which would recurse).
    from acp_fast.pool._relay import Relay

    relay = Relay()
    relay.on_sent("held")
    target = _Broken()
    with pytest.raises(OSError):
        relay.attach(target)
    with pytest.raises(OSError):
        relay.on_sent("later")
    assert target.calls == 2

"""The Ray hop's cost: N sessions through `acp_fast.fleet` against the same N in one process
with `AsyncClient`, side by side in one run (fleet.md §3).

    python benches/fleet_bench.py                  # N=8 sessions, 20000 updates each
    python benches/fleet_bench.py --sessions 16 --updates 2000 --hosts 2

Agent: the demo agent in flood mode (``--flood-count U --flood-bytes 64``): every prompt is
answered with U message chunks of 64 bytes, as fast as the agent can write them.

Rows:
- updates/s: the N tasks from start to finish (start the agent, journal every update, prompt,
  consume every update: the fleet streams them to the driver through ``Fleet.stream``; in
  process they are iterated from each session's ``updates()``), over the wall time from the
  first start to the last update consumed.
- batch latency p50/p99: per batch, the consumer's receipt time minus the time the host read
  its first update from the agent (the journal's record time; same machine, same clock).
- Ray objects per update: batches returned through Ray / updates (each batch is one object).
- host RSS per agent: the host actor's RSS growth with its agents running, per agent.
- driver fan-in ceiling: small replies from the hosts (a batch is one) the driver takes per
  second with 64 calls in flight: how many batches/s one consumer can take at most.

Needs the ``ray`` extra; starts a local Ray (2 CPUs, no dashboard) and stops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

import acp_fast as acp
import psutil
import ray
from acp_fast import fleet, journal


def spec(updates: int) -> acp.AgentSpec:
    command, args = acp.demo_agent_command()
    return acp.AgentSpec(command, [*args, "--flood-count", str(updates), "--flood-bytes", "64"])


async def in_process(sessions: int, updates: int, workdir: str) -> tuple[float, int]:
    """The same work as a fleet task, in this process: start the agent with a journal as its
    observer, prompt, and consume every update from ``updates()``."""
    agent = spec(updates)
    count = 0

    async def one(index: int) -> None:
        nonlocal count
        path = os.path.join(workdir, f"local{index}.jsonl")
        with journal.JsonlJournal(path) as record:
            client = acp.AsyncClient(agent.command, agent.args, cwd=workdir, observer=record)
            async with client:
                await client.start()
                session = client.default_session
                assert session is not None
                stream = session.updates()

                async def consume() -> None:
                    nonlocal count
                    seen = 0
                    async for chunk in stream:  # the flood's chunks, then leave
                        seen += len(chunk)
                        if seen >= updates:
                            break
                    count += seen

                consumer = asyncio.ensure_future(consume())
                await session.prompt("go")
                await consumer

    began = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(sessions)))
    return time.perf_counter() - began, count


async def through_fleet(sessions: int, updates: int, hosts: int, workdir: str) -> dict[str, float]:
    per_host = -(-sessions // hosts)
    f = fleet.Fleet(spec(updates), hosts=hosts, agents_per_host=per_host, journal_dir=workdir)
    async with f:
        host_pids = [s["pid"] for s in await f.stats()]
        idle_rss = sum(psutil.Process(p).memory_info().rss for p in host_pids)
        tasks = [fleet.Task(f"b{i}", workdir, ["go"]) for i in range(sessions)]
        received: dict[str, list[tuple[float, int]]] = {t.id: [] for t in tasks}
        counts = {"updates": 0, "batches": 0}
        peak_rss = idle_rss

        async def consume(task_id: str) -> None:
            async for batch in f.stream(task_id):
                received[task_id].append((time.time(), batch.first_seq))
                counts["updates"] += len(batch)
                counts["batches"] += 1

        async def sample_rss() -> None:
            nonlocal peak_rss
            while True:
                rss = sum(psutil.Process(p).memory_info().rss for p in host_pids)
                peak_rss = max(peak_rss, rss)
                await asyncio.sleep(0.05)

        sampler = asyncio.ensure_future(sample_rss())
        began = time.perf_counter()
        consumers = [asyncio.ensure_future(consume(t.id)) for t in tasks]
        results = await f.run(tasks)
        await asyncio.gather(*consumers)
        elapsed = time.perf_counter() - began
        sampler.cancel()
        # The driver's fan-in ceiling: small host replies (a batch is one) one driver takes per
        # second, 64 calls in flight, from every host.
        actors = [f.actor(i) for i in range(hosts)]
        calls = 0
        fan_began = time.perf_counter()

        async def caller(index: int) -> None:
            nonlocal calls
            actor = actors[index % hosts]
            for _ in range(50):
                await actor.stats.remote()
                calls += 1

        await asyncio.gather(*(caller(i) for i in range(64)))
        fan_in = calls / (time.perf_counter() - fan_began)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    latencies = []
    for r in results:
        read_at = {
            rec.update_sequence: rec.time
            for rec in journal.read(r.journal or "")
            if rec.kind == journal.RecordKind.UPDATE
        }
        latencies += [got - read_at[first] for got, first in received[r.id]]
    latencies.sort()
    return {
        "elapsed": elapsed,
        "updates": counts["updates"],
        "batches": counts["batches"],
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "rss_per_agent": (peak_rss - idle_rss) / max(1, per_host * hosts),
        "fan_in": fan_in,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--updates", type=int, default=20000)
    parser.add_argument("--hosts", type=int, default=1)
    options = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with tempfile.TemporaryDirectory() as workdir:
        seconds, count = asyncio.run(in_process(options.sessions, options.updates, workdir))
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            resources={"acp_slots": options.sessions + options.hosts},
        )
        try:
            got = asyncio.run(
                through_fleet(options.sessions, options.updates, options.hosts, workdir)
            )
        finally:
            ray.shutdown()
    local_rate = count / seconds
    fleet_rate = got["updates"] / got["elapsed"]
    print(f"{options.sessions} sessions x {options.updates} updates (64 B), "
          f"{options.hosts} host(s), {os.cpu_count()} CPUs")  # fmt: skip
    print(f"in process (AsyncClient):  {local_rate:12,.0f} updates/s")
    print(f"through the fleet:         {fleet_rate:12,.0f} updates/s  "
          f"({fleet_rate / local_rate:.2f} of in-process)")  # fmt: skip
    print(
        f"batch latency:             p50 {got['p50'] * 1e3:.1f} ms, p99 {got['p99'] * 1e3:.1f} ms"
    )
    print(f"Ray objects per update:    {got['batches'] / got['updates']:.4f} "
          f"({got['batches']:.0f} batches for {got['updates']:.0f} updates)")  # fmt: skip
    print(f"driver fan-in ceiling:     {got['fan_in']:12,.0f} replies/s (64 in flight)")
    print(f"host RSS per agent:        {got['rss_per_agent'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()

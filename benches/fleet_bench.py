"""The Ray hop's cost: N sessions through `acp_fast.fleet` against the same N in one process
with `AsyncClient`, side by side in one run (fleet.md §3).

    python benches/fleet_bench.py                  # N=8 sessions, 20000 updates each
    python benches/fleet_bench.py --sessions 16 --updates 2000 --hosts 2
    python benches/fleet_bench.py --pool 2         # each host keeps 2 warm spares

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
- driver fan-in ceiling: batches/s one consumer (this driver) takes at most: an actor per
  host returns ready-made batches (1 MiB, a flood's largest; 16 KiB, the size a busy stream's
  batch leaves at; 256 B, a trickle's) as fast as the driver asks, 64 calls in flight; no
  agent runs meanwhile.
  What a fleet's streams can deliver to one driver is this many batches per second, whatever
  the number of nodes.

Needs the ``ray`` extra; starts a local Ray (2 CPUs, no dashboard) and stops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from typing import Any

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


async def through_fleet(
    sessions: int, updates: int, hosts: int, workdir: str, pool: int
) -> dict[str, Any]:
    per_host = -(-sessions // hosts)
    warm = {"min_idle": pool, "max_idle": pool} if pool else None
    f = fleet.Fleet(spec(updates), hosts=hosts, agents_per_host=per_host, journal_dir=workdir,
                    pool=warm)  # fmt: skip
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
    fan_in = {size: await fan_in_ceiling(hosts, size) for size in (1 << 20, 16 * 1024, 256)}
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


@ray.remote(num_cpus=0)
class _Source:
    """Stands in for a host whose streams always have a batch ready."""

    def __init__(self, size: int) -> None:
        self.batch = (b"x" * (size - 1) + b"\n", b"\0" * 8, False)

    async def read(self) -> tuple[bytes, bytes, bool]:
        return self.batch


async def fan_in_ceiling(hosts: int, size: int, seconds: float = 3.0) -> float:
    """Batches of `size` bytes per second one driver takes, 64 reads in flight over `hosts`
    sources (the shape of `Fleet.stream`: one awaited actor call per batch)."""
    sources = [_Source.remote(size) for _ in range(hosts)]  # type: ignore[attr-defined]
    await asyncio.gather(*(s.read.remote() for s in sources))
    taken = 0
    stop = time.perf_counter() + seconds

    async def consumer(index: int) -> None:
        nonlocal taken
        source = sources[index % hosts]
        while time.perf_counter() < stop:
            await source.read.remote()
            taken += 1

    began = time.perf_counter()
    await asyncio.gather(*(consumer(i) for i in range(64)))
    rate = taken / (time.perf_counter() - began)
    for source in sources:
        ray.kill(source)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--updates", type=int, default=20000)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--pool", type=int, default=0, help="warm spares per host (0: none)")
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
                through_fleet(
                    options.sessions, options.updates, options.hosts, workdir, options.pool
                )
            )
        finally:
            ray.shutdown()
    local_rate = count / seconds
    fleet_rate = got["updates"] / got["elapsed"]
    print(f"{options.sessions} sessions x {options.updates} updates (64 B), "
          f"{options.hosts} host(s), {options.pool} warm spares per host, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"in process (AsyncClient):  {local_rate:12,.0f} updates/s")
    print(f"through the fleet:         {fleet_rate:12,.0f} updates/s  "
          f"({fleet_rate / local_rate:.2f} of in-process)")  # fmt: skip
    print(
        f"batch latency:             p50 {got['p50'] * 1e3:.1f} ms, p99 {got['p99'] * 1e3:.1f} ms"
    )
    print(f"Ray objects per update:    {got['batches'] / got['updates']:.4f} "
          f"({got['batches']:.0f} batches for {got['updates']:.0f} updates)")  # fmt: skip
    fan_in = got["fan_in"]
    for size, rate in fan_in.items():  # type: ignore[attr-defined]
        print(f"driver fan-in ceiling:     {rate:12,.0f} batches/s of {size:,} B "
              f"({rate * size / 2**20:,.1f} MiB/s; 64 in flight)")  # fmt: skip
    print(f"host RSS per agent:        {got['rss_per_agent'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()

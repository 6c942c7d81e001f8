"""`AsyncClient` side by side with the blocking `Client` and the official SDK (design/async.md §8).

Run from the repository root in the dev venv (the `bench` extra, and uvloop from `test`):

    python benches/compare_async.py            # full run (~3 minutes), markdown on stdout
    python benches/compare_async.py --quick    # smoke run with small sizes

Every runner drives `benches/flood_agent.py`, the agent of `benches/compare.py`, whose runners
and observer it reuses: `on_update` counts updates and sums `len(update.text)`. The cases:

- (g) one agent streaming 100,000 updates of 32 B in one prompt, through the blocking `Client`,
  `AsyncClient` on the default loop, `AsyncClient` on uvloop and the SDK, interleaved in each
  round; medians of the rounds.
- (h) 64 agents in one event loop, one `AsyncClient` each, every agent streaming 100,000 updates
  of 32 B in one prompt, all prompts started together: aggregate updates/s, the slowest and the
  fastest agent's completion time (from the common start to its prompt's response), the host's
  peak RSS, CPU time and thread count, and the agents' own CPU time. Then the same 64 agents with
  64 blocking clients, one thread each. Each run in a fresh interpreter (VmHWM is per process).
- (i) `AsyncSession.updates()` at max_latency 16 ms: updates/s and batches/s while one agent
  streams 100,000 updates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import acp_fast
from compare import (
    AGENT,
    FAST_LIMITS,
    FAST_POLICY,
    PYTHON,
    FastCounter,
    Stream,
    check,
    fast_stream,
    fmt_rate,
    fmt_ratio,
    progress,
    sdk_stream,
)


def async_client(agent_args: list[str], observer: object) -> acp_fast.AsyncClient:
    return acp_fast.AsyncClient(
        PYTHON,
        args=[AGENT, *agent_args],
        reader_limits=acp_fast.DEFAULT_READER_LIMITS,
        transfer_limits=FAST_LIMITS,
        transport_epoch=1,
        permission_policy=FAST_POLICY,
        observer=observer,
    )


async def _async_stream(agent_args: list[str]) -> Stream:
    counter = FastCounter()
    async with async_client(agent_args, counter) as client:
        await client.start()
        started = time.perf_counter()
        result = await client.prompt_detailed("go")
        seconds = time.perf_counter() - started
    check(result.stop_reason == "end_turn", f"async: stop reason {result.stop_reason}")
    check(len(result.response) == counter.chars, "async: reply and updates differ")
    return Stream(seconds, counter.updates, counter.chars, counter.permissions)


def async_stream(agent_args: list[str]) -> Stream:
    return asyncio.run(_async_stream(agent_args))


def uvloop_stream(agent_args: list[str]) -> Stream:
    import uvloop

    result: Stream = uvloop.run(_async_stream(agent_args))
    return result


def case_single(updates: int, rounds: int) -> dict[str, float]:
    runners = {
        "Client": fast_stream,
        "AsyncClient": async_stream,
        "AsyncClient+uvloop": uvloop_stream,
        "SDK": sdk_stream,
    }
    args = ["--updates", str(updates), "--text-bytes", "32"]
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for number in range(1, rounds + 1):
        shown = []
        for name, run in runners.items():
            sample = run(args)
            check(sample.updates == updates, f"(g) {name}: {sample.updates} of {updates}")
            samples[name].append(sample.updates / sample.seconds)
            shown.append(f"{name} {fmt_rate(samples[name][-1])}")
        progress(f"(g) round {number}/{rounds}: " + ", ".join(shown) + " updates/s")
    return {name: statistics.median(values) for name, values in samples.items()}


# --- (h): many agents, run in a child interpreter ------------------------------------------


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


async def _many_async(agents: int, updates: int) -> dict[str, Any]:
    args = ["--updates", str(updates), "--text-bytes", "32"]
    counters = [FastCounter() for _ in range(agents)]
    clients = [async_client(args, counter) for counter in counters]
    await asyncio.gather(*(client.start() for client in clients))
    threads = threads_now()
    started = time.perf_counter()
    finished: list[float] = []

    async def one(client: acp_fast.AsyncClient) -> None:
        await client.prompt("go")
        finished.append(time.perf_counter() - started)

    await asyncio.gather(*(one(client) for client in clients))
    wall = time.perf_counter() - started
    for client in clients:
        client.close()
    total = sum(counter.updates for counter in counters)
    check(total == agents * updates, f"(h) async: {total} of {agents * updates} updates")
    return {"wall": wall, "finished": finished, "threads": threads, "total": total}


def _many_threads(agents: int, updates: int) -> dict[str, Any]:
    from compare import fast_client

    args = ["--updates", str(updates), "--text-bytes", "32"]
    counters = [FastCounter() for _ in range(agents)]
    clients = [fast_client(args, counter) for counter in counters]
    for client in clients:
        client.start()
    barrier = threading.Barrier(agents + 1)
    finished: list[float] = []
    started = 0.0

    def one(client: acp_fast.Client) -> None:
        barrier.wait()
        client.prompt("go")
        finished.append(time.perf_counter() - started)

    workers = [threading.Thread(target=one, args=(client,)) for client in clients]
    for worker in workers:
        worker.start()
    threads = threads_now()
    started = time.perf_counter()
    barrier.wait()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    for client in clients:
        client.close()
    total = sum(counter.updates for counter in counters)
    check(total == agents * updates, f"(h) threads: {total} of {agents * updates} updates")
    return {"wall": wall, "finished": finished, "threads": threads, "total": total}


def child_main(mode: str, agents: int, updates: int) -> None:
    """(h) in this interpreter: one JSON line with the figures."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    if mode == "async":
        figures = asyncio.run(_many_async(agents, updates))
    else:
        figures = _many_threads(agents, updates)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures["host_cpu"] = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    figures["agents_cpu"] = children.ru_utime + children.ru_stime
    figures["peak_rss_mib"] = usage.ru_maxrss / 1024
    print(json.dumps(figures), flush=True)


def run_child(mode: str, agents: int, updates: int) -> dict[str, Any]:
    out = subprocess.run(
        [PYTHON, __file__, "--child", mode, str(agents), str(updates)],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def case_many(agents: int, updates: int, rounds: int) -> dict[str, dict[str, float]]:
    results: dict[str, list[dict[str, Any]]] = {"async": [], "threads": []}
    for number in range(1, rounds + 1):
        for mode in results:
            figures = run_child(mode, agents, updates)
            results[mode].append(figures)
            finished = figures["finished"]
            rate = fmt_rate(figures["total"] / figures["wall"])
            spread = max(finished) / min(finished)
            progress(
                f"(h) round {number}/{rounds} {mode}: {rate} updates/s, "
                f"slowest/fastest {spread:.2f}"
            )
    summary: dict[str, dict[str, float]] = {}
    for mode, runs in results.items():
        summary[mode] = {
            "rate": statistics.median(r["total"] / r["wall"] for r in runs),
            "spread": statistics.median(max(r["finished"]) / min(r["finished"]) for r in runs),
            "fastest": statistics.median(min(r["finished"]) for r in runs),
            "slowest": statistics.median(max(r["finished"]) for r in runs),
            "host_cpu": statistics.median(r["host_cpu"] for r in runs),
            "agents_cpu": statistics.median(r["agents_cpu"] for r in runs),
            "rss": statistics.median(r["peak_rss_mib"] for r in runs),
            "threads": max(r["threads"] for r in runs),
        }
    return summary


# --- (i): updates() batches ------------------------------------------------------------------


async def _batches(updates: int) -> tuple[float, float]:
    counter = FastCounter()
    async with async_client(["--updates", str(updates), "--text-bytes", "32"], counter) as client:
        await client.start()
        session = client.default_session
        assert session is not None
        stream = session.updates(max_latency=0.016, max_items=256)
        started = time.perf_counter()
        turn = asyncio.ensure_future(session.prompt("go"))
        got = batches = 0
        async for batch in stream:
            got += len(batch)
            batches += 1
            if got == updates:
                break
        seconds = time.perf_counter() - started
        await turn
        await stream.aclose()
    return got / seconds, batches / seconds


def case_batches(updates: int, rounds: int) -> tuple[float, float]:
    rates, per_second = [], []
    for number in range(1, rounds + 1):
        rate, batches = asyncio.run(_batches(updates))
        rates.append(rate)
        per_second.append(batches)
        progress(
            f"(i) round {number}/{rounds}: {fmt_rate(rate)} updates/s, {batches:.0f} batches/s"
        )
    return statistics.median(rates), statistics.median(per_second)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "AGENTS", "UPDATES"))
    options = parser.parse_args(argv)
    if options.child:
        mode, agents, updates = options.child
        child_main(mode, int(agents), int(updates))
        return 0
    updates, rounds, agents = (10_000, 3, 16) if options.quick else (100_000, 5, 64)
    single = case_single(updates, rounds)
    many = case_many(agents, updates, 3)
    rate, batches = case_batches(updates, rounds)
    one = single["AsyncClient"]
    print(f"## AsyncClient ({updates:,} updates of 32 B; medians of {rounds} interleaved rounds)\n")
    print("| runner | updates/s | vs Client | vs SDK |")
    print("|---|---|---|---|")
    for name, value in single.items():
        print(
            f"| {name} | {fmt_rate(value)} | {fmt_ratio(value / single['Client'])} "
            f"| {fmt_ratio(value / single['SDK'])} |"
        )
    print(f"\n## {agents} agents at once, {updates:,} updates each (medians of 3 runs)\n")
    print(
        "| host | aggregate updates/s | vs one AsyncClient | fastest s | slowest s "
        "| slowest/fastest | host CPU s | agents' CPU s | peak RSS MiB | threads |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, label in (("async", "one loop, AsyncClient each"), ("threads", "Client per thread")):
        row = many[mode]
        print(
            f"| {label} | {fmt_rate(row['rate'])} | {fmt_ratio(row['rate'] / one)} "
            f"| {row['fastest']:.2f} | {row['slowest']:.2f} | {row['spread']:.2f} "
            f"| {row['host_cpu']:.2f} | {row['agents_cpu']:.2f} | {row['rss']:.0f} "
            f"| {row['threads']:.0f} |"
        )
    print("\n## updates() at max_latency 16 ms\n")
    print(f"{fmt_rate(rate)} updates/s in {batches:,.0f} batches/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Warm pool against cold starts, side by side in one run (fleet.md §1).

    python benches/pool_bench.py            # ~1 minute
    python benches/pool_bench.py --quick    # fewer samples (~30 s)

Agents: the fake agent of tests/pool/slow_agent.py, which takes 1 s to answer ``initialize``
(Python start-up comes on top); the demo agent (``python -m acp_fast.demo_agent``); the
official Python SDK's agent (tests/interop/agents/py_sdk_agent.py, when agent-client-protocol
is installed); and the Node agents of scripts/install-agents.sh where installed (skipped with a
message otherwise).

Rows:
- claim: ``Pool.claim()`` on a warm pool (each claim waits until the pool is full again, so
  every sample is a warm claim) against a cold start (``Client(...)`` + ``start(new_session=
  False)``), p50 and p99; and the same with ``session/new`` (``pool.session()`` entered,
  against ``Client(...)`` + ``start()``).
- burst: ``max_total`` claims at once on a full `AsyncPool` (spawn_concurrency 2): hit rate,
  claim p50/p99, then the time until the pool is full again after they are released.
- memory: RSS of one idle spare's agent process, and the host's RSS growth per spare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast as acp

ROOT = Path(__file__).resolve().parents[1]
SLOW = str(ROOT / "tests" / "pool" / "slow_agent.py")
SDK_AGENT = ROOT / "tests" / "interop" / "agents" / "py_sdk_agent.py"
LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=1 << 20,
    response_segment_count=1 << 20,
)
NODE_AGENTS = {
    "claude-agent-acp": "@agentclientprotocol/claude-agent-acp",
    "claude-code-acp": "@zed-industries/claude-code-acp",
    "codex-acp": "@zed-industries/codex-acp",
    "gemini": "@google/gemini-cli",
}


class Quiet:
    def on_update(self, update: object) -> None:
        pass

    def on_permission_commit(self, request: object) -> None:
        pass


def options() -> dict[str, Any]:
    return {
        "reader_limits": acp.DEFAULT_READER_LIMITS,
        "transfer_limits": LIMITS,
        "transport_epoch": 1,
        "observer": Quiet(),
    }


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 10 else f"{value:.1f} s"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# --- the agents -----------------------------------------------------------------------------


def agents() -> tuple[list[tuple[str, str, tuple[str, ...]]], list[str]]:
    """(label, command, args) of each agent to measure, and the skipped ones' messages."""
    found = [
        ("fake, 1 s initialize", sys.executable, (SLOW, "--init-delay", "1")),
        ("demo agent", sys.executable, ("-m", "acp_fast.demo_agent")),
    ]
    skipped = []
    try:
        import acp as _sdk  # noqa: F401

        found.append(("official Python SDK agent", sys.executable, (str(SDK_AGENT),)))
    except ImportError:
        skipped.append("official Python SDK agent: agent-client-protocol is not installed")
    root = Path(os.environ.get("ACP_FAST_AGENTS") or Path.home() / ".cache" / "acp-fast-agents")
    for name in NODE_AGENTS:
        program = root / name / "node_modules" / ".bin" / name
        if program.exists() and shutil.which("node"):
            found.append((name, str(program), ()))
        else:
            skipped.append(f"{name}: not installed ({program}; scripts/install-agents.sh)")
    return found, skipped


# --- warm against cold ----------------------------------------------------------------------


def cold_start(command: str, args: tuple[str, ...], new_session: bool) -> float:
    began = time.perf_counter()
    client = acp.Client(command, args=args, **options())
    client.start(new_session=new_session)
    seconds = time.perf_counter() - began
    client.close()
    return seconds


def wait_full(pool: acp.Pool, idle: int, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while pool.stats().idle < idle:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pool did not refill: {pool.stats()}")
        time.sleep(0.005)


def warm_claims(command: str, args: tuple[str, ...], samples: int) -> tuple[list[float], ...]:
    """Claim latencies, and claim + session/new latencies, on a pool kept full."""
    claims: list[float] = []
    sessions: list[float] = []
    with acp.Pool(
        command, args=args, client_options=options(), min_idle=2, max_idle=2, max_total=4
    ) as pool:
        pool.start(wait=True)
        for _ in range(samples):
            wait_full(pool, 2)
            began = time.perf_counter()
            client = pool.claim()
            claims.append(time.perf_counter() - began)
            pool.release(client)
            wait_full(pool, 2)
            began = time.perf_counter()
            with pool.session():
                sessions.append(time.perf_counter() - began)
        stats = pool.stats()
        if stats.hits != stats.claims:
            raise RuntimeError(f"a warm claim missed: {stats}")
    return claims, sessions


def case_claims(
    found: list[tuple[str, str, tuple[str, ...]]], samples: int, colds: int
) -> list[str]:
    rows = []
    for label, command, args in found:
        progress(f"claim: {label} ...")
        cold = [cold_start(command, args, False) for _ in range(colds)]
        cold_session = [cold_start(command, args, True) for _ in range(colds)]
        warm, warm_session = warm_claims(command, args, samples)
        rows.append(
            f"| {label} | {ms(quantile(warm, 0.5))} / {ms(quantile(warm, 0.99))} "
            f"| {ms(quantile(cold, 0.5))} / {ms(quantile(cold, 0.99))} "
            f"| {ms(quantile(warm_session, 0.5))} / {ms(quantile(warm_session, 0.99))} "
            f"| {ms(quantile(cold_session, 0.5))} / {ms(quantile(cold_session, 0.99))} "
            f"| {statistics.median(cold) / statistics.median(warm):,.0f}x |"
        )
    return rows


# --- a burst of max_total claims --------------------------------------------------------------


async def burst(command: str, args: tuple[str, ...], size: int) -> str:
    async with acp.AsyncPool(
        command,
        args=args,
        client_options=options(),
        min_idle=size,
        max_idle=size,
        max_total=size,
        spawn_concurrency=2,
        claim_timeout=30.0,
    ) as pool:
        began = time.perf_counter()
        await pool.start(wait=True)
        filled = time.perf_counter() - began
        latencies: list[float] = []

        async def claim() -> acp.AsyncClient:
            began = time.perf_counter()
            client = await pool.claim()
            latencies.append(time.perf_counter() - began)
            return client

        clients = await asyncio.gather(*(claim() for _ in range(size)))
        stats = pool.stats()
        began = time.perf_counter()
        for client in clients:
            pool.release(client)
        while pool.stats().idle < size:
            await asyncio.sleep(0.005)
        refill = time.perf_counter() - began
    return (
        f"| {size} | {stats.hits}/{stats.claims} ({stats.hits / stats.claims:.0%}) "
        f"| {ms(quantile(latencies, 0.5))} / {ms(quantile(latencies, 0.99))} "
        f"| {ms(filled)} | {ms(refill)} |"
    )


# --- memory -----------------------------------------------------------------------------------


def memory(label: str, command: str, args: tuple[str, ...], spares: int) -> str:
    host_before = rss_kib(os.getpid())
    threads_before = len(os.listdir("/proc/self/task"))
    with acp.Pool(
        command, args=args, client_options=options(), min_idle=spares, max_idle=spares,
        max_total=spares, spawn_concurrency=spares,
    ) as pool:  # fmt: skip
        pool.start(wait=True)
        time.sleep(0.5)  # let the start threads finish
        agents = [s.client.pid for s in pool._state.idle if s.client.pid is not None]
        agent_kib = statistics.median(rss_kib(pid) for pid in agents)
        host_after = rss_kib(os.getpid())
        threads = len(os.listdir("/proc/self/task")) - threads_before
    return (
        f"| {label} | {spares} | {agent_kib / 1024:.1f} MiB "
        f"| {(host_after - host_before) / spares:.0f} KiB | {threads} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Warm pool against cold starts.")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.memory_child is not None:
        label, command, args = agents()[0][arguments.memory_child]
        print(memory(label, command, args, 8))
        return 0
    samples, colds = (10, 3) if arguments.quick else (40, 6)
    found, skipped = agents()
    for message in skipped:
        progress(f"skipped: {message}")
    print(
        f"pool_bench on {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, acp-fast {acp.__version__}"
    )
    print()
    print("| agent | warm claim p50 / p99 | cold start p50 / p99 | warm claim + session/new "
          "| cold start + session/new | cold / warm (p50) |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|")
    for row in case_claims(found, samples, colds):
        print(row)
    if skipped:
        print()
        print("Skipped: " + "; ".join(skipped) + ".")
    print()
    progress("burst ...")
    print("| burst of max_total claims (fake 1 s agent) | hits | claim p50 / p99 "
          "| first fill | refill after release |")  # fmt: skip
    print("|--:|--:|--:|--:|--:|")
    print(asyncio.run(burst(sys.executable, (SLOW, "--init-delay", "1"), 8)))
    print()
    progress("memory ...")
    print("| idle spares of | spares | agent RSS (median) | host RSS per spare "
          "| host threads added |")  # fmt: skip
    print("|---|--:|--:|--:|--:|")
    for index in range(2):  # each in a fresh interpreter: the host's RSS is its own
        child = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(index)],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        print(child.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""pytest-benchmark suites for acp-fast's own cases (a)-(c) of `benches/compare.py`.

Run from the repository root in the dev venv:

    python -m pytest benches -p no:cacheprovider --benchmark-only

(add `--benchmark-autosave` / `--benchmark-compare` to track regressions between commits).
They are not part of the default test run: `python -m pytest` collects only `tests/`
(`testpaths` in pyproject.toml).

Each round spawns `benches/flood_agent.py`, runs `start()` outside the timing, then times one
`prompt_detailed()` with an observer that counts updates and sums `len(update.text)`, exactly
as the acp-fast runner of `compare.py` does. The rates appear in the report's `extra_info`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import acp_fast
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import FastCounter  # benches/ is not a package: found via the path above

AGENT = str(Path(__file__).resolve().with_name("flood_agent.py"))
ROUNDS = 5
LIMITS = acp_fast.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=512 << 20,
    update_bytes=1 << 20,
    update_count=1 << 40,
    response_segment_count=1 << 30,
)


# The same observer as benches/compare.py's acp-fast runner (counts and sums text length).
Counter = FastCounter


def bench_prompt(benchmark: Any, agent_args: list[str]) -> list[Counter]:
    """Time one prompt per round against a fresh, started agent; return the counters."""
    counters: list[Counter] = []

    def setup() -> tuple[tuple[acp_fast.Client], dict[str, Any]]:
        counter = Counter()
        counters.append(counter)
        client = acp_fast.Client(
            sys.executable,
            args=[AGENT, *agent_args],
            reader_limits=acp_fast.DEFAULT_READER_LIMITS,
            transfer_limits=LIMITS,
            transport_epoch=1,
            permission_policy=acp_fast.PermissionPolicy(allowed_tool_kinds=["execute"]),
            observer=counter,
        )
        client.start()
        return (client,), {}

    def prompt(client: acp_fast.Client) -> acp_fast.PromptResult:
        return client.prompt_detailed("go")

    def teardown(client: acp_fast.Client) -> None:
        client.close()

    result = benchmark.pedantic(
        prompt, setup=setup, teardown=teardown, rounds=ROUNDS, warmup_rounds=1
    )
    assert result.stop_reason == "end_turn"
    assert result.overflow is None
    return counters


@pytest.mark.benchmark(group="acp-fast")
def test_a_updates_32b(benchmark: Any) -> None:
    """(a) 100,000 agent_message_chunk updates of 32 bytes of text in one prompt."""
    count = 100_000
    counters = bench_prompt(benchmark, ["--updates", str(count), "--text-bytes", "32"])
    assert all(c.updates == count and c.chars == count * 32 for c in counters)
    benchmark.extra_info["updates_per_s"] = round(count / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="acp-fast")
def test_b_updates_64kib(benchmark: Any) -> None:
    """(b) 2,000 updates of 64 KiB of text: MB/s of reply text."""
    count, size = 2_000, 64 * 1024
    counters = bench_prompt(benchmark, ["--updates", str(count), "--text-bytes", str(size)])
    assert all(c.updates == count and c.chars == count * size for c in counters)
    benchmark.extra_info["text_mb_per_s"] = round(count * size / benchmark.stats.stats.median / 1e6)


@pytest.mark.benchmark(group="acp-fast")
def test_c_permission_round_trips(benchmark: Any) -> None:
    """(c) 2,000 permission round trips, the agent waiting for each answer."""
    count = 2_000
    counters = bench_prompt(benchmark, ["--permissions", str(count)])
    assert all(c.permissions == count for c in counters)
    benchmark.extra_info["round_trips_per_s"] = round(count / benchmark.stats.stats.median)

"""What telemetry costs: cases (a)-(c) of benches/compare.py through `acp_fast.Client` with
telemetry off, with the OpenTelemetry API only (no SDK configured: every call a no-op), and
with the SDK and an in-memory span exporter and metric reader (fleet.md §2).

    python benches/telemetry_bench.py            # 5 rounds, the full sizes (~1 minute)
    python benches/telemetry_bench.py --quick    # 3 rounds, small sizes

The same flood agent and observer as compare.py's acp-fast runner (``on_update`` counts
updates and sums ``len(update.text)``; permissions granted by the policy), the three variants
interleaved in each round, medians shown: the rate by the wall clock, and the host's CPU time
per update or round trip (all its threads), which a loaded machine disturbs much less. Needs
opentelemetry-api and opentelemetry-sdk.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import acp_fast
from acp_fast import telemetry

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import (
    AGENT,
    BIG_TEXT,
    FAST_LIMITS,
    FAST_POLICY,
    FULL,
    PYTHON,
    QUICK,
    FastCounter,
    Sizes,
)

VARIANTS = ("off", "API only", "SDK, in-memory")


def make_sdk() -> tuple[object, object, Callable[[], int]]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def drained() -> int:
        spans = len(exporter.get_finished_spans())
        exporter.clear()
        return spans

    return tracer_provider, meter_provider, drained


def run(
    agent_args: list[str], variant: str, sdk: tuple[object, object, Callable[[], int]]
) -> float:
    """Seconds of one prompt, from sending it to its answer."""
    if variant == "off":
        telemetry.uninstrument()
    elif variant == "API only":
        telemetry.instrument()  # the global providers: no SDK configured, so no-ops
    else:
        telemetry.instrument(tracer_provider=sdk[0], meter_provider=sdk[1])
    counter = FastCounter()
    with acp_fast.Client(
        PYTHON,
        args=[AGENT, *agent_args],
        reader_limits=acp_fast.DEFAULT_READER_LIMITS,
        transfer_limits=FAST_LIMITS,
        transport_epoch=1,
        permission_policy=FAST_POLICY,
        observer=counter,
    ) as client:
        if (client._telemetry is None) != (variant == "off"):
            raise RuntimeError(f"{variant}: telemetry is not as asked")
        client.start()
        began, cpu = time.perf_counter(), time.process_time()
        result = client.prompt_detailed("go")
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    if result.stop_reason != "end_turn":
        raise RuntimeError(f"{variant}: stop reason {result.stop_reason}")
    if variant == "SDK, in-memory" and sdk[2]() != 1:
        raise RuntimeError("the SDK variant did not export the turn's span")
    telemetry.uninstrument()
    return seconds, cpu


def case(
    label: str,
    agent_args: list[str],
    rounds: int,
    count: int,
    value: Callable[[float], float],
    unit: str,
    sdk: tuple[object, object, Callable[[], int]],
) -> tuple[str, str]:
    """The case's row of rates (wall clock) and of host CPU per item, medians of the rounds."""
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpus: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for number in range(1, rounds + 1):
        for variant in VARIANTS:
            seconds, cpu = run(agent_args, variant, sdk)
            rates[variant].append(value(seconds))
            cpus[variant].append(cpu / count * 1e6)
        shown = ", ".join(f"{v} {rates[v][-1]:,.0f} ({cpus[v][-1]:.2f} us CPU)" for v in VARIANTS)
        print(f"{label} round {number}/{rounds}: {shown} {unit}", file=sys.stderr, flush=True)
    rate = {v: statistics.median(rates[v]) for v in VARIANTS}
    cpu = {v: statistics.median(cpus[v]) for v in VARIANTS}
    spread = (max(rates["off"]) - min(rates["off"])) / rate["off"] * 100 / 2
    rate_row = (
        f"| {label} ({unit}) | "
        + " | ".join(f"{rate[v]:,.0f}" for v in VARIANTS)
        + " | "
        + " | ".join(f"{(rate[v] / rate['off'] - 1) * 100:+.1f}%" for v in VARIANTS[1:])
        + f" | ±{spread:.1f}% |"
    )
    cpu_row = (
        f"| {label}: host CPU per item | "
        + " | ".join(f"{cpu[v]:.3f} us" for v in VARIANTS)
        + " | "
        + " | ".join(f"{(cpu[v] / cpu['off'] - 1) * 100:+.1f}%" for v in VARIANTS[1:])
        + " | |"
    )
    return rate_row, cpu_row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The cost of acp_fast.telemetry.")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, help="rounds (default: compare.py's)")
    arguments = parser.parse_args(argv)
    sizes: Sizes = QUICK if arguments.quick else FULL
    if arguments.rounds:
        sizes = dataclasses.replace(sizes, rounds=arguments.rounds)
    sdk = make_sdk()
    for variant in VARIANTS:  # warm-up
        run(["--updates", "1000", "--text-bytes", "32"], variant, sdk)
    rows = [
        case(
            f"(a) {sizes.updates:,} updates of 32 B",
            ["--updates", str(sizes.updates), "--text-bytes", "32"],
            sizes.rounds,
            sizes.updates,
            lambda s: sizes.updates / s,
            "updates/s",
            sdk,
        ),
        case(
            f"(b) {sizes.big_updates:,} updates of 64 KiB",
            ["--updates", str(sizes.big_updates), "--text-bytes", str(BIG_TEXT)],
            sizes.rounds,
            sizes.big_updates,
            lambda s: sizes.big_updates * BIG_TEXT / s / 1e6,
            "MB/s",
            sdk,
        ),
        case(
            f"(c) {sizes.permissions:,} permission round trips",
            ["--permissions", str(sizes.permissions)],
            sizes.rounds,
            sizes.permissions,
            lambda s: sizes.permissions / s,
            "round trips/s",
            sdk,
        ),
    ]
    print(
        f"telemetry_bench on {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, acp-fast {acp_fast.__version__}, medians of "
        f"{sizes.rounds} interleaved rounds"
    )
    print()
    print(
        "| case | off | API only | SDK, in-memory | API only vs off | SDK vs off "
        "| off: half the round-to-round spread |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|")
    for rate_row, _ in rows:
        print(rate_row)
    for _, cpu_row in rows:
        print(cpu_row)
    return 0


if __name__ == "__main__":
    sys.exit(main())

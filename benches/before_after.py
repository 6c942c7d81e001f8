"""acp-fast against an earlier build of itself, side by side: cases (a), (b), (b2), (c), (d) and (e)
of `compare.py`, measured by the same code (`compare.py`'s acp-fast runner) in two interpreters,
interleaved round by round; medians and the ratio now / before.

    python benches/before_after.py --baseline /path/to/other/venv/bin/python [--rounds 5]

The baseline interpreter needs acp-fast (the build to compare with), orjson and the SDK
installed, e.g. `git worktree add /tmp/base <rev> && python -m venv /tmp/base/.venv &&
/tmp/base/.venv/bin/pip install '/tmp/base[bench]'`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

BENCHES = Path(__file__).resolve().parent

# One measurement in a fresh interpreter: the case's figure and the host's CPU per unit (JSON).
MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {benches!r})
import compare
case = sys.argv[1]
if case == "d":
    # As compare.py's case (d): clients after the first of the process (which also starts the
    # host-death guard, once per process; "d0" measures that one alone).
    compare.fast_startup()
    times = sorted(compare.fast_startup() for _ in range(9))
    print(json.dumps([times[4] * 1000, None]))
elif case == "d0":
    print(json.dumps([compare.fast_startup() * 1000, None]))
elif case == "e":
    # As compare.py's case (e): ms from close() until the agent (SIGTERM ignored) and its
    # grandchild are gone, the median of 9 closes after a first one.
    compare.fast_startup()
    closes = [compare.fast_close(["--ignore-term", "--grandchild"], 1.0) for _ in range(9)]
    assert all(c.gone_ms is not None for c in closes), [c.left_alive for c in closes]
    print(json.dumps([sorted(c.gone_ms for c in closes)[4], None]))
else:
    # One client first, as compare.py's warm-up does: the process's one-time costs (imports,
    # the host-death guard started with the first agent) stay out of the timed stream.
    compare.fast_startup()
    args, capped = {{
        "a": (["--updates", "100000"], False),
        "b": (["--updates", "2000", "--text-bytes", str(compare.BIG_TEXT)], False),
        "b2": (["--updates", "2000", "--text-bytes", str(compare.BIG_TEXT)], True),
        "c": (["--permissions", "2000"], False),
    }}[case]
    limits = compare.CAPPED_LIMITS if capped else compare.FAST_LIMITS
    counter = compare.FastCounter()
    with compare.fast_client(args, counter, limits) as client:
        client.start()
        # The host's CPU (this process) during the prompt, per unit: unlike the rates, it does
        # not depend on where the scheduler puts the client and the agent.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        started = time.perf_counter()
        result = client.prompt_detailed("go")
        seconds = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime - cpu
    assert result.stop_reason == "end_turn", result.stop_reason
    sample = compare.Stream(seconds, counter.updates, counter.chars, counter.permissions)
    if case == "a":
        value, cpu = sample.updates / sample.seconds, cpu / sample.updates * 1e6
    elif case == "c":
        value, cpu = sample.permissions / sample.seconds, cpu / sample.permissions * 1e6
    else:
        value, cpu = sample.chars / sample.seconds / 1e6, cpu / (sample.chars / 1e6) * 1e6
    print(json.dumps([value, cpu]))
"""

CASES = {
    "a": "(a) 100,000 updates of 32 B text: updates/s; host CPU µs/update",
    "b": "(b) 2,000 updates of 64 KiB text: MB/s (whole reply kept); host CPU µs/MB",
    "b2": "(b2) the same, response_bytes 1 MiB: MB/s; host CPU µs/MB",
    "c": "(c) 2,000 permission round trips: round trips/s; host CPU µs/round trip",
    "d": "(d) start-up (spawn + initialize + session/new): ms (lower is better)",
    "d0": "(d0) the same for the first client of a fresh interpreter: ms (lower is better)",
    "e": "(e) close() of an agent that ignores SIGTERM, with a grandchild: ms until both are "
    "gone (lower is better)",
}


def measure(python: str, case: str) -> tuple[float, float | None]:
    """The case's figure and the host's CPU per unit (None for start-up)."""
    code = MEASURE.format(benches=str(BENCHES))
    out = subprocess.run(
        [python, "-c", code, case], capture_output=True, text=True, check=True, timeout=300
    )
    value, cpu = json.loads(out.stdout.strip().splitlines()[-1])
    return float(value), cpu


def version(python: str) -> str:
    code = "import acp_fast, subprocess; print(acp_fast.__version__, acp_fast.__file__)"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the interpreter of the earlier build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES), help="which, comma-separated")
    args = parser.parse_args()
    chosen = args.cases.split(",")
    unknown = sorted(set(chosen) - CASES.keys())
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    builds = {"before": args.baseline, "now": sys.executable}
    for name, python in builds.items():
        print(f"{name}: {version(python)}", file=sys.stderr)
    lines = [
        "| case | before | now | now / before | host CPU before | host CPU now |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for case, label in CASES.items():
        if case not in chosen:
            continue
        samples: dict[str, list[float]] = {name: [] for name in builds}
        cpus: dict[str, list[float]] = {name: [] for name in builds}
        for number in range(args.rounds):
            for name, python in builds.items():
                value, cpu = measure(python, case)
                samples[name].append(value)
                if cpu is not None:
                    cpus[name].append(cpu)
            print(f"{case} round {number + 1}/{args.rounds}", file=sys.stderr)
        before, now = (statistics.median(samples[name]) for name in builds)
        ratio = before / now if case[0] in "de" else now / before
        cpu_cells = [
            f"{statistics.median(cpus[name]):,.2f}" if cpus[name] else "—" for name in builds
        ]
        lines.append(
            f"| {label} | {before:,.1f} | {now:,.1f} | {ratio:.2f}x | {' | '.join(cpu_cells)} |"
        )
    print("\n".join(lines))
    print(
        f"\nMedians of {args.rounds} interleaved rounds; a ratio above 1 means now is better. "
        "Host CPU: user + system time of the client's process during the prompt, per update, "
        "MB or round trip."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

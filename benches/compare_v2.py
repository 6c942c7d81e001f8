"""ACP v2 beside v1: cases (a)-(c) of `benches/compare.py` with the same client and agent, the
agent speaking v1 or v2 (issue 25 item 7).

Run from the repository root in the dev venv:

    python benches/compare_v2.py            # full run (~2 minutes), writes its section of
                                            # benches/results.md
    python benches/compare_v2.py --quick    # smoke run with small sizes (prints only)

The runners are `acp_fast.Client` with `compare.py`'s observer (counts updates, sums
`len(update.text)` of the message chunks), limits (the whole reply kept) and policy
(permissions granted by a kind rule), against `benches/flood_agent.py`: `protocol="v1"`
against the agent as `compare.py` runs it; `protocol="v1"` against `flood_agent.py
--message-ids` ("v1 + ids"), whose chunks carry a `messageId` as today's v1 agents write them
(claude-agent-acp 0.101, codex-acp: the recorded traffic in ../shared/interop-transcripts);
`protocol="v2"` against `flood_agent.py --v2`, which acknowledges the prompt with
`{messageId}`, sends `state_update` running, the same chunks as "v1 + ids" (`{"sessionUpdate":
"agent_message_chunk","messageId":…,"content":…}`, the layout of both official SDKs' v2
agents), permission requests in v2's shape, and ends the turn with `state_update` idle. The
cases: (a) 100,000 updates of 32 B of text, (b) 2,000 updates of 64 KiB, (c) 2,000 permission
round trips, each timed from sending the prompt to the turn's end with every update delivered.

The three run in turn within each round (which goes first rotates between rounds); the table
gives the medians of the rounds and, for the host's CPU (the process CPU time of this
interpreter and every thread of the client during the prompt; the agent is another process), the
per-round ratios v2/v1 and v2/(v1 + ids) (median and range), which say whether a difference is
beyond this shared machine's noise: the first is what a host pays for v2's longer lines and
what it does with them, the second what v2 costs for the same lines.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import acp_fast
from compare import (
    AGENT,
    BIG_TEXT,
    FAST_LIMITS,
    FAST_POLICY,
    PYTHON,
    RESULTS,
    ROOT,
    V2_SECTION,
    check,
    fmt_rate,
    machine_line,
    progress,
)

#: The runners: v1 against chunks without a `messageId` (as compare.py's agent writes them),
#: v1 against chunks with one (as claude-agent-acp 0.101 and codex-acp write v1 chunks: the
#: same bytes as v2's chunks, so the difference to v2 is what v2 itself does with them), v2.
PROTOCOLS = ("v1", "v1+ids", "v2")
CHUNK = acp_fast.UpdateKind.AGENT_MESSAGE_CHUNK


class Counter:
    """compare.py's observer, summing the text of the message chunks only (v2's state updates
    have a text too: the state)."""

    __slots__ = ("chars", "permissions", "updates")

    def __init__(self) -> None:
        self.updates = 0
        self.chars = 0
        self.permissions = 0

    def on_update(self, update: acp_fast.Update) -> None:
        self.updates += 1
        if update.kind is CHUNK:
            self.chars += len(update.text)

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        self.permissions += 1


#: The heading of this script's section of benches/results.md (compare.py keeps it).
SECTION = V2_SECTION


@dataclass(frozen=True)
class Sample:
    seconds: float
    cpu: float  # process CPU seconds of the host during the prompt
    updates: int
    chars: int
    permissions: int


@dataclass(frozen=True)
class Case:
    label: str
    agent_args: list[str]
    #: The measure (a rate, higher is better) and its unit.
    rate: Callable[[Sample], float]
    rate_unit: str
    #: What the host's CPU is divided by, and how it is shown.
    per: Callable[[Sample], float]
    cpu_unit: str
    cpu_scale: float
    expect: Callable[[Sample], None]


def run_prompt(runner: str, agent_args: list[str]) -> Sample:
    counter = Counter()
    extra = {"v2": ["--v2"], "v1+ids": ["--message-ids"]}.get(runner, [])
    args = [AGENT, *agent_args, *extra]
    protocol = runner[:2]
    with acp_fast.Client(
        PYTHON,
        args=args,
        reader_limits=acp_fast.DEFAULT_READER_LIMITS,
        transfer_limits=FAST_LIMITS,
        transport_epoch=1,
        permission_policy=FAST_POLICY,
        observer=counter,
        protocol=protocol,
    ) as client:
        client.start()
        check(client.protocol_version == int(protocol[1]), f"{protocol}: agreed otherwise")
        cpu = time.process_time()
        started = time.perf_counter()
        result = client.prompt_detailed("go")
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
    check(result.stop_reason == "end_turn", f"{protocol}: stop reason {result.stop_reason}")
    check(result.overflow is None, f"{protocol}: the reply overflowed")
    check(len(result.response) == counter.chars, f"{protocol}: reply and updates differ")
    return Sample(seconds, cpu, counter.updates, counter.chars, counter.permissions)


def cases(updates: int, big: int, permissions: int) -> list[Case]:
    # v2 delivers two more updates a turn (state_update running and idle): the per-update
    # measures count the chunks, the same payload in both versions.
    def chunks(count: int, text: int) -> Callable[[Sample], None]:
        def expect(sample: Sample) -> None:
            check(sample.updates - count in (0, 2), f"{sample.updates} updates, not {count}")
            check(sample.chars == count * text, f"{sample.chars} characters")

        return expect

    def asked(sample: Sample) -> None:
        check(sample.permissions == permissions, f"{sample.permissions} permissions")

    return [
        Case(
            f"(a) {updates:,} updates of 32 B text",
            ["--updates", str(updates), "--text-bytes", "32"],
            lambda s: updates / s.seconds,
            "updates/s",
            lambda s: updates,
            "ns/update",
            1e9,
            chunks(updates, 32),
        ),
        Case(
            f"(b) {big:,} updates of 64 KiB text",
            ["--updates", str(big), "--text-bytes", str(BIG_TEXT)],
            lambda s: big * BIG_TEXT / s.seconds / 1e6,
            "MB/s of text",
            lambda s: big * BIG_TEXT / 1e6,
            "µs/MB",
            1e6,
            chunks(big, BIG_TEXT),
        ),
        Case(
            f"(c) {permissions:,} permission round trips",
            ["--permissions", str(permissions)],
            lambda s: permissions / s.seconds,
            "round trips/s",
            lambda s: permissions,
            "µs/round trip",
            1e6,
            asked,
        ),
    ]


def measure(case: Case, rounds: int) -> str:
    rates: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
    cpus: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
    ratios: list[float] = []
    same_line: list[float] = []
    for number in range(rounds):
        turn = number % len(PROTOCOLS)  # each runner goes first, second and last in turn
        order = PROTOCOLS[turn:] + PROTOCOLS[:turn]
        for protocol in order:
            sample = run_prompt(protocol, case.agent_args)
            try:
                case.expect(sample)
            except Exception as error:
                raise RuntimeError(f"{case.label}, {protocol}: {error}") from error
            rates[protocol].append(case.rate(sample))
            cpus[protocol].append(sample.cpu / case.per(sample) * case.cpu_scale)
        ratios.append(cpus["v2"][-1] / cpus["v1"][-1])
        same_line.append(cpus["v2"][-1] / cpus["v1+ids"][-1])
        progress(
            f"{case.label} round {number + 1}/{rounds}: "
            + ", ".join(
                f"{p} {fmt_rate(rates[p][-1])} {case.rate_unit}, {cpus[p][-1]:,.2f} {case.cpu_unit}"
                for p in PROTOCOLS
            )
        )
    rate = {p: statistics.median(rates[p]) for p in PROTOCOLS}
    cpu = {p: statistics.median(cpus[p]) for p in PROTOCOLS}
    return (
        f"| {case.label}: {case.rate_unit} | {fmt_rate(rate['v1'])} | {fmt_rate(rate['v1+ids'])} "
        f"| {fmt_rate(rate['v2'])} | {cpu['v1']:,.2f} | {cpu['v1+ids']:,.2f} | {cpu['v2']:,.2f} "
        f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f} to {max(ratios):.2f}) "
        f"| {statistics.median(same_line):.2f}x ({min(same_line):.2f} to {max(same_line):.2f}) |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="acp-fast with ACP v1 and v2, side by side.")
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 rounds, no file")
    parser.add_argument("--rounds", type=int, default=0, help="rounds (default 7; quick 3)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    sizes = (10_000, 200, 200) if args.quick else (100_000, 2_000, 2_000)
    command = "python benches/compare_v2.py" + (" --quick" if args.quick else "")
    if args.rounds:
        command += f" --rounds {args.rounds}"
    began = time.perf_counter()
    machine = machine_line()
    progress(machine)
    for protocol in PROTOCOLS:  # warm-up: the page cache, the agent's imports
        run_prompt(protocol, ["--updates", "1000"])
    rows = [measure(case, rounds) for case in cases(*sizes)]
    unit_note = "host CPU: ns/update in (a), µs per MB of text in (b), µs/round trip in (c)"
    table = "\n".join(
        [
            "| case | v1 | v1 + ids | v2 | host CPU v1 | host CPU v1 + ids | host CPU v2 "
            "| CPU v2 / v1 per round: median (range) | CPU v2 / (v1 + ids) per round |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
            *rows,
        ]
    )
    notes = [
        f"Medians of {rounds} rounds, the three runners in turn within each round (which goes "
        "first rotating between rounds). Rates: higher is better; " + unit_note + ", of "
        "this interpreter (client, core threads) during the prompt; lower is better.",
        "All: `acp_fast.Client` against `benches/flood_agent.py` (v1 + ids: `--message-ids`, "
        "each v1 chunk with a `messageId` as today's v1 agents write it; v2: `--v2`), the "
        "whole reply "
        "kept, every update delivered to an observer that sums the text length. v2 turns carry "
        "two more updates (state_update running and idle) and end at idle, not at the "
        "prompt's response.",
        machine,
    ]
    report = table + "\n\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    print(report)
    elapsed = time.perf_counter() - began
    progress(f"total time {elapsed:.0f} s")
    if args.quick:
        progress("(--quick: benches/results.md not written)")
        return 0
    today = datetime.date.today().isoformat()
    section = f"{SECTION}\n\n{today}, `{command}` ({elapsed:.0f} s):\n\n{report}"
    text = RESULTS.read_text() if RESULTS.exists() else "# acp-fast benchmark results\n"
    head = text.split(SECTION, 1)[0].rstrip("\n")
    RESULTS.write_text(head + "\n\n" + section)
    progress(f"wrote its section of {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Case (a) of benches/compare.py with a journal attached: each kind, each fsync mode, side by
side with no journal, interleaved round by round; medians.

    python benches/journal_bench.py            # 100,000 updates, 5 rounds (~1 minute)
    python benches/journal_bench.py --quick    # 10,000 updates, 3 rounds
    python benches/journal_bench.py --updates 1000000   # the fixed costs spread thinner
    python benches/journal_bench.py --baseline OTHER/.venv/bin/python   # before/after, one run
    python benches/journal_bench.py --record   # a record alone: the writer called in a loop

Every runner is `acp_fast.Client` reading the same flood agent (`benches/flood_agent.py`,
100,000 `agent_message_chunk` updates of 32 B of text) with compare.py's counting observer
(`on_update` counts and sums the text length); a journal wraps it (`observer=counter`), so the
journal records every update and then forwards it. The prompt is timed from sending it to its
answer; the journal's `close()` (writing what is still buffered; for SQLite also closing the
writer's connection, whose last checkpoint copies the WAL into the database: builds before
git b3cf17b closed it only when the writer was freed, outside the span) is inside it. The
host's CPU time per update is steadier than the wall rate on a shared machine, given two ways:
the whole process (`time.process_time`: the reader, the journal's work on the reader's thread
and the journal writer's own thread; the agent is another process) and the reader's thread
alone (`time.thread_time`: what the journal adds to the reader). The journal's share is the
median over rounds of its difference from the same round's no-journal run (and "vs no
journal" the median of the rounds' ratios): paired within a round, so the load of a shared
machine, which shifts between rounds, largely cancels. Bytes per update: the JSONL file, or
the SQLite database after a checkpoint, divided by the updates (the handshake's and the
prompt's six wire lines included).
With --baseline each measurement runs in a fresh interpreter of either build, interleaved.
fsync="every" syncs each update, so it runs 1,000 updates (its rate is per update).
Journals are written to --dir (default: a temporary directory on the same disk as /tmp).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import acp_fast
import compare
from acp_fast import journal

KINDS = ("jsonl", "sqlite")
#: fsync="every" waits for the disk on each update: a few ms each here, so fewer of them.
EVERY_UPDATES = 1000


def run_one(
    updates: int, directory: Path, kind: str | None, fsync: journal.Fsync
) -> tuple[float, float, float, int]:
    """One timed prompt: wall seconds, the host's CPU seconds (every thread: the reader and
    the journal's own; the agent is another process), the reader thread's CPU seconds (the
    reader and the journal's work on its thread), and the journal's bytes (0 without one)."""
    counter = compare.FastCounter()
    path = directory / f"bench-{kind}-{fsync}"
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)
    observer: Any = counter
    recording: Any = None
    if kind is not None:
        cls = journal.JsonlJournal if kind == "jsonl" else journal.SqliteJournal
        recording = observer = cls(path, fsync, observer=counter)
    with compare.fast_client(["--updates", str(updates), "--text-bytes", "32"], observer) as client:
        client.start()
        started = time.perf_counter()
        cpu = time.process_time()
        thread = time.thread_time()
        result = client.prompt_detailed("go")
        if recording is not None:
            recording.close()
        thread = time.thread_time() - thread
        cpu = time.process_time() - cpu
        seconds = time.perf_counter() - started
    compare.check(result.stop_reason == "end_turn", f"stop reason {result.stop_reason}")
    compare.check(counter.updates == updates, f"{counter.updates} of {updates} updates")
    size = 0
    if kind is not None:
        records = sum(1 for r in journal.read(path) if r.kind == "update")
        compare.check(records == updates, f"{kind}/{fsync}: {records} of {updates} updates")
        if kind == "sqlite":
            # What the records take once checkpointed into the database file.
            size = _sqlite_size(path)
        else:
            size = os.path.getsize(path) - len(journal.JSONL_HEADER)
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            leftover.unlink(missing_ok=True)
    return seconds, cpu, thread, size


def _sqlite_size(path: Path) -> int:
    import sqlite3

    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        size = connection.execute("PRAGMA page_size").fetchone()[0]
    finally:
        connection.close()
    return int(pages * size)


def _runners(updates: int) -> dict[str, tuple[str | None, journal.Fsync, int]]:
    runners: dict[str, tuple[str | None, journal.Fsync, int]] = {
        "no journal": (None, "never", updates)
    }
    for kind in KINDS:
        for fsync in journal.FSYNC_MODES:
            count = EVERY_UPDATES if fsync == "every" else updates
            runners[f"{kind} {fsync}"] = (kind, fsync, count)
    return runners


def _in_process(kind: str | None, fsync: journal.Fsync, count: int, directory: Path) -> list[float]:
    seconds, cpu, thread, size = run_one(count, directory, kind, fsync)
    return [seconds, cpu, thread, float(size)]


def _in_child(
    python: str, kind: str | None, fsync: journal.Fsync, count: int, directory: Path
) -> list[float]:
    """One measurement by another interpreter (another build of acp-fast), this script's code."""
    found = subprocess.run(
        [python, __file__, "--one", kind or "none", fsync, str(count), str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise SystemExit(f"{python}: {found.stderr.strip()}")
    values: list[float] = json.loads(found.stdout.strip().splitlines()[-1])
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 updates, 3 rounds")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5; quick 3)")
    parser.add_argument(
        "--updates",
        type=int,
        default=None,
        help="updates a prompt (default 100,000; quick 10,000): more spread the journal's "
        "fixed costs (opening, the last sync and checkpoint at close()) thinner",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where the journals are written")
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="PYTHON",
        help="also measure the acp-fast of this interpreter (say, another build's venv), "
        "interleaved; every measurement then runs in a fresh interpreter",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="what making a record costs the calling thread: a writer's update() called in a "
        "loop, less the same loop calling a no-op function",
    )
    parser.add_argument("--one", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.record:
        with tempfile.TemporaryDirectory(dir=args.dir) as temporary:
            print(_record_cost(Path(temporary), args.rounds or 5))
        return 0
    if args.one is not None:  # one measurement for --baseline's parent, as JSON
        kind, fsync, count, directory = args.one
        compare.fast_stream(["--updates", "1000"])  # warm up
        values = _in_process(None if kind == "none" else kind, fsync, int(count), Path(directory))
        print(json.dumps(values))
        return 0
    updates = args.updates or (10_000 if args.quick else 100_000)
    rounds = args.rounds or (3 if args.quick else 5)
    runners = _runners(updates)
    builds = ["after", "before"] if args.baseline else ["after"]
    with tempfile.TemporaryDirectory(dir=args.dir) as temporary:
        directory = Path(temporary)
        compare.fast_stream(["--updates", "1000"])  # warm up
        # build -> runner -> [(updates/s, host CPU µs/update, reader thread µs/update)]
        found: dict[str, dict[str, list[tuple[float, float, float]]]] = {
            build: {name: [] for name in runners} for build in builds
        }
        sizes: dict[str, dict[str, int]] = {build: {} for build in builds}
        for number in range(1, rounds + 1):
            shown = []
            for name, (kind, fsync, count) in runners.items():
                for build in builds:
                    if args.baseline is None:
                        seconds, cpu, thread, size = _in_process(kind, fsync, count, directory)
                    else:
                        python = sys.executable if build == "after" else args.baseline
                        seconds, cpu, thread, size = _in_child(
                            python, kind, fsync, count, directory
                        )
                    found[build][name].append(
                        (count / seconds, cpu / count * 1e6, thread / count * 1e6)
                    )
                    sizes[build][name] = int(size) // count
                    shown.append(
                        f"{name}{'' if build == 'after' else ' (before)'} "
                        f"{found[build][name][-1][0]:,.0f}"
                    )
            compare.progress(f"round {number}/{rounds}: " + ", ".join(shown) + " updates/s")
    for build in builds:
        if args.baseline:
            python = sys.executable if build == "after" else args.baseline
            print(f"\n{build}: {python}")
        print(_table(runners, found[build], sizes[build]))
    print(
        f"\nCase (a): {updates:,} updates of 32 B text (fsync=every: "
        f"{EVERY_UPDATES:,}); medians of {rounds} interleaved rounds; "
        f"{compare.machine_line()}"
    )
    return 0


def _record_cost(directory: Path, rounds: int) -> str:
    """Thread CPU per record of each kind's writer called from Python (fsync="never"), less a
    no-op call, median of `rounds`; the envelope is the flood agent's 32 B chunk."""
    update = acp_fast.Update(
        kind=acp_fast.UpdateKind.AGENT_MESSAGE_CHUNK,
        session_update="agent_message_chunk",
        transport_epoch=1,
        update_sequence=1,
        session_id="s-1",
        envelope=json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s-1",
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "x" * 32},
                    },
                },
            },
            separators=(",", ":"),
        ),
        text="x" * 32,
    )
    count = 1_000_000

    def noop(update: acp_fast.Update) -> None:
        pass

    found: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(rounds):
        for kind in KINDS:
            path = directory / f"record-{kind}"
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)
            cls = journal.JsonlJournal if kind == "jsonl" else journal.SqliteJournal
            recording = cls(path, "never")
            record = recording.on_update
            started = time.thread_time()
            for _ in range(count):
                noop(update)
            base = time.thread_time() - started
            started = time.thread_time()
            for _ in range(count):
                record(update)
            spent = time.thread_time() - started
            recording.close()
            found[kind].append((spent - base) / count * 1e6)
    return "\n".join(
        f"{kind}: {statistics.median(values):.3f} µs a record on the calling thread "
        f"(median of {rounds})"
        for kind, values in found.items()
    )


def _table(
    runners: dict[str, tuple[str | None, journal.Fsync, int]],
    found: dict[str, list[tuple[float, float, float]]],
    sizes: dict[str, int],
) -> str:
    def median(name: str, column: int) -> float:
        return statistics.median(values[column] for values in found[name])

    def paired(name: str, column: int) -> float:
        """The median over rounds of this runner's value less the same round's no journal."""
        pairs = zip(found[name], found["no journal"], strict=True)
        return statistics.median(values[column] - base[column] for values, base in pairs)

    def ratio(name: str) -> float:
        pairs = zip(found[name], found["no journal"], strict=True)
        return statistics.median(values[0] / base[0] for values, base in pairs)

    lines = [
        "| journal | fsync | updates/s | vs no journal | host CPU µs/update | journal's share "
        "(µs) | reader thread µs/update | journal's share there (µs) | bytes/update |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, (kind, fsync, _) in runners.items():
        rate, cpu, thread = (median(name, c) for c in range(3))
        if kind is None:
            lines.append(
                f"| none | - | {rate:,.0f} | 1.00x | {cpu:.2f} | - | {thread:.2f} | - | - |"
            )
            continue
        lines.append(
            f"| {kind} | {fsync} | {rate:,.0f} | {ratio(name):.2f}x | {cpu:.2f} | "
            f"{paired(name, 1):.2f} | {thread:.2f} | {paired(name, 2):.2f} | {sizes[name]} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

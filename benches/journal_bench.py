"""Case (a) of benches/compare.py with a journal attached: each kind, each fsync mode, side by
side with no journal, interleaved round by round; medians.

    python benches/journal_bench.py            # 100,000 updates, 5 rounds (~1 minute)
    python benches/journal_bench.py --quick    # 10,000 updates, 3 rounds

Every runner is `acp_fast.Client` reading the same flood agent (`benches/flood_agent.py`,
100,000 `agent_message_chunk` updates of 32 B of text) with compare.py's counting observer
(`on_update` counts and sums the text length); a journal wraps it (`observer=counter`), so the
journal records every update and then forwards it. The prompt is timed from sending it to its
answer; the journal's `close()` (writing what is still buffered) is inside the timed span. The
host's CPU time per update is steadier than the wall rate on a shared machine, given two ways:
the whole process (`time.process_time`: the reader, the journal's work on the reader's thread
and the JSONL journal's batch thread; the agent is another process) and the reader's thread
alone (`time.thread_time`: what the journal adds to the reader). The journal's share is the
difference from no journal. Bytes per update: the JSONL file, or the
SQLite database after a checkpoint, divided by the updates (the handshake's and the prompt's
six wire lines included).
fsync="every" syncs each update, so it runs 1,000 updates (its rate is per update).
Journals are written to --dir (default: a temporary directory on the same disk as /tmp).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 updates, 3 rounds")
    parser.add_argument("--dir", type=Path, default=None, help="where the journals are written")
    args = parser.parse_args(argv)
    updates = 10_000 if args.quick else 100_000
    rounds = 3 if args.quick else 5
    runners: dict[str, tuple[str | None, journal.Fsync, int]] = {
        "no journal": (None, "never", updates)
    }
    for kind in KINDS:
        for fsync in journal.FSYNC_MODES:
            count = EVERY_UPDATES if fsync == "every" else updates
            runners[f"{kind} {fsync}"] = (kind, fsync, count)
    with tempfile.TemporaryDirectory(dir=args.dir) as temporary:
        directory = Path(temporary)
        compare.fast_stream(["--updates", "1000"])  # warm up
        rates: dict[str, list[float]] = {name: [] for name in runners}
        cpus: dict[str, list[float]] = {name: [] for name in runners}
        threads: dict[str, list[float]] = {name: [] for name in runners}
        sizes: dict[str, int] = {}
        for number in range(1, rounds + 1):
            shown = []
            for name, (kind, fsync, count) in runners.items():
                seconds, cpu, thread, size = run_one(count, directory, kind, fsync)
                rates[name].append(count / seconds)
                cpus[name].append(cpu / count * 1e6)
                threads[name].append(thread / count * 1e6)
                sizes[name] = size // count
                shown.append(f"{name} {rates[name][-1]:,.0f}")
            compare.progress(f"round {number}/{rounds}: " + ", ".join(shown) + " updates/s")
    base = statistics.median(rates["no journal"])
    base_cpu = statistics.median(cpus["no journal"])
    base_thread = statistics.median(threads["no journal"])
    lines = [
        "| journal | fsync | updates/s | vs no journal | host CPU µs/update | journal's share "
        "(µs) | reader thread µs/update | journal's share there (µs) | bytes/update |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, (kind, fsync, _) in runners.items():
        rate = statistics.median(rates[name])
        cpu = statistics.median(cpus[name])
        thread = statistics.median(threads[name])
        if kind is None:
            lines.append(
                f"| none | - | {rate:,.0f} | 1.00x | {cpu:.2f} | - | {thread:.2f} | - | - |"
            )
            continue
        lines.append(
            f"| {kind} | {fsync} | {rate:,.0f} | {rate / base:.2f}x | {cpu:.2f} | "
            f"{cpu - base_cpu:.2f} | {thread:.2f} | {thread - base_thread:.2f} | {sizes[name]} |"
        )
    print("\n".join(lines))
    print(
        f"\nCase (a): {updates:,} updates of 32 B text (fsync=every: "
        f"{EVERY_UPDATES:,}); medians of {rounds} interleaved rounds; "
        f"{compare.machine_line()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A journal whose file cannot grow (a full disk, a file-size limit): the core's error kinds
become `JournalError`s that say what happened, in order — the failed write, every later call,
then the records lost at close — and what was written stays a whole-record, gap-free prefix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from acp_fast import journal

HERE = Path(__file__).resolve().parent

CHILD = """
import resource, signal, sys
sys.path.insert(0, sys.argv[3])
from pathlib import Path
from journal.kit import make, update
from acp_fast.journal import JournalError

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
j = make("jsonl", Path(sys.argv[1]), sys.argv[2])
seen = []
for i in range(20_000):
    try:
        j.on_update(update(i + 1, text="x" * 100))
        if i % 100 == 0:
            j.flush()
    except JournalError as exc:
        seen.append(str(exc))
        if len(seen) == 2:
            break
for _ in range(2):
    try:
        j.close()
        seen.append("closed")
    except JournalError as exc:
        seen.append(str(exc))
print("\\n".join(seen))
"""


@pytest.mark.parametrize("fsync", ["every", "batch", "never"])
def test_a_file_that_cannot_grow_fails_in_order_and_keeps_a_whole_prefix(
    tmp_path: Path, fsync: str
) -> None:
    path = tmp_path / "j.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), fsync, str(HERE.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [
        f"{path}: cannot write: File too large",
        f"{path}: an earlier write failed (File too large)",
        f"{path}: records were lost: a write failed (File too large)",
        "closed",  # reported once; a second close() is quiet
    ]
    records = list(journal.read(path))  # whole records only, numbered without a gap
    assert records and [r.number for r in records] == list(range(1, len(records) + 1))

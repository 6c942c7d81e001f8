"""A closed journal holds no descriptor (issue 21, item 12: descriptors stayed open after
`close()` until garbage collection). Checked with the collector off, so nothing but `close()`
can have released them."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import acp_fast as acp
import pytest
from acp_fast import journal


def _open_fds() -> dict[str, str]:
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the listing's own descriptor
    return found


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("fsync", ["every", "batch", "never"])
def test_close_releases_every_descriptor(
    tmp_path: Path, no_gc: None, kind: str, fsync: str
) -> None:
    # One client first: the process's one-time descriptors (the host-death guard's pipe) are
    # then in `before`.
    with acp.Client(*acp.demo_agent_command()) as warm:
        warm.start()
    before = _open_fds()
    path = tmp_path / ("run.jsonl" if kind == "jsonl" else "run.db")
    made = journal.JsonlJournal if kind == "jsonl" else journal.SqliteJournal
    record = made(path, fsync=fsync)
    client = acp.Client(*acp.demo_agent_command(), observer=record)
    client.start()
    assert client.prompt("hello")
    client.close()
    record.close()
    left = {fd: target for fd, target in _open_fds().items() if fd not in before}
    assert left == {}, f"descriptors left open after close(): {left}"
    del client, record

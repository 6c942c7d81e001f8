"""A host for the crash test: streams COUNT updates from the demo agent into a journal.

    python crash_host.py KIND PATH FSYNC PROGRESS COUNT [DRIVER]

DRIVER: "blocking" (`Client`, the default) or "async" (`AsyncClient`).

PROGRESS is a 16-byte file it maps: the agent's pid, then the sequence of the last update
whose journal callback had recorded it (written by the wrapped observer, which the journal
calls after recording). After the prompt it waits to be killed.
"""

from __future__ import annotations

import asyncio
import mmap
import struct
import sys
import time

import acp_fast as acp
from acp_fast import journal


class Progress:
    """Writes each recorded update's sequence as one 8-byte store. (`struct.pack_into` zeroes
    its target before it packs: a reader, or a kill between the two, would see 0.)"""

    __slots__ = ("numbers",)

    def __init__(self, view: mmap.mmap) -> None:
        self.numbers = memoryview(view).cast("q")

    def on_update(self, update: acp.Update) -> None:
        self.numbers[1] = update.update_sequence


def main() -> None:
    kind, path, fsync, progress_path, count = sys.argv[1:6]
    driver = sys.argv[6] if len(sys.argv) > 6 else "blocking"
    with open(progress_path, "r+b") as handle:
        view = mmap.mmap(handle.fileno(), 16)
    cls = journal.JsonlJournal if kind == "jsonl" else journal.SqliteJournal
    recording = cls(path, fsync, observer=Progress(view))  # type: ignore[arg-type]
    options = dict(
        args=["-m", "acp_fast.demo_agent", "--flood-count", count, "--flood-bytes", "32"],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=acp.TransferLimits(
            request_bytes=1 << 20,
            # The whole reply (3.2 MB for 100,000 chunks): past its limit the client would
            # cancel the turn mid-stream, and the stream would not be only updates.
            response_bytes=1 << 30,
            update_bytes=1 << 20,
            update_count=1 << 30,
            response_segment_count=1 << 30,
        ),
        transport_epoch=1,
        observer=recording,
    )
    if driver == "async":
        asyncio.run(stream_async(view, options))
    client = acp.Client(sys.executable, **options)  # type: ignore[arg-type]
    struct.pack_into("q", view, 0, client.pid or 0)
    client.start()
    client.prompt_detailed("flood")
    while True:
        time.sleep(1)


async def stream_async(view: mmap.mmap, options: dict[str, object]) -> None:
    client = acp.AsyncClient(sys.executable, **options)  # type: ignore[arg-type]
    struct.pack_into("q", view, 0, client.pid or 0)
    await client.start()
    await client.prompt_detailed("flood")
    while True:
        await asyncio.sleep(1)


if __name__ == "__main__":
    main()

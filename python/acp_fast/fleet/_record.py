"""What a host keeps of one attempt's updates for its streams, and how it coalesces them into
batches (fleet.md §3): a batch leaves at 16 KiB, after a 2 ms quiet gap, or 50 ms after its
first update at most; what piled up meanwhile (a batch in flight) goes out at once, up to
1 MiB. The agent is never blocked: updates are appended as they are journaled, whatever the
consumers do."""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._core import Update

#: Sizes are counted in characters of the envelopes (bytes for the ASCII JSON agents send).
FULL = 16 * 1024
QUIET = 0.002
LONGEST = 0.050
LARGEST = 1024 * 1024
#: How long a read waits for a first update before returning an empty batch (so a consumer
#: that went away does not pin a call on the host forever).
POLL = 5.0
#: What one attempt keeps in memory for its streams; older updates are read from its journal.
RETAINED = 64 * 1024 * 1024


class Record:
    """The updates of one attempt, in journal order, as the journal's observer saw them.

    Written on the loop that runs the agent's client, read on the streams' loop (Ray gives each
    concurrency group a thread and loop of its own). A reader that waits registers a waiter
    (its loop and an event of that loop); the writer wakes the waiters there are and forgets
    them, so a flood costs one cross-thread wake per read that waits, not one per update."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.seqs = array("Q")
        self.lines: list[str] = []
        self.arrived: list[float] = []
        #: Where each line begins in everything recorded (so a batch's end is a bisection,
        #: not a loop over its lines while the writer waits for the lock).
        self.begins = array("Q")
        self.recorded_bytes = 0
        self.retained_bytes = 0
        self.dropped = 0  # updates forgotten from the front (beyond RETAINED)
        self.dropped_through = 0  # the sequence of the last of them
        self.total = 0
        self.done = False

    # The journal's wrapped observer: called for every update after the journal recorded it.
    def on_update(self, update: Update) -> None:
        # Kept as the str the core made: encoded once per batch, not once per update.
        line = update.envelope
        # Under the lock: a stream on another thread indexes and slices the three lists.
        size = len(line) + 1
        with self._lock:
            self.seqs.append(update.update_sequence)
            self.lines.append(line)
            self.arrived.append(time.monotonic())
            self.begins.append(self.recorded_bytes)
            self.recorded_bytes += size
            self.retained_bytes += size
            self.total += 1
            if self.retained_bytes > RETAINED:
                self._trim()
        if self._waiters:  # read after the append: a reader registers before it looks
            self._wake()

    def finish(self) -> None:
        self.done = True
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            try:
                if _running_loop() is loop:
                    event.set()
                else:
                    loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed: its reader is gone
                pass

    def _trim(self) -> None:
        """Lock held."""
        cut = 0
        while self.retained_bytes > RETAINED // 2 and cut < len(self.lines):
            self.retained_bytes -= len(self.lines[cut]) + 1
            cut += 1
        if cut:
            self.dropped_through = max(self.dropped_through, self.seqs[cut - 1])
        del self.seqs[:cut], self.lines[:cut], self.arrived[:cut], self.begins[:cut]
        self.dropped += cut

    def _index(self, from_seq: int) -> int:
        return bisect.bisect_left(self.seqs, from_seq)

    async def _wait(self, seen: int, timeout: float) -> bool:
        """Waits at most `timeout` seconds for an update after the first `seen` ones (or the
        end); True when one came."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._lock:
            self._waiters.append(waiter)
        # Looked at after registering: an update appended before it is seen here, one after
        # it wakes the event.
        if self.total != seen or self.done:
            self._forget(waiter)
            return True
        try:
            await asyncio.wait_for(event.wait(), max(timeout, 0.0))
        except TimeoutError:
            self._forget(waiter)
            return False
        return True

    def _forget(self, waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event]) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def read(self, from_seq: int) -> tuple[bytes, bytes, bool]:
        """The next batch from `from_seq`: (lines, sequences as array("Q") bytes, ended).
        Empty lines with ended=False: nothing arrived within POLL seconds (ask again)."""
        began = time.monotonic()
        while True:
            with self._lock:
                self._check_kept(from_seq)
                seen = self.total  # before looking: what is added after it wakes the wait
                pending = self._index(from_seq) < len(self.lines)
            if pending or self.done:
                break
            if not await self._wait(seen, POLL - (time.monotonic() - began)):
                return b"", b"", False
        if pending:
            # Coalesce: wait while below FULL, the flow not quiet and the first pending update
            # younger than LONGEST.
            with self._lock:
                index = self._index(from_seq)  # trimmed to nothing meanwhile: no wait
                first = self.arrived[index] if index < len(self.arrived) else 0.0
            while not self.done:
                with self._lock:
                    seen = self.total
                    start = self._index(from_seq)
                    kept = start < len(self.begins)
                    size = self.recorded_bytes - self.begins[start] if kept else 0
                if size >= FULL:
                    break
                left = first + LONGEST - time.monotonic()
                if left <= 0 or not await self._wait(seen, min(QUIET, left)):
                    break  # 50 ms reached, or 2 ms quiet
        with self._lock:  # the writer may have trimmed meanwhile: look again
            self._check_kept(from_seq)
            start = end = self._index(from_seq)
            if start < len(self.lines):  # the lines that begin within LARGEST, at least one
                end = bisect.bisect_left(self.begins, self.begins[start] + LARGEST, lo=start + 1)
            ended = self.done and end >= len(self.lines)
            lines = self.lines[start:end]
            seqs = self.seqs[start:end].tobytes()
        if not lines:
            return b"", b"", ended
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
        return data, seqs, ended

    def _check_kept(self, from_seq: int) -> None:
        """Lock held. An update the writer trimmed is refused, never skipped."""
        if self.dropped and from_seq <= self.dropped_through:
            raise LookupError(
                f"updates through sequence {self.dropped_through} are no longer in memory; "
                "read them from the attempt's journal"
            )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

"""``acp-fast bench``: this machine's reader capacity. The bundled demo agent floods
``agent_message_chunk`` updates of 64 B, 1 KiB, 64 KiB and 1 MiB of text; the table on stdout
gives updates/s and MB/s (whole lines, JSON envelope included) for each; a progress bar goes to
stderr when it is a terminal."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import acp_fast

from . import errors
from .options import Parser, command_parser, default_agent_command

_MIB = 1024 * 1024

#: Seconds of flooding per size by default.
BENCH_SECONDS = 0.75


@dataclass(frozen=True)
class BenchSize:
    """One row of the bench: `text_bytes` of text an update, `per_prompt` updates a prompt."""

    label: str
    text_bytes: int
    per_prompt: int
    quick_per_prompt: int


#: Updates per prompt are chosen so each prompt streams several MiB: the prompt round trip is
#: then a small part of the time, and the reply each prompt keeps stays bounded (<= 16 MiB).
BENCH_SIZES = (
    BenchSize("64 B", 64, 50_000, 2_000),
    BenchSize("1 KiB", 1024, 8_000, 500),
    BenchSize("64 KiB", 64 * 1024, 256, 16),
    BenchSize("1 MiB", 1024 * 1024, 16, 2),
)


@dataclass(frozen=True)
class BenchRow:
    label: str
    line_bytes: int
    updates: int
    seconds: float
    #: The same flood through `AsyncClient` (`acp-fast bench --async`).
    async_updates: int = 0
    async_seconds: float = 0.0

    @property
    def updates_per_second(self) -> float:
        return self.updates / self.seconds if self.seconds > 0 else 0.0

    @property
    def async_updates_per_second(self) -> float:
        return self.async_updates / self.async_seconds if self.async_seconds > 0 else 0.0

    @property
    def megabytes_per_second(self) -> float:
        return self.updates_per_second * self.line_bytes / 1e6


class _Progress:
    """A one-line text progress bar on a terminal; silent elsewhere."""

    WIDTH = 30

    def __init__(self, err: TextIO, steps: int, seconds: float) -> None:
        self._err = err
        self._steps = steps
        self._seconds = seconds
        self._enabled = err.isatty()
        self._step = 0
        self._label = ""
        self._began = self._drawn = time.perf_counter()

    def begin(self, step: int, label: str) -> None:
        self._step = step
        self._label = label
        self._began = time.perf_counter()
        self.show(force=True)

    def show(self, force: bool = False) -> None:
        if not self._enabled:
            return
        now = time.perf_counter()
        if not force and now - self._drawn < 0.1:
            return
        self._drawn = now
        within = 1.0
        if self._seconds > 0:
            within = min(1.0, (now - self._began) / self._seconds)
        done = (self._step + within) / self._steps
        filled = round(done * self.WIDTH)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._err.write(f"\racp-fast bench [{bar}] {done:4.0%} {self._label:<7}")
        self._err.flush()

    def finish(self) -> None:
        if self._enabled:
            self._err.write("\r" + " " * (self.WIDTH + 36) + "\r")
            self._err.flush()


class _BenchObserver:
    """Counts updates, notes the first line's size, and redraws the progress bar now and then."""

    __slots__ = ("_every", "_progress", "line_bytes", "updates")

    def __init__(self, progress: _Progress, every: int) -> None:
        self._progress = progress
        self._every = max(1, every)
        self.updates = 0
        self.line_bytes = 0

    def on_update(self, update: acp_fast.Update) -> None:
        self.updates += 1
        if self.updates % self._every == 0:
            self._progress.show()
        if not self.line_bytes:
            self.line_bytes = len(update.envelope.encode()) + 1  # the newline


def _bench_size(
    size: BenchSize, per_prompt: int, seconds: float, progress: _Progress, asynchronous: bool
) -> BenchRow:
    """Floods one size with `Client`, then (with `asynchronous`) with `AsyncClient`."""
    limits = acp_fast.TransferLimits(
        request_bytes=_MIB,
        response_bytes=per_prompt * size.text_bytes + 1,
        update_bytes=acp_fast.DEFAULT_READER_LIMITS.message_bytes,
        update_count=2**62,
        response_segment_count=per_prompt + 1,
    )
    command = [
        *default_agent_command(),
        "--flood-count",
        str(per_prompt),
        "--flood-bytes",
        str(size.text_bytes),
    ]
    options: dict[str, Any] = {
        "args": command[1:],
        "reader_limits": acp_fast.DEFAULT_READER_LIMITS,
        "transfer_limits": limits,
        "transport_epoch": 1,
    }

    def check(result: acp_fast.PromptResult) -> None:
        progress.show()
        if result.stop_reason != "end_turn" or result.overflow is not None:
            raise acp_fast.AgentProtocolError(
                f"the demo agent's flood ended with {result.stop_reason!r}"
            )

    observer = _BenchObserver(progress, per_prompt // 8)
    with acp_fast.Client(command[0], observer=observer, **options) as client:
        client.start()
        elapsed = 0.0
        while True:
            began = time.perf_counter()
            result = client.prompt_detailed("flood")
            elapsed += time.perf_counter() - began
            check(result)
            if elapsed >= seconds:
                break
    row = BenchRow(size.label, observer.line_bytes, observer.updates, elapsed)
    if not asynchronous:
        return row
    counted = _BenchObserver(progress, per_prompt // 8)

    async def flood() -> float:
        async with acp_fast.AsyncClient(command[0], observer=counted, **options) as client:
            await client.start()
            spent = 0.0
            while True:
                began = time.perf_counter()
                result = await client.prompt_detailed("flood")
                spent += time.perf_counter() - began
                check(result)
                if spent >= seconds:
                    return spent

    import asyncio  # only `bench --async` needs it: loading asyncio is most of an import

    spent = asyncio.run(flood())
    return dataclasses.replace(row, async_updates=counted.updates, async_seconds=spent)


def run_bench(
    seconds: float, quick: bool, err: TextIO, asynchronous: bool = False
) -> list[BenchRow]:
    """Flood each size for about `seconds` (one prompt each when `quick`), with `Client` and,
    when `asynchronous`, `AsyncClient` too; the rows."""
    runs = 2 if asynchronous else 1
    progress = _Progress(err, len(BENCH_SIZES), 0.0 if quick else seconds * runs)
    rows = []
    try:
        for step, size in enumerate(BENCH_SIZES):
            progress.begin(step, size.label)
            per_prompt = size.quick_per_prompt if quick else size.per_prompt
            rows.append(
                _bench_size(size, per_prompt, 0.0 if quick else seconds, progress, asynchronous)
            )
    finally:
        progress.finish()
    return rows


def format_bench(rows: Sequence[BenchRow]) -> str:
    """The bench table: one header line and one line per size."""
    header: tuple[str, ...] = (
        "text/update",
        "line bytes",
        "updates",
        "seconds",
        "updates/s",
        "MB/s",
    )
    lines: list[tuple[str, ...]] = [
        (
            row.label,
            f"{row.line_bytes:,}",
            f"{row.updates:,}",
            f"{row.seconds:.3f}",
            f"{row.updates_per_second:,.0f}",
            f"{row.megabytes_per_second:,.1f}",
        )
        for row in rows
    ]
    if any(row.async_seconds > 0 for row in rows):
        header += ("async updates/s", "async/blocking")
        lines = [
            (
                *cells,
                f"{row.async_updates_per_second:,.0f}",
                f"{row.async_updates_per_second / max(row.updates_per_second, 1e-9):.2f}x",
            )
            for cells, row in zip(lines, rows, strict=True)
        ]
    widths = [max(len(cells[i]) for cells in (header, *lines)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in (header, *lines)
    )


def add_parser(commands: Any) -> None:
    bench = command_parser(
        commands,
        "bench",
        help="measure this machine's reader capacity with the demo agent in flood mode",
        description="Flood the client with agent_message_chunk updates of 64 B, 1 KiB, 64 KiB "
        "and 1 MiB of text from the bundled demo agent and print updates/s and MB/s (whole "
        "lines, envelope included) for each size as a table on stdout. A progress bar goes "
        "to stderr when it is a terminal.",
    )
    bench.add_argument(
        "--seconds",
        type=float,
        default=BENCH_SECONDS,
        metavar="S",
        help=f"how long to flood each size (default {BENCH_SECONDS:g})",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="one small prompt per size: checks that it works, measures little",
    )
    bench.add_argument(
        "--async",
        dest="asynchronous",
        action="store_true",
        help="also flood each size through AsyncClient (asyncio) and add its column",
    )
    bench.set_defaults(handler=run)


def run(parser: Parser, args: argparse.Namespace) -> int:
    seconds = args.seconds
    if not seconds > 0 or seconds > 3600:
        parser.fail("--seconds must be above 0 and at most 3600")
    try:
        rows = run_bench(seconds, args.quick, sys.stderr, args.asynchronous)
    except KeyboardInterrupt:
        # The progress bar (a terminal only) is erased by run_bench: the line is free.
        sys.stderr.write("acp-fast: interrupted\n")
        return 130
    except (acp_fast.AcpError, OSError) as exc:
        errors.report(exc)
        return 1
    try:
        print(format_bench(rows))
        sys.stdout.flush()
    except BrokenPipeError:
        errors.silence_stdout()
        return errors.EXIT_PIPE
    return 0

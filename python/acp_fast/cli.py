"""The ``acp-fast`` command line.

``acp-fast run [--agent "CMD ARGS"] [--cwd DIR] [--allow-kind K]... [--allow-title-prefix P]...
PROMPT`` starts an agent (by default the bundled demo agent), sends one prompt and streams the
reply to stdout; thoughts, the plan, tool calls and permission decisions go to stderr.

``acp-fast bench [--quick] [--seconds S]`` measures this machine's reader capacity: the bundled
demo agent floods ``agent_message_chunk`` updates of 64 B, 1 KiB, 64 KiB and 1 MiB of text, and
the table on stdout gives updates/s and MB/s (whole lines, JSON envelope included) for each; a
progress bar goes to stderr when it is a terminal.

Exit status: 0 when the turn finished (whatever its stop reason), 1 on an acp-fast or OS error
(one line on stderr, no traceback), 2 on a usage error, 130 on Ctrl-C, 143 on SIGTERM and 129 on
SIGHUP (each ends the turn and stops the agent's group first).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import acp_fast

_MIB = 1024 * 1024

#: Generous limits for interactive use: the reply is streamed, not kept for a program.
CLI_TRANSFER_LIMITS = acp_fast.TransferLimits(
    request_bytes=16 * _MIB,
    response_bytes=64 * _MIB,
    update_bytes=16 * _MIB,
    update_count=10**9,
    response_segment_count=10**9,
)


def default_agent_command() -> list[str]:
    """The bundled demo agent, run by this interpreter."""
    return [sys.executable, "-m", "acp_fast.demo_agent"]


class ConsoleObserver:
    """Streams agent message chunks to `out` and reports everything else, one line each, on
    `err`. Consecutive thought chunks are joined on one ``thought:`` line."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out = out
        self._err = err
        self._in_thought = False
        self._titles: dict[str, str] = {}
        #: The reply text streamed so far ends with a newline (or nothing was streamed).
        self.reply_written = False
        self.reply_ends_with_newline = True

    def _end_thought(self) -> None:
        if self._in_thought:
            self._in_thought = False
            self._err.write("\n")
            self._err.flush()

    def _say(self, line: str) -> None:
        self._end_thought()
        self._err.write(line + "\n")
        self._err.flush()

    def finish(self) -> None:
        """End any open stderr line."""
        self._end_thought()

    def on_update(self, update: acp_fast.Update) -> None:
        kind = update.kind
        if kind == acp_fast.UpdateKind.AGENT_MESSAGE_CHUNK:
            text = update.text
            if text:
                self._out.write(text)
                self._out.flush()
                self.reply_written = True
                self.reply_ends_with_newline = text.endswith("\n")
        elif kind == acp_fast.UpdateKind.AGENT_THOUGHT_CHUNK:
            text = update.text
            if not text:
                return
            if not self._in_thought:
                self._err.write("thought: ")
                self._in_thought = True
            self._err.write(text)
            self._err.flush()
        elif kind == acp_fast.UpdateKind.PLAN:
            if not update.text:
                self._say("plan: (empty)")
                return
            self._end_thought()
            for entry in update.text.split("\n"):
                self._err.write(f"plan: - {entry}\n")
            self._err.flush()
        elif kind in (acp_fast.UpdateKind.TOOL_CALL, acp_fast.UpdateKind.TOOL_CALL_UPDATE):
            call_id = update.tool_call_id or ""
            title = update.text
            if title:
                self._titles[call_id] = title
            else:
                title = self._titles.get(call_id) or call_id or "(untitled)"
            status = update.json().get("status")
            suffix = f" [{status}]" if isinstance(status, str) and status else ""
            self._say(f"tool: {title}{suffix}")
        elif kind == acp_fast.UpdateKind.CURRENT_MODE_UPDATE:
            self._say(f"mode: {update.text}")

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        title = request.title or request.tool_call_id or "(untitled)"
        decision = f"{request.outcome} {request.option_id}".rstrip()
        self._say(f"permission: {title} -> {decision}")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-fast",
        description="Host a coding agent over the Agent Client Protocol.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="send one prompt to an agent and stream its reply",
        description="Start an agent, send PROMPT, stream the reply to stdout; thoughts, plan, "
        "tool calls and permission decisions go to stderr.",
    )
    run.add_argument(
        "--agent",
        metavar="CMD",
        default=None,
        help="the agent command line, split like a shell does "
        "(default: the bundled demo agent, python -m acp_fast.demo_agent)",
    )
    run.add_argument(
        "--cwd",
        metavar="DIR",
        default=None,
        help="the session's working directory (default: the current directory)",
    )
    run.add_argument(
        "--allow-kind",
        metavar="KIND",
        action="append",
        default=[],
        help="grant permission requests for tool calls of this kind (e.g. edit, execute); "
        "repeatable. Anything not granted is rejected.",
    )
    run.add_argument(
        "--allow-title-prefix",
        metavar="PREFIX",
        action="append",
        default=[],
        help="grant permission requests whose tool call title starts with PREFIX; repeatable",
    )
    run.add_argument("prompt", metavar="PROMPT", help="the prompt text")
    bench = commands.add_parser(
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
    return parser


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _silence_stdout() -> None:
    """After a broken stdout pipe, point fd 1 at /dev/null so the exit flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.agent is None:
        command = default_agent_command()
    else:
        try:
            command = shlex.split(args.agent)
        except ValueError as exc:
            parser.error(f"--agent: {exc}")
        if not command:
            parser.error("--agent: empty command")
    cwd: str | None = None
    if args.cwd is not None:
        cwd = os.path.abspath(args.cwd)
        if not os.path.isdir(cwd):
            print(f"acp-fast: error: --cwd {args.cwd}: not a directory", file=sys.stderr)
            return 1

    observer = ConsoleObserver(sys.stdout, sys.stderr)
    try:
        client = acp_fast.Client(
            command[0],
            args=command[1:],
            reader_limits=acp_fast.DEFAULT_READER_LIMITS,
            transfer_limits=CLI_TRANSFER_LIMITS,
            transport_epoch=1,
            cwd=cwd,
            permission_policy=acp_fast.PermissionPolicy(
                allowed_tool_kinds=args.allow_kind,
                allowed_title_prefixes=args.allow_title_prefix,
            ),
            observer=observer,
        )
        with client:
            client.start()
            result = client.prompt_detailed(args.prompt)
    except KeyboardInterrupt:
        observer.finish()
        print("acp-fast: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        observer.finish()
        print("acp-fast: error: stdout was closed", file=sys.stderr)
        return 1
    except (acp_fast.AcpError, OSError) as exc:
        observer.finish()
        if observer.reply_written and not observer.reply_ends_with_newline:
            _write_newline()
        print(f"acp-fast: error: {_one_line(exc)}", file=sys.stderr)
        return 1

    observer.finish()
    if observer.reply_written and not observer.reply_ends_with_newline:
        _write_newline()
    overflow = result.overflow
    if overflow is not None:
        print(
            f"acp-fast: the reply was cut at the {overflow.kind.value} limit "
            f"({overflow.admitted_bytes} bytes, {overflow.admitted_segments} chunks kept)",
            file=sys.stderr,
        )
    if result.stop_reason != "end_turn":
        print(f"stop reason: {result.stop_reason}", file=sys.stderr)
    return 0


def _write_newline() -> None:
    try:
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


# --- acp-fast bench -------------------------------------------------------------------------

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

    @property
    def updates_per_second(self) -> float:
        return self.updates / self.seconds if self.seconds > 0 else 0.0

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


def _bench_size(size: BenchSize, per_prompt: int, seconds: float, progress: _Progress) -> BenchRow:
    observer = _BenchObserver(progress, per_prompt // 8)
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
    with acp_fast.Client(
        command[0],
        args=command[1:],
        reader_limits=acp_fast.DEFAULT_READER_LIMITS,
        transfer_limits=limits,
        transport_epoch=1,
        observer=observer,
    ) as client:
        client.start()
        elapsed = 0.0
        while True:
            began = time.perf_counter()
            result = client.prompt_detailed("flood")
            elapsed += time.perf_counter() - began
            progress.show()
            if result.stop_reason != "end_turn" or result.overflow is not None:
                raise acp_fast.AgentProtocolError(
                    f"the demo agent's flood ended with {result.stop_reason!r}"
                )
            if elapsed >= seconds:
                break
    return BenchRow(size.label, observer.line_bytes, observer.updates, elapsed)


def run_bench(seconds: float, quick: bool, err: TextIO) -> list[BenchRow]:
    """Flood each size for about `seconds` (one prompt each when `quick`); the rows."""
    progress = _Progress(err, len(BENCH_SIZES), 0.0 if quick else seconds)
    rows = []
    try:
        for step, size in enumerate(BENCH_SIZES):
            progress.begin(step, size.label)
            per_prompt = size.quick_per_prompt if quick else size.per_prompt
            rows.append(_bench_size(size, per_prompt, 0.0 if quick else seconds, progress))
    finally:
        progress.finish()
    return rows


def format_bench(rows: Sequence[BenchRow]) -> str:
    """The bench table: one header line and one line per size."""
    header = ("text/update", "line bytes", "updates", "seconds", "updates/s", "MB/s")
    lines = [
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
    widths = [max(len(cells[i]) for cells in (header, *lines)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in (header, *lines)
    )


def _bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    seconds = args.seconds
    if not seconds > 0 or seconds > 3600:
        parser.error("--seconds must be above 0 and at most 3600")
    try:
        rows = run_bench(seconds, args.quick, sys.stderr)
    except KeyboardInterrupt:
        print("acp-fast: interrupted", file=sys.stderr)
        return 130
    except (acp_fast.AcpError, OSError) as exc:
        print(f"acp-fast: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    try:
        print(format_bench(rows))
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return 1
    return 0


def _stop_on(signums: Sequence[int], received: list[int]) -> dict[int, Any]:
    """SIGTERM and SIGHUP take Ctrl-C's path (the turn ends, `with client` stops the agent's
    group); a signal the caller ignores (nohup) stays ignored. Returns what to restore."""

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signal.signal's rule
        for signum in signums:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, stop)
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``acp-fast`` command line; return the exit status."""
    received: list[int] = []
    previous = _stop_on((signal.SIGTERM, signal.SIGHUP), received)
    try:
        status = _main(argv)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 + received[0] if received else status


def _main(argv: Sequence[str] | None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(parser, args)
    if args.command == "bench":
        return _bench(parser, args)
    parser.print_help(sys.stderr)
    return 2

"""The ``acp-fast`` command line.

``acp-fast run [--agent "CMD ARGS"] [--cwd DIR] [--allow-kind K]... [--allow-title-prefix P]...
[--journal PATH [--fsync every|batch|never] [--journal-kind jsonl|sqlite]] [--view auto|live|plain]
PROMPT`` starts an agent (by default the bundled demo agent) and sends one prompt. On a terminal,
with the optional ``rich`` installed, a live view shows the reply streaming, the plan, tool calls,
permission decisions and a footer with updates/s and bytes; otherwise the reply streams to
stdout and thoughts, the plan, tool calls and permission decisions go to stderr, one line each.
``--journal`` records the whole conversation (see `acp_fast.journal`).

``acp-fast journal show PATH [--kind K]... [--envelopes]`` prints a journal's records, one a
line; ``acp-fast journal stats PATH`` counts them (turns, updates by kind, bytes, permission
decisions, durations). ``acp-fast replay PATH [--epoch E] [--log LOG] [--wait-cancel]`` is an ACP
agent that plays a journal or transcript back (see `acp_fast.replay_agent`).

``acp-fast bench [--quick] [--seconds S]`` measures this machine's reader capacity: the bundled
demo agent floods ``agent_message_chunk`` updates of 64 B, 1 KiB, 64 KiB and 1 MiB of text, and
the table on stdout gives updates/s and MB/s (whole lines, JSON envelope included) for each; a
progress bar goes to stderr when it is a terminal.

Exit status: 0 when the turn finished (whatever its stop reason), 1 on an acp-fast, journal or
OS error (one line on stderr, no traceback), 2 on a usage error, 130 on Ctrl-C, 143 on SIGTERM
and 129 on SIGHUP (each ends the turn and stops the agent's group first).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import signal
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import acp_fast
from acp_fast import _host, replay_agent
from acp_fast import journal as journal_module

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

    def on_activity(self, activity: acp_fast.ClientActivity) -> None:
        self._say(_host.activity_line(activity))


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
    run.add_argument(
        "--allow",
        metavar="RULE",
        action="append",
        default=[],
        help="grant permission requests matching RULE, [KIND][:TITLE] (TITLE a case-insensitive "
        "substring, or /REGEX/); repeatable",
    )
    run.add_argument(
        "--deny",
        metavar="RULE",
        action="append",
        default=[],
        help="reject permission requests matching RULE (as --allow; deny rules win); repeatable",
    )
    run.add_argument(
        "--fs",
        action="store_true",
        help="serve fs/read_text_file and fs/write_text_file, confined to --cwd (and --add-dir)",
    )
    run.add_argument(
        "--terminal",
        action="store_true",
        help="serve terminal/* (commands run without a shell, in --cwd or below)",
    )
    run.add_argument(
        "--terminal-shell",
        metavar="SHELL",
        default=None,
        help="with --terminal: run a terminal/create without args as SHELL -c COMMAND (e.g. "
        "/bin/sh; for agents that send whole shell lines, such as claude-code-acp)",
    )
    run.add_argument(
        "--add-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="another directory the agent's files and terminals may reach; repeatable",
    )
    run.add_argument(
        "--journal",
        metavar="PATH",
        default=None,
        help="record the whole conversation in this journal (appended to when it exists; a new "
        "one is SQLite when its name ends in .sqlite, .sqlite3 or .db, else JSONL)",
    )
    run.add_argument(
        "--fsync",
        choices=journal_module.FSYNC_MODES,
        default="batch",
        help="when journal records are synced to disk: every record, each batch (default), "
        "or never (left to the OS)",
    )
    run.add_argument(
        "--journal-kind",
        choices=("jsonl", "sqlite"),
        default=None,
        help="the kind of a new journal (default: by its name)",
    )
    run.add_argument(
        "--view",
        choices=("auto", "live", "plain"),
        default="auto",
        help="live: the terminal view (needs rich: pip install 'acp-fast[live]'); plain: one "
        "line per event; auto (default): live when stdout is a terminal and rich is installed",
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
    bench.add_argument(
        "--async",
        dest="asynchronous",
        action="store_true",
        help="also flood each size through AsyncClient (asyncio) and add its column",
    )
    journal = commands.add_parser(
        "journal",
        help="show or count the records of a journal",
        description="Read a journal (JSONL or SQLite, told apart by content).",
    )
    journal_commands = journal.add_subparsers(dest="journal_command", metavar="ACTION")
    show = journal_commands.add_parser(
        "show",
        help="print the records, one a line",
        description="Print a journal's records in order, one a line: number, time, kind, "
        "epoch:sequence, session and a summary.",
    )
    show.add_argument("path", metavar="PATH")
    show.add_argument(
        "--kind",
        action="append",
        choices=[kind.value for kind in journal_module.RecordKind],
        default=[],
        help="only records of this kind; repeatable",
    )
    show.add_argument(
        "--envelopes",
        action="store_true",
        help="print each record's exact line instead of the table",
    )
    stats = journal_commands.add_parser(
        "stats",
        help="count turns, updates by kind, bytes, permission decisions and durations",
        description="Summarise a journal: records, turns and their durations, updates by kind "
        "with their bytes, permission decisions.",
    )
    stats.add_argument("path", metavar="PATH")
    replay = commands.add_parser(
        "replay",
        help="an ACP agent that plays a journal or transcript back (for --agent)",
        description="Run an ACP agent on stdin/stdout that plays a recorded conversation back "
        "to any client, checks the client's messages against the recording and says where "
        "they differ (on stderr). E.g. acp-fast run --agent 'acp-fast replay PATH' hello",
    )
    replay_agent.add_arguments(replay)
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

    try:
        allow = [_host.parse_rule(rule) for rule in args.allow]
        deny = [_host.parse_rule(rule) for rule in args.deny]
    except ValueError as exc:
        parser.error(str(exc))
    if args.terminal_shell is not None and not args.terminal:
        parser.error("--terminal-shell needs --terminal")
    capabilities = None
    if args.fs or args.terminal:  # off by default: the default run stays wave 1's
        try:
            capabilities = acp_fast.ClientCapabilityConfig(
                read_text_file=args.fs,
                write_text_file=args.fs,
                terminal=args.terminal,
                additional_directories=tuple(os.path.abspath(d) for d in args.add_dir),
                terminal_shell=args.terminal_shell,
            )
        except ValueError as exc:
            parser.error(f"--terminal-shell: {exc}")

    live = _live_view(parser, args.view, args.journal)
    observer: ConsoleObserver | Any = (
        live if live is not None else ConsoleObserver(sys.stdout, sys.stderr)
    )
    try:
        with ExitStack() as stack, _warnings_to_stderr():
            epoch = 1
            watched: Any = observer
            if args.journal is not None:
                journal = journal_module.open_journal(
                    args.journal, args.fsync, kind=args.journal_kind, observer=observer
                )
                stack.callback(journal.close)
                # A new epoch per run, so (epoch, sequence) stays a key in an appended journal.
                epoch = journal.last_transport_epoch + 1
                journal.transport_epoch = epoch
                watched = journal
                if live is not None:
                    live.attach_journal(journal)
            if live is not None:
                stack.enter_context(live)
            client = acp_fast.Client(
                command[0],
                args=command[1:],
                reader_limits=acp_fast.DEFAULT_READER_LIMITS,
                transfer_limits=CLI_TRANSFER_LIMITS,
                transport_epoch=epoch,
                cwd=cwd,
                permission_policy=acp_fast.PermissionPolicy(
                    allowed_tool_kinds=args.allow_kind,
                    allowed_title_prefixes=args.allow_title_prefix,
                    allow=allow,
                    deny=deny,
                ),
                observer=watched,
                capabilities=capabilities,
            )
            with client:
                client.start()
                result = client.prompt_detailed(args.prompt)
    except KeyboardInterrupt:
        _finish(observer)
        print("acp-fast: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        _finish(observer)
        print("acp-fast: error: stdout was closed", file=sys.stderr)
        return 1
    except (acp_fast.AcpError, OSError) as exc:
        _finish(observer)
        if isinstance(observer, ConsoleObserver):
            if observer.reply_written and not observer.reply_ends_with_newline:
                _write_newline()
        print(f"acp-fast: error: {_one_line(exc)}", file=sys.stderr)
        return 1

    _finish(observer)
    if isinstance(observer, ConsoleObserver):
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


def _finish(observer: Any) -> None:
    if isinstance(observer, ConsoleObserver):
        observer.finish()
    else:
        observer.stop()


def _live_view(parser: argparse.ArgumentParser, view: str, journal_path: str | None) -> Any:
    """The live view when asked for (or, with "auto", when stdout is a terminal and rich is
    installed); None for plain lines."""
    if view == "plain" or (view == "auto" and not sys.stdout.isatty()):
        return None
    try:
        from rich.console import Console

        from acp_fast._live import LiveView
    except ImportError:
        if view == "live":
            parser.error("--view live needs rich: pip install 'acp-fast[live]'")
        return None
    return LiveView(Console(), journal_path)


@contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Journal warnings (a torn final record) as one line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", journal_module.TornRecordWarning)
        try:
            yield
        finally:
            for warning in caught:
                print(
                    f"acp-fast: warning: {' '.join(str(warning.message).split())}", file=sys.stderr
                )


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


def _bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    seconds = args.seconds
    if not seconds > 0 or seconds > 3600:
        parser.error("--seconds must be above 0 and at most 3600")
    try:
        rows = run_bench(seconds, args.quick, sys.stderr, args.asynchronous)
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


# --- acp-fast journal show|stats, acp-fast replay -------------------------------------------


def _clock(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%H:%M:%S.%f")[:-3]


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary(record: journal_module.JournalRecord) -> str:
    """A record in a few words, for `journal show`."""
    kind = record.kind
    if kind == journal_module.RecordKind.PERMISSION:
        fields = record.fields
        title = fields.get("title") or fields.get("tool_call_id") or "(untitled)"
        return f"{_clip(str(title), 40)} -> {journal_module.permission_label(fields)}"
    if kind == journal_module.RecordKind.ACTIVITY:
        fields = record.fields
        what = fields.get("path") or fields.get("command") or fields.get("terminal_id") or ""
        allowed = "allowed" if fields.get("allowed") else f"refused: {fields.get('reason')}"
        return f"{fields.get('method', '?')} {_clip(str(what), 40)} {allowed}"
    try:
        message = json.loads(record.envelope)
    except ValueError:
        return "(not JSON) " + _clip(record.envelope)
    if not isinstance(message, dict):
        return _clip(record.envelope)
    if kind == journal_module.RecordKind.UPDATE:
        update = (message.get("params") or {}).get("update") or {}
        name = str(update.get("sessionUpdate", "?"))
        content = update.get("content")
        text = ""
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            text = repr(_clip(content["text"], 50))
        elif name in ("tool_call", "tool_call_update"):
            text = " ".join(
                str(update[k]) for k in ("toolCallId", "title", "status") if update.get(k)
            )
        elif name == "plan":
            text = f"{len(update.get('entries') or [])} entries"
        return f"{name} {text}".rstrip()
    method = message.get("method")
    request_id = f" id={json.dumps(message['id'])}" if "id" in message else ""
    if isinstance(method, str):
        return f"{method}{request_id}"
    if "error" in message:
        error = message.get("error") or {}
        return (
            f"answer{request_id} error {error.get('code')} {_clip(str(error.get('message')), 40)}"
        )
    result = message.get("result")
    if isinstance(result, dict) and "stopReason" in result:
        return f"answer{request_id} stopReason={result['stopReason']}"
    if isinstance(result, dict) and "outcome" in result:
        return f"answer{request_id} {_clip(json.dumps(result['outcome']), 50)}"
    return f"answer{request_id}"


def _journal_show(args: argparse.Namespace) -> int:
    kinds = set(args.kind)
    out = sys.stdout
    with _warnings_to_stderr():
        for record in journal_module.read(args.path):
            if kinds and record.kind.value not in kinds:
                continue
            if args.envelopes:
                out.write(record.envelope + "\n")
                continue
            key = f"{record.transport_epoch}:{record.update_sequence}"
            out.write(
                f"{record.number:>7}  {_clock(record.time)}  {record.kind.value:<10} {key:<9} "
                f"{_clip(record.session_id, 16):<16} {summary(record)}\n"
            )
    out.flush()
    return 0


def _table(rows: Sequence[tuple[str, ...]], right: Sequence[bool]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            (cell.rjust(width) if align else cell.ljust(width))
            for cell, width, align in zip(row, widths, right, strict=True)
        ).rstrip()
        for row in rows
    )


def _seconds(value: float) -> str:
    return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.3f} s"


def format_stats(stats: journal_module.JournalStats) -> str:
    """The `journal stats` report: a few labelled tables."""
    span = (stats.last_time or 0.0) - (stats.first_time or 0.0)
    head = [
        ("journal", f"{stats.path} ({stats.kind})"),
        ("file bytes", f"{stats.file_bytes:,}"),
        ("records", f"{stats.records:,}"),
        ("by kind", ", ".join(f"{k} {v:,}" for k, v in sorted(stats.records_by_kind.items()))),
        ("epochs", ", ".join(str(e) for e in sorted(stats.epochs)) or "-"),
        ("sessions", ", ".join(sorted(stats.sessions)) or "-"),
        ("span", _seconds(span) if stats.records else "-"),
    ]
    if stats.updates:
        head.append(("bytes/update", f"{stats.file_bytes / stats.updates:,.1f} in the file"))
    if stats.torn:
        head.append(("torn", "a torn final record (a crash) was left out"))
    parts = [_table(head, (False, False))]
    turns = stats.turns
    if stats.records_by_kind.get("sent") or stats.records_by_kind.get("received"):
        rows: list[tuple[str, ...]] = [("turn", "session", "updates", "duration", "stop reason")]
        for number, turn in enumerate(turns, 1):
            duration = _seconds(turn.ended - turn.started) if turn.ended is not None else "-"
            rows.append(
                (
                    str(number),
                    _clip(turn.session_id, 24),
                    f"{turn.updates:,}",
                    duration,
                    turn.stop_reason or "(no answer)",
                )
            )
        ended = [t.ended - t.started for t in turns if t.ended is not None]
        if ended:
            rows.append(
                (
                    "all",
                    "",
                    f"{sum(t.updates for t in turns):,}",
                    f"median {_seconds(statistics.median(ended))}",
                    f"{len(turns)} turns",
                )
            )
        parts.append(_table(rows, (True, False, True, True, False)) if turns else "turns: 0")
    else:
        parts.append("turns: unknown (no wire lines: recorded without the core's wire tap)")
    if stats.updates_by_kind:
        rows = [("update kind", "count", "bytes")]
        for kind, count in sorted(stats.updates_by_kind.items(), key=lambda item: -item[1]):
            rows.append((kind, f"{count:,}", f"{stats.update_bytes_by_kind[kind]:,}"))
        total = sum(stats.update_bytes_by_kind.values())
        rows.append(("all", f"{stats.updates:,}", f"{total:,}"))
        parts.append(_table(rows, (False, True, True)))
    if stats.permissions:
        rows = [("permission decision", "count")]
        for label, count in sorted(stats.permissions.items(), key=lambda item: -item[1]):
            rows.append((label, f"{count:,}"))
        parts.append(_table(rows, (False, True)))
    return "\n\n".join(parts)


def _journal_stats(args: argparse.Namespace) -> int:
    stats = journal_module.summarize(args.path)
    print(format_stats(stats))
    sys.stdout.flush()
    return 0


def _journal(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.journal_command is None:
        parser.error("journal: say show or stats")
    try:
        if args.journal_command == "show":
            return _journal_show(args)
        return _journal_stats(args)
    except journal_module.JournalError as exc:
        print(f"acp-fast: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            _silence_stdout()
            return 1
        print(f"acp-fast: error: {args.path}: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


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
    if args.command == "journal":
        return _journal(parser, args)
    if args.command == "replay":
        return replay_agent.run(args.path, args.log, args.wait_cancel, args.epoch, args.map_path)
    parser.print_help(sys.stderr)
    return 2

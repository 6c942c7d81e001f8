"""``acp-fast journal show|stats PATH``: a journal's records one a line, or counted. Every piece
of a record is agent or file text: each is made printable before it is printed."""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from acp_fast import journal as journal_module
from acp_fast._text import printable_line

from . import errors
from .options import Parser, command_parser

NEVER_STARTED = "no records: the run that made this journal never started"


def add_parser(commands: Any) -> None:
    journal = command_parser(
        commands,
        "journal",
        help="show or count the records of a journal",
        description="Read a journal (JSONL or SQLite, told apart by content).",
    )
    actions = journal.add_subparsers(dest="journal_command", metavar="ACTION")
    show = command_parser(
        actions,
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
        help="print each record's exact line instead of the table (control characters are "
        "shown, not sent, when stdout is a terminal)",
    )
    stats = command_parser(
        actions,
        "stats",
        help="count turns, updates by kind, bytes, permission decisions and durations",
        description="Summarise a journal: records, turns and their durations, updates by kind "
        "with their bytes, permission decisions.",
    )
    stats.add_argument("path", metavar="PATH")
    journal.set_defaults(handler=run)


def plural(count: int, word: str) -> str:
    """``1 turn``, ``2 turns``, ``1,000 updates``."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _clock(seconds: float) -> str:
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return "??:??:??.???"
    return moment.strftime("%H:%M:%S.%f")[:-3]


def _clip(text: str, width: int = 60) -> str:
    """A one-line field: whitespace runs shown as one space, printable, at most `width`."""
    text = printable_line(" ".join(text[: width * 4].split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _exact(text: str, width: int = 50) -> str:
    """Message text as Python writes a string (quotes, ``\\n`` …): exact, whitespace kept,
    cut at `width` characters with the count of the rest."""
    shown = repr(text[:width])
    if len(text) > width:
        shown += f"…(+{len(text) - width:,} chars)"
    return printable_line(shown)


def summary(record: journal_module.JournalRecord) -> str:
    """A record in a few words, for `journal show` (printable: no control characters)."""
    kind = record.kind
    if kind == journal_module.RecordKind.PERMISSION:
        fields = record.fields
        title = fields.get("title") or fields.get("tool_call_id") or "(untitled)"
        label = printable_line(journal_module.permission_label(fields))
        return f"{_clip(str(title), 40)} -> {label}"
    if kind == journal_module.RecordKind.ACTIVITY:
        fields = record.fields
        what = fields.get("path") or fields.get("command") or fields.get("terminal_id") or ""
        allowed = "allowed" if fields.get("allowed") else f"refused: {fields.get('reason')}"
        return f"{_clip(str(fields.get('method', '?')), 40)} {_clip(str(what), 40)} " + _clip(
            allowed, 60
        )
    try:
        message = json.loads(record.envelope)
    except (ValueError, RecursionError):
        return "(not JSON) " + _clip(record.envelope)
    if not isinstance(message, dict):
        return _clip(record.envelope)
    if kind == journal_module.RecordKind.UPDATE:
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        update = update if isinstance(update, dict) else {}
        name = _clip(str(update.get("sessionUpdate", "?")), 40)
        content = update.get("content")
        text = ""
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            text = _exact(content["text"])
        elif name in ("tool_call", "tool_call_update"):
            text = " ".join(
                _clip(str(update[k]), 40)
                for k in ("toolCallId", "title", "status")
                if update.get(k)
            )
        elif name == "plan":
            entries = update.get("entries")
            count = len(entries) if isinstance(entries, list) else 0
            text = "1 entry" if count == 1 else f"{count:,} entries"
        return f"{name} {text}".rstrip()
    method = message.get("method")
    request_id = ""
    if "id" in message:
        request_id = " id=" + _clip(json.dumps(message["id"], ensure_ascii=False), 40)
    if isinstance(method, str):
        return f"{_clip(method, 60)}{request_id}"
    if "error" in message:
        error = message.get("error")
        error = error if isinstance(error, dict) else {}
        code = _clip(str(error.get("code")), 20)
        return f"answer{request_id} error {code} {_clip(str(error.get('message')), 40)}"
    result = message.get("result")
    if isinstance(result, dict) and "stopReason" in result:
        return f"answer{request_id} stopReason={_clip(str(result['stopReason']), 40)}"
    if isinstance(result, dict) and "outcome" in result:
        outcome = json.dumps(result["outcome"], ensure_ascii=False)
        return f"answer{request_id} {_clip(outcome, 50)}"
    return f"answer{request_id}"


def _show(args: argparse.Namespace) -> int:
    kinds = set(args.kind)
    out = sys.stdout
    # An envelope is printed exactly into a pipe or a file; a terminal is shown its controls.
    exact = not out.isatty()
    shown = 0
    for record in journal_module.read(args.path):
        shown += 1
        if kinds and record.kind.value not in kinds:
            continue
        if args.envelopes:
            out.write((record.envelope if exact else printable_line(record.envelope)) + "\n")
            continue
        key = f"{record.transport_epoch}:{record.update_sequence}"
        out.write(
            f"{record.number:>7}  {_clock(record.time)}  {record.kind.value:<10} {key:<9} "
            f"{_clip(record.session_id, 16):<16} {summary(record)}\n"
        )
    out.flush()
    if not shown:
        errors.report(f"{printable_line(args.path)}: {NEVER_STARTED}", prefix="note")
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
    """The `journal stats` report: a few labelled tables, every agent piece printable."""
    span = (stats.last_time or 0.0) - (stats.first_time or 0.0)
    by_kind = sorted(stats.records_by_kind.items())
    head = [
        ("journal", f"{printable_line(stats.path)} ({printable_line(stats.kind)})"),
        ("file bytes", f"{stats.file_bytes:,}"),
        ("records", f"{stats.records:,}"),
        ("by kind", ", ".join(f"{printable_line(k)} {v:,}" for k, v in by_kind) or "-"),
        ("epochs", ", ".join(str(e) for e in sorted(stats.epochs)) or "-"),
        ("sessions", ", ".join(_clip(s, 40) for s in sorted(stats.sessions)[:20]) or "-"),
        ("span", _seconds(span) if stats.records else "-"),
    ]
    if len(stats.sessions) > 20:
        head[5] = ("sessions", head[5][1] + f", … ({len(stats.sessions):,} in all)")
    if stats.updates:
        head.append(("bytes/update", f"{stats.file_bytes / stats.updates:,.1f} in the file"))
    if stats.torn:
        head.append(("torn", "a torn final record (a crash) was left out"))
    parts = [_table(head, (False, False))]
    if not stats.records:
        parts.append(NEVER_STARTED + " (the agent did not start, or nothing was recorded)")
        return "\n\n".join(parts)
    turns = stats.turns
    if stats.records_by_kind.get("sent") or stats.records_by_kind.get("received"):
        if not stats.records_by_kind.get("received"):
            parts.append(
                "the agent never answered: the run never started (the agent's stderr, shown "
                "by acp-fast run, says why)"
            )
        rows: list[tuple[str, ...]] = [("turn", "session", "updates", "duration", "stop reason")]
        for number, turn in enumerate(turns, 1):
            duration = _seconds(turn.ended - turn.started) if turn.ended is not None else "-"
            rows.append(
                (
                    str(number),
                    _clip(turn.session_id, 24),
                    f"{turn.updates:,}",
                    duration,
                    _clip(turn.stop_reason, 30) if turn.stop_reason else "(no answer)",
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
                    plural(len(turns), "turn"),
                )
            )
        parts.append(_table(rows, (True, False, True, True, False)) if turns else "turns: 0")
    else:
        parts.append("turns: unknown (no wire lines: recorded without the core's wire tap)")
    if stats.updates_by_kind:
        rows = [("update kind", "count", "bytes")]
        for kind, count in sorted(stats.updates_by_kind.items(), key=lambda item: -item[1]):
            rows.append((_clip(kind, 40), f"{count:,}", f"{stats.update_bytes_by_kind[kind]:,}"))
        total = sum(stats.update_bytes_by_kind.values())
        rows.append(("all", plural(stats.updates, "update"), f"{total:,}"))
        parts.append(_table(rows, (False, True, True)))
    if stats.permissions:
        rows = [("permission decision", "count")]
        for label, count in sorted(stats.permissions.items(), key=lambda item: -item[1]):
            rows.append((_clip(label, 60), f"{count:,}"))
        parts.append(_table(rows, (False, True)))
    return "\n\n".join(parts)


def _stats(args: argparse.Namespace) -> int:
    stats = journal_module.summarize(args.path)
    print(format_stats(stats))
    sys.stdout.flush()
    return 0


def run(parser: Parser, args: argparse.Namespace) -> int:
    if args.journal_command is None:
        parser.fail("say show or stats")
    try:
        with errors.warnings_to_stderr():
            if args.journal_command == "show":
                return _show(args)
            return _stats(args)
    except journal_module.JournalError as exc:
        errors.report(exc)
        return 1
    except OSError as exc:
        if errors.closed_stdout(exc):
            errors.silence_stdout()
            return errors.EXIT_PIPE
        errors.report(f"{printable_line(args.path)}: {errors.one_line(exc)}")
        return 1
    except KeyboardInterrupt:
        return 130

"""The ``acp-fast`` command line.

``acp-fast run [--agent "CMD ARGS"] [--cwd DIR] [--allow-kind K]... [--allow-title-prefix P]...
PROMPT`` starts an agent (by default the bundled demo agent), sends one prompt and streams the
reply to stdout; thoughts, the plan, tool calls and permission decisions go to stderr.

Exit status: 0 when the turn finished (whatever its stop reason), 1 on an acp-fast or OS error
(one line on stderr, no traceback), 2 on a usage error, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TextIO

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
    # Room for more commands here (a `bench` subcommand is planned).
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``acp-fast`` command line; return the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(parser, args)
    parser.print_help(sys.stderr)
    return 2

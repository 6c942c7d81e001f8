"""``acp-fast run [options] PROMPT``: start an agent (by default the bundled demo agent), send
one prompt (``-``: read it from stdin), stream the reply, stop the agent."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

import acp_fast
from acp_fast import journal as journal_module

from . import agent, elicit, errors, options
from .options import Parser, command_parser
from .output import ConsoleObserver, Screen, isatty, live_view, say


def add_parser(commands: Any) -> None:
    run_parser = command_parser(
        commands,
        "run",
        help="send one prompt to an agent and stream its reply",
        description="Start an agent, send PROMPT, stream the reply to stdout; thoughts, plan, "
        "tool calls and permission decisions go to stderr. Anything the rules do not allow is "
        "rejected.",
    )
    options.add_agent_options(run_parser)
    run_parser.add_argument(
        "prompt", metavar="PROMPT", help="the prompt text, or - to read it from stdin"
    )
    run_parser.set_defaults(handler=run)


def interrupted(screen: Screen | None) -> None:
    """``acp-fast: interrupted`` on a line of its own (after the reply's, and after the ``^C``
    the terminal echoed)."""
    if screen is not None:
        mid = screen.out_mid_line or screen.err_mid_line
        screen.close()
        screen.end_lines()
        if not mid and isatty(sys.stderr):
            sys.stderr.write("\n")
    elif isatty(sys.stderr):
        sys.stderr.write("\n")
    say("acp-fast: interrupted")


def finish(view: Any) -> None:
    """End the view: the live view prints its final frame; the plain one ends its lines."""
    if isinstance(view, ConsoleObserver):
        view.finish()
        view.screen.close()
    elif view is not None:
        view.stop()


def run(parser: Parser, args: argparse.Namespace) -> int:
    command = options.agent_command(parser, args)
    options.permission_policy(parser, args)  # usage errors before anything starts
    options.capabilities(parser, args)
    limit = acp_fast.DEFAULT_TRANSFER_LIMITS.request_bytes - 64 * 1024
    prompt = options.read_prompt(parser, args.prompt, max(limit, 1024))
    try:
        cwd = options.session_cwd(args)
    except NotADirectoryError as exc:
        errors.report(exc)
        return 1
    live = live_view(parser, args.view, args.journal)
    view: Any = live if live is not None else ConsoleObserver(sys.stdout, sys.stderr)
    if isatty(sys.stdin):
        # Elicitations are asked on the terminal; without one, none is advertised.
        view.on_elicitation = elicit.terminal_asker(view)
    screen = view.screen if isinstance(view, ConsoleObserver) else None
    client: acp_fast.Client | None = None
    name = options.agent_name(command)
    try:
        with ExitStack() as stack, errors.warnings_to_stderr():
            if live is not None:
                stack.enter_context(live)
            client = agent.open_client(stack, parser, args, command, view, live, cwd)
            agent.status(view, f"starting {name}…")
            client.start(timeout=args.timeout)
            note = agent.protocol_note(client, args)
            if note is not None and live is not None:
                live.note(note)
            elif note is not None:
                view.screen.write_err(note + "\n")  # erases the status line first
            warning = agent.ask_host(client, args)
            if warning is not None:
                errors.report(warning, prefix="warning")
            agent.status(view, "waiting for the agent…")
            result = client.prompt_detailed(prompt, timeout=args.timeout)
            agent.status(view, None)
    except KeyboardInterrupt:
        finish(view)
        interrupted(screen)
        return 130
    except (acp_fast.AcpError, journal_module.JournalError, OSError) as exc:
        if errors.closed_stdout(exc):
            errors.silence_stdout()
            finish(view)
            return errors.EXIT_PIPE
        finish(view)
        if screen is not None:
            screen.end_lines()
        errors.report(exc, tail=agent.stderr_tail(client))
        return 1

    finish(view)
    if screen is not None:
        screen.end_lines()
    overflow = result.overflow
    if overflow is not None:
        say(
            f"acp-fast: the reply was cut at the {overflow.kind.value} limit "
            f"({overflow.admitted_bytes:,} bytes, {overflow.admitted_segments:,} chunks kept)"
        )
    if result.stop_reason != "end_turn":
        say(f"stop reason: {errors.one_line(result.stop_reason)}")
    return 0

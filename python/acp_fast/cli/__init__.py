"""The ``acp-fast`` command line.

``acp-fast run [options] PROMPT`` starts an agent (by default the bundled demo agent) and sends
one prompt (``-`` reads it from stdin). ``acp-fast chat [options]`` is a conversation of many
turns in the terminal, with slash commands and permission questions. On a terminal, with the
optional ``rich`` installed, a live view shows each turn: the reply streaming, the plan, tool
calls, permission decisions, the host's activity and a footer with updates/s and bytes;
otherwise the reply streams to stdout and the rest goes to stderr, one line each. Every piece
of text an agent or a journal chose is shown with its control characters made visible
(`acp_fast._text.printable`), never sent to the terminal. ``--journal`` records the whole
conversation (see `acp_fast.journal`). Errors show the agent's last stderr lines.

``acp-fast journal show PATH [--kind K]... [--envelopes]`` prints a journal's records, one a
line; ``acp-fast journal stats PATH`` counts them (turns, updates by kind, bytes, permission
decisions, durations). ``acp-fast replay PATH [--epoch E] [--log LOG] [--wait-cancel]`` is an ACP
agent that plays a journal or transcript back (see `acp_fast.replay_agent`).

``acp-fast agents list|show [ID] --registry PATH|URL`` reads an ACP registry: its agents, and how
each starts here (``--agent ID`` with ``--registry`` starts one, with its profile).

``acp-fast login [--agent CMD|ID] [--method ID] [--list] [--yes]`` runs an agent's terminal login
method (ACP terminal authentication) on this terminal; see `acp_fast.cli.login`.

``acp-fast bench [--quick] [--seconds S]`` measures this machine's reader capacity with the demo
agent in flood mode.

Exit status: 0 when the turn finished (whatever its stop reason), 1 on an acp-fast, journal or
OS error (one line on stderr, no traceback, the agent's stderr under it), 2 on a usage error,
130 on Ctrl-C, 143 on SIGTERM and 129 on SIGHUP (each ends the turn and stops the agent's group
first), 141 when stdout was closed under it (``| head``: quietly, as a filter does).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

import acp_fast

from . import agents, bench, chat, errors, journal, login, replay, run
from .bench import BENCH_SECONDS, BENCH_SIZES, BenchRow, format_bench, run_bench
from .journal import format_stats, summary
from .options import Parser, default_agent_command
from .output import ConsoleObserver

__all__ = [
    "BENCH_SECONDS",
    "BENCH_SIZES",
    "BenchRow",
    "ConsoleObserver",
    "build_parser",
    "default_agent_command",
    "format_bench",
    "format_stats",
    "main",
    "run_bench",
    "summary",
]


def build_parser() -> Parser:
    parser = Parser(
        prog="acp-fast",
        description="Host a coding agent over the Agent Client Protocol.",
    )
    parser.add_argument("--version", action="version", version=f"acp-fast {acp_fast.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in (run, chat, journal, replay, bench, agents, login):
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``acp-fast`` command line; return the exit status."""
    received: list[int] = []
    previous = errors.stop_on((signal.SIGTERM, signal.SIGHUP), received)
    try:
        status = _main(argv)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 + received[0] if received else status


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    # parse_args would report an unknown option of a subcommand's with the top-level usage
    # (argparse leaves extras to the top parser): the subcommand's own parser reports them.
    args, extras = parser.parse_known_args(argv)
    chosen = _chosen(parser, args)
    if extras:
        chosen.error(f"unrecognized arguments: {' '.join(extras)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    # The subcommand's own parser, so its usage errors show its usage.
    return int(handler(_chosen(parser, args, deepest=False), args))


def _chosen(parser: Parser, args: argparse.Namespace, *, deepest: bool = True) -> Parser:
    """The parser of the subcommand `args` chose (``journal show``'s with `deepest`)."""
    chosen = parser
    while chosen._subparsers is not None:
        found: Parser | None = None
        for action in chosen._subparsers._group_actions:
            choices = getattr(action, "choices", None) or {}
            name = getattr(args, getattr(action, "dest", "") or "", None)
            parser_of = choices.get(name) if isinstance(name, str) else None
            if isinstance(parser_of, Parser):
                found = parser_of
        if found is None:
            return chosen
        chosen = found
        if not deepest:
            return chosen
    return chosen

"""``acp-fast replay PATH``: an ACP agent that plays a journal or transcript back (for
``--agent``); see `acp_fast.replay_agent`."""

from __future__ import annotations

import argparse
from typing import Any

from acp_fast import replay_agent

from .options import Parser, command_parser


def add_parser(commands: Any) -> None:
    replay = command_parser(
        commands,
        "replay",
        help="an ACP agent that plays a journal or transcript back (for --agent)",
        description="Run an ACP agent on stdin/stdout that plays a recorded conversation back "
        "to any client, checks the client's messages against the recording and says where "
        "they differ (on stderr). E.g. acp-fast run --agent 'acp-fast replay PATH' hello",
    )
    replay_agent.add_arguments(replay)
    replay.set_defaults(handler=run)


def run(parser: Parser, args: argparse.Namespace) -> int:
    return replay_agent.run(args.path, args.log, args.wait_cancel, args.epoch, args.map_path)

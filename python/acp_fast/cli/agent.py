"""Starting the agent for `run` and `chat`: the journal (a new epoch per run), the client with
the arguments' options, and the status line while the agent starts."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Any

import acp_fast
from acp_fast import journal as journal_module
from acp_fast._agent_spec import ask_mode_to_set
from acp_fast._text import printable_line

from . import options
from .options import Parser


def status(view: Any, text: str | None) -> None:
    """Tell the view what the CLI waits for (shown on a terminal after a second of silence)."""
    target = getattr(view, "screen", view)
    setter = getattr(target, "status", None)
    if setter is not None:
        setter(text)


def open_client(
    stack: ExitStack,
    parser: Parser,
    args: argparse.Namespace,
    command: list[str],
    observer: Any,
    live: Any,
    cwd: str | None,
) -> acp_fast.Client:
    """The journal (when asked for) around `observer`, then the client, both closed by
    `stack`; the client is not started."""
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
        attach = getattr(live if live is not None else observer, "attach_journal", None)
        if attach is not None:  # the footer counts its records
            attach(journal)
    settings = options.client_options(parser, args, watched, epoch)
    spec = getattr(args, "agent_spec", None)
    env = spec.environment() if spec is not None else None
    client = acp_fast.Client(command[0], args=command[1:], cwd=cwd, env=env, **settings)
    stack.enter_context(client)
    return client


def ask_host(client: acp_fast.Client, args: argparse.Namespace) -> str | None:
    """For a registry agent with a profile: switch the default session to the mode in which
    the agent asks the host. Returns a warning when the session stays in a mode where the
    agent decides permission requests by itself (the host's rules then decide nothing)."""
    spec = getattr(args, "agent_spec", None)
    session = client.default_session
    if spec is None or spec.profile is None or session is None:
        return None
    modes = session.modes
    offered = [mode.id for mode in modes.available]
    wanted = ask_mode_to_set(spec.profile, modes.current, offered)
    if wanted is not None:
        session.set_mode(wanted)
    current = session.modes.current
    if spec.profile.asks_in(current) is False:
        return (
            f"the agent is in mode {printable_line(current)!r}, in which it decides permission "
            "requests itself: --allow/--deny and your answers are not asked for"
        )
    return None


def protocol_note(client: acp_fast.Client, args: argparse.Namespace) -> str | None:
    """``acp-fast: speaking ACP v2 (--protocol auto)``, once the agent agreed, unless v1 was
    asked for and agreed (the default says nothing new); with --protocol auto and --fs or
    --terminal, what v2 leaves unserved too."""
    asked = getattr(args, "protocol", "v1")
    if asked == "v1":
        return None
    version = client.protocol_version
    if version is None:
        return None
    line = f"acp-fast: speaking ACP v{version} (--protocol {asked})"
    if version == 2 and (getattr(args, "fs", False) or getattr(args, "terminal", False)):
        line += "; v2 has no host side: --fs/--terminal are not offered"
    return line


def stderr_tail(client: acp_fast.Client | None) -> str:
    if client is None:
        return ""
    try:
        return client.stderr_tail()
    except Exception:  # a client that failed part-way: no tail to show
        return ""

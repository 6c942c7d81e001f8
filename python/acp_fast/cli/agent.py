"""Starting the agent for `run` and `chat`: the journal (a new epoch per run), the client with
the arguments' options, and the status line while the agent starts."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Any

import acp_fast
from acp_fast import journal as journal_module

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
    client = acp_fast.Client(command[0], args=command[1:], cwd=cwd, **settings)
    stack.enter_context(client)
    return client


def stderr_tail(client: acp_fast.Client | None) -> str:
    if client is None:
        return ""
    try:
        return client.stderr_tail()
    except Exception:  # a client that failed part-way: no tail to show
        return ""

"""What the journal tests share: journal factories for both kinds, made-up updates and
permission records, and a recording observer."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp_fast as acp
from acp_fast import journal

KINDS = ("jsonl", "sqlite")


def journal_path(tmp_path: Path, kind: str, name: str = "j") -> Path:
    # Deliberately misleading suffixes: the kind is told by content, never by name.
    return tmp_path / (f"{name}.log" if kind == "jsonl" else f"{name}.data")


def make(kind: str, path: Path, fsync: journal.Fsync = "batch", **kw: Any) -> Any:
    cls = journal.JsonlJournal if kind == "jsonl" else journal.SqliteJournal
    return cls(path, fsync, **kw)


def update(
    sequence: int,
    text: str = "hi",
    *,
    session: str = "s-1",
    epoch: int = 1,
    kind: str = "agent_message_chunk",
    envelope: str | None = None,
) -> acp.Update:
    if envelope is None:
        envelope = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": session,
                    "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}},
                },
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )
    return acp.Update(
        kind=kind,
        session_update=kind,
        transport_epoch=epoch,
        update_sequence=sequence,
        session_id=session,
        envelope=envelope,
        text=text,
    )


PERMISSION_LINE = (
    '{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":'
    '{"sessionId":"s-1","toolCall":{"toolCallId":"call-1","title":"Write a.txt","kind":"edit",'
    '"status":"pending"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},'
    '{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}'
)


def permission(outcome: str = "selected", option: str = "allow") -> acp.PermissionRequest:
    return acp.PermissionRequest(
        session_id="s-1",
        tool_call_id="call-1",
        title="Write a.txt",
        tool_kind="edit",
        status="pending",
        outcome=outcome,
        option_id=option,
        option_kind="allow_once" if option == "allow" else "reject_once",
        options=(
            acp.PermissionOption("allow", "Allow", "allow_once"),
            acp.PermissionOption("reject", "Reject", "reject_once"),
        ),
        envelope=PERMISSION_LINE,
        request_id="perm-1",
    )


@dataclass(frozen=True)
class Activity:
    """The shape of host.md's ClientActivity (the core does not have it yet)."""

    method: str
    allowed: bool
    path: str | None = None
    reason: str | None = None
    session_id: str = ""
    error_code: int | None = None


class Recorder:
    """An observer that keeps every callback it gets, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_update(self, value: Any) -> None:
        self.calls.append(("update", value))

    def on_permission_commit(self, value: Any) -> None:
        self.calls.append(("permission", value))

    def on_activity(self, value: Any) -> None:
        self.calls.append(("activity", value))

    def on_sent(self, value: str) -> None:
        self.calls.append(("sent", value))

    def on_received(self, value: str) -> None:
        self.calls.append(("received", value))


def records(path: Path) -> list[journal.JournalRecord]:
    return list(journal.read(path))


def file_size(path: Path) -> int:
    return os.path.getsize(path)

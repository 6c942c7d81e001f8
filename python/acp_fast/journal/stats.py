"""Summaries of a journal for `acp-fast journal stats`."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _json
from .reading import journal_kind, read
from .records import RecordKind, TornRecordWarning


@dataclass
class Turn:
    """One `session/prompt` call seen in the journal's wire lines."""

    session_id: str
    started: float
    ended: float | None = None
    stop_reason: str | None = None  # None: no answer recorded; "error" for an error answer
    updates: int = 0


@dataclass
class JournalStats:
    """What `summarize` found: counts, bytes and durations of a journal."""

    path: str
    kind: str
    file_bytes: int
    records: int = 0
    records_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    updates_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    update_bytes_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    envelope_bytes: int = 0
    permissions: dict[str, int] = dataclasses.field(default_factory=dict)
    turns: list[Turn] = dataclasses.field(default_factory=list)
    epochs: set[int] = dataclasses.field(default_factory=set)
    sessions: set[str] = dataclasses.field(default_factory=set)
    first_time: float | None = None
    last_time: float | None = None
    torn: bool = False

    @property
    def updates(self) -> int:
        return sum(self.updates_by_kind.values())


def _update_kind(envelope: str) -> str:
    # Fast path: the name right after `"sessionUpdate":"` (a plain identifier in practice);
    # anything unusual takes a full parse.
    at = envelope.find('"sessionUpdate":"')
    if at >= 0:
        start = at + 17
        end = envelope.find('"', start)
        name = envelope[start:end]
        if end > start and "\\" not in name and envelope.count('"sessionUpdate"') == 1:
            return name
    try:
        update = _json.loads_lenient(envelope)["params"]["update"]["sessionUpdate"]
    except (ValueError, KeyError, TypeError):
        return "unknown"
    return update if isinstance(update, str) else "unknown"


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def permission_label(fields: Mapping[str, Any]) -> str:
    """A permission decision in a few words: outcome, option, and the decision's reason."""
    label = f"{fields.get('outcome', '')} {fields.get('option_id', '')}".strip()
    reason = fields.get("reason")
    if reason:
        label += f" ({reason})"
    return label or "(none)"


def summarize(path: str | os.PathLike[str]) -> JournalStats:
    """Read a whole journal and count it (a torn final record is noted, not warned about)."""
    name = os.fspath(path)
    stats = JournalStats(name, journal_kind(name) or "", 0)
    stats.file_bytes = sum(os.path.getsize(p) for p in (name, name + "-wal") if os.path.exists(p))
    open_turns: dict[Any, Turn] = {}
    current: Turn | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TornRecordWarning)
        for record in read(name):
            stats.records += 1
            kind = record.kind.value
            stats.records_by_kind[kind] = stats.records_by_kind.get(kind, 0) + 1
            size = _utf8_len(record.envelope)
            stats.envelope_bytes += size
            stats.epochs.add(record.transport_epoch)
            if record.session_id:
                stats.sessions.add(record.session_id)
            if stats.first_time is None:
                stats.first_time = record.time
            stats.last_time = record.time
            if record.kind == RecordKind.UPDATE:
                update_kind = _update_kind(record.envelope)
                stats.updates_by_kind[update_kind] = stats.updates_by_kind.get(update_kind, 0) + 1
                stats.update_bytes_by_kind[update_kind] = (
                    stats.update_bytes_by_kind.get(update_kind, 0) + size
                )
                if current is not None:
                    current.updates += 1
            elif record.kind == RecordKind.PERMISSION:
                label = permission_label(record.fields)
                stats.permissions[label] = stats.permissions.get(label, 0) + 1
            elif record.kind in (RecordKind.SENT, RecordKind.RECEIVED):
                try:
                    message = _json.loads_lenient(record.envelope)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if record.kind == RecordKind.SENT and message.get("method") == "session/prompt":
                    current = Turn(record.session_id, record.time)
                    stats.turns.append(current)
                    open_turns[json.dumps(message.get("id"))] = current
                elif record.kind == RecordKind.RECEIVED and "method" not in message:
                    turn = open_turns.pop(json.dumps(message.get("id")), None)
                    if turn is not None:
                        turn.ended = record.time
                        result = message.get("result")
                        reason = result.get("stopReason") if isinstance(result, dict) else None
                        turn.stop_reason = reason if isinstance(reason, str) else "error"
                        if turn is current:
                            current = None
    stats.torn = any(issubclass(w.category, TornRecordWarning) for w in caught)
    return stats

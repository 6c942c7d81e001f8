"""The observer both journal kinds are: recording each callback, then forwarding it to a
wrapped observer."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import _json
from .._types import PermissionRequest
from .records import Fsync, RecordKind

if TYPE_CHECKING:
    from .._core import Update


def _record_fields(record: object) -> dict[str, Any]:
    """A permission or activity record as plain JSON values (envelope left out: it is stored
    verbatim). Any dataclass works, so fields the core adds later are kept."""
    out: dict[str, Any] = {}
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        names = [f.name for f in dataclasses.fields(record)]
    else:
        names = [n for n in vars(record) if not n.startswith("_")]
    for name in names:
        if name == "envelope":
            continue
        value = getattr(record, name)
        if name == "options":
            value = [
                {"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in value or ()
            ]
        elif isinstance(value, enum.Enum):
            value = value.value
        elif not isinstance(value, str | int | float | bool | type(None) | list | dict):
            value = str(value)
        out[name] = value
    return out


def _line_session(message: Any) -> str:
    """The session a JSON-RPC message names: params.sessionId, else result.sessionId."""
    if isinstance(message, dict):
        for key in ("params", "result"):
            inner = message.get(key)
            if isinstance(inner, dict):
                session = inner.get("sessionId")
                if isinstance(session, str):
                    return session
    return ""


def record_rest(
    session_id: str, envelope: str, fields: dict[str, Any] | None, is_json: bool
) -> bytes:
    """A record's text after its time (``"i":…`` up to the closing brace): the session, the
    fields, and the envelope, verbatim as ``"m"`` when `is_json` and on one line, else as the
    JSON string ``"x"``."""
    rest = f'"i":{json.dumps(session_id)}'
    if fields is not None:
        rest += ',"p":' + json.dumps(fields, separators=(",", ":"))
    if is_json and envelope and "\n" not in envelope:
        rest += f',"m":{envelope}}}'
    else:  # not JSON (or empty): kept as a string instead
        rest += f',"x":{json.dumps(envelope)}}}'
    return rest.encode("utf-8", "surrogatepass")


class _Writer(Protocol):
    """What a journal's writer does (`_core.JournalWriter`, `_core.SqliteWriter`, or
    `_SqliteFallback`): make records, store them in batches, flush, close."""

    @property
    def last_record(self) -> int: ...
    def update(self, update: Update) -> None: ...
    def other(self, kind: str, epoch: int | None, rest: bytes) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def forked(self) -> None: ...


class _Journal:
    """The observer plumbing both kinds share; the writer (`_writer`) makes and stores the
    records."""

    #: Set per instance: the writer's `update`, which records the update and then calls the
    #: wrapped observer's `on_update`. `on_permission` is set only when the wrapped observer
    #: has one, so the client sees no answer hook otherwise.
    on_update: Callable[[Update], None]
    on_permission: Callable[[PermissionRequest], Any]
    on_elicitation: Callable[[Any], Any]

    path: str
    fsync: Fsync
    #: The epoch of the last record found when the journal was opened (0: it was empty).
    last_transport_epoch: int
    _writer: _Writer

    def __init__(self, observer: object | None, transport_epoch: int | None) -> None:
        self._observer = observer
        #: Stamped on every record that is not an update (settable, e.g. once the caller has
        #: chosen the client's epoch from `last_transport_epoch`). None: the latest update's
        #: epoch, or before any update the last one found when the journal was opened.
        self.transport_epoch = transport_epoch
        inner_permission = getattr(observer, "on_permission", None)
        if inner_permission is not None:
            self.on_permission = inner_permission
        # Likewise: the client advertises elicitation only when an observer answers them.
        inner_elicitation = getattr(observer, "on_elicitation", None)
        if inner_elicitation is not None:
            self.on_elicitation = inner_elicitation

    def _start(self, writer: _Writer) -> None:
        self._writer = writer
        _WRITERS.add(writer)
        # The writer, not the journal: a dropped journal still stores its pending records.
        self._finalizer = weakref.finalize(self, writer.close)
        self.on_update = writer.update

    @property
    def last_record(self) -> int:
        """The number of the last record written (records are numbered from 1)."""
        return self._writer.last_record

    def _other(
        self,
        kind: RecordKind,
        session_id: str,
        envelope: str,
        fields: dict[str, Any] | None,
        is_json: bool = True,
    ) -> None:
        """Store a record that is not an update, and write it out at once. `is_json`: the
        envelope is one JSON value (stored verbatim) rather than any text."""
        self._writer.other(
            kind.value, self.transport_epoch, record_rest(session_id, envelope, fields, is_json)
        )

    def on_permission_commit(self, request: PermissionRequest) -> None:
        self._other(
            RecordKind.PERMISSION, request.session_id, request.envelope, _record_fields(request)
        )
        inner = getattr(self._observer, "on_permission_commit", None)
        if inner is not None:
            inner(request)

    def on_activity(self, activity: Any) -> None:
        session = str(getattr(activity, "session_id", "") or "")
        self._other(RecordKind.ACTIVITY, session, "", _record_fields(activity), is_json=False)
        inner = getattr(self._observer, "on_activity", None)
        if inner is not None:
            inner(activity)

    def on_sent(self, line: str) -> None:
        self._wire(RecordKind.SENT, line)
        inner = getattr(self._observer, "on_sent", None)
        if inner is not None:
            inner(line)

    def on_received(self, line: str) -> None:
        self._wire(RecordKind.RECEIVED, line)
        inner = getattr(self._observer, "on_received", None)
        if inner is not None:
            inner(line)

    def _wire(self, kind: RecordKind, line: str) -> None:
        try:
            # Deep values read as null: only the session id is wanted, and the line is
            # stored verbatim whatever its depth.
            message = _json.loads_lenient(line)
        except ValueError:
            self._other(kind, "", line, None, is_json=False)
            return
        self._other(kind, _line_session(message), line, None)

    def flush(self) -> None:
        """Store (and, unless fsync is "never", sync) every pending record now."""
        self._writer.flush()

    def close(self) -> None:
        """Store the pending records and close the journal. Idempotent."""
        self._finalizer()

    def __enter__(self) -> _Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Every live writer, told in a child made by fork() that its records are the parent's.
_WRITERS: weakref.WeakSet[_Writer] = weakref.WeakSet()


def _forked() -> None:
    for writer in list(_WRITERS):
        writer.forked()


os.register_at_fork(after_in_child=_forked)

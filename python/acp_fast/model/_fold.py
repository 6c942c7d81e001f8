"""The session fold: updates -> SessionState, pure (design/model.md §6).

States share structure: a ``Seq`` is a length-bounded view of an append-only list, so the
newest state appends in place (older states keep seeing their own length) and only a write
through an older state, or a replacement inside a list, copies. Appending a chunk is O(1)
amortized; folding N chunks is linear.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, TypeVar, overload

import msgspec

from .._errors import AcpError
from . import _generated as g
from ._base import OMITTED, Nullable
from ._pvec import PVec
from ._walk import UnknownUpdate

T = TypeVar("T")

__all__ = [
    "DuplicateToolCall",
    "FoldIssue",
    "InvalidTimestamp",
    "Message",
    "Seq",
    "SessionState",
    "SessionUpdateFoldError",
    "UnknownMode",
    "UnknownToolCall",
    "fold_updates",
    "session_update_apply",
    "session_update_fold",
]


class Seq(Sequence[T]):
    """An immutable sequence; equal to a tuple or Seq with the same items; pickles.

    Backed by a length-bounded view of an append-only list (messages, blocks: O(1) appends
    from the newest state) or by a persistent vector (tool calls: replacements in place).
    """

    __slots__ = ("_buf", "_n")

    _buf: list[T] | PVec[T]
    _n: int

    def __init__(self, items: Iterable[T] = ()) -> None:
        buf = list(items)
        object.__setattr__(self, "_buf", buf)
        object.__setattr__(self, "_n", len(buf))

    @classmethod
    def _view(cls, buf: list[T] | PVec[T], n: int) -> Seq[T]:
        s = object.__new__(cls)
        object.__setattr__(s, "_buf", buf)
        object.__setattr__(s, "_n", n)
        return s

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Seq is immutable")

    def appended(self, item: T) -> Seq[T]:
        buf, n = self._buf, self._n
        if type(buf) is PVec:
            return Seq._view(buf.appended(item), n + 1)
        assert isinstance(buf, list)
        if len(buf) == n:  # the newest view of this buffer: extend it in place
            buf.append(item)
            return Seq._view(buf, n + 1)
        return Seq._view([*buf[:n], item], n + 1)

    def replaced(self, index: int, item: T) -> Seq[T]:
        src = self._buf
        if isinstance(src, PVec):
            return Seq._view(src.replaced(index, item), self._n)
        buf = src[: self._n]
        buf[index] = item
        return Seq._view(buf, self._n)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...
    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        if isinstance(i, slice):
            return tuple(self)[i]
        n = self._n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("Seq index out of range")
        return self._buf[i]

    def __iter__(self) -> Iterator[T]:
        buf = self._buf
        if type(buf) is PVec:
            return iter(buf)
        assert isinstance(buf, list)
        return iter(buf[: self._n]) if len(buf) != self._n else iter(buf)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Seq):
            if self._n != other._n:
                return False
            if type(self._buf) is list and type(other._buf) is list:
                return self._buf[: self._n] == other._buf[: other._n]
            return tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return self._n == len(other) and tuple(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Seq({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Seq, (list(self),))


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a bucket: the blocks of its chunks, in arrival order."""

    message_id: Nullable[str]
    blocks: Seq[g.ContentBlock]


class SessionUpdateFoldError(AcpError):
    """An update cannot be folded into the state (strict mode)."""

    _fields: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._fields)

    # Equal by class and fields, so states holding FoldIssues compare by value.
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, SessionUpdateFoldError)
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._key())


class DuplicateToolCall(SessionUpdateFoldError):
    _fields = ("tool_call_id",)

    def __init__(self, tool_call_id: str) -> None:
        super().__init__(f"tool call {tool_call_id!r} already exists")
        self.tool_call_id = tool_call_id


class UnknownToolCall(SessionUpdateFoldError):
    _fields = ("tool_call_id",)

    def __init__(self, tool_call_id: str) -> None:
        super().__init__(f"no tool call {tool_call_id!r} to update")
        self.tool_call_id = tool_call_id


class UnknownMode(SessionUpdateFoldError):
    _fields = ("mode_id",)

    def __init__(self, mode_id: str) -> None:
        super().__init__(f"mode {mode_id!r} is not one of the session's modes")
        self.mode_id = mode_id


class InvalidTimestamp(SessionUpdateFoldError):
    _fields = ("field", "value")

    def __init__(self, field: str, value: str) -> None:
        super().__init__(f"{field} is not an RFC 3339 timestamp: {value!r}")
        self.field = field
        self.value = value


class FoldIssue(msgspec.Struct, frozen=True, kw_only=True):
    """What strict mode would have raised, and what lenient mode did instead."""

    error: SessionUpdateFoldError
    action: Literal["replaced", "ignored", "accepted"]


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))"
)


def is_rfc3339(text: str) -> bool:
    m = _RFC3339.fullmatch(text)
    if m is None:
        return False
    y, mo, d, hh, mm, ss = (int(x) for x in m.group(1, 2, 3, 4, 5, 6))
    try:
        datetime.date(y, mo, d)
    except ValueError:
        return False
    if hh > 23 or mm > 59 or ss > 60:  # 60: a leap second, as RFC 3339 allows
        return False
    oh, om = m.group(8), m.group(9)
    return oh is None or (int(oh) <= 23 and int(om) <= 59)


class _Bucket:
    """The messages of one kind: the finished ones in a shared ``Seq``, the last one apart, so
    a chunk for the last message costs O(1) and never copies the bucket."""

    __slots__ = ("_messages", "entries", "index", "last")

    def __init__(self, entries: Seq[Message], last: Message | None, index: dict[str, int]) -> None:
        self.entries = entries  # every message but the last
        self.last = last
        self.index = index  # message id -> position; shared like entries' buffer
        self._messages: Seq[Message] | None = None

    def messages(self) -> Seq[Message]:
        if self._messages is None:
            if self.last is None:
                self._messages = Seq()
            else:
                self._messages = Seq((*self.entries, self.last))
        return self._messages

    def add(self, message_id: Nullable[str], block: g.ContentBlock) -> _Bucket:
        entries, last, index = self.entries, self.last, self.index
        n = len(entries)
        if type(message_id) is str:
            pos = index.get(message_id)
            if pos is not None and last is not None:
                if pos == n and last.message_id == message_id:
                    grown = Message(message_id=message_id, blocks=last.blocks.appended(block))
                    return _Bucket(entries, grown, index)
                if pos < n:  # an earlier message resumed (keyed aggregation): copy
                    old = entries[pos]
                    grown = Message(message_id=message_id, blocks=old.blocks.appended(block))
                    return _Bucket(entries.replaced(pos, grown), last, dict(index))
        new = Message(message_id=message_id, blocks=Seq((block,)))
        if last is None:
            new_entries = entries
        else:
            new_entries = entries.appended(last)
            if new_entries._buf is not entries._buf:  # a branch: its own index
                index = {k: v for k, v in index.items() if v <= n}
        if type(message_id) is str:
            index[message_id] = len(new_entries)
        return _Bucket(new_entries, new, index)

    def upsert(self, message_id: str, blocks: Seq[g.ContentBlock]) -> _Bucket:
        """ACP v2's whole-message upsert: the message ``message_id`` now holds ``blocks``
        (replacing what its chunks and earlier upserts gave it); a new id is a new message."""
        entries, last, index = self.entries, self.last, self.index
        pos = index.get(message_id)
        n = len(entries)
        message = Message(message_id=message_id, blocks=blocks)
        if pos is not None and last is not None:
            if pos == n and last.message_id == message_id:
                return _Bucket(entries, message, index)
            if pos < n and entries[pos].message_id == message_id:
                return _Bucket(entries.replaced(pos, message), last, dict(index))
        if last is None:
            new_entries = entries
        else:
            new_entries = entries.appended(last)
            if new_entries._buf is not entries._buf:  # a branch: its own index
                index = {k: v for k, v in index.items() if v <= n}
        index[message_id] = len(new_entries)
        return _Bucket(new_entries, message, index)


def _empty_bucket() -> _Bucket:
    return _Bucket(Seq(), None, {})


def _empty_calls() -> Seq[Any]:
    return Seq._view(PVec(), 0)


class _Index:
    """Tool call id -> position, shared by a lineage of states: only the state holding the
    current owner token may extend it in place; any other copies it (a branch)."""

    __slots__ = ("map", "owner")

    def __init__(self, mapping: dict[str, int], owner: object) -> None:
        self.map = mapping
        self.owner = owner


def _new_index() -> _Index:
    return _Index({}, None)


class SessionState(msgspec.Struct, frozen=True, kw_only=True, eq=False):
    """The folded state of one session (model.md §6). Immutable; ``apply`` returns a new one.

    A Struct so that each apply is one C-level ``replace``; the underscored fields are the
    shared internals (message buckets, the tool-call index) and take no part in equality.
    """

    known_modes: tuple[str, ...] = ()
    tool_calls: Seq[g.ToolCall] = msgspec.field(default_factory=_empty_calls)
    plan: g.Plan | None = None
    available_commands: tuple[g.AvailableCommand, ...] = ()
    current_mode_id: str | None = None
    config_options: tuple[g.SessionConfigOption, ...] = ()
    session_title: Nullable[str] = OMITTED
    session_updated_at: Nullable[str] = OMITTED
    usage: g.UsageUpdate | None = None
    #: Each compaction, first-seen order, folded to its state: status, error and the whole
    #: summary (a ``compaction_update`` patches it, each ``compaction_summary_chunk`` appends
    #: to it). Notices are live events, not session history: they are not folded.
    compactions: Seq[g.CompactionUpdate] = msgspec.field(default_factory=_empty_calls)
    issues: Seq[FoldIssue] = msgspec.field(default_factory=Seq)
    #: ACP v2: the session's foreground activity from its latest ``state_update``
    #: (`SessionActivity` "running", "idle", "requires_action", or the agent's other value);
    #: None before one (and always in v1, which has no such update).
    activity: g.SessionActivity | str | None = None
    #: ACP v2: the stop reason of the latest ``state_update`` to "idle" (None before one).
    stop_reason: str | None = None
    #: ACP v2: the background work the latest ``state_update`` listed.
    background: tuple[g.BackgroundWork, ...] = ()
    #: ACP v2 (`session_update_fold(protocol_version=2)`): a ``tool_call_update`` or
    #: ``tool_call_content_chunk`` for an id not seen yet announces that tool call (v2's
    #: upsert) instead of being an `UnknownToolCall`.
    upserts: bool = False
    _user: _Bucket = msgspec.field(default_factory=_empty_bucket)
    _agent: _Bucket = msgspec.field(default_factory=_empty_bucket)
    _thought: _Bucket = msgspec.field(default_factory=_empty_bucket)
    _calls_index: _Index = msgspec.field(default_factory=_new_index)
    _calls_token: object = None
    _compactions_index: _Index = msgspec.field(default_factory=_new_index)
    _compactions_token: object = None

    @property
    def user_messages(self) -> Seq[Message]:
        return self._user.messages()

    @property
    def agent_messages(self) -> Seq[Message]:
        return self._agent.messages()

    @property
    def agent_thoughts(self) -> Seq[Message]:
        return self._thought.messages()

    def _copy(self, **changes: Any) -> SessionState:
        return msgspec.structs.replace(self, **changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionState):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _PUBLIC)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={getattr(self, n)!r}" for n in _PUBLIC)
        return f"SessionState({parts})"

    def tool_call(self, tool_call_id: str) -> g.ToolCall | None:
        pos = _call_position(self, tool_call_id)
        return None if pos is None else self.tool_calls[pos]

    def apply(
        self, update: g.SessionUpdate | UnknownUpdate, *, strict: bool = True
    ) -> SessionState:
        return session_update_apply(self, update, strict=strict)


_PUBLIC = (
    "known_modes",
    "user_messages",
    "agent_messages",
    "agent_thoughts",
    "tool_calls",
    "plan",
    "available_commands",
    "current_mode_id",
    "config_options",
    "session_title",
    "session_updated_at",
    "usage",
    "compactions",
    "issues",
    "activity",
    "stop_reason",
    "background",
)


def session_update_fold(
    known_modes: Iterable[str] = (), *, protocol_version: int = 1
) -> SessionState:
    """The empty state of a session whose modes are ``known_modes``; ``protocol_version=2``
    folds ACP v2's tool-call upserts (see `SessionState.upserts`)."""
    return SessionState(known_modes=tuple(known_modes), upserts=protocol_version >= 2)


_TCU_FIELDS = ("name", "kind", "status", "content", "locations", "raw_input", "raw_output", "meta")


def _issue(st: SessionState, error: SessionUpdateFoldError, action: str) -> Seq[FoldIssue]:
    return st.issues.appended(FoldIssue(error=error, action=action))  # type: ignore[arg-type]


def _call_position(state: SessionState, tool_call_id: str) -> int | None:
    # The shared index may hold ids other states added: trust it only where it agrees.
    pos = state._calls_index.map.get(tool_call_id)
    calls = state.tool_calls
    if pos is None or pos >= len(calls) or calls[pos].tool_call_id != tool_call_id:
        return None
    return pos


def session_update_apply(
    state: SessionState, update: g.SessionUpdate | UnknownUpdate, *, strict: bool = True
) -> SessionState:
    """Fold one update into ``state``; returns a new state, ``state`` is never changed."""
    t = type(update)
    if t is g.AgentMessageChunk or t is g.UserMessageChunk or t is g.AgentThoughtChunk:
        u: Any = update
        slot = (
            "_agent"
            if t is g.AgentMessageChunk
            else "_user"
            if t is g.UserMessageChunk
            else "_thought"
        )
        bucket: _Bucket = getattr(state, slot)
        return state._copy(**{slot: bucket.add(u.message_id, u.content)})
    if t is g.AgentMessage or t is g.UserMessage or t is g.AgentThought:
        m: Any = update
        if m.content is OMITTED:  # patch semantics: no content, no change (but the id exists)
            known = getattr(state, _UPSERT_SLOTS[t]).index.get(m.message_id)
            if known is not None:
                return state
        slot = _UPSERT_SLOTS[t]
        blocks: Seq[Any] = Seq(() if m.content in (OMITTED, None) else m.content)
        return state._copy(**{slot: getattr(state, slot).upsert(m.message_id, blocks)})
    if t is g.StateUpdate:
        st: g.StateUpdate = update  # type: ignore[assignment]
        changes_: dict[str, Any] = {"activity": st.state}
        if st.state == "idle":
            reason = st.stop_reason
            changes_["stop_reason"] = reason if type(reason) is str else None
        if st.background is not OMITTED:
            changes_["background"] = tuple(st.background or ())
        return state._copy(**changes_)
    if t is g.ToolCallContentChunk:
        chunk: g.ToolCallContentChunk = update  # type: ignore[assignment]
        pos = _call_position(state, chunk.tool_call_id)
        if pos is None:
            state = _announce(state, chunk.tool_call_id, strict)
            pos = _call_position(state, chunk.tool_call_id)
            if pos is None:  # lenient v1: the issue is recorded, nothing to append to
                return state
        calls = state.tool_calls
        old_call = calls[pos]
        content = old_call.content if type(old_call.content) is tuple else ()
        grown = msgspec.structs.replace(old_call, content=(*content, chunk.content))
        return state._copy(tool_calls=calls.replaced(pos, grown))
    if t is g.PlanUpdate:
        plan = update.plan  # type: ignore[union-attr]
        if plan.type == "items" and type(plan.entries) is tuple:
            return state._copy(plan=g.Plan(entries=plan.entries))
        return state  # another kind of plan content: not folded
    if t is g.TerminalUpdate or t is g.TerminalOutputChunk:
        return state  # an agent-owned terminal's display: not session history
    if t is g.ToolCall:
        call: g.ToolCall = update  # type: ignore[assignment]
        pos = _call_position(state, call.tool_call_id)
        calls = state.tool_calls
        if pos is not None:
            err = DuplicateToolCall(call.tool_call_id)
            if strict:
                raise err
            return state._copy(
                tool_calls=calls.replaced(pos, call), issues=_issue(state, err, "replaced")
            )
        index, token = state._calls_index, object()
        if index.owner is not state._calls_token:  # another state extended it: branch
            index = _Index(
                {k: v for k, v in index.map.items() if _call_position(state, k) == v}, None
            )
        index.map[call.tool_call_id] = len(calls)
        index.owner = token
        return state._copy(tool_calls=calls.appended(call), _calls_index=index, _calls_token=token)
    if t is g.ToolCallUpdate:
        tcu: g.ToolCallUpdate = update  # type: ignore[assignment]
        pos = _call_position(state, tcu.tool_call_id)
        if pos is None and state.upserts:
            state = _announce(state, tcu.tool_call_id, strict)
            pos = _call_position(state, tcu.tool_call_id)
        calls = state.tool_calls
        if pos is None:
            err2 = UnknownToolCall(tcu.tool_call_id)
            if strict:
                raise err2
            return state._copy(issues=_issue(state, err2, "ignored"))
        old = calls[pos]
        changes: dict[str, Any] = {}
        for name in _TCU_FIELDS:
            v = getattr(tcu, name)
            if v is OMITTED:
                continue
            changes[name] = OMITTED if v is None else v
        if type(tcu.title) is str:  # a null title keeps the old one: title is required
            changes["title"] = tcu.title
        new_call = msgspec.structs.replace(old, **changes) if changes else old
        return state._copy(tool_calls=calls.replaced(pos, new_call))
    if t is g.Plan:
        return state._copy(plan=update)
    if t is g.AvailableCommandsUpdate:
        return state._copy(available_commands=update.available_commands)  # type: ignore[union-attr]
    if t is g.ConfigOptionUpdate:
        return state._copy(config_options=update.config_options)  # type: ignore[union-attr]
    if t is g.CurrentModeUpdate:
        mode = update.current_mode_id  # type: ignore[union-attr]
        if mode not in state.known_modes:
            err3 = UnknownMode(mode)
            if strict:
                raise err3
            return state._copy(current_mode_id=mode, issues=_issue(state, err3, "accepted"))
        return state._copy(current_mode_id=mode)
    if t is g.SessionInfoUpdate:
        info: g.SessionInfoUpdate = update  # type: ignore[assignment]
        ch: dict[str, Any] = {}
        issues = state.issues
        if info.updated_at is not OMITTED:
            at = info.updated_at
            if type(at) is str and not is_rfc3339(at):
                err4 = InvalidTimestamp("updatedAt", at)
                if strict:
                    raise err4
                issues = _issue(state, err4, "accepted")
            ch["session_updated_at"] = at
        if info.title is not OMITTED:
            ch["session_title"] = info.title
        return state._copy(issues=issues, **ch)
    if t is g.UsageUpdate:
        return state._copy(usage=update)
    if t is UnknownUpdate:
        return state
    if t is g.CompactionUpdate or t is g.CompactionSummaryChunk:
        return _compaction(state, update)  # type: ignore[arg-type]
    if t is g.Notice:
        return state  # a live event for the user, not session history (schema 1.25)
    raise TypeError(f"not a session update: {t.__name__}")


_UPSERT_SLOTS: dict[type[Any], str] = {
    g.AgentMessage: "_agent",
    g.UserMessage: "_user",
    g.AgentThought: "_thought",
}


def _announce(state: SessionState, tool_call_id: str, strict: bool) -> SessionState:
    """A tool call first seen in an update that patches one: in v2 (upserts) a new call with
    the protocol's defaults (no title, kind "other", status "pending"); in v1 what an update
    of an unknown call is (`UnknownToolCall`, raised or recorded)."""
    if not state.upserts:
        err = UnknownToolCall(tool_call_id)
        if strict:
            raise err
        return state._copy(issues=_issue(state, err, "ignored"))
    return session_update_apply(
        state, g.ToolCall(tool_call_id=tool_call_id, title=""), strict=strict
    )


_COMPACTION_PATCH = ("summary", "error", "meta")


def _compaction(
    state: SessionState, update: g.CompactionUpdate | g.CompactionSummaryChunk
) -> SessionState:
    """A compaction upsert (status set; summary, error and _meta patched: omitted keeps,
    null or ``summary: []`` clears) or a summary chunk (appended; a first-seen id creates an
    in-progress compaction), into ``state.compactions``."""
    compaction_id = update.compaction_id
    items = state.compactions
    pos = state._compactions_index.map.get(compaction_id)
    if pos is not None and (pos >= len(items) or items[pos].compaction_id != compaction_id):
        pos = None  # the shared index holds another state's entry
    old = items[pos] if pos is not None else None
    if type(update) is g.CompactionSummaryChunk:
        if old is None:
            old = g.CompactionUpdate(compaction_id=compaction_id, status="in_progress")
        summary = old.summary
        blocks: Seq[Any] = summary if isinstance(summary, Seq) else Seq(summary or ())
        new = msgspec.structs.replace(old, summary=blocks.appended(update.content))
    else:
        patch: g.CompactionUpdate = update  # type: ignore[assignment]
        changes: dict[str, Any] = {"status": patch.status}
        for name in _COMPACTION_PATCH:
            value = getattr(patch, name)
            if value is OMITTED:
                continue
            if value is None or (name == "summary" and len(value) == 0):
                changes[name] = OMITTED
            elif name == "summary":
                changes[name] = Seq(value)
            else:
                changes[name] = value
        base = (
            old if old is not None else g.CompactionUpdate(compaction_id=compaction_id, status="")
        )
        new = msgspec.structs.replace(base, **changes)
    if pos is not None:
        return state._copy(compactions=items.replaced(pos, new))
    index, token = state._compactions_index, object()
    if index.owner is not state._compactions_token:  # another state extended it: branch
        index = _Index(
            {k: v for k, v in index.map.items() if v < len(items) and items[v].compaction_id == k},
            None,
        )
    index.map[compaction_id] = len(items)
    index.owner = token
    return state._copy(
        compactions=items.appended(new), _compactions_index=index, _compactions_token=token
    )


def fold_updates(
    updates: Iterable[Any],
    *,
    known_modes: Iterable[str] = (),
    strict: bool = True,
    protocol_version: int = 1,
) -> SessionState:
    """Fold model updates (or ``acp.Update`` items, decoded with the same ``strict``);
    ``protocol_version`` as for `session_update_fold`."""
    st = session_update_fold(known_modes, protocol_version=protocol_version)
    for u in updates:
        if not isinstance(u, (msgspec.Struct,)):
            u = u.decode(strict=strict)
        st = session_update_apply(st, u, strict=strict)
    return st

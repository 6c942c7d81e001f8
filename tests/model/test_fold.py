"""The session fold: the aggregation table of model.md §6 and its laws."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from acp_fast import model as m
from hypothesis import given, settings
from hypothesis import strategies as st


def text(t: str) -> m.TextContent:
    return m.TextContent(text=t)


def agent(t: str, mid: Any = m.OMITTED) -> m.AgentMessageChunk:
    return m.AgentMessageChunk(content=text(t), message_id=mid)


def call(cid: str, title: str = "t", **kw: Any) -> m.ToolCall:
    return m.ToolCall(tool_call_id=cid, title=title, **kw)


def fold(*updates: Any, strict: bool = True, modes: tuple[str, ...] = ()) -> m.SessionState:
    return m.fold_updates(updates, known_modes=modes, strict=strict)


def test_chunks_keyed_by_message_id_and_buckets_never_merge() -> None:
    s = fold(
        agent("a", "m1"),
        agent("b", "m2"),
        agent("c", "m1"),
        m.UserMessageChunk(content=text("u"), message_id="m1"),
        m.AgentThoughtChunk(content=text("t")),
    )
    assert [msg.message_id for msg in s.agent_messages] == ["m1", "m2"]
    assert s.agent_messages[0].blocks == (text("a"), text("c"))
    assert len(s.user_messages) == 1 and len(s.agent_thoughts) == 1


def test_chunks_without_id_are_standalone_and_keep_omitted_or_none() -> None:
    s = fold(agent("a"), agent("b", None), agent("c"))
    assert [msg.message_id for msg in s.agent_messages] == [m.OMITTED, None, m.OMITTED]


def test_tool_call_duplicate_strict_raises_lenient_replaces_in_place() -> None:
    with pytest.raises(m.DuplicateToolCall) as info:
        fold(call("a"), call("a"))
    assert info.value.tool_call_id == "a"
    s = fold(call("a"), call("b"), call("a", "new"), strict=False)
    assert [c.title for c in s.tool_calls] == ["new", "t"]
    assert s.issues[0].action == "replaced"
    assert isinstance(s.issues[0].error, m.DuplicateToolCall)


def test_tool_call_update_fields_keep_reset_replace() -> None:
    content = (m.Terminal(terminal_id="x"),)
    s = fold(
        call("a", kind=m.ToolKind.EDIT, status=m.ToolCallStatus.PENDING, content=content),
        m.ToolCallUpdate(
            tool_call_id="a",
            status=m.ToolCallStatus.COMPLETED,
            kind=None,
            title=None,
            locations=(m.ToolCallLocation(path="/p"),),
        ),
    )
    c = s.tool_call("a")
    assert c is not None
    assert c.status == m.ToolCallStatus.COMPLETED and c.kind is m.OMITTED
    assert c.title == "t" and c.content == content
    assert c.locations == (m.ToolCallLocation(path="/p"),)
    s2 = s.apply(m.ToolCallUpdate(tool_call_id="a", content=()))
    assert s2.tool_calls[0].content == ()  # replaces the tuple, never appends


def test_a_tool_call_update_carries_the_name_into_the_folded_call() -> None:
    """Schema 1.22's tool call `name`: an update's name replaces the call's, an omitted one
    keeps it (the other fields behave the same)."""
    s = fold(call("a", name="Write"), m.ToolCallUpdate(tool_call_id="a", name="Edit"))
    assert s.tool_calls[0].name == "Edit"
    kept = s.apply(m.ToolCallUpdate(tool_call_id="a", status=m.ToolCallStatus.COMPLETED))
    assert kept.tool_calls[0].name == "Edit"


def test_tool_call_update_unknown_id() -> None:
    with pytest.raises(m.UnknownToolCall):
        fold(m.ToolCallUpdate(tool_call_id="zz"))
    s = fold(m.ToolCallUpdate(tool_call_id="zz"), strict=False)
    assert s.tool_calls == () and s.issues[0].action == "ignored"


def test_plan_commands_config_usage_replace_whole() -> None:
    plan = m.Plan(entries=())
    cmd = m.AvailableCommand(name="c", description="d")
    opt = m.SessionConfigOption(id="o", name="O", kind=m.SessionConfigBoolean(current_value=False))
    usage = m.UsageUpdate(used=1, size=2)
    s = fold(
        m.Plan(
            entries=(
                m.PlanEntry(
                    content="x", priority=m.PlanEntryPriority.LOW, status=m.PlanEntryStatus.PENDING
                ),
            )
        ),
        plan,
        m.AvailableCommandsUpdate(available_commands=(cmd, cmd)),
        m.AvailableCommandsUpdate(available_commands=(cmd,)),
        m.ConfigOptionUpdate(config_options=(opt,)),
        usage,
    )
    assert s.plan == plan and s.plan is not None
    assert s.available_commands == (cmd,) and s.config_options == (opt,) and s.usage == usage


def test_current_mode_known_unknown_lenient() -> None:
    assert fold(m.CurrentModeUpdate(current_mode_id="ask"), modes=("ask",)).current_mode_id == (
        "ask"
    )
    with pytest.raises(m.UnknownMode):
        fold(m.CurrentModeUpdate(current_mode_id="ask"))
    s = fold(m.CurrentModeUpdate(current_mode_id="x"), modes=("ask",), strict=False)
    assert s.current_mode_id == "x" and s.known_modes == ("ask",)
    assert s.issues[0].action == "accepted"


@pytest.mark.parametrize(
    "good", ["2026-02-28T10:00:00Z", "2024-02-29t23:59:60.5+05:30", "2026-01-01T00:00:00-00:00"]
)
def test_session_info_valid_timestamps(good: str) -> None:
    s = fold(m.SessionInfoUpdate(title="T", updated_at=good))
    assert (s.session_title, s.session_updated_at) == ("T", good)


@pytest.mark.parametrize(
    "bad",
    [
        "2026-02-30T10:00:00Z",
        "2026-01-01 10:00:00Z",
        "yesterday",
        "2026-01-01T24:00:00Z",
        "2026-01-01T10:00:00",
    ],
)
def test_session_info_invalid_timestamp_applies_nothing(bad: str) -> None:
    before = fold(m.SessionInfoUpdate(title="old"))
    with pytest.raises(m.InvalidTimestamp) as info:
        before.apply(m.SessionInfoUpdate(title="new", updated_at=bad))
    assert (info.value.field, info.value.value) == ("updatedAt", bad)
    lenient = before.apply(m.SessionInfoUpdate(title="new", updated_at=bad), strict=False)
    assert lenient.session_updated_at == bad and lenient.issues[0].action == "accepted"


def test_session_info_null_clears_omitted_keeps() -> None:
    s = fold(m.SessionInfoUpdate(title="T"), m.SessionInfoUpdate(updated_at=None))
    assert s.session_title == "T" and s.session_updated_at is None
    assert fold(m.SessionInfoUpdate(title=None)).session_title is None
    assert fold().session_title is m.OMITTED


def test_unknown_update_is_ignored() -> None:
    s = fold(m.UnknownUpdate(session_update="x", raw={}))
    assert s == m.session_update_fold()


def test_state_is_immutable_and_pickles() -> None:
    s = fold(agent("a", "m"), call("c"), m.SessionInfoUpdate(title="t"))
    with pytest.raises(AttributeError):
        s.plan = None  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(s)) == s
    assert m.Seq([1, 2]) == (1, 2) and m.Seq([1, 2])[1:] == (2,)
    assert pickle.loads(pickle.dumps(m.Seq([1]))) == m.Seq([1])


def test_older_states_are_unchanged_by_later_and_branching_applies() -> None:
    s1 = fold(agent("a", "m"), call("c"))
    s2 = s1.apply(agent("b", "m"))
    s3 = s1.apply(agent("x", "m"))  # a branch from the older state
    s4 = s1.apply(agent("y", "n")).apply(call("d"))
    assert s1.agent_messages[0].blocks == (text("a"),)
    assert s2.agent_messages[0].blocks == (text("a"), text("b"))
    assert s3.agent_messages[0].blocks == (text("a"), text("x"))
    assert len(s4.agent_messages) == 2 and len(s1.tool_calls) == 1
    assert s3.tool_call("d") is None and s4.tool_call("d") is not None


# -- laws -------------------------------------------------------------------------------------

ids = st.sampled_from(["m1", "m2", "m3", None, m.OMITTED])
cids = st.sampled_from(["a", "b", "c"])
updates = st.one_of(
    st.builds(agent, st.text(max_size=3), ids),
    st.builds(
        lambda t, i: m.UserMessageChunk(content=text(t), message_id=i), st.text(max_size=3), ids
    ),
    st.builds(lambda c, t: call(c, t), cids, st.text(max_size=3)),
    st.builds(
        lambda c, t: m.ToolCallUpdate(tool_call_id=c, title=t),
        cids,
        st.one_of(st.none(), st.text(max_size=3)),
    ),
    st.builds(lambda i: m.CurrentModeUpdate(current_mode_id=i), st.sampled_from(["ask", "x"])),
    st.builds(
        lambda at: m.SessionInfoUpdate(updated_at=at),
        st.sampled_from(["2026-01-01T00:00:00Z", "bad", None]),
    ),
)


def fold_from(state: m.SessionState, us: list[Any], strict: bool) -> m.SessionState:
    for u in us:
        state = state.apply(u, strict=strict)
    return state


@settings(max_examples=150, deadline=None)
@given(st.lists(updates, max_size=25), st.integers(0, 25))
def test_folding_prefix_then_rest_equals_folding_all(us: list[Any], cut: int) -> None:
    whole = m.fold_updates(us, known_modes=("ask",), strict=False)
    prefix = m.fold_updates(us[:cut], known_modes=("ask",), strict=False)
    assert fold_from(prefix, us[cut:], False) == whole


@settings(max_examples=150, deadline=None)
@given(st.lists(updates, max_size=25))
def test_a_strict_error_leaves_the_state_equal_to_before(us: list[Any]) -> None:
    state = m.session_update_fold(("ask",))
    for u in us:
        before = pickle.loads(pickle.dumps(state))
        try:
            state = state.apply(u)
        except m.SessionUpdateFoldError:
            assert state == before  # unchanged, and still usable
    assert isinstance(state, m.SessionState)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), min_size=1, max_size=1500))
def test_persistent_vector_matches_a_list_and_keeps_every_version(ops: list[Any]) -> None:
    from acp_fast.model._pvec import PVec

    vec: PVec[int] = PVec()
    ref: list[int] = []
    versions = []
    for replace, x in ops:
        if replace and ref:
            i = x % len(ref)
            vec, ref = vec.replaced(i, -x), [*ref[:i], -x, *ref[i + 1 :]]
        else:
            vec, ref = vec.appended(x), [*ref, x]
        versions.append((vec, ref))
    for v, r in versions[:: max(1, len(versions) // 20)]:
        assert list(v) == r and len(v) == len(r) and (not r or v[len(r) - 1] == r[-1])


def test_tool_calls_branch_from_older_states() -> None:
    base = fold(*(call(f"c{i}") for i in range(40)))
    a = base.apply(call("x")).apply(m.ToolCallUpdate(tool_call_id="c3", title="A"))
    b = base.apply(call("y")).apply(m.ToolCallUpdate(tool_call_id="c3", title="B"))
    assert base.tool_call("c3").title == "t"  # type: ignore[union-attr]
    assert a.tool_call("c3").title == "A" and b.tool_call("c3").title == "B"  # type: ignore[union-attr]
    assert a.tool_call("y") is None and b.tool_call("x") is None
    assert a.tool_call("x") is not None and b.tool_call("y") is not None
    assert [c.tool_call_id for c in b.tool_calls][-1] == "y" and len(a.tool_calls) == 41
    with pytest.raises(m.DuplicateToolCall):
        b.apply(call("y"))
    assert a.apply(call("y")).tool_call("y") is not None


class _Delivered:
    """Stands in for acp.Update: anything with decode(strict=...) folds."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params

    def decode(self, *, strict: bool = True) -> Any:
        return m.decode_update(self.params, strict=strict)


def test_fold_updates_decodes_delivered_updates_with_the_same_strictness() -> None:
    chunk = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"},
        },
    }
    odd = {"sessionId": "s", "update": {"sessionUpdate": "future_thing"}}
    s = m.fold_updates([_Delivered(chunk), _Delivered(odd)], strict=False)
    assert s.agent_messages[0].blocks == (text("hi"),)
    with pytest.raises(m.ProtocolDecodeError):
        m.fold_updates([_Delivered(chunk), _Delivered(odd)])
    assert m.UnknownUpdate(session_update="x", raw={}).update_kind == "unknown"

"""`PermissionRule(name=…)` (protocol-now.md §2): matches the tool call's `name` (the request's
own, else the one its `tool_call` announced); exact and case-sensitive as a str, searched as a
pattern; a request without a name never matches; hostile names are bounded as titles are."""

from __future__ import annotations

import json
import re

import acp_fast as acp
import pytest

from .conftest import update

OPTIONS = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


def ask(tool_call: dict[str, object], request_id: str = "p1") -> str:
    params = {"sessionId": "s1", "toolCall": tool_call, "options": OPTIONS}
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/request_permission",
            "params": params,
        }
    )


def decided(run, policy: acp.PermissionPolicy) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    run.client.permission_policy = policy
    run.client.default_session.prompt("go")
    return [(p.decision, p.reason) for p in run.observer.permissions]


def allow_named(name: object) -> acp.PermissionPolicy:
    return acp.PermissionPolicy(allow=[acp.PermissionRule(name=name)])  # type: ignore[arg-type]


def test_the_requests_own_name_matches_exactly(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[
            ask({"toolCallId": "t1", "title": "run", "name": "Bash"}, "p1"),
            ask({"toolCallId": "t2", "title": "run", "name": "BashOutput"}, "p2"),
            ask({"toolCallId": "t3", "title": "run", "name": "bash"}, "p3"),
            ask({"toolCallId": "t4", "title": "Bash"}, "p4"),  # no name: title is not a name
        ]
    )
    assert decided(run, allow_named("Bash")) == [
        ("allow", "allow rule 0"),
        ("deny", "default"),
        ("deny", "default"),
        ("deny", "default"),
    ]
    assert run.answer("p1")["result"]["outcome"] == {"outcome": "selected", "optionId": "yes"}


def test_the_announced_name_is_used_when_the_request_has_none(agent) -> None:  # type: ignore[no-untyped-def]
    announce = update(
        '{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x","kind":"execute","name":"Bash"}'
    )
    run = agent(turn=[announce, ask({"toolCallId": "t1", "title": "x"})])
    assert decided(run, allow_named("Bash")) == [("allow", "allow rule 0")]
    assert run.answer("p1")["result"]["outcome"]["optionId"] == "yes"


def test_a_deny_name_rule_wins_over_an_allow_kind_rule(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(turn=[ask({"toolCallId": "t1", "title": "x", "kind": "execute", "name": "Bash"})])
    policy = acp.PermissionPolicy(
        allow=[acp.PermissionRule(kind="execute")],
        deny=[acp.PermissionRule(kind="execute", name="Bash")],
    )
    assert decided(run, policy) == [("deny", "deny rule 0")]


def test_regex_looking_text_is_plain_text(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[
            ask({"toolCallId": "t1", "title": "x", "name": "Bash"}, "p1"),
            ask({"toolCallId": "t2", "title": "x", "name": ".*"}, "p2"),
        ]
    )
    assert decided(run, allow_named(".*")) == [("deny", "default"), ("allow", "allow rule 0")]


def test_a_pattern_searches_the_name(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[
            ask({"toolCallId": "t1", "title": "x", "name": "mcp__github__create_issue"}, "p1"),
            ask({"toolCallId": "t2", "title": "x", "name": "Edit"}, "p2"),
            ask({"toolCallId": "t3", "title": "mcp__x"}, "p3"),
        ]
    )
    assert decided(run, allow_named(re.compile(r"^mcp__github__"))) == [
        ("allow", "allow rule 0"),
        ("deny", "default"),
        ("deny", "default"),
    ]


def test_hostile_names(agent) -> None:  # type: ignore[no-untyped-def]
    huge = "mcp__" + "A" * (1 << 20)  # 1 MiB: past the 16 KiB a pattern looks at
    control = "Bash\x00\x1b[2J"
    run = agent(
        turn=[
            ask({"toolCallId": "t1", "title": "x", "name": huge}, "p1"),
            ask({"toolCallId": "t2", "title": "x", "name": control}, "p2"),
            ask({"toolCallId": "t3", "title": "x", "name": ["Bash"]}, "p3"),  # not a string
            ask({"toolCallId": "t4", "title": "x", "name": None}, "p4"),
        ]
    )
    policy = acp.PermissionPolicy(
        allow=[acp.PermissionRule(name=re.compile("^mcp__")), acp.PermissionRule(name="Bash")],
        deny=[acp.PermissionRule(name=re.compile("A{5}$"))],
    )
    decisions = decided(run, policy)
    # The huge name is not searched: the deny pattern matches it (fail closed), no allow does.
    assert decisions[0] == ("deny", "deny rule 0")
    assert decisions[1:] == [("deny", "default")] * 3  # control bytes: not "Bash"; others: no name
    allow_only = agent(turn=[ask({"toolCallId": "t1", "title": "x", "name": huge})])
    assert decided(allow_only, allow_named(re.compile("^mcp__"))) == [("deny", "default")]


def test_the_name_field_is_checked() -> None:
    with pytest.raises(TypeError, match=r"PermissionRule\.name must be"):
        acp.PermissionRule(name=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"PermissionRule\.name must be"):
        acp.PermissionRule(name=re.compile(b"x"))  # type: ignore[arg-type]
    assert acp.PermissionRule(name="Bash").name == "Bash"


def test_a_name_pattern_the_core_cannot_use_is_refused(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent()
    with pytest.raises(ValueError, match=r"allow\[0\]: the name pattern"):
        run.client.permission_policy = allow_named(re.compile(r"(?=x)"))


class Seen:
    """Keeps the previews `on_permission` is shown (abstaining) and the committed records."""

    def __init__(self) -> None:
        self.previews: list[acp.PermissionRequest] = []
        self.permissions: list[acp.PermissionRequest] = []

    def on_permission(self, request: acp.PermissionRequest) -> None:
        self.previews.append(request)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.permissions.append(request)


def test_the_record_carries_the_name(agent) -> None:  # type: ignore[no-untyped-def]
    announce = update('{"sessionUpdate":"tool_call","toolCallId":"t2","title":"x","name":"Edit"}')
    seen = Seen()
    run = agent(
        turn=[
            ask({"toolCallId": "t1", "title": "x", "name": "Bash\x1b[2J"}, "p1"),
            announce,
            ask({"toolCallId": "t2", "title": "x"}, "p2"),
            ask({"toolCallId": "t3", "title": "x"}, "p3"),
        ],
        observer=seen,
    )
    run.client.default_session.prompt("go")
    assert [p.tool_name for p in seen.previews] == ["Bash\x1b[2J", "Edit", ""]
    assert [p.tool_name for p in seen.permissions] == ["Bash\x1b[2J", "Edit", ""]


def test_the_name_is_journaled_and_read_back(agent, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from acp_fast import journal

    path = tmp_path / "j.jsonl"
    observer = journal.JsonlJournal(path)
    run = agent(turn=[ask({"toolCallId": "t1", "title": "x", "name": "Bash"})], observer=observer)
    run.client.default_session.prompt("go")
    run.client.close()
    observer.close()
    (record,) = [r for r in journal.read(path) if r.kind is journal.RecordKind.PERMISSION]
    assert record.permission().tool_name == "Bash"
    # A record written before the field existed reads back with the default.
    old = dict(record.fields)
    old.pop("tool_name")
    assert journal.JournalRecord(**{**record.__dict__, "fields": old}).permission().tool_name == ""

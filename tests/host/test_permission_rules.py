"""Permission rules (design/host.md §5) with the scripted host agent: every tier, the option
choice, the record's decision and reason, and the policy set between calls; in ACP v1 and v2
(v2's request: the rules see its `title` and its `subject.toolCall`)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import PermissionDecision as D
from acp_fast import PermissionRule as Rule

from .conftest import MakeClient, Recorder, run


@pytest.fixture
def host_protocol(protocol: str) -> str:
    """The rules are the same in both versions: every test runs in each."""
    return protocol


ONCE_ALWAYS = [
    {"optionId": "ao", "name": "Allow", "kind": "allow_once"},
    {"optionId": "aa", "name": "Always", "kind": "allow_always"},
    {"optionId": "ro", "name": "Reject", "kind": "reject_once"},
    {"optionId": "ra", "name": "Never", "kind": "reject_always"},
]


def ask(
    title: str | None = "edit file",
    kind: str | None = "edit",
    options: list[dict[str, str]] | None = None,
    tool_call_id: str = "t1",
) -> dict[str, Any]:
    tool: dict[str, Any] = {"toolCallId": tool_call_id}
    if title is not None:
        tool["title"] = title
    if kind is not None:
        tool["kind"] = kind
    return {
        "request": {
            "method": "session/request_permission",
            "params": {"toolCall": tool, "options": ONCE_ALWAYS if options is None else options},
        }
    }


def outcome(answer: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = answer["result"]["outcome"]
    return result


def decided(
    make: MakeClient, policy: acp.PermissionPolicy, *steps: dict[str, Any], **kw: Any
) -> tuple[list[dict[str, Any]], Recorder]:
    client, recorder = make(permission_policy=policy, **kw)
    return run(client, list(steps)), recorder


def test_deny_beats_allow_and_the_observer_is_not_asked(make_host_client: MakeClient) -> None:
    policy = acp.PermissionPolicy(allow=[Rule(kind="edit")], deny=[Rule(title="secret")])
    answers, rec = decided(make_host_client, policy, ask("edit the Secret file"), ask("edit notes"))
    assert [outcome(a) for a in answers] == [
        {"outcome": "selected", "optionId": "ro"},
        {"outcome": "selected", "optionId": "ao"},
    ]
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("deny", "deny rule 0"),
        ("allow", "allow rule 0"),
    ]
    assert rec.previews == []  # rules decided: on_permission never called


def test_title_rules_are_case_insensitive_substrings_or_patterns(
    make_host_client: MakeClient,
) -> None:
    policy = acp.PermissionPolicy(
        allow=[Rule(title="^Run "), Rule(title=re.compile(r"^Run ")), Rule(title="STRASSE")],
    )
    answers, rec = decided(
        make_host_client,
        policy,
        ask("Run ls"),  # the pattern, not the "^Run " string (a substring, not an anchor)
        ask("go ^run now"),  # the plain string, case-insensitively
        ask("Hauptstraße 1"),  # Unicode case folding: "ß" folds to "ss" as str.casefold does
        ask("Do Run ls"),  # neither: the default (deny)
    )
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("allow", "allow rule 1"),
        ("allow", "allow rule 0"),
        ("allow", "allow rule 2"),
        ("deny", "default"),
    ]
    assert [outcome(a)["optionId"] for a in answers] == ["ao", "ao", "ao", "ro"]


def test_kind_comes_from_the_earlier_tool_call(make_host_client: MakeClient) -> None:
    policy = acp.PermissionPolicy(allow=[Rule(kind="execute")])
    tool_call = {
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "t9",
            "title": "ls",
            "kind": "execute",
        }
    }
    answers, rec = decided(
        make_host_client, policy, tool_call, ask("ls", kind=None, tool_call_id="t9")
    )
    assert outcome(answers[0]) == {"outcome": "selected", "optionId": "ao"}
    assert (rec.commits[0].tool_kind, rec.commits[0].reason) == ("execute", "allow rule 0")


@pytest.mark.parametrize(
    ("default", "expected"),
    [
        (D.ALLOW, {"outcome": "selected", "optionId": "ao"}),
        (D.DENY, {"outcome": "selected", "optionId": "ro"}),
        (D.CANCEL, {"outcome": "cancelled"}),
    ],
)
def test_default_decision(
    make_host_client: MakeClient, default: D, expected: dict[str, str]
) -> None:
    answers, rec = decided(make_host_client, acp.PermissionPolicy(default=default), ask())
    assert outcome(answers[0]) == expected
    assert (rec.commits[0].decision, rec.commits[0].reason) == (default.value, "default")
    assert len(rec.previews) == 1  # tier 4 was reached (the observer abstained)


def test_persist_prefers_the_always_options(make_host_client: MakeClient) -> None:
    policy = acp.PermissionPolicy(
        allow=[Rule(kind="edit")], deny=[Rule(kind="delete")], persist=True
    )
    answers, _ = decided(make_host_client, policy, ask(), ask("rm", kind="delete"))
    assert [outcome(a)["optionId"] for a in answers] == ["aa", "ra"]


def test_no_suitable_option_is_cancelled_but_keeps_the_decision(
    make_host_client: MakeClient,
) -> None:
    only_reject = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    policy = acp.PermissionPolicy(allow=[Rule()])
    answers, rec = decided(make_host_client, policy, ask(options=only_reject))
    assert outcome(answers[0]) == {"outcome": "cancelled"}
    commit = rec.commits[0]
    assert (commit.outcome, commit.decision) == ("cancelled", "allow")
    assert commit.reason == "allow rule 0"


def test_allowed_tool_kinds_keep_the_wave1_reject_fallback(make_host_client: MakeClient) -> None:
    only_reject = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    policy = acp.PermissionPolicy(allowed_tool_kinds=["edit"])
    answers, rec = decided(make_host_client, policy, ask(options=only_reject), ask())
    assert [outcome(a)["optionId"] for a in answers] == ["no", "ao"]
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("allow", "allowed_tool_kinds"),
        ("allow", "allowed_tool_kinds"),
    ]


def test_rules_come_before_the_observer_and_the_lists_after_it(
    make_host_client: MakeClient,
) -> None:
    def reject(request: acp.PermissionRequest) -> acp.PermissionOutcome:
        return acp.PermissionOutcome(D.DENY, reason="observer said no")

    policy = acp.PermissionPolicy(allowed_tool_kinds=["edit"], allow=[Rule(title="notes")])
    client, rec = make_host_client(Recorder(reject), permission_policy=policy)
    answers = run(client, [ask("notes"), ask("code")])
    assert [outcome(a)["optionId"] for a in answers] == ["ao", "ro"]
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("allow", "allow rule 0"),
        ("deny", "observer said no"),
    ]
    assert [p.title for p in rec.previews] == ["code"]
    assert (rec.previews[0].decision, rec.previews[0].reason) == ("", "")


def test_observer_outcome_picks_its_option_when_it_agrees(make_host_client: MakeClient) -> None:
    answers_given = iter(
        [
            acp.PermissionOutcome(D.ALLOW, option_id="aa"),  # offered, agrees: taken
            acp.PermissionOutcome(D.ALLOW, option_id="ro"),  # disagrees: the rule order
            acp.PermissionOutcome(D.CANCEL),
            acp.PermissionReply("selected", "ra"),  # verbatim; decision from the option kind
        ]
    )
    client, rec = make_host_client(Recorder(lambda _r: next(answers_given)))
    answers = run(client, [ask(), ask(), ask(), ask()])
    assert [outcome(a) for a in answers] == [
        {"outcome": "selected", "optionId": "aa"},
        {"outcome": "selected", "optionId": "ao"},
        {"outcome": "cancelled"},
        {"outcome": "selected", "optionId": "ra"},
    ]
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("allow", "observer"),
        ("allow", "observer"),
        ("cancel", "observer"),
        ("deny", "observer"),
    ]


def test_an_observer_answer_of_another_type_stops_the_client(
    make_host_client: MakeClient,
) -> None:
    client, _ = make_host_client(Recorder(lambda _r: "allow"))
    with pytest.raises(TypeError, match="PermissionOutcome"):
        run(client, [ask()])
    with pytest.raises(acp.AgentProtocolError, match="stopped"):
        run(client, [ask()])


def test_remember_keeps_always_answers_per_session(make_host_client: MakeClient) -> None:
    policy = acp.PermissionPolicy(default=D.ALLOW, persist=True, remember=True)
    client, rec = make_host_client(permission_policy=policy)
    first = run(client, [ask("write a")])
    # A new policy without a matching deny rule: the remembered answer decides (kind, title).
    client.permission_policy = acp.PermissionPolicy(
        deny=[Rule(title="b")], persist=False, remember=True
    )
    second = run(client, [ask("write a"), ask("write b")])
    assert [outcome(a)["optionId"] for a in first + second] == ["aa", "aa", "ro"]
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("allow", "default"),
        ("allow", "remembered"),
        ("deny", "deny rule 0"),
    ]
    # Another session remembers nothing of the first one's answers.
    other = client.new_session()
    third = run(other, [ask("write a")])
    assert outcome(third[0])["optionId"] == "ro"
    # Without remember the kept answers are not consulted.
    client.permission_policy = acp.PermissionPolicy(deny=[Rule()])
    assert outcome(run(client, [ask("write a")])[0])["optionId"] == "ro"


def test_a_deny_rule_of_the_current_policy_beats_a_remembered_allow(
    make_host_client: MakeClient,
) -> None:
    """Issue 21 #7: an `allow_always` remembered under an old policy must not outrank a deny
    rule of the policy set later, whatever the rule matches on."""
    client, rec = make_host_client(
        permission_policy=acp.PermissionPolicy(allow=[Rule()], persist=True, remember=True)
    )
    assert outcome(run(client, [ask("rm -rf build")])[0])["optionId"] == "aa"
    for deny in (Rule(), Rule(kind="edit"), Rule(title="RM -RF"), Rule(title=re.compile("^rm"))):
        client.permission_policy = acp.PermissionPolicy(deny=[deny], remember=True)
        assert outcome(run(client, [ask("rm -rf build")])[0])["optionId"] == "ro"
    # The remembered answer is kept, not erased: with no deny rule matching it decides again.
    client.permission_policy = acp.PermissionPolicy(deny=[Rule(kind="execute")], remember=True)
    assert outcome(run(client, [ask("rm -rf build")])[0])["optionId"] == "aa"
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("allow", "allow rule 0"),
        *[("deny", "deny rule 0")] * 4,
        ("allow", "remembered"),
    ]


def test_a_remembered_reject_beats_a_new_allow_rule(make_host_client: MakeClient) -> None:
    client, rec = make_host_client(
        permission_policy=acp.PermissionPolicy(deny=[Rule()], persist=True, remember=True)
    )
    assert outcome(run(client, [ask()])[0])["optionId"] == "ra"
    client.permission_policy = acp.PermissionPolicy(allow=[Rule()], remember=True)
    assert outcome(run(client, [ask()])[0])["optionId"] == "ra"
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("deny", "deny rule 0"),
        ("deny", "remembered"),
    ]


def test_a_cancelling_session_answers_cancelled_without_asking(
    make_host_client: MakeClient,
) -> None:
    holder: dict[str, acp.Session] = {}

    class Canceller(Recorder):
        def on_update(self, update: acp.Update) -> None:
            super().on_update(update)
            if update.session_update in ("plan", "plan_update"):  # v1, v2
                holder["s"].cancel()

    rec = Canceller(lambda _r: acp.PermissionOutcome(D.ALLOW))
    policy = acp.PermissionPolicy(allow=[Rule()])
    client, _ = make_host_client(rec, permission_policy=policy)
    assert client.default_session is not None
    holder["s"] = client.default_session
    plan = {"update": {"sessionUpdate": "plan", "entries": []}}
    answers = run(client, [plan, {"wait_cancel": True}, ask()])
    assert outcome(answers[0]) == {"outcome": "cancelled"}
    assert (rec.commits[0].decision, rec.commits[0].reason) == ("cancel", "session cancelled")
    assert rec.previews == []


def test_the_policy_is_settable_between_calls(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(permission_policy=acp.PermissionPolicy(default=D.ALLOW))
    assert outcome(run(client, [ask()])[0])["optionId"] == "ao"
    client.permission_policy = acp.PermissionPolicy(deny=[Rule(kind="edit")])
    assert client.permission_policy.deny == (Rule(kind="edit"),)
    assert outcome(run(client, [ask()])[0])["optionId"] == "ro"


def test_policy_construction_checks_types() -> None:
    with pytest.raises(TypeError):
        acp.PermissionPolicy(allow=[Rule(kind="edit"), "read"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        acp.PermissionPolicy(default="maybe")
    with pytest.raises(TypeError):
        acp.PermissionPolicy(persist=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Rule(title=re.compile(rb"bytes"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        acp.PermissionOutcome("yes")  # type: ignore[arg-type]
    policy = acp.PermissionPolicy(allow=[Rule()], default="allow")
    assert policy.allow == (Rule(),) and policy.default is D.ALLOW


# --- title patterns: a linear-time engine (issue 21 #9) -----------------------------------------


def test_a_catastrophic_title_pattern_does_not_stall_the_client(
    make_host_client: MakeClient,
) -> None:
    """`^(a+)+$` against 28 `a`s and a `!` took ~6 s under the GIL with Python's `re`; the
    title may be as long as a pattern ever looks at (16 KiB) and it still answers at once."""
    policy = acp.PermissionPolicy(
        deny=[Rule(title=re.compile(r"^(a+)+$"))], allow=[Rule(title=re.compile(r"^(a|aa)+$"))]
    )
    client, rec = make_host_client(permission_policy=policy)
    titles = ["a" * 28 + "!", "a" * 16_000 + "!", "a" * 40]
    began = time.monotonic()
    answers = run(client, [ask(title) for title in titles])
    assert time.monotonic() - began < 10  # a backtracking engine would not finish this century
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("deny", "default"),
        ("deny", "default"),
        ("deny", "deny rule 0"),
    ]
    assert [outcome(a)["optionId"] for a in answers] == ["ro", "ro", "ro"]


def test_titles_past_the_pattern_cap_fail_closed(make_host_client: MakeClient) -> None:
    """A pattern looks at 16 KiB of a title at most: a longer one counts as matched by a deny
    pattern and as not matched by an allow pattern, so padding cannot slip past a deny rule."""
    policy = acp.PermissionPolicy(
        deny=[Rule(title=re.compile(r"rm -rf"))],
        allow=[Rule(title=re.compile(r"^echo"))],
        default=D.ALLOW,
    )
    client, rec = make_host_client(permission_policy=policy)
    padded = "echo " + " " * 20_000 + "; rm -rf /"
    long_echo = "echo " + "x" * 20_000
    run(client, [ask(padded), ask(long_echo), ask("echo hi")])
    assert [(c.decision, c.reason) for c in rec.commits] == [
        ("deny", "deny rule 0"),  # not searched, refused unseen
        ("deny", "deny rule 0"),
        ("allow", "allow rule 0"),
    ]


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
def test_python_pattern_semantics_are_kept(make_host_client: MakeClient) -> None:
    rules = [
        Rule(title=re.compile(r"^ls$")),  # `$` also before a final newline, as in Python
        Rule(title=re.compile(r"(?i)^GIT\s+status\Z")),
        Rule(title=re.compile(r"[[]x]")),  # `[` inside a class is a literal
        Rule(title=re.compile(r"run\b", re.IGNORECASE)),
        Rule(title=re.compile(r"^first.second", re.DOTALL)),
        Rule(title=re.compile(r"^third$", re.MULTILINE)),
    ]
    policy = acp.PermissionPolicy(allow=rules)
    client, rec = make_host_client(permission_policy=policy)
    titles = ["ls\n", "git  Status", "a[x]", "RUN it", "first\nsecond", "x\nthird\ny", "lsx"]
    run(client, [ask(title) for title in titles])
    assert [c.reason for c in rec.commits] == [
        "allow rule 0",
        "allow rule 1",
        "allow rule 2",
        "allow rule 3",
        "allow rule 4",
        "allow rule 5",
        "default",
    ]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (re.compile(r"(?<=sudo )rm"), "look-around"),
        (re.compile(r"(?=rm)"), "look-around"),
        (re.compile(r"(\w+) \1"), "backreference"),
        (re.compile(r"a*+b"), "possessive"),
        (re.compile(r"rm", re.ASCII), "re.ASCII"),
    ],
)
def test_patterns_the_engine_cannot_run_are_refused_on_assignment(
    make_host_client: MakeClient, pattern: re.Pattern[str], reason: str
) -> None:
    policy = acp.PermissionPolicy(allow=[Rule(kind="read")], deny=[Rule(title=pattern)])
    with pytest.raises(ValueError, match=r"PermissionPolicy\.deny\[0\]") as caught:
        make_host_client(permission_policy=policy, start=False)
    assert reason in str(caught.value) and repr(pattern) in str(caught.value)
    client, _ = make_host_client()
    with pytest.raises(ValueError, match=reason):
        client.permission_policy = policy
    # The old policy stays in force.
    assert client.permission_policy == acp.PermissionPolicy()


# --- the agent withdraws a request while a synchronous on_permission runs -----------------------


def _blocked_reading(pid: int) -> bool:
    """Whether the agent sleeps in a read of its stdin (it wrote everything it had to)."""
    try:
        return "pipe_read" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def test_cancel_request_while_a_sync_on_permission_runs(make_host_client: MakeClient) -> None:
    """Nothing is read while a synchronous `on_permission` runs; once it returns the driver looks
    at what arrived meanwhile, and a `$/cancel_request` for this request replaces the answer."""
    pids: list[int] = []

    def slow_allow(request: acp.PermissionRequest) -> acp.PermissionOutcome:
        # Returns once the agent has sent the cancel and waits for our answer (as a person
        # answering late would): deterministic, no sleep standing in for the agent's speed.
        deadline = time.monotonic() + 10
        while not _blocked_reading(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.005)
        return acp.PermissionOutcome(D.ALLOW)

    client, rec = make_host_client(Recorder(slow_allow), start=False)
    assert client.pid is not None
    pids.append(client.pid)
    client.start()
    cancel = {"method": "$/cancel_request", "params": {"requestId": "h1"}}
    answers = run(client, [{"send": ask()["request"]}, {"notify": cancel}, {"collect": 1}, ask()])
    assert [outcome(a) for a in answers] == [
        {"outcome": "cancelled"},
        {"outcome": "selected", "optionId": "ao"},  # the next request is asked as usual
    ]
    assert [(c.outcome, c.decision, c.reason) for c in rec.commits] == [
        ("cancelled", "cancel", "cancelled by the agent"),
        ("selected", "allow", "observer"),
    ]

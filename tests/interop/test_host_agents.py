"""Real agents with the host side offered (design/host.md): files written and commands run
through the client under its permission rules.

Findings (against the fake model server):
- claude-code-acp 0.16.2, `fs` offered: its Write/Read/Edit tools become mcp__acp__* tools that
  call `fs/*`; the write asks permission first, and a deny rule stops it (nothing written).
  `terminal` offered: Bash becomes mcp__acp__Bash through `terminal/*`, but it sends the whole
  shell line as `command` with no `args`; without a shell (host.md §3) only single-word
  commands run, and with `terminal_shell="/bin/sh"` (the opt-in) any line does.
- claude-agent-acp 0.49.0 keeps its built-in tools with `fs` offered: the rules decide, the
  agent writes by itself, no `fs/*` request comes.
- Gemini CLI 0.61.0 reads (the target first) and writes through the client.
- codex-acp 0.16.0 runs exec_command itself even with `terminal` offered.
"""

from __future__ import annotations

import json
from typing import Any

import acp_fast as acp
import pytest

from .conftest import Harness
from .fake_models import ModelRequest, Reply, ToolCall
from .support import AFTER_TOOL, _latest_user_text, global_problem, plan_for

pytestmark = pytest.mark.time_limit(90)

_problem = global_problem()
if _problem:
    pytest.skip(_problem, allow_module_level=True)

FS = acp.ClientCapabilityConfig(terminal=False, read_missing_as_empty=True)
ALLOW_EDIT = acp.PermissionPolicy(allow=[acp.PermissionRule(kind="edit")])
DENY_EDIT = acp.PermissionPolicy(
    allow=[acp.PermissionRule()], deny=[acp.PermissionRule(kind="edit")]
)


def agents(*names: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("harness", names, indirect=True)


def offer_client_tools(harness: Harness) -> None:
    """With `fs` offered, claude-code-acp and claude-agent-acp drop their built-in Write tool
    and offer `mcp__acp__Write` (served through the client): the fake model calls that one."""
    base = plan_for(harness.spec, harness.cwd)

    def plan(request: ModelRequest) -> Reply:
        tools = [t.get("name") for t in request.body.get("tools") or [] if isinstance(t, dict)]
        latest = _latest_user_text(request)
        if "mcp__acp__Write" in tools and "write hello.txt" in latest:
            if not request.has_tool_result():
                arguments = {
                    "file_path": str(harness.cwd / "hello.txt"),
                    "content": "hi from fake claude\n",
                }
                return Reply(("I'll write the file.",), ToolCall("mcp__acp__Write", arguments))
        return base(request)

    assert harness.server is not None
    harness.server.plan = plan


def writes(activity: list[acp.ClientActivity]) -> list[acp.ClientActivity]:
    return [a for a in activity if a.method == acp.ClientMethod.FS_WRITE_TEXT_FILE]


@agents("claude-code-acp", "gemini")
def test_an_allowed_write_goes_through_the_client(harness: Harness) -> None:
    offer_client_tools(harness)
    run = harness.start(policy=ALLOW_EDIT, capabilities=FS)
    result = run.client.prompt_detailed("Please write hello.txt")
    hello = harness.cwd / "hello.txt"
    assert hello.read_text().startswith("hi from fake")
    done = [a for a in writes(run.journal.activity) if a.path == str(hello)]
    assert done and done[-1].allowed and done[-1].error_code is None, run.journal.activity
    permission = run.journal.permissions[0]
    assert (permission.decision, permission.reason) == ("allow", "allow rule 0")
    assert result.response.endswith("".join(AFTER_TOOL))
    if harness.spec.name == "gemini":  # its write tool reads the target through the client first
        reads = [a for a in run.journal.activity if a.method == "fs/read_text_file"]
        assert reads and reads[0].path == str(hello) and reads[0].allowed


@agents("claude-code-acp", "claude-agent-acp", "gemini")
def test_a_deny_rule_stops_the_write(harness: Harness) -> None:
    offer_client_tools(harness)
    run = harness.start(policy=DENY_EDIT, capabilities=FS)
    run.client.prompt_detailed("Please write hello.txt")
    assert not (harness.cwd / "hello.txt").exists()
    assert writes(run.journal.activity) == []
    permission = run.journal.permissions[0]
    assert (permission.decision, permission.reason) == ("deny", "deny rule 0")


@agents("claude-agent-acp")
def test_claude_agent_acp_writes_by_itself_under_the_rules(harness: Harness) -> None:
    # claude-agent-acp 0.49.0 keeps its built-in Write tool with `fs` offered (the model is
    # offered no client-served tool): the rules decide, the agent writes, no fs request comes.
    offer_client_tools(harness)
    run = harness.start(policy=ALLOW_EDIT, capabilities=FS)
    run.client.prompt_detailed("Please write hello.txt")
    assert (harness.cwd / "hello.txt").read_text().startswith("hi from fake")
    assert writes(run.journal.activity) == []
    assert run.journal.permissions[0].reason == "allow rule 0"


def run_command_through(harness: Harness, tool: str, arguments: dict[str, object]) -> None:
    """The fake model calls `tool` for "run the command" (once), then says AFTER_TOOL."""
    base = plan_for(harness.spec, harness.cwd)

    def plan(request: ModelRequest) -> Reply:
        if "run the command" in _latest_user_text(request) and not request.has_tool_result():
            return Reply(("Running it.",), ToolCall(tool, arguments))
        return base(request)

    assert harness.server is not None
    harness.server.plan = plan


def bash_run(
    harness: Harness, command: str, capabilities: acp.ClientCapabilityConfig | None = None
) -> tuple[Any, Any]:
    run_command_through(
        harness, "mcp__acp__Bash", {"command": command, "description": "Run", "timeout": 20000}
    )
    policy = acp.PermissionPolicy(allow=[acp.PermissionRule(kind="execute")])
    run = harness.start(policy=policy, capabilities=capabilities or acp.ClientCapabilityConfig())
    result = run.client.prompt_detailed("Please run the command")
    assert run.journal.permissions[0].reason == "allow rule 0"
    return run, result


@agents("claude-code-acp")
def test_claude_code_acp_runs_commands_in_a_client_terminal(harness: Harness) -> None:
    # With `terminal` offered its Bash tool becomes mcp__acp__Bash, run through terminal/*.
    run, result = bash_run(harness, "pwd")
    methods = [a.method for a in run.journal.activity]
    assert methods[0] == acp.ClientMethod.TERMINAL_CREATE, run.journal.activity
    created = run.journal.activity[0]
    assert (created.allowed, created.error_code) == (True, None)
    assert (created.terminal_id, created.command, created.path) == (
        "term-1",
        "pwd",
        str(harness.cwd),
    )
    assert acp.ClientMethod.TERMINAL_OUTPUT in methods or "terminal/wait_for_exit" in methods
    assert methods[-1] == acp.ClientMethod.TERMINAL_RELEASE
    finished = [
        u.json()
        for u in run.journal.of_kind(acp.UpdateKind.TOOL_CALL_UPDATE)
        if u.json().get("status") == "completed"
    ]
    assert finished and str(harness.cwd) in json.dumps(finished[-1])
    assert result.stop_reason == "end_turn"


@agents("claude-code-acp")
def test_claude_code_acp_sends_shell_lines_which_are_not_run_by_a_shell(
    harness: Harness,
) -> None:
    # claude-code-acp 0.16.2 puts the whole shell line in `command` with no `args`; host.md runs
    # terminals without a shell, so the program "printf 'x' > t.txt" does not exist (-32603).
    run, _ = bash_run(harness, "printf 'x' > t.txt")
    created = run.journal.activity[0]
    assert created.method == acp.ClientMethod.TERMINAL_CREATE
    assert (created.allowed, created.error_code) == (True, -32603)
    assert not (harness.cwd / "t.txt").exists()


@agents("claude-code-acp")
def test_claude_code_acp_runs_a_shell_line_with_terminal_shell(harness: Harness) -> None:
    # The opt-in runs its whole line as ["/bin/sh", "-c", line] in a client terminal.
    config = acp.ClientCapabilityConfig(terminal_shell="/bin/sh")
    run, result = bash_run(harness, "echo hello world > t.txt && cat t.txt", config)
    created = run.journal.activity[0]
    assert created.method == acp.ClientMethod.TERMINAL_CREATE, run.journal.activity
    assert (created.allowed, created.error_code, created.terminal_id) == (True, None, "term-1")
    assert (harness.cwd / "t.txt").read_text() == "hello world\n"
    assert run.journal.activity[-1].method == acp.ClientMethod.TERMINAL_RELEASE
    finished = [
        u.json()
        for u in run.journal.of_kind(acp.UpdateKind.TOOL_CALL_UPDATE)
        if u.json().get("status") == "completed"
    ]
    assert finished and "hello world" in json.dumps(finished[-1])
    assert result.stop_reason == "end_turn"


@agents("codex-acp")
def test_codex_acp_runs_commands_itself(harness: Harness) -> None:
    # codex-acp 0.16.0 executes exec_command itself even with `terminal` offered.
    policy = acp.PermissionPolicy(allow=[acp.PermissionRule(kind="execute")])
    run = harness.start(policy=policy, capabilities=acp.ClientCapabilityConfig())
    run.client.prompt_detailed("Please write hello.txt")
    assert (harness.cwd / "hello.txt").read_text().startswith("hi from fake codex")
    assert run.journal.activity == []

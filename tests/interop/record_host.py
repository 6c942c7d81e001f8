"""Records the host-side transcripts in tests/interop/data (`*-host-*.jsonl`): real agents using
the client's files and terminals, served by `acp_fast.Client` against the fake model server.

    unshare -r -n -- sh -c 'ip link set lo up && cd tests && python -m interop.record_host OUTDIR'

(the scenarios of today's agents need ACP_INTEROP_CURRENT=1 and name them: NAME... after OUTDIR)

Each run's temporary root is written as /workspace (so the session cwd is /workspace/work, as in
the other transcripts); the replay tests map it back to their own temporary directory.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import acp_fast as acp

from .conftest import Harness
from .support import AGENTS, Launch, global_problem
from .test_host_agents import ALLOW_EDIT, FS, offer_client_tools, run_command_through

PROXY = Path(__file__).resolve().parent / "agents" / "transcript_proxy.py"
RECORDED_ROOT = "/workspace"
OLD_HELLO = "old first line\nsecond line: ü\n"


def record(name: str, agent: str, out: Path, scenario: Callable[[Harness, Callable], None]) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary).resolve()
        harness = Harness(AGENTS[agent], root)
        transcript = root / "transcript.jsonl"

        def wrap(start: Launch) -> Launch:
            args = [str(PROXY), str(transcript), "--", start.command, *start.args]
            return Launch(sys.executable, args, start.env, start.cwd, start.tag)

        failed = True
        try:
            scenario(harness, wrap)
            failed = False
        finally:
            leftovers = harness.close()
            text = transcript.read_text(encoding="utf-8").replace(str(root), RECORDED_ROOT)
            kept = out / f"{name}{'.failed' if failed else ''}.jsonl"
            kept.write_text(text, encoding="utf-8")
            print(f"{kept}: {len(text.splitlines())} lines", file=sys.stderr)
        if leftovers:
            print(f"{name}: left behind {leftovers}", file=sys.stderr)


def claude_write(harness: Harness, wrap: Callable) -> None:
    offer_client_tools(harness)
    run = harness.start(policy=ALLOW_EDIT, capabilities=FS, wrap=wrap)
    run.client.prompt_detailed("Please write hello.txt")
    assert (harness.cwd / "hello.txt").exists(), run.journal.activity


def gemini_read_write(harness: Harness, wrap: Callable) -> None:
    # Its write tool reads the target through the client first (its read_file tool reads the
    # disk itself), so hello.txt exists beforehand: a read with content, then the write.
    (harness.cwd / "hello.txt").write_text(OLD_HELLO, encoding="utf-8")
    run = harness.start(policy=ALLOW_EDIT, capabilities=FS, wrap=wrap)
    run.client.prompt_detailed("Please write hello.txt")
    assert (harness.cwd / "hello.txt").read_text() != OLD_HELLO, run.journal.activity


def claude_terminal(harness: Harness, wrap: Callable) -> None:
    arguments = {"command": "pwd", "description": "Print the directory", "timeout": 20000}
    run_command_through(harness, "mcp__acp__Bash", arguments)
    policy = acp.PermissionPolicy(allow=[acp.PermissionRule(kind="execute")])
    run = harness.start(policy=policy, capabilities=acp.ClientCapabilityConfig(), wrap=wrap)
    run.client.prompt_detailed("Please run the command")
    methods = [a.method for a in run.journal.activity]
    assert "terminal/create" in methods, run.journal.activity


def agent_write(harness: Harness, wrap: Callable) -> None:
    """Today's agents (ACP_INTEROP_CURRENT=1), nothing offered: the agent's own write tool,
    after asking the host."""
    run = harness.start(policy=harness.spec.allow_policy, wrap=wrap)
    run.client.prompt_detailed("Please write hello.txt")
    assert (harness.cwd / "hello.txt").exists(), run.journal.activity


def agent_host_write(harness: Harness, wrap: Callable) -> None:
    """`fs` offered: whether the write goes through the client (opencode: fs/write_text_file)."""
    run = harness.start(policy=ALLOW_EDIT, capabilities=FS, wrap=wrap)
    run.client.prompt_detailed("Please write hello.txt")
    assert (harness.cwd / "hello.txt").exists(), run.journal.activity


def main() -> int:
    problem = global_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    scenarios = {
        "claude-code-acp-host-write": ("claude-code-acp", claude_write),
        "gemini-host-read-write": ("gemini", gemini_read_write),
        "claude-code-acp-host-terminal": ("claude-code-acp", claude_terminal),
        # ACP_INTEROP_CURRENT=1 only:
        "claude-agent-acp-101-current-write": ("claude-agent-acp-101", agent_write),
        "codex-acp-2-current-write": ("codex-acp-2", agent_write),
        "opencode-current-write": ("opencode", agent_write),
        "opencode-host-write": ("opencode", agent_host_write),
    }
    for name in sys.argv[2:] or scenarios:
        record(name, scenarios[name][0], out, scenarios[name][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

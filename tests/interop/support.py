"""What the interop tests share: where the real agents are, how to start each one against the
fake model server, what each is expected to do, the checks that decide whether real agents can
run here, a journal that keeps every update, wire taps, and process accounting."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp_fast as acp

from .fake_models import FakeModelServer, ModelRequest, Reply, ToolCall

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
PY_SDK_AGENT = HERE / "agents" / "py_sdk_agent.py"
TS_SDK_AGENT = HERE / "agents" / "ts_sdk_agent.mjs"
TAP = HERE / "agents" / "tap.py"
#: The replay agent, promoted into the package: `python -m acp_fast.replay_agent`.
REPLAY_AGENT_ARGS = ("-m", "acp_fast.replay_agent")

PY_SDK_VERSION = "0.12.1"
LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=100_000,
    response_segment_count=10_000,
)
TAG_VARIABLE = "ACP_FAST_INTEROP_TAG"

# What the fake model says.
HELLO = ("Hello", " from the fake", " model.")
AFTER_TOOL = ("Tool result ", "received.")
TICKS = tuple(f"tick {n}. " for n in range(40))
TICK_DELAY = 0.3
#: "codeword X" in a prompt makes the fake model answer `codeword_reply(X)`, so that the replies
#: of several sessions (and of a loaded one) tell apart which prompt they answer.
CODEWORD = re.compile(r"codeword ([a-z0-9]+)")


def codeword_reply(word: str) -> tuple[str, ...]:
    return ("Codeword ", word, " received.")


def agents_root() -> Path:
    return Path(os.environ.get("ACP_FAST_AGENTS") or Path.home() / ".cache" / "acp-fast-agents")


# --- the agents ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentSpec:
    """One real agent: how it is installed and started, and what it is expected to do."""

    name: str
    package: str  # npm package ("" for the Python SDK agent)
    version: str
    #: Which model API it calls ("gemini", "anthropic", "openai"); None: it needs no model.
    model_api: str | None
    #: The policy that allows its file-writing tool call, and what the grant looks like.
    allow_policy: acp.PermissionPolicy
    allow_option: str
    reject_option: str
    reject_stop_reason: str
    #: Whether an allowed tool call really writes hello.txt into the session's cwd.
    writes_file: bool = True
    #: Whether a `tool_call` update announces the call before its permission request.
    tool_call_before_permission: bool = True
    #: The tool call the fake model makes for "write hello.txt" (None: the agent is scripted).
    tool: Callable[[Path], ToolCall] | None = None
    #: Processes it starts besides itself once a session is open (all in its process group).
    helpers: int = 0
    #: A plain prompt is echoed back (our SDK test agents) rather than answered by a model.
    echo: bool = False
    #: The Python SDK agent runs on the virtualenv `prefix` (install-agents.sh makes it), not on
    #: this Python (whose SDK is the project's pin).
    own_venv: bool = False
    #: It answers ACP v2's `initialize` with 2 (protocol="auto" agrees v2 with it):
    #: test_v2_agents.py drives it in v2; the v1 tests run it with protocol="v1" only.
    speaks_v2: bool = False

    @property
    def prefix(self) -> Path:
        return agents_root() / self.name

    @property
    def python(self) -> str:
        return str(self.prefix / "bin" / "python") if self.own_venv else sys.executable

    def installed_version(self) -> str | None:
        if self.own_venv:
            found = sorted(self.prefix.glob("lib/python*/site-packages/agent_client_protocol-*"))
            names = [p.name for p in found if p.name.endswith(".dist-info")]
            return names[0][len("agent_client_protocol-") : -len(".dist-info")] if names else None
        if not self.package:
            try:
                import importlib.metadata

                return importlib.metadata.version("agent-client-protocol")
            except importlib.metadata.PackageNotFoundError:
                return None
        manifest = self.prefix / "node_modules" / self.package / "package.json"
        try:
            return str(json.loads(manifest.read_text()).get("version"))
        except (OSError, ValueError):
            return None


def _gemini_tool(cwd: Path) -> ToolCall:
    return ToolCall(
        "write_file", {"file_path": str(cwd / "hello.txt"), "content": "hi from fake gemini\n"}
    )


def _claude_tool(cwd: Path) -> ToolCall:
    return ToolCall(
        "Write", {"file_path": str(cwd / "hello.txt"), "content": "hi from fake claude\n"}
    )


def _codex_tool(cwd: Path) -> ToolCall:
    # codex's own bubblewrap sandbox cannot start in the test's network namespace, so the call
    # asks to run outside it, which codex-acp turns into a permission request.
    return ToolCall(
        "exec_command",
        {
            "cmd": "printf 'hi from fake codex\\n' > hello.txt",
            "sandbox_permissions": "require_escalated",
            "justification": "Need to write hello.txt",
        },
    )


def _codex_exec_tool(cwd: Path) -> ToolCall:
    # codex 0.166 (under codex-acp 2.x) offers its tools inside a freeform JavaScript `exec`
    # tool: the fake model writes a script that calls exec_command, escalated as above.
    command = "printf 'hi from fake codex\\n' > hello.txt"
    args = {
        "cmd": command,
        "sandbox_permissions": "require_escalated",
        "justification": "Need to write hello.txt",
    }
    return ToolCall("exec", args, freeform=f"await tools.exec_command({json.dumps(args)});")


def _opencode_tool(cwd: Path) -> ToolCall:
    return ToolCall(
        "write", {"filePath": str(cwd / "hello.txt"), "content": "hi from fake opencode\n"}
    )


AGENTS: dict[str, AgentSpec] = {
    spec.name: spec
    for spec in (
        AgentSpec(
            name="gemini",
            package="@google/gemini-cli",
            version="0.61.0",
            model_api="gemini",
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="proceed_once",
            reject_option="cancel",
            reject_stop_reason="end_turn",
            tool_call_before_permission=False,
            tool=_gemini_tool,
            helpers=1,
        ),
        AgentSpec(
            name="claude-code-acp",
            package="@zed-industries/claude-code-acp",
            version="0.16.2",
            model_api="anthropic",
            # Its permission request carries no tool `kind` (the earlier `tool_call` update
            # does): the client then judges by that announced kind. This spec's standard
            # allow test uses the title rule; test_claude_code_acp_allowed_by_kind the kind.
            allow_policy=acp.PermissionPolicy(allowed_title_prefixes=["Write "]),
            allow_option="allow",
            reject_option="reject",
            reject_stop_reason="end_turn",
            tool=_claude_tool,
            helpers=1,
        ),
        AgentSpec(
            name="claude-agent-acp",
            package="@agentclientprotocol/claude-agent-acp",
            version="0.49.0",
            model_api="anthropic",
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="allow",
            reject_option="reject",
            reject_stop_reason="end_turn",
            tool=_claude_tool,
            helpers=1,
        ),
        AgentSpec(
            name="codex-acp",
            package="@zed-industries/codex-acp",
            version="0.16.0",
            model_api="openai",
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["execute"]),
            allow_option="approved",
            reject_option="abort",
            reject_stop_reason="cancelled",
            tool_call_before_permission=False,
            tool=_codex_tool,
            helpers=1,
        ),
        AgentSpec(
            name="ts-sdk",
            package="@agentclientprotocol/sdk",
            version="0.14.1",
            model_api=None,
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="allow",
            reject_option="reject",
            reject_stop_reason="end_turn",
            writes_file=False,
        ),
        AgentSpec(
            name="py-sdk",
            package="",
            version=PY_SDK_VERSION,
            model_api=None,
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="allow",
            reject_option="reject",
            reject_stop_reason="end_turn",
            echo=True,
        ),
        # The current SDKs, under our own test agents (agents/ts_sdk_agent.mjs, py_sdk_agent.py).
        AgentSpec(
            name="ts-sdk-2",
            package="@agentclientprotocol/sdk",
            version="2.4.0",
            model_api=None,
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="allow",
            reject_option="reject",
            reject_stop_reason="end_turn",
            echo=True,
        ),
        AgentSpec(
            name="py-sdk-1",
            package="",
            version="1.0.0rc3",
            model_api=None,
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="allow",
            reject_option="reject",
            reject_stop_reason="end_turn",
            echo=True,
            own_venv=True,
        ),
    )
}
#: Today's releases of the real agents, driven only with ACP_INTEROP_CURRENT=1 (install-agents.sh
#: installs them then); tests/interop/README.md says what each still fails.
CURRENT = os.environ.get("ACP_INTEROP_CURRENT") == "1"
if CURRENT:
    for _spec in (
        AgentSpec(
            name="claude-agent-acp-101",
            package="@agentclientprotocol/claude-agent-acp",
            version="0.101.0",
            model_api="anthropic",
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="allow-once",
            reject_option="reject",
            reject_stop_reason="end_turn",
            tool=_claude_tool,
            helpers=1,
            speaks_v2=True,
        ),
        AgentSpec(
            name="codex-acp-2",
            package="@agentclientprotocol/codex-acp",
            version="2.6.0",
            model_api="openai",
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["execute"]),
            allow_option="allow_once",
            reject_option="cancel",
            reject_stop_reason="cancelled",
            tool_call_before_permission=False,
            tool=_codex_exec_tool,
            helpers=2,
            speaks_v2=True,
        ),
        AgentSpec(
            name="opencode",
            package="opencode-ai",
            version="1.18.33",
            model_api="openai-chat",
            allow_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
            allow_option="once",
            reject_option="reject",
            reject_stop_reason="end_turn",
            tool=_opencode_tool,
        ),
    ):
        AGENTS[_spec.name] = _spec
#: The current real agents when ACP_INTEROP_CURRENT=1, else none: the session tests add them.
CURRENT_AGENTS = ("claude-agent-acp-101", "codex-acp-2", "opencode") if CURRENT else ()
MODEL_AGENTS = [name for name, spec in AGENTS.items() if spec.model_api is not None]
#: The real agents that speak ACP v2 too (today's releases, with ACP_INTEROP_CURRENT=1).
V2_REAL_AGENTS = [name for name, spec in AGENTS.items() if spec.speaks_v2]


def v1_and_auto(names: list[str]) -> list[tuple[str, str]]:
    """(agent, protocol) pairs: each agent with protocol "v1", and with "auto" unless it speaks
    v2 (auto then agrees v2: test_v2_agents.py covers it)."""
    return [(name, "v1") for name in names] + [
        (name, "auto") for name in names if not AGENTS[name].speaks_v2
    ]


def plan_for(spec: AgentSpec, cwd: Path) -> Callable[[ModelRequest], Reply]:
    """The fake model's script for `spec`: "write hello.txt" makes it call the agent's file tool
    once; "slow" streams ticks slowly; "codeword X" in the latest user turn gets
    `codeword_reply(X)` (before the others); anything else gets HELLO."""

    def plan(request: ModelRequest) -> Reply:
        latest = _latest_user_text(request)
        # First, so that a later prompt of a conversation that held a tool call or a cancelled
        # turn (claude-code-acp sends the interrupted prompt again with the next) gets it.
        word = CODEWORD.search(latest)
        if word is not None:
            return Reply(codeword_reply(word.group(1)))
        if request.has_tool_result():
            return Reply(AFTER_TOOL)
        if "write hello.txt" in latest and spec.tool is not None:
            return Reply(("I'll write the file.",), spec.tool(cwd))
        if "slow" in latest:
            return Reply(TICKS, delay=TICK_DELAY)
        return Reply(HELLO)

    return plan


def _latest_user_text(request: ModelRequest) -> str:
    """The text of the last user turn (the prompt just sent), in any of the three formats."""
    body = request.body
    if request.api == "gemini":
        turns = [c for c in body.get("contents") or [] if c.get("role") == "user"]
        return json.dumps(turns[-1]) if turns else ""
    if request.api == "anthropic":
        turns = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        return json.dumps(turns[-1]) if turns else ""
    if request.api == "openai-chat":
        turns = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        return json.dumps(turns[-1]) if turns else ""
    items = [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("role") == "user"]
    return json.dumps(items[-1]) if items else ""


@dataclass
class Launch:
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: Path
    tag: str


def isolated(root: Path) -> tuple[Path, Path, dict[str, str], str]:
    """A run's working directory and HOME under `root` (made), and its environment: nothing of
    ours but PATH, plus a fresh tag that every process the agent starts inherits (what the
    harness finds leftovers by). Returns (cwd, home, env, tag)."""
    cwd = root / "work"
    home = root / "home"
    cwd.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        TAG_VARIABLE: tag,
    }
    return cwd, home, env, tag


def launch(spec: AgentSpec, root: Path, server: FakeModelServer | None) -> Launch:
    """Command, arguments, environment and cwd that start `spec` against `server`, with an
    isolated HOME and a tag in the environment that every process it starts inherits."""
    cwd, home, env, tag = isolated(root)
    modules = spec.prefix / "node_modules"
    url = server.url if server is not None else ""
    if spec.name == "gemini":
        env.update(GEMINI_API_KEY="dummy", GOOGLE_GEMINI_BASE_URL=url)
        return Launch(
            "node",
            [
                str(modules / "@google/gemini-cli/bundle/gemini.js"),
                "--acp",
                "-m",
                "gemini-2.5-flash",
            ],
            env,
            cwd,
            tag,
        )
    if spec.name in ("claude-code-acp", "claude-agent-acp"):
        env.update(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="anything",
            IS_SANDBOX="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        return Launch(str(modules / ".bin" / spec.name), [], env, cwd, tag)
    if spec.name == "codex-acp":
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model_provider = "fake"\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n'
            "supports_websockets = false\n"
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        env.update(CODEX_HOME=str(codex_home), OPENAI_API_KEY="dummy")
        return Launch(str(modules / ".bin" / "codex-acp"), [], env, cwd, tag)
    if spec.name == "claude-agent-acp-101":
        # It starts in mode `auto` (it decides permissions itself); `default` makes it ask.
        settings = home / ".claude"
        settings.mkdir(exist_ok=True)
        (settings / "settings.json").write_text('{"permissions": {"defaultMode": "default"}}')
        env.update(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="anything",
            IS_SANDBOX="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        return Launch(str(modules / ".bin" / "claude-agent-acp"), [], env, cwd, tag)
    if spec.name == "codex-acp-2":
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model_provider = "fake"\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n'
            "supports_websockets = false\n"
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        # It starts in "Auto review" (a model call decides escalations); this mode asks.
        env.update(
            CODEX_HOME=str(codex_home), OPENAI_API_KEY="dummy", INITIAL_AGENT_MODE="workspace-write"
        )
        return Launch(str(modules / ".bin" / "codex-acp"), [], env, cwd, tag)
    if spec.name == "opencode":
        config = {
            "autoupdate": False,
            "share": "disabled",
            "model": "fake/fake-model",
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": f"{url}/v1", "apiKey": "dummy"},
                    "models": {"fake-model": {"name": "Fake model", "tool_call": True}},
                }
            },
            "permission": {"edit": "ask", "bash": "ask"},
        }
        env.update(
            OPENCODE_CONFIG_CONTENT=json.dumps(config),
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_SHARE="1",
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local/share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            XDG_STATE_HOME=str(home / ".local/state"),
        )
        return Launch(str(modules / ".bin" / "opencode"), ["acp"], env, cwd, tag)
    if spec.name == "ts-sdk":
        agent_js = modules / "@agentclientprotocol/sdk/dist/examples/agent.js"
        return Launch("node", [str(agent_js)], env, cwd, tag)
    if spec.name == "ts-sdk-2":
        sdk = modules / "@agentclientprotocol/sdk"
        return Launch("node", [str(TS_SDK_AGENT), str(sdk)], env, cwd, tag)
    if spec.name in ("py-sdk", "py-sdk-1"):
        return Launch(spec.python, [str(PY_SDK_AGENT)], env, cwd, tag)
    raise ValueError(spec.name)


def missing_entry(start: Launch) -> str | None:
    """What of `start` is not on disk (the program, or the script node/python is to run), said
    so that the run fails at once with the reason instead of a dead pipe."""
    program = Path(start.command)
    if program.is_absolute() and not program.exists():
        return f"{program} does not exist"
    if program.name.startswith(("node", "python")) and start.args:
        script = Path(start.args[0])
        if script.is_absolute() and not script.exists():
            return f"{script} does not exist (the package no longer ships it?)"
    return None


def tapped(start: Launch, log_in: Path, log_out: Path) -> Launch:
    """The same agent behind agents/tap.py: what the client writes goes to `log_in`, what the
    agent writes to `log_out`, byte for byte, each chunk logged before it is passed on; the tap
    exits with the agent and stays in its group."""
    return Launch(
        sys.executable,
        ["-S", str(TAP), str(log_in), str(log_out), "--", start.command, *start.args],
        start.env,
        start.cwd,
        start.tag,
    )


# --- can real agents run here? ------------------------------------------------------------------


def _loopback_only() -> str | None:
    """None when this process is in a network namespace whose only interface is a working
    loopback; otherwise what is wrong (scripts/run-interop.sh passes on why it could not make
    one in ACP_FAST_NETNS_PROBLEM)."""
    told = os.environ.get("ACP_FAST_NETNS_PROBLEM")
    if told:
        return told
    try:
        names = sorted(name for _, name in socket.if_nameindex())
    except OSError as error:
        return f"cannot list network interfaces ({error})"
    if names != ["lo"]:
        return (
            "not in a loopback-only network namespace (interfaces: "
            + ", ".join(names)
            + "; run scripts/run-interop.sh, or "
            "unshare -n -- sh -c 'ip link set lo up && python -m pytest tests/interop')"
        )
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            port = listener.getsockname()[1]
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError as error:
        return f"loopback is down in this network namespace ({error}; run ip link set lo up)"
    return None


def _node_problem() -> str | None:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return "node/npm not on PATH (the real agents need Node.js >= 20 and npm)"
    try:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"node --version failed ({error})"
    major = int(version.lstrip("v").split(".")[0] or 0)
    if major < 20:
        return f"node {version} is too old (the real agents need Node.js >= 20)"
    return None


_GLOBAL_PROBLEM: list[str | None] = []


def global_problem() -> str | None:
    """One line naming everything that keeps every real agent from running here, or None."""
    if not _GLOBAL_PROBLEM:
        problems = [p for p in (_node_problem(), _loopback_only()) if p]
        root = agents_root()
        if not any((root / spec.name).is_dir() for spec in AGENTS.values() if spec.package):
            problems.append(
                f"agents not installed at {root} (run scripts/install-agents.sh; "
                "ACP_FAST_AGENTS overrides the dir)"
            )
        _GLOBAL_PROBLEM.append(
            ("real agents not run: " + "; ".join(problems)) if problems else None
        )
    return _GLOBAL_PROBLEM[0]


def agent_problem(spec: AgentSpec) -> str | None:
    """Why `spec` cannot run here (beyond `global_problem`), or None."""
    installed = spec.installed_version()
    if installed == spec.version:
        return None
    where = (
        "in this Python (pip install agent-client-protocol==0.12.1, or scripts/install-agents.sh)"
        if not spec.package and not spec.own_venv
        else f"at {spec.prefix} (run scripts/install-agents.sh)"
    )
    found = f"found {installed}" if installed else "not installed"
    return f"{spec.name}: {spec.package or 'agent-client-protocol'}=={spec.version} {found} {where}"


# --- observing ----------------------------------------------------------------------------------


@dataclass
class Journal:
    """An observer that keeps every update and every committed permission request."""

    updates: list[Any] = field(default_factory=list)
    permissions: list[acp.PermissionRequest] = field(default_factory=list)
    activity: list[acp.ClientActivity] = field(default_factory=list)

    def on_update(self, update: Any) -> None:
        self.updates.append(update)

    def on_activity(self, activity: acp.ClientActivity) -> None:
        self.activity.append(activity)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.permissions.append(request)

    def of_kind(self, kind: acp.UpdateKind) -> list[Any]:
        return [update for update in self.updates if update.kind == kind]

    @property
    def sequences(self) -> list[int]:
        return [update.update_sequence for update in self.updates]

    @property
    def envelopes(self) -> list[str]:
        return [update.envelope for update in self.updates]

    def chunk_text(self, start: int = 0) -> str:
        return "".join(
            update.text
            for update in self.updates[start:]
            if update.kind == acp.UpdateKind.AGENT_MESSAGE_CHUNK
        )


def _complete_lines(path: Path) -> list[str]:
    """The lines of `path` that end in a newline: a tap may be writing the next one right now
    (a long line arrives in several chunks), and a line counts only once it is whole."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return data[: data.rfind(b"\n") + 1].decode("utf-8", "replace").splitlines()


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    values = []
    for line in _complete_lines(path):
        line = line.strip()
        if line:
            try:
                values.append(json.loads(line))
            except ValueError:
                values.append({"_unparsed": line})
    return values


def raw_lines(path: Path) -> list[str]:
    return [line.strip() for line in _complete_lines(path) if line.strip()]


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(0.02)
    return True


# --- processes ----------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, sid) of a process, or None when it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def live_pids() -> Iterable[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def tagged_processes(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment carries the test's tag: the agent and
    everything it started, wherever they went (other groups, other sessions, reparented)."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found = []
    for pid in live_pids():
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X", "x"):
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(pid)
    return found


def group_processes(pgid: int) -> list[int]:
    """Live processes in process group or session `pgid`."""
    found = []
    for pid in live_pids():
        stat = _stat(pid)
        if stat is not None and stat[0] not in ("Z", "X", "x") and pgid in (stat[2], stat[3]):
            found.append(pid)
    return found


def describe(pids: Iterable[int]) -> list[str]:
    """Each process as "pid (state, parent, group, session): command line", for a failure
    message: which of the agent's processes it was and whether it had left the group."""
    out = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            cmdline = "?"
        stat = _stat(pid)
        where = "gone"
        if stat is not None:
            where = "state {}, parent {}, group {}, session {}".format(*stat)
        out.append(f"{pid} ({where}): {cmdline[:160]!a}")
    return out


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def expected_modes(result: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The modes a session/new (load, resume) result offers: its ``modes`` object, else its
    ``"mode"`` select config option (opencode 1.18), as (current id, [(id, name)])."""
    modes = result.get("modes") or {}
    if modes.get("availableModes"):
        offered = [(m["id"], m["name"]) for m in modes["availableModes"]]
        return modes.get("currentModeId", ""), offered
    for option in result.get("configOptions") or []:
        if option.get("category") == "mode" and option.get("type") == "select":
            values: list[dict[str, Any]] = []
            for item in option.get("options") or []:
                values.extend(item["options"] if "group" in item and "options" in item else [item])
            return option.get("currentValue", ""), [(v["value"], v["name"]) for v in values]
    return modes.get("currentModeId", ""), []

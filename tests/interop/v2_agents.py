"""The ACP v2 (preview) agents written by others that the v2 interop tests drive
(design/protocol-now.md §4, issue 25):

- `rust-sdk-v2`: the Rust SDK's `simple_agent_v2` example (agent-client-protocol 5.2.0), built by
  `scripts/build-rust-v2-agent.sh` into the agents' cache dir. An echo agent ("Echo: <prompt>",
  streamed as one chunk then repeated as the whole `agent_message`); it reports `idle` for a new
  session before its first prompt's `running`, never asks for a permission and finishes a turn at
  once (a cancel finds it done).
- `ts-sdk-2-v2`: our agent on the TypeScript SDK 2.4.0's `experimental/v2` entry point
  (`agents/ts_sdk_v2_agent.mjs`, installed with the `ts-sdk-2` prefix): echoes a plain prompt,
  asks before writing hello.txt ("write hello.txt"), streams ticks until session/cancel ("slow").

Neither needs a model or the network; they run inside the loopback-only namespace like the rest.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import acp_fast as acp

from .support import HERE, Launch, agents_root, isolated

TS_SDK_V2_AGENT = HERE / "agents" / "ts_sdk_v2_agent.mjs"
RUST_V2_VERSION = "5.2.0"
TS_SDK_V2_VERSION = "2.4.0"
#: .ci/run sets it: there a v2 agent that is not built or installed fails the test instead of
#: skipping it (the build step already failed loudly; this keeps a skip from hiding it).
REQUIRED = os.environ.get("ACP_FAST_REQUIRE_V2_AGENTS") == "1"


@dataclass(frozen=True)
class V2Spec:
    """One v2 agent: where it is, how to start it, and what it does."""

    name: str
    version: str
    #: The reply to a plain prompt `text`.
    echo_prefix: str
    #: It asks before writing hello.txt and streams ticks until a cancel ("slow").
    scripted: bool
    #: What the harness reads of an AgentSpec: no model server.
    model_api: None = None

    def reply(self, text: str) -> str:
        return self.echo_prefix + text

    @property
    def allow_policy(self) -> acp.PermissionPolicy:
        return acp.PermissionPolicy(allowed_tool_kinds=["edit"])

    def problem(self) -> str | None:
        """Why it cannot run here (None: it can)."""
        root = agents_root()
        if self.name == "rust-sdk-v2":
            binary = root / "rust-sdk-v2" / "simple_agent_v2"
            stamp = root / "rust-sdk-v2" / "VERSION"
            found = stamp.read_text().split()[0] if stamp.is_file() and binary.is_file() else ""
            if found == self.version:
                return None
            return (
                f"rust-sdk-v2: simple_agent_v2 of agent-client-protocol {self.version} "
                f"{'found ' + found if found else 'not built'} at {binary.parent} "
                "(run scripts/build-rust-v2-agent.sh)"
            )
        manifest = root / "ts-sdk-2" / "node_modules" / "@agentclientprotocol/sdk" / "package.json"
        try:
            found = str(json.loads(manifest.read_text()).get("version"))
        except (OSError, ValueError):
            found = ""
        if found == self.version:
            return None
        return (
            f"ts-sdk-2-v2: @agentclientprotocol/sdk=={self.version} "
            f"{'found ' + found if found else 'not installed'} at {manifest.parent} "
            "(run scripts/install-agents.sh)"
        )

    def launch(self, root: Path) -> Launch:
        """Command, arguments, environment and cwd, with an isolated HOME and the run's tag."""
        cwd, _, env, tag = isolated(root)
        agents = agents_root()
        if self.name == "rust-sdk-v2":
            return Launch(str(agents / "rust-sdk-v2" / "simple_agent_v2"), [], env, cwd, tag)
        sdk = agents / "ts-sdk-2" / "node_modules" / "@agentclientprotocol/sdk"
        return Launch("node", [str(TS_SDK_V2_AGENT), str(sdk)], env, cwd, tag)


V2_AGENTS: dict[str, V2Spec] = {
    spec.name: spec
    for spec in (
        V2Spec("rust-sdk-v2", RUST_V2_VERSION, echo_prefix="Echo: ", scripted=False),
        V2Spec("ts-sdk-2-v2", TS_SDK_V2_VERSION, echo_prefix="", scripted=True),
    )
}
#: The v2 agents that ask for permissions and stream until cancelled.
SCRIPTED = [name for name, spec in V2_AGENTS.items() if spec.scripted]

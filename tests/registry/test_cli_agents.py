"""`acp-fast agents list|show` and `--agent ID` with `--registry`: registry text is someone
else's (shown printable), a typo names the known ids, a registry agent starts with its profile."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import acp_fast
from acp_fast.cli import agent
from acp_fast.registry import AgentProfile, current_platform

from .support import DEMO_SCRIPT, entry, env, tar_gz, write_registry

NPX = {"npx": {"package": "@agentclientprotocol/claude-agent-acp@0.101.0"}}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_fast", *args],
        env={**env(), "XDG_CACHE_HOME": str(cwd / "cache")},  # not the user's cache
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _demo_registry(tmp_path: Path) -> Path:
    archive = tmp_path / "demo.tgz"
    archive.write_bytes(tar_gz({"bin/demo": DEMO_SCRIPT}))
    binary = {current_platform(): {"archive": str(archive), "cmd": "bin/demo"}}
    hostile = "Evil\x1b]0;pwned\x07\x1b[2J name"
    return write_registry(
        tmp_path / "registry.json",
        entry("demo", {"binary": binary}, name="Demo agent"),
        entry("claude-acp", NPX, name="Claude Agent", version="0.101.0"),
        entry("evil", NPX, name=hostile, description="\x1b[31mred\x1b[0m"),
        entry("../x", NPX),
    )


def test_agents_list_and_show_print_registry_text_printable(tmp_path: Path) -> None:
    reg = _demo_registry(tmp_path)
    listed = cli("agents", "list", "--registry", str(reg), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines()]
    assert ids == ["claude-acp", "demo", "evil"]
    assert "\x1b" not in listed.stdout + listed.stderr and "\x07" not in listed.stdout
    assert "acp-fast: skipped #3:" in listed.stderr
    shown = cli("agents", "show", "claude-acp", "--registry", str(reg), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "npx --yes @agentclientprotocol/claude-agent-acp@0.101.0" in shown.stdout
    assert "ask mode default" in shown.stdout
    evil = cli("agents", "show", "evil", "--registry", str(reg), cwd=tmp_path)
    assert "\x1b" not in evil.stdout and "profile: none" in evil.stdout
    missing = cli("agents", "list", cwd=tmp_path)
    assert missing.returncode == 2 and "no registry" in missing.stderr


def test_run_starts_a_registry_agent_by_id_and_a_typo_names_the_ids(tmp_path: Path) -> None:
    reg = _demo_registry(tmp_path)
    ran = cli("run", "--registry", str(reg), "--agent", "demo", "hello", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "hello" in ran.stdout.lower()
    assert list((tmp_path / "cache" / "acp-fast" / "agents").iterdir()) == [
        tmp_path / "cache" / "acp-fast" / "agents" / "demo"
    ]
    typo = cli("run", "--registry", str(reg), "--agent", "dmeo", "hello", cwd=tmp_path)
    assert typo.returncode == 2
    assert "no agent 'dmeo'" in typo.stderr and "claude-acp, demo, evil" in typo.stderr
    # Not an id: a command line, as without a registry.
    line = f"{sys.executable} -m acp_fast.demo_agent"
    plain = cli("run", "--registry", str(reg), "--agent", line, "hello", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr


def _started(profile: AgentProfile, tmp_path: Path) -> tuple[acp_fast.Client, argparse.Namespace]:
    command, args = acp_fast.demo_agent_command()
    spec = acp_fast.AgentSpec(command, args, profile=profile)
    client = acp_fast.Client(spec.command, spec.args, cwd=tmp_path)
    client.start(timeout=30)
    return client, argparse.Namespace(agent_spec=spec)


def test_the_cli_switches_a_session_to_the_profile_s_ask_mode(tmp_path: Path) -> None:
    # The demo agent starts in mode "ask" and offers "code"; pretend "code" is where it asks.
    asks = AgentProfile("demo", ask_mode="code", ask_modes=frozenset({"code"}))
    client, args = _started(asks, tmp_path)
    with client:
        assert client.default_session is not None
        assert client.default_session.modes.current == "ask"
        assert agent.ask_host(client, args) is None
        assert client.default_session.modes.current == "code"
    # A profile that knows the current mode decides by itself, and no way out: a warning.
    autonomous = AgentProfile("demo", autonomous_modes=frozenset({"ask"}))
    client, args = _started(autonomous, tmp_path)
    with client:
        warning = agent.ask_host(client, args)
        assert warning is not None and "mode 'ask'" in warning and "itself" in warning

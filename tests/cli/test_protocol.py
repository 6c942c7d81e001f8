"""`--protocol` on the commands that start an agent, what `run` says was agreed, and how the
views show ACP v2's whole-message and state updates."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import acp_fast
import pytest
from acp_fast.cli.output import ConsoleObserver

from .test_run import cli

V2_AGENT = Path(__file__).resolve().parents[1] / "v2" / "v2_agent.py"
EVIL = "\x1b]0;PWNED\x07\x1b[2J"


def v2_agent(tmp_path: Path, turns: dict[str, Any]) -> str:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    return f"{sys.executable} {V2_AGENT} {script} {tmp_path / 'agent.log'}"


def message_turn(*steps: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"update": {"sessionUpdate": "state_update", "state": "running"}},
        *steps,
        {"update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}},
    ]


def chunk(text: str, message_id: str = "m1") -> dict[str, Any]:
    body = {"sessionUpdate": "agent_message_chunk", "messageId": message_id}
    return {"update": {**body, "content": {"type": "text", "text": text}}}


def whole(text: str, message_id: str = "m1") -> dict[str, Any]:
    body = {"sessionUpdate": "agent_message", "messageId": message_id}
    return {"update": {**body, "content": [{"type": "text", "text": text}]}}


@pytest.mark.parametrize("command", ["run", "chat", "login"])
def test_protocol_is_an_option_of_every_command_that_starts_an_agent(command: str) -> None:
    usage = cli(command, "--help")
    assert usage.returncode == 0 and "--protocol {v1,v2,auto}" in usage.stdout
    wrong = cli(command, "--protocol", "v3", *(["hi"] if command == "run" else []))
    assert wrong.returncode == 2 and "invalid choice: 'v3'" in wrong.stderr


@pytest.mark.parametrize("flag", ["--fs", "--terminal"])
def test_v2_with_the_host_side_is_a_usage_error(flag: str, tmp_path: Path) -> None:
    proc = cli("run", "--protocol", "v2", flag, "hi", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{flag} cannot be served with --protocol v2" in proc.stderr
    assert "--protocol auto" in proc.stderr


def test_v1_says_nothing_new_and_auto_says_what_was_agreed(tmp_path: Path) -> None:
    plain = cli("run", "hello", cwd=tmp_path)
    assert plain.returncode == 0 and "ACP v" not in plain.stderr
    auto = cli("run", "--protocol", "auto", "hello", cwd=tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert "acp-fast: speaking ACP v2 (--protocol auto)" in auto.stderr  # the demo agent's
    assert auto.stdout == plain.stdout


def test_a_v2_agent_through_run(tmp_path: Path) -> None:
    agent = v2_agent(tmp_path, {"hello": message_turn(chunk("Hel"), chunk("lo"), whole("Hello!"))})
    proc = cli("run", "--protocol", "v2", "--agent", agent, "hello there", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello!\n"
    assert "acp-fast: speaking ACP v2 (--protocol v2)" in proc.stderr
    auto = cli("run", "--protocol", "auto", "--fs", "--agent", agent, "hello", cwd=tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert "speaking ACP v2 (--protocol auto); v2 has no host side" in auto.stderr


def test_a_revised_message_is_printed_again_and_said_so(tmp_path: Path) -> None:
    turn = message_turn(chunk("first draft"), whole(f"final {EVIL}"))
    agent = v2_agent(tmp_path, {"hello": turn})
    proc = cli("run", "--protocol", "v2", "--agent", agent, "hello", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("first draft\nfinal ")
    assert "acp-fast: the agent revised its message; the final text follows" in proc.stderr


def test_a_v1_agent_refused_by_v2_says_what_to_do(tmp_path: Path) -> None:
    v1_only = f"{sys.executable} -m acp_fast.demo_agent --max-protocol 1"
    proc = cli("run", "--protocol", "v2", "--agent", v1_only, "hello", cwd=tmp_path)
    assert proc.returncode == 1
    assert "auto" in proc.stderr and "acp-fast: error:" in proc.stderr


# --- the plain view, update by update ---------------------------------------------------------


def update(kind: str, text: str, message_id: str | None = None) -> acp_fast.Update:
    return acp_fast.Update(
        kind=kind,
        session_update=kind,
        transport_epoch=1,
        update_sequence=1,
        session_id="s1",
        envelope="{}",
        text=text,
        message_id=message_id,
    )


def view() -> tuple[ConsoleObserver, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return ConsoleObserver(out, err), out, err


def test_a_whole_message_adds_only_what_extends_the_streamed_text() -> None:
    observer, out, err = view()
    observer.on_update(update("agent_message_chunk", "Hel", "m1"))
    observer.on_update(update("agent_message", "Hello", "m1"))
    observer.on_update(update("agent_message", "Hello", "m1"))  # a repeat adds nothing
    observer.on_update(update("agent_message", "Bye", "m2"))  # another message: whole
    assert out.getvalue() == "HelloBye" and err.getvalue() == ""


def test_a_changed_message_is_written_again_after_a_note() -> None:
    observer, out, err = view()
    observer.on_update(update("agent_message_chunk", "draft", "m1"))
    observer.on_update(update("agent_message", "final", "m1"))
    assert out.getvalue() == "draft\nfinal"
    assert err.getvalue() == "acp-fast: the agent revised its message; the final text follows\n"


def test_state_and_plan_updates_have_their_lines_made_printable() -> None:
    observer, _out, err = view()
    observer.on_update(update("state_update", "running"))
    observer.on_update(update("state_update", "requires_action"))
    observer.on_update(update("plan_update", f"one{EVIL}\ntwo"))
    lines = err.getvalue().splitlines()
    assert lines[0] == "state: waiting for you (requires action)"
    assert lines[1].startswith("plan: - one") and "\x1b" not in err.getvalue()
    assert lines[2] == "plan: - two"


def test_the_live_view_replaces_a_streamed_message() -> None:
    pytest.importorskip("rich")
    from acp_fast._live import LiveView
    from rich.console import Console

    live = LiveView(Console(file=io.StringIO()))
    for item in (
        update("agent_message_chunk", "Hel", "m1"),
        update("agent_message_chunk", "lo", "m1"),
        update("agent_message_chunk", " then", "m2"),
        update("agent_message", " after", "m2"),
        update("state_update", "requires_action"),
    ):
        live.on_update(item)
    assert live.reply_text() == "Hello after"
    assert "state requires_action" in live._footer().plain


def test_a_whole_thought_is_shown_only_when_its_chunks_were_not() -> None:
    observer, _out, err = view()
    observer.on_update(update("agent_thought_chunk", "think", "t1"))
    observer.on_update(update("agent_thought", "think", "t1"))
    observer.on_update(update("agent_thought", f"other{EVIL}", "t2"))
    observer.finish()
    lines = err.getvalue().splitlines()
    assert lines[0] == "thought: think"
    assert lines[1].startswith("thought: other") and "\x1b" not in err.getvalue()
    assert len(lines) == 2

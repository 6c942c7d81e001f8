"""The CLI's questions for an agent's elicitation (`acp_fast.cli.elicit.ask`), driven by scripted
answers: typed fields, enums, skipping, wrong answers, end of input, and hostile forms."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_fast.cli import elicit

from .ptykit import Pty


def scripted(*answers: str) -> tuple[Callable[[str], str], Callable[[str], None], list[str]]:
    queue = list(answers)
    shown: list[str] = []

    def read(prompt: str) -> str:
        shown.append(prompt)
        if not queue:
            raise EOFError
        return queue.pop(0)

    return read, shown.append, shown


FORM: dict[str, Any] = {
    "type": "object",
    "title": "Deploy",
    "properties": {
        "name": {"type": "string", "description": "who you are"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "sure": {"type": "boolean"},
        "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g"}]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
    },
    "required": ["name", "count"],
}


def test_a_form_is_asked_field_by_field_with_types() -> None:
    read, write, shown = scripted("y", "ann", "x", "3", "", "yes", "1", "1, 3")
    action, content = elicit.ask("Fill it", "form", schema=FORM, read=read, write=write)
    assert action == "accept"
    assert content == {"name": "ann", "count": 3, "sure": True, "colour": "r", "tags": ["a", "c"]}
    text = "".join(shown)
    assert "The agent asks: Fill it" in text and "Deploy" in text and "who you are" in text
    assert "(not a valid integer)" in text and "1. Red" in text


def test_decline_and_cancel_and_end_of_input() -> None:
    for answer, action in (("n", "decline"), ("c", "cancel"), ("what", "cancel")):
        read, write, _ = scripted(answer)
        assert elicit.ask("m", "form", schema=FORM, read=read, write=write) == (action, None)
    read, write, shown = scripted("y", "ann")  # then the input ends
    assert elicit.ask("m", "form", schema=FORM, read=read, write=write) == ("cancel", None)
    assert "(cancelled)" in "".join(shown)


def test_a_required_field_answered_wrong_three_times_cancels() -> None:
    read, write, _ = scripted("y", "", "", "")
    assert elicit.ask("m", "form", schema=FORM, read=read, write=write) == ("cancel", None)


def test_a_url_request_shows_the_address_printably() -> None:
    read, write, shown = scripted("y")
    url = "https://example.test/\x1b[2Jlogin"
    assert elicit.ask("Log in", "url", url=url, read=read, write=write) == ("accept", None)
    text = "".join(shown)
    assert "\x1b" not in text and "example.test" in text


def test_hostile_forms_are_declined_not_half_asked() -> None:
    many = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(100)}}
    read, write, shown = scripted()
    assert elicit.ask("m", "form", schema=many, read=read, write=write) == ("decline", None)
    odd = {"type": "object", "properties": {"x": {"type": "_custom"}}, "required": ["x"]}
    read, write, shown = scripted()
    assert elicit.ask("m", "form", schema=odd, read=read, write=write) == ("decline", None)
    read, write, shown = scripted()
    assert elicit.ask("m", "_future", read=read, write=write) == ("decline", None)
    # An optional field of an unknown type is left out; control bytes never shown.
    odd = {
        "type": "object",
        "properties": {"\x1b]0;x\x07": {"type": "_custom"}, "a": {"type": "string"}},
    }
    read, write, shown = scripted("y", "v")
    assert elicit.ask("\x1b[31m", "form", schema=odd, read=read, write=write) == (
        "accept",
        {"a": "v"},
    )
    assert not any("\x1b" in s or "\x07" in s for s in shown)


def test_a_huge_message_is_cut() -> None:
    read, write, shown = scripted("n")
    elicit.ask("x" * 1_000_000, "form", schema=FORM, read=read, write=write)
    assert sum(len(s) for s in shown) < 10_000


def test_numbers_must_be_finite() -> None:
    schema = {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]}
    read, write, _ = scripted("y", "nan", "inf", "2.5")
    assert elicit.ask("m", "form", schema=schema, read=read, write=write) == ("accept", {"r": 2.5})


# --- acp-fast run and chat on a terminal, against the scripted host agent ------------------

HOST_AGENT = Path(__file__).resolve().parents[1] / "host" / "host_agent.py"
ASKING = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Who \x1b[31mare\x1b[0m you?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"],
        },
    },
}


def _agent(tmp_path: Path) -> str:
    return shlex.join([sys.executable, "-I", str(HOST_AGENT), str(tmp_path / "agent.log")])


def test_run_on_a_terminal_asks_the_form_and_sends_the_answers(tmp_path: Path) -> None:
    steps = json.dumps([{"request": ASKING}])
    pty = Pty(
        ["run", "--view", "plain", "--agent", _agent(tmp_path), "--cwd", str(tmp_path), steps],
        cwd=tmp_path,
    )
    try:
        pty.expect(r"Answer\? \[y\]es")
        pty.send("y\r")
        pty.expect(r"name \(string\)")
        pty.send("Ada\r")
        pty.expect(r"age \(integer, Enter to skip\)")
        pty.send("36\r")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    assert "\x1b[31m" not in pty.text  # the agent's control bytes are shown, not obeyed
    sent = [json.loads(line) for line in (tmp_path / "agent.log").read_text().splitlines()]
    answers = [
        m["result"] for m in sent if isinstance(m.get("result"), dict) and "action" in m["result"]
    ]
    assert answers == [{"action": "accept", "content": {"name": "Ada", "age": 36}}]


def test_run_without_a_terminal_advertises_no_elicitation(tmp_path: Path) -> None:
    steps = json.dumps([{"request": ASKING}])
    command = ["run", "--view", "plain", "--agent", _agent(tmp_path), "--cwd", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "acp_fast", *command, steps],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    sent = [json.loads(line) for line in (tmp_path / "agent.log").read_text().splitlines()]
    init = next(m for m in sent if m.get("method") == "initialize")
    assert "elicitation" not in init["params"]["clientCapabilities"]
    answers = [
        m["result"] for m in sent if isinstance(m.get("result"), dict) and "action" in m["result"]
    ]
    assert answers == [{"action": "decline"}]


def test_chat_asks_an_elicitation_and_ctrl_d_cancels_it(tmp_path: Path) -> None:
    steps = json.dumps([{"request": ASKING}])
    pty = Pty(
        ["chat", "--view", "plain", "--agent", _agent(tmp_path), "--cwd", str(tmp_path)],
        cwd=tmp_path,
    )
    try:
        pty.expect(r"you> ")
        pty.send(steps + "\r")
        pty.expect(r"Answer\? \[y\]es")
        pty.send("y\r")
        pty.expect(r"name \(string\)")
        pty.send(b"\x04")  # end of input: the elicitation is cancelled, then chat leaves
        pty.finish()
    finally:
        pty.close()
    sent = [json.loads(line) for line in (tmp_path / "agent.log").read_text().splitlines()]
    answers = [
        m["result"] for m in sent if isinstance(m.get("result"), dict) and "action" in m["result"]
    ]
    assert answers == [{"action": "cancel"}]

"""`acp-fast chat` on a pseudo-terminal, as a person uses it: turns, a permission question,
Ctrl-C cancelling a turn, slash commands, Ctrl-D ending; and from a pipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from acp_fast import journal

from .ptykit import Pty, env


def sent_methods(path: Path) -> list[str]:
    methods = []
    for record in journal.read(path):
        if record.kind == "sent":
            message = json.loads(record.envelope)
            if "method" in message:
                methods.append(message["method"])
    return methods


def stop_reasons(path: Path) -> list[str]:
    reasons = []
    for record in journal.read(path):
        if record.kind == "received":
            result = json.loads(record.envelope).get("result")
            if isinstance(result, dict) and "stopReason" in result:
                reasons.append(result["stopReason"])
    return reasons


@pytest.mark.parametrize("view", ["plain", "live"])
def test_turns_question_cancel_and_ctrl_d(tmp_path: Path, view: str) -> None:
    if view == "live":
        pytest.importorskip("rich")
    record = tmp_path / "chat.jsonl"
    pty = Pty(
        ["chat", "--view", view, "--journal", str(record)],
        cwd=tmp_path,
        extra_env={"ACP_DEMO_DELAY": "0.3"},
    )
    try:
        pty.expect("acp-fast chat with acp-fast demo agent: session demo-1, mode ask")
        pty.expect("you> ")
        pty.send("hello there\r")
        pty.expect("Hello! You said: hello there.")
        pty.expect("you> ")

        pty.send("please write a.txt\r")
        pty.expect(r"the agent asks permission: Write a\.txt \(edit\)")
        pty.expect(r"allow\? \[y\]es once, \[a\]lways, \[n\]o: ")
        pty.send("y\r")
        pty.expect(r"I wrote a\.txt\.")
        pty.expect("you> ")

        pty.send("tell me a long story about the sea and the ships on it\r")
        pty.expect("Hello! ")
        pty.send("\x03")  # Ctrl-C: the terminal sends SIGINT to the chat
        pty.expect(r"cancelling the turn \(Ctrl-C again within 2 s to leave\)")
        pty.expect("stop reason: cancelled")
        pty.expect("you> ")

        pty.send("/mode\r")
        pty.expect(r"\* ask  Ask")
        pty.expect("you> ")
        pty.send("\x04")  # Ctrl-D at the prompt
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    text = pty.text
    assert "permission: Write a.txt" in text
    assert "Traceback" not in text
    if view == "live":
        assert " records)" in text  # the footer counts the journal's records
    assert stop_reasons(record) == ["end_turn", "end_turn", "cancelled"]
    methods = sent_methods(record)
    assert methods.count("session/prompt") == 3
    assert methods.count("session/cancel") == 1  # one Ctrl-C, one session/cancel


@pytest.mark.parametrize(
    "rule",
    [("--allow-kind", "EDIT"), ("--allow-title-prefix", "Write b."), ("--allow", "edit:b.txt")],
)
def test_rules_decide_before_the_question(tmp_path: Path, rule: tuple[str, str]) -> None:
    """--allow-kind and --allow-title-prefix are allow rules, as --allow is: the write is
    allowed and nobody is asked."""
    pty = Pty(["chat", "--view", "plain", *rule], cwd=tmp_path)
    try:
        pty.expect("you> ")
        pty.send("write b.txt\r")
        pty.expect(r"I wrote b\.txt\.")
        pty.expect("you> ")
        pty.send("/quit\r")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    assert "asks permission" not in pty.text
    assert "permission: Write b.txt -> selected allow" in pty.text


def test_always_is_asked_once(tmp_path: Path) -> None:
    pty = Pty(["chat", "--view", "plain"], cwd=tmp_path)
    try:
        pty.expect("you> ")
        pty.send("write c.txt\r")
        pty.expect(r"allow\? ")
        pty.send("a\r")
        pty.expect(r"I wrote c\.txt\.")
        pty.expect("you> ")
        pty.send("write d.txt\r")
        pty.expect(r"I wrote d\.txt\.")
        pty.expect("you> ")
        pty.send("\x04")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    assert pty.text.count("asks permission") == 1


def test_two_ctrl_c_within_two_seconds_stop(tmp_path: Path) -> None:
    pty = Pty(["chat", "--view", "plain"], cwd=tmp_path, extra_env={"ACP_DEMO_DELAY": "2"})
    try:
        pty.expect("you> ")
        pty.send("a slow answer please\r")
        pty.expect("Hello! ")
        pty.send("\x03")
        pty.expect("cancelling the turn")
        pty.send("\x03")
        assert pty.finish() == 130, pty.text
    finally:
        pty.close()
    assert "acp-fast: interrupted" in pty.text
    assert "Traceback" not in pty.text


def test_cancel_typed_while_a_turn_runs(tmp_path: Path) -> None:
    record = tmp_path / "chat.jsonl"
    pty = Pty(
        ["chat", "--view", "plain", "--journal", str(record)],
        cwd=tmp_path,
        extra_env={"ACP_DEMO_DELAY": "1"},
    )
    try:
        pty.expect("you> ")
        pty.send("one two three four five six seven\r")
        pty.expect("Hello! ")
        pty.send("/cancel\r")
        pty.expect("cancelling the turn")
        pty.expect("stop reason: cancelled")
        pty.expect("you> ")
        pty.send("\x04")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    assert stop_reasons(record) == ["cancelled"]


def test_a_line_typed_ahead_does_not_answer_a_question(tmp_path: Path) -> None:
    """ "y" typed while the turn ran, before the question was shown, is a prompt for later,
    not a yes."""
    pty = Pty(["chat", "--view", "plain"], cwd=tmp_path, extra_env={"ACP_DEMO_DELAY": "0.4"})
    try:
        pty.expect("you> ")
        pty.send("hello one two three four five\r")
        pty.expect("Hello! ")
        pty.send("write g.txt\r")  # typed ahead: the next prompt
        pty.send("y\r")  # typed before the question (the first turn still runs)
        pty.expect("you> write g.txt")
        pty.expect(r"allow\? ")
        pty.send("n\r")
        pty.expect(r"I did not write g\.txt: permission was rejected\.")
        pty.expect("you> y")  # the early "y" came next, as a prompt
        pty.expect("you> ")
        pty.send("\x04")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    assert not (tmp_path / "g.txt").exists()


def test_ctrl_c_at_the_prompt_drops_the_line(tmp_path: Path) -> None:
    pty = Pty(["chat", "--view", "plain"], cwd=tmp_path)
    try:
        pty.expect("you> ")
        pty.send("half a line")
        # Typed and Ctrl-C in one burst, readline could still be reading the keys when the
        # signal lands (CPython's readline runs handlers only on an interrupted select): a
        # person types slower. Wait for the echo first.
        pty.expect("half a line")
        # Even so, under load the SIGINT can land while readline is between two selects: its
        # handler then waits for the next key or signal (a person presses Ctrl-C again; both
        # trip one pending flag, so the chat sees one Ctrl-C, not two).
        for attempt in range(3):
            pty.send("\x03")
            try:
                pty.expect("the line was dropped", timeout=5.0)
                break
            except AssertionError:
                if attempt == 2:
                    raise
        pty.expect("you> ")
        pty.send("/nonsense\r")
        pty.expect(r"unknown command /nonsense \(/help lists them")
        pty.expect("you> ")
        pty.send("\x04")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()


def test_from_a_pipe(tmp_path: Path) -> None:
    """stdin not a terminal: lines are prompts, nobody is asked (the rules decide)."""
    proc = subprocess.run(
        [sys.executable, "-m", "acp_fast", "chat", "--view", "plain"],
        input="hello\nwrite e.txt\n/mode code\nwrite f.txt\n",
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "Hello! You said: hello.",
        "Hello! You said: write e.txt. I did not write e.txt: permission was rejected.",
        "Hello! You said: write f.txt. I wrote f.txt.",
    ]
    assert "asks permission" not in proc.stderr
    assert "acp-fast: mode code" in proc.stderr


def test_a_line_too_long_is_skipped_and_said(tmp_path: Path) -> None:
    """A pipe may hold a line of any length: one over 1 MiB is skipped (memory stays bounded),
    the chat says so and goes on."""
    proc = subprocess.run(
        [sys.executable, "-m", "acp_fast", "chat", "--view", "plain"],
        input="x" * (3 << 20) + "\nhello\n",
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello! You said: hello.\n"
    assert proc.stderr.count("acp-fast: a line longer than 1,048,576 bytes was skipped") == 1

"""`acp-fast run` and the command line as a new user meets it (first-use.md §2): errors that
show the agent's stderr, --version, each subcommand's usage, the prompt from stdin, --timeout,
a closed stdout, interruptions on their own line, checked tool kinds, the demo agent's host
mode, and the journal tools' wording."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import acp_fast
import pytest

from .ptykit import Pty, env

TIMEOUT = 60


def cli(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_fast", *args],
        env=env(),
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_the_agent_s_stderr_is_shown_under_the_error(tmp_path: Path) -> None:
    agent = "/bin/sh -c 'echo GEMINI_API_KEY is not set >&2; echo see the docs >&2; exit 3'"
    proc = cli("run", "--agent", agent, "hi", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("acp-fast: error: ")
    assert "exited with status 3" in lines[0]
    assert lines[1:] == [
        "acp-fast: the agent's stderr ended with:",
        "  | GEMINI_API_KEY is not set",
        "  | see the docs",
    ]
    quiet = cli("run", "--agent-stderr", "discard", "--agent", agent, "hi", cwd=tmp_path)
    assert quiet.returncode == 1 and len(quiet.stderr.splitlines()) == 1
    inherit = cli("run", "--agent-stderr", "inherit", "--agent", agent, "hi", cwd=tmp_path)
    assert inherit.returncode == 1 and "GEMINI_API_KEY is not set" in inherit.stderr


def test_replay_of_a_missing_journal_says_why(tmp_path: Path) -> None:
    agent = f"{sys.executable} -m acp_fast replay {tmp_path / 'nope.jsonl'}"
    proc = cli("run", "--agent", agent, "hi", cwd=tmp_path)
    assert proc.returncode == 1
    assert f"  | acp-fast replay: error: {tmp_path / 'nope.jsonl'}: No such file" in proc.stderr


def test_version_and_usage() -> None:
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"acp-fast {acp_fast.__version__}\n"
    for args, usage in (
        (("run",), "usage: acp-fast run "),
        (("run", "--agent", "", "hi"), "usage: acp-fast run "),
        (("run", "--terminal-shell", "/bin/sh", "hi"), "usage: acp-fast run "),
        (("chat", "--allow", "bogus:x"), "usage: acp-fast chat "),
        (("journal",), "usage: acp-fast journal "),
        (("bench", "--seconds", "0"), "usage: acp-fast bench "),
        (("run", "--timeout", "-1", "hi"), "usage: acp-fast run "),
    ):
        proc = cli(*args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith(usage), (args, proc.stderr)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--allow", "bogus:x"),
        ("--deny", "wrte"),
        ("--allow-kind", "Edits"),
        ("--deny", "execut:/rm/"),
    ],
)
def test_unknown_tool_kinds_are_usage_errors(option: str, value: str) -> None:
    proc = cli("run", option, value, "hi")
    assert proc.returncode == 2
    last = proc.stderr.splitlines()[-1]
    assert "unknown tool kind" in last
    assert "read, edit, delete, move, search, execute, think, fetch, switch_mode, other" in last


def test_kinds_are_case_insensitive_and_deny_wins(tmp_path: Path) -> None:
    proc = cli("run", "--allow-kind", "EDIT", "write a.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "I wrote a.txt." in proc.stdout  # "EDIT" is the kind edit, not a kind of its own
    proc = cli("run", "--allow-kind", "EDIT", "--deny", "Edit", "write a.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "I did not write a.txt: permission was rejected." in proc.stdout


def test_prompt_from_stdin(tmp_path: Path) -> None:
    proc = cli("run", "-", cwd=tmp_path, stdin="a prompt\nof two lines\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello! You said: a prompt of two lines.\n"
    empty = cli("run", "-", cwd=tmp_path, stdin="  \n")
    assert empty.returncode == 2 and "the prompt on stdin is empty" in empty.stderr


def test_timeout_for_start_and_for_the_turn(tmp_path: Path) -> None:
    began = time.monotonic()
    proc = cli("run", "--timeout", "0.5", "--agent", "/bin/sh -c 'sleep 30'", "hi")
    assert proc.returncode == 1
    assert proc.stderr.startswith("acp-fast: error: the agent did not start within 0.5 s")
    assert time.monotonic() - began < 20  # not the agent's 30 s
    slow = f"{sys.executable} -m acp_fast.demo_agent --delay 5"
    began = time.monotonic()
    proc = cli("run", "--timeout", "1", "--agent", slow, "one two three four", cwd=tmp_path)
    assert proc.returncode == 1
    assert "acp-fast: error: the turn did not end within 1 s (--timeout)" in proc.stderr
    assert time.monotonic() - began < 20


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    """`| head -c 5`: no "stdout was closed", no traceback; the status a filter has."""
    proc = subprocess.run(
        f"{sys.executable} -m acp_fast run 'hello there you' | head -c 5",
        shell=True,
        env=env(ACP_DEMO_DELAY="0.05"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        executable="/bin/bash",
    )
    assert proc.stdout == "Hello"
    assert "stdout was closed" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error" not in proc.stderr


def test_an_interruption_is_on_its_own_line(tmp_path: Path) -> None:
    pty = Pty(
        ["run", "--view", "plain", "one two three four five six"],
        cwd=tmp_path,
        extra_env={"ACP_DEMO_DELAY": "1"},
    )
    try:
        pty.expect("Hello! ")
        pty.send("\x03")
        assert pty.finish() == 130
    finally:
        pty.close()
    lines = pty.text.replace("\r\n", "\n").split("\n")
    assert "acp-fast: interrupted" in lines, lines


def test_the_waiting_line_on_a_terminal(tmp_path: Path) -> None:
    """An agent slow to start: after a second the terminal says so, and the line is erased
    before anything else is written."""
    slow = f"/bin/sh -c 'sleep 2.5; exec {sys.executable} -m acp_fast.demo_agent'"
    pty = Pty(["run", "--view", "plain", "--agent", slow, "one two"], cwd=tmp_path)
    status = pty.finish()
    assert status == 0, pty.text
    assert "acp-fast: starting sh… (1 s)" in pty.text
    shown = pty.output.decode()
    # Each drawing starts by erasing the line; the first line after it starts clean.
    assert "\r\x1b[2Kthought: Thinking about: one two\r\n" in shown
    piped = cli("run", "--agent", slow, "one two", cwd=tmp_path)
    assert "starting" not in piped.stderr  # not a terminal: nothing drawn


def test_host_mode_writes_the_file_and_shows_the_activity(tmp_path: Path) -> None:
    proc = cli("run", "--fs", "--terminal", "--allow-kind", "edit", "write hello.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "hello.txt").read_text().startswith("Hello from the acp-fast demo agent.")
    assert proc.stdout.startswith("Hello! You said: write hello.txt. I wrote hello.txt.")
    lines = proc.stderr.splitlines()
    assert f"fs/write_text_file {tmp_path}/hello.txt: allowed" in lines
    assert "permission: Run wc -c hello.txt -> selected reject" in lines


def test_the_terminal_shell_hint_reaches_the_screen(tmp_path: Path) -> None:
    args = ["run", "--fs", "--terminal", "--allow-kind", "edit", "--allow-kind", "execute"]
    proc = cli(*args, "write hello.txt in a shell", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    hints = [line for line in proc.stderr.splitlines() if line.startswith("acp-fast: hint:")]
    assert len(hints) == 1 and "--terminal-shell /bin/sh" in hints[0]
    proc = cli(*args, "--terminal-shell", "/bin/sh", "write hello.txt in a shell", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "acp-fast: hint:" not in proc.stderr
    assert "wc -c hello.txt printed:" in proc.stdout


def test_journal_tools_wording(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    assert cli("run", "--journal", str(path), "  spaced\tout  ", cwd=tmp_path).returncode == 0
    show = cli("journal", "show", str(path)).stdout
    # The chunk text exactly as sent: the demo agent's words keep their trailing spaces.
    assert "agent_message_chunk 'Hello! '" in show
    stats = cli("journal", "stats", str(path)).stdout
    assert "1 turn\n" in stats or stats.rstrip().endswith("1 turn") or " 1 turn" in stats
    assert "1 turns" not in stats

    never = tmp_path / "never.jsonl"
    proc = cli("run", "--journal", str(never), "--agent", "/does/not/exist", "hi")
    assert proc.returncode == 1
    for action in ("show", "stats"):
        proc = cli("journal", action, str(never))
        assert proc.returncode == 0, proc.stderr
        assert "never started" in proc.stdout + proc.stderr


def test_sigterm_still_stops_with_143(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_fast", "run", "one two three four"],
        env=env(ACP_DEMO_DELAY="2"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.read(len("Hello! "))
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_live_view_final_frame(tmp_path: Path) -> None:
    """The final frame keeps the thought line, says "1 update", and says where a cut reply
    is whole."""
    pytest.importorskip("rich")
    import io

    from acp_fast import _live
    from rich.console import Console

    console = Console(file=io.StringIO(), width=100, color_system=None)
    view = _live.LiveView(console, "j.jsonl")

    def update(kind: str, text: str) -> acp_fast.Update:
        body = f'{{"sessionUpdate":"{kind}","content":{{"type":"text","text":"x"}}}}'
        params = f'{{"sessionId":"s","update":{body}}}'
        envelope = f'{{"jsonrpc":"2.0","method":"session/update","params":{params}}}'
        return acp_fast.Update(
            kind=kind,
            session_update=kind,
            transport_epoch=1,
            update_sequence=1,
            session_id="s",
            envelope=envelope,
            text=text,
        )

    view.on_update(update("agent_thought_chunk", "pondering deeply"))
    view.stop()
    frame = console.file.getvalue()
    assert "thinking: pondering deeply" in frame
    assert "1 update ·" in frame

    console = Console(file=io.StringIO(), width=300, color_system=None)
    view = _live.LiveView(console, "j.jsonl")
    chunk = "y" * 1000
    for _ in range(_live.REPLY_CHARS // 1000 + 5):
        view.on_update(update("agent_message_chunk", chunk))
    view.stop()
    frame = console.file.getvalue()
    assert "the first 5,000 characters of the reply are left out" in frame
    assert "the journal j.jsonl has the whole reply" in frame

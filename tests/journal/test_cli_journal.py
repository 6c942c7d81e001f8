"""`acp-fast run --journal`, `acp-fast journal show|stats`, `acp-fast replay` and the live view,
run as a user would (python -m acp_fast, stdout a pipe)."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import acp_fast as acp
import pytest
from acp_fast import journal

TIMEOUT = 60


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_fast", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def one_error_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("acp-fast: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("name", ["talk.jsonl", "talk.sqlite"])
def test_run_records_and_show_and_stats_read_it(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    first = cli("run", "--journal", str(path), "--allow-kind", "edit", "please write a.txt")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Hello! You said: please write a.txt. I wrote a.txt.\n"
    second = cli("run", "--journal", str(path), "--fsync", "every", "hello")
    assert second.returncode == 0, second.stderr
    assert journal.journal_kind(path) == ("sqlite" if name.endswith("sqlite") else "jsonl")

    records = list(journal.read(path))
    updates = [r for r in records if r.kind == "update"]
    # One epoch per run, so (epoch, sequence) stays a key; every record carries its run's.
    assert {r.transport_epoch for r in updates} == {1, 2}
    assert {r.transport_epoch for r in records} == {1, 2}
    assert next(r.update_sequence for r in updates if r.transport_epoch == 2) == 1

    show = cli("journal", "show", str(path))
    assert show.returncode == 0 and show.stderr == ""
    lines = show.stdout.splitlines()
    assert len(lines) == len(records)
    assert any(
        "permission 1:0" in line and "Write a.txt -> selected allow" in line for line in lines
    )
    assert any("update     2:1" in line and "agent_thought_chunk" in line for line in lines)

    envelopes = cli("journal", "show", "--kind", "permission", "--envelopes", str(path))
    permission = [r for r in records if r.kind == "permission"]
    assert envelopes.stdout == "".join(r.envelope + "\n" for r in permission)

    stats = cli("journal", "stats", str(path))
    assert stats.returncode == 0, stats.stderr
    text = stats.stdout
    assert f"records       {len(records)}" in text
    assert "epochs        1, 2" in text
    assert "agent_message_chunk" in text and "tool_call_update" in text
    assert "selected allow" in text
    assert "turn" in text  # the turns table, or why there is none


def test_replay_command_plays_a_journal_to_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    assert cli("run", "--journal", str(path), "--allow-kind", "edit", "write b.txt").returncode == 0
    again = cli(
        "run",
        "--agent",
        f"{sys.executable} -m acp_fast replay {path}",
        "--allow-kind",
        "edit",
        "write b.txt",
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Hello! You said: write b.txt. I wrote b.txt.\n"
    assert "permission: Write b.txt -> selected allow" in again.stderr


def test_a_torn_journal_shows_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    assert cli("run", "--journal", str(path), "hello").returncode == 0
    count = len(list(journal.read(path)))
    with path.open("ab") as handle:
        handle.write(b'{"n":99,"k":"upd')
    proc = cli("journal", "show", str(path))
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == count
    assert proc.stderr.splitlines() == [
        f"acp-fast: warning: {path}: dropped a torn final record (record {count + 1}, 16 "
        "bytes), what a crash leaves"
    ]
    stats = cli("journal", "stats", str(path))
    assert stats.returncode == 0 and "a torn final record (a crash) was left out" in stats.stdout


def test_errors_are_one_line_naming_the_file_and_record(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    assert cli("run", "--journal", str(path), "hello").returncode == 0
    lines = path.read_bytes().splitlines(keepends=True)
    lines[4] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    for action in ("show", "stats"):
        one_error_line(cli("journal", action, str(path)), f"{path}: record 4: not valid JSON")

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    one_error_line(cli("journal", "stats", str(other)), f"{other}: not an acp-fast journal")
    one_error_line(cli("journal", "show", str(tmp_path / "nope")), "nope: no such file")
    missing = tmp_path / "no" / "dir" / "j.jsonl"
    one_error_line(
        cli("run", "--journal", str(missing), "hello"),
        f"{missing}: cannot create the journal: no such directory",
    )
    one_error_line(cli("run", "--journal", str(other), "hello"), "not an acp-fast journal")

    replay = cli("replay", str(tmp_path / "nope"))
    assert replay.returncode == 1 and "Traceback" not in replay.stderr
    assert replay.stderr.splitlines() == [
        f"acp-fast replay: error: {tmp_path / 'nope'}: No such file or directory"
    ]
    replay = cli("replay", str(path))
    assert replay.returncode == 1 and "Traceback" not in replay.stderr
    assert replay.stderr.splitlines() == [
        f"acp-fast replay: error: {path}: record 4: not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    ]


def test_live_view_prints_the_final_turn_when_not_a_terminal(tmp_path: Path) -> None:
    """--view live with stdout a pipe: rich draws no frames, only the final state."""
    proc = cli(
        "run",
        "--view",
        "live",
        "--journal",
        str(tmp_path / "j"),
        "--allow-kind",
        "edit",
        "please write c.txt",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Hello! You said: please write c.txt. I wrote c.txt." in out
    for piece in (
        "reply",
        "plan",
        "Read the prompt",
        "Write c.txt",
        "completed",
        "permission: Write c.txt",
        "selected allow",
        "updates/s",
        "journal",
    ):
        assert piece in out, piece
    assert "\x1b[" not in out  # no terminal, no escape codes


def test_live_view_renders_each_part() -> None:
    """The view's frames, drawn into a fake terminal: reply, plan, tool calls with status,
    permission decisions, footer."""
    from acp_fast._live import LiveView
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100, height=40, color_system=None)
    view = LiveView(console, "j.jsonl")

    def u(
        kind: str, body: dict[str, object], text: str = "", call: str | None = None
    ) -> acp.Update:
        envelope = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "s", "update": {"sessionUpdate": kind, **body}},
            }
        )
        return acp.Update(
            kind=kind,
            session_update=kind,
            transport_epoch=1,
            update_sequence=1,
            session_id="s",
            envelope=envelope,
            text=text,
            tool_call_id=call,
        )

    view.on_update(
        u(
            "plan",
            {
                "entries": [
                    {"content": "Step one", "status": "completed"},
                    {"content": "Step two", "status": "in_progress"},
                ]
            },
        )
    )
    view.on_update(
        u(
            "tool_call",
            {"toolCallId": "c1", "title": "Run ls", "kind": "execute", "status": "pending"},
            "Run ls",
            "c1",
        )
    )
    view.on_update(u("tool_call_update", {"toolCallId": "c1", "status": "completed"}, "", "c1"))
    for word in ("Hello ", "there ", "world"):
        view.on_update(u("agent_message_chunk", {"content": {"type": "text", "text": word}}, word))
    view.on_permission_commit(
        acp.PermissionRequest(
            "s", "c1", "Run ls", "execute", "pending", "selected", "ok", "allow_once", (), "", 1
        )
    )
    console.print(view._render())
    frame = screen.getvalue()
    for piece in (
        "Hello there world",
        "Step one",
        "Step two",
        "in_progress",
        "Run ls",
        "execute",
        "completed",
        "permission: Run ls",
        "selected ok",
        "6 updates",
        "journal j.jsonl",
    ):
        assert piece in frame, piece
    assert view.reply_text() == "Hello there world"


def test_show_and_stats_of_wire_lines(tmp_path: Path) -> None:
    """A journal with the client's lines and the agent's answers (the wire tap): show names
    each message, stats has the turns table with durations and stop reasons."""
    from .test_journal import conversation

    path = tmp_path / "wire.jsonl"
    with journal.JsonlJournal(path) as j:
        conversation(j)
    show = cli("journal", "show", str(path))
    assert show.returncode == 0, show.stderr
    lines = show.stdout.splitlines()
    assert "session/new id=1" in lines[0] and "sent" in lines[0]
    assert lines[1].endswith("answer id=1")
    assert lines[2].endswith("session/prompt id=2")
    assert "agent_message_chunk 'héllo ✓" in lines[3]
    assert lines[4].endswith("Write a.txt -> selected allow")
    assert lines[5].endswith('answer id="perm-1" {"outcome": "selected", "optionId": "allow"}')
    assert lines[6].endswith("fs/read_text_file /etc/passwd refused: outside roots")
    assert lines[8].endswith("answer id=2 stopReason=end_turn")
    stats = cli("journal", "stats", str(path)).stdout
    turn_rows = [line for line in stats.splitlines() if line.lstrip().startswith("1 ")]
    assert len(turn_rows) == 1 and turn_rows[0].split()[1:3] == ["s-1", "2"]
    assert turn_rows[0].endswith("end_turn")
    assert "1 turn" in stats and "1 turns" not in stats


def test_without_rich_the_view_is_plain_lines(tmp_path: Path) -> None:
    """rich is an optional extra: without it `auto` falls back to plain lines, and asking for
    `live` is a usage error naming the extra."""
    blocked = (
        "import sys; sys.modules['rich'] = None; from acp_fast.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", blocked, *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            cwd=tmp_path,
        )

    plain = run("run", "--view", "auto", "hello")
    assert plain.returncode == 0 and plain.stdout == "Hello! You said: hello.\n"
    live = run("run", "--view", "live", "hello")
    assert live.returncode == 2 and "Traceback" not in live.stderr
    assert live.stderr.splitlines()[-1] == (
        "acp-fast run: error: --view live needs rich: pip install 'acp-fast[live]'"
    )


def test_replay_plays_one_run_of_an_appended_journal(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    assert cli("run", "--journal", str(path), "first run").returncode == 0
    assert cli("run", "--journal", str(path), "second run").returncode == 0

    def replay(*options: str) -> subprocess.CompletedProcess[str]:
        agent = f"{sys.executable} -m acp_fast replay {path} {' '.join(options)}"
        return cli("run", "--agent", agent, "first run")

    last = replay()
    assert last.returncode == 0, last.stderr
    assert last.stdout == "Hello! You said: second run.\n"
    first = replay("--epoch", "1")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Hello! You said: first run.\n"
    proc = subprocess.run(
        [sys.executable, "-m", "acp_fast", "replay", str(path), "--epoch", "9"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"acp-fast replay: error: {path}: no run with epoch 9 (epochs: 1, 2)"
    ]

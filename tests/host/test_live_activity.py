"""The rich live view of `acp-fast run` shows each `ClientActivity` as a line, the same line the
plain output prints on stderr (`_host.activity_line`)."""

from __future__ import annotations

import io
from pathlib import Path

import acp_fast as acp
from acp_fast._host import activity_line

from .conftest import run_cli

READ = acp.ClientMethod.FS_READ_TEXT_FILE
WRITE = acp.ClientMethod.FS_WRITE_TEXT_FILE
CREATE = acp.ClientMethod.TERMINAL_CREATE


def records(count: int) -> list[acp.ClientActivity]:
    made = [
        acp.ClientActivity(WRITE, True, path="/w/hello.txt", session_id="s"),
        acp.ClientActivity(
            READ, False, path="/etc/passwd", reason="path outside the allowed roots"
        ),
        acp.ClientActivity(READ, True, path="/w/none.txt", error_code=-32002),
        acp.ClientActivity(CREATE, True, path="/w", command="ls -la", terminal_id="term-1"),
    ]
    made += [acp.ClientActivity(READ, True, path=f"/w/f{n}.txt") for n in range(count - len(made))]
    return made


def frame(view: object, console: object, screen: io.StringIO) -> str:
    screen.seek(0)
    screen.truncate()
    console.print(view._render())  # type: ignore[attr-defined]
    return screen.getvalue()


def test_the_view_shows_each_activity_as_the_plain_line() -> None:
    from acp_fast._live import ACTIVITY_SHOWN, LiveView
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, height=40, color_system=None)
    view = LiveView(console)
    few = records(4)
    for activity in few:
        view.on_activity(activity)
    shown = frame(view, console, screen)
    for activity in few:
        assert f"host: {activity_line(activity)}" in shown, activity
    assert "fs/read_text_file /etc/passwd: refused: path outside the allowed roots" in shown
    assert "terminal/create ls -la (in /w): allowed" in shown

    many = records(30)[4:]
    for activity in many:
        view.on_activity(activity)
    live = frame(view, console, screen)  # while live: only the latest few, and how many more
    assert f"host: {30 - ACTIVITY_SHOWN} earlier" in live
    assert live.count("host: fs/") == ACTIVITY_SHOWN
    assert f"host: {activity_line(many[-1])}" in live
    assert activity_line(few[0]) not in live
    view._final = True  # the final frame: every line
    final = frame(view, console, screen)
    for activity in few + many:
        assert f"host: {activity_line(activity)}" in final


def test_acp_fast_run_live_view_shows_activity(tmp_path: Path) -> None:
    """--view live with stdout a pipe: the final state holds the activity lines."""
    steps = [
        {
            "request": {
                "method": "fs/write_text_file",
                "params": {"path": str(tmp_path / "a.txt"), "content": "x"},
            }
        },
        {"request": {"method": "fs/read_text_file", "params": {"path": "/etc/hostname"}}},
        {"request": {"method": "terminal/create", "params": {"command": "pwd"}}},
        {"request": {"method": "terminal/wait_for_exit", "params": {"terminalId": "term-1"}}},
    ]
    proc = run_cli(tmp_path, steps, "--fs", "--terminal", view="live")
    assert proc.returncode == 0, proc.stderr
    lines = [" ".join(line.split()) for line in proc.stdout.splitlines()]
    for wanted in (
        f"host: fs/write_text_file {tmp_path}/a.txt: allowed",
        "host: fs/read_text_file /etc/hostname: refused: path outside the allowed roots",
        f"host: terminal/create pwd (in {tmp_path}): allowed",
        "host: terminal/wait_for_exit term-1: allowed",
    ):
        assert wanted in lines, (wanted, proc.stdout)

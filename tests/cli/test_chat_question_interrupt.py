"""Ctrl-C while the chat asks a permission question: the turn is cancelled and what follows (the
"cancelling the turn" line, the live view) starts on a line of its own, not after the question
on its line (seen with the live view under tmux: ``allow? [y]es once, [a]lways, [n]o: acp-fast:
cancelling the turn``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.ptykit import Pty


@pytest.mark.parametrize("view", ["plain", "live"])
def test_ctrl_c_at_the_question(tmp_path: Path, view: str) -> None:
    if view == "live":
        pytest.importorskip("rich")
    pty = Pty(["chat", "--view", view], cwd=tmp_path)
    try:
        pty.expect("you> ")
        pty.send("please write a.txt\r")
        asked = pty.expect(r"allow\? \[y\]es once, \[a\]lways, \[n\]o: ")
        # A SIGINT landing while CPython's readline is between two selects waits for the next
        # key or signal: sent again as a person would (one pending flag: one Ctrl-C is seen).
        for attempt in range(3):
            pty.send("\x03")
            try:
                note = pty.expect(r"acp-fast: cancelling the turn", timeout=5.0)
                break
            except AssertionError:
                if attempt == 2:
                    raise
        pty.expect("you> ")
        pty.send("\x04")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    between = pty.output[asked : note - len(b"acp-fast: cancelling the turn")]
    assert b"\n" in between, between
    assert not (tmp_path / "a.txt").exists()

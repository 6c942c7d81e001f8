"""The live view paused for a permission question and resumed: what was printed while it was
paused (the question, the answer typed) and everything above it stays on the screen.

rich's Live moves the cursor up by the height of its last frame before drawing the next one; a
Live stopped and started again still held that height, so its first frame after the question
erased the question, the answer and lines above them (seen in ``acp-fast chat`` under tmux: the
banner and the earlier turns were gone). A tiny terminal model reads what the view wrote."""

from __future__ import annotations

import io
import re

from acp_fast._live import LiveView
from rich.console import Console

_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|[\r\n]|[^\x1b\r\n]+")


def screen(output: str) -> list[str]:
    """The rows a terminal shows after `output`: text, CR, LF (as the tty's ONLCR makes it),
    cursor up (CSI n A) and erase line (CSI 2 K); other sequences change nothing we look at."""
    rows = [""]
    row = col = 0
    for match in _CONTROL.finditer(output):
        piece = match.group(0)
        if piece == "\r":
            col = 0
        elif piece == "\n":
            row, col = row + 1, 0
            while len(rows) <= row:
                rows.append("")
        elif match.group(2) == "A":
            row = max(0, row - int(match.group(1) or 1))
            col = 0 if col > len(rows[row]) else col
        elif match.group(2) == "K":
            rows[row] = ""
        elif match.group(2) is None:
            line = rows[row].ljust(col)
            rows[row] = line[:col] + piece + line[col + len(piece) :]
            col += len(piece)
    return [line.rstrip() for line in rows]


def test_what_is_printed_while_paused_stays() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=60, height=30, color_system=None)
    out.write("BANNER: acp-fast chat\nyou> Please write hello.txt\n")
    view = LiveView(console)
    view.__enter__()
    view._live.refresh()  # a frame of four rows is on the screen
    view.pause()
    out.write("QUESTION: the agent asks permission\nallow? y\n")
    view.resume()
    view._live.refresh()
    view.stop()
    shown = screen(out.getvalue())
    for line in (
        "BANNER: acp-fast chat",
        "you> Please write hello.txt",
        "QUESTION: the agent asks permission",
        "allow? y",
    ):
        assert line in shown, shown
    assert shown.index("allow? y") < next(i for i, r in enumerate(shown) if "reply" in r)

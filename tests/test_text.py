"""`acp_fast._text`: agent text made safe for a terminal (escape sequences shown, not sent)."""

from __future__ import annotations

import pytest
from acp_fast._text import printable, printable_line


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;owned\x07", "^[]0;owned^G"),  # OSC 0: window title
        ("\x1b[2J", "^[[2J"),  # CSI 2J: clear screen
        ("\x1b]52;c;aGk=\x07", "^[]52;c;aGk=^G"),  # OSC 52: clipboard write
        ("\x9b2J", "<U+009B>2J"),  # the one-character CSI
        ("a\rb\bc\x7f", "a^Mb^Hc^?"),
        ("\u202etxt.exe", "<U+202E>txt.exe"),  # right-to-left override
        ("\ud800", "<U+D800>"),  # a lone surrogate cannot be printed as UTF-8
        ("plain text é 漢字 🙂", "plain text é 漢字 🙂"),
    ],
)
def test_controls_are_shown_not_sent(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable_line(raw) == shown


def test_newlines_and_tabs_kept_only_in_text() -> None:
    assert printable("a\nb\tc") == "a\nb\tc"
    assert printable_line("a\nb\tc") == "a^Jb^Ic"
    assert printable("a\nb", keep_newlines=False) == "a^Jb"


def test_every_escaped_result_is_free_of_controls() -> None:
    every = "".join(chr(code) for code in range(0x0, 0x3000) if not 0xD800 <= code < 0xE000)
    shown = printable_line(every + "\udfff")
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in shown)
    shown.encode("utf-8")  # no surrogate left

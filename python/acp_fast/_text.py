"""Agent-controlled text made safe for a terminal.

An agent chooses titles, ids, paths, commands, method names and reply text; a journal file holds
whatever was written to it. Printed raw, an ESC or a C1 byte is a terminal command: OSC 0 sets
the window title, CSI 2J clears the screen, OSC 52 writes the clipboard. Everything the CLI and
the live view print from those sources goes through `printable`, which shows control characters
the way ``cat -v`` and ``less`` do instead of sending them.

What is escaped, and why each:
- C0 controls (U+0000-U+001F) and DEL: ESC starts every escape sequence; BEL ends OSC; CR and BS
  overwrite what is already on the line. Shown in caret notation (``^[``, ``^G``, ``^?``). ``\\n``
  and ``\\t`` are kept only where the caller says so (reply text), never in one-line fields.
- C1 controls (U+0080-U+009F): U+009B is a one-character CSI and U+009D a one-character OSC on
  terminals that honour 8-bit controls. Shown as ``<U+009B>``.
- Bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069) and U+200E/U+200F: they
  reorder what follows on the line, so a path can display as another path. Shown as ``<U+202E>``.
- Lone surrogates (U+D800-U+DFFF, from ``surrogateescape`` or ``\\ud800`` in JSON): a strict
  UTF-8 stream cannot encode them and ``print`` would raise. Shown as ``<U+D800>``.
"""

from __future__ import annotations

__all__ = ["printable", "printable_line"]


def _caret(code: int) -> str:
    return "^?" if code == 0x7F else "^" + chr(code + 0x40)


def _table(keep_newlines: bool) -> dict[int, str]:
    table: dict[int, str] = {code: _caret(code) for code in range(0x20)}
    table[0x7F] = _caret(0x7F)
    for code in (
        *range(0x80, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        0x200E,
        0x200F,
        *range(0xD800, 0xE000),
    ):
        table[code] = f"<U+{code:04X}>"
    if keep_newlines:
        del table[0x0A]
        del table[0x09]
    return table


_LINE = _table(keep_newlines=False)
_TEXT = _table(keep_newlines=True)


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """`text` with every terminal control character shown instead of sent (see the module's
    docstring). ``keep_newlines`` keeps ``\\n`` and ``\\t`` (reply text); one-line fields pass
    ``False`` or use `printable_line`."""
    return text.translate(_TEXT if keep_newlines else _LINE)


def printable_line(text: str) -> str:
    """`text` for a one-line field (a title, an id, a path): newlines and tabs are shown too, so
    an agent cannot start a line that looks like the CLI's own output."""
    return text.translate(_LINE)

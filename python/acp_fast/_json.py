"""Agent JSON parsed with a bound on nesting depth (issue 21, item 4).

Nesting depth is agent input: Python's parsers (``json``, msgspec) recurse once a level and
raise `RecursionError` near 1,000 levels, and everything that walks the value afterwards
(decoding, ``repr``, pickling) recurses again. Every place that parses what an agent sent goes
through here: values nested deeper than `MAX_DEPTH` (the core's own limit, serde_json's 128)
are refused (`TooDeep`, a `ValueError`) or, read leniently, replaced by ``null`` (a field of
the wrong type reads as absent, docs/reliability.md).

The check costs two ``str.count`` calls for the usual line (fewer brackets than the limit
can nest no deeper); only a line with more brackets is scanned token by token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

#: The deepest nesting read (the root object or array is level 1).
MAX_DEPTH = 128

# A JSON string (skipped whole: brackets in it do not nest), or one bracket.
_TOKENS_STR = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_TOKENS_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_OPEN = frozenset("[{") | frozenset(b"[{")
_CLOSE = frozenset("]}") | frozenset(b"]}")


class TooDeep(ValueError):
    """A JSON text nests deeper than `MAX_DEPTH`."""


def _count(text: str | bytes) -> int:
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def _spans(text: str | bytes, limit: int) -> list[tuple[int, int]]:
    """The (start, end) of every outermost value nested deeper than `limit`."""
    matches: Iterator[re.Match[str]] | Iterator[re.Match[bytes]] = (
        _TOKENS_STR.finditer(text) if isinstance(text, str) else _TOKENS_BYTES.finditer(text)
    )
    spans: list[tuple[int, int]] = []
    depth = 0
    start = -1
    for match in matches:
        first = match.group()[0]
        if first in _OPEN:
            depth += 1
            if depth == limit + 1:
                start = match.start()
        elif first in _CLOSE:
            if depth == limit + 1 and start >= 0:
                spans.append((start, match.end()))
                start = -1
            depth -= 1
    if start >= 0:  # never closed: cut to the end (the parser reports the rest)
        spans.append((start, len(text)))
    return spans


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether `text` nests deeper than `limit` (strings skipped)."""
    if _count(text) <= limit:
        return False
    return bool(_spans(text, limit))


def check(text: str | bytes, limit: int = MAX_DEPTH) -> None:
    """Raise `TooDeep` when `text` nests deeper than `limit`."""
    if _count(text) > limit:
        spans = _spans(text, limit)
        if spans:
            raise TooDeep(f"JSON nested deeper than {limit} levels (at character {spans[0][0]})")


def prune(text: str, limit: int = MAX_DEPTH) -> str:
    """`text` with every value nested deeper than `limit` replaced by ``null`` (the same text
    when none is)."""
    if _count(text) <= limit:
        return text
    spans = _spans(text, limit)
    if not spans:
        return text
    pieces = []
    at = 0
    for start, end in spans:
        pieces.append(text[at:start])
        pieces.append("null")
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _not_json(name: str) -> Any:
    # Python's json reads NaN, Infinity and -Infinity; JSON (RFC 8259), the core's parser and
    # the journal's reader do not. A line is JSON here only where it is JSON everywhere.
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """`json.loads` refusing a text nested deeper than `limit` (`TooDeep`) and the
    non-standard constants NaN and Infinity (`ValueError`)."""
    check(text, limit)
    return json.loads(text, parse_constant=_not_json)


def loads_lenient(text: str, limit: int = MAX_DEPTH) -> Any:
    """`json.loads` of `text` with values nested deeper than `limit` read as ``null`` (NaN
    and Infinity refused with `ValueError`, as by `loads`)."""
    return json.loads(prune(text, limit), parse_constant=_not_json)

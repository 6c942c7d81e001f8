"""Answering an agent's elicitation (``elicitation/create``) on a terminal: the form's fields asked
one by one, typed as the schema says, or the URL shown to open by hand. Everything in the request
is the agent's text: shown printable, and a form the CLI cannot render (a field type it does not
know that is required, or more fields than `MAX_FIELDS`) is declined rather than half-asked.

`ask` is pure over two callables (`read` a line, `write` text), so tests drive it without a
terminal; the CLI passes `input` and stderr.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from acp_fast._elicitation import ElicitationReply, ElicitationRequest, check_content
from acp_fast._text import printable, printable_line

#: The most fields a form may have for the CLI to ask them.
MAX_FIELDS = 64
#: Attempts at one field before the whole request is cancelled.
ATTEMPTS = 3
#: The most characters of one agent text shown (a message, a title, a URL).
SHOWN = 2000

Answer = tuple[str, dict[str, Any] | None]


class _Cancelled(Exception):
    pass


def ask(
    message: str,
    mode: str,
    *,
    schema: Mapping[str, Any] | None = None,
    url: str | None = None,
    read: Callable[[str], str],
    write: Callable[[str], None],
) -> Answer:
    """The user's answer to one elicitation: ``(action, content)``, action ``"accept"``,
    ``"decline"`` or ``"cancel"`` (end of input or too many wrong answers cancel)."""
    write(f"The agent asks: {_shown(message)}\n")
    try:
        if mode == "url":
            return _url(url or "", read, write)
        if mode != "form" or not isinstance(schema, Mapping):
            write(f"(a {printable_line(mode)[:40]!r} request this CLI cannot show: declined)\n")
            return ("decline", None)
        return _form(schema, read, write)
    except (_Cancelled, EOFError, KeyboardInterrupt):
        write("(cancelled)\n")
        return ("cancel", None)


def _shown(text: Any) -> str:
    text = text if isinstance(text, str) else ""
    return printable(text[:SHOWN]) + ("…" if len(text) > SHOWN else "")


def _url(url: str, read: Callable[[str], str], write: Callable[[str], None]) -> Answer:
    write(f"Open this address in a browser: {printable_line(url[:SHOWN])}\n")
    choice = read("Done? [y]es / [n]o (decline) / [c]ancel: ").strip().lower()
    return _choice(choice) or ("cancel", None)


def _choice(text: str) -> Answer | None:
    if text in ("y", "yes"):
        return ("accept", None)
    if text in ("n", "no"):
        return ("decline", None)
    if text in ("c", "cancel"):
        return ("cancel", None)
    return None


def _form(
    schema: Mapping[str, Any], read: Callable[[str], str], write: Callable[[str], None]
) -> Answer:
    fields = schema.get("properties")
    fields = fields if isinstance(fields, Mapping) else {}
    required = schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    if len(fields) > MAX_FIELDS:
        write(f"(a form of {len(fields)} fields, more than {MAX_FIELDS}: declined)\n")
        return ("decline", None)
    for name, field in fields.items():
        if _kind(field) is None and name in needed:
            kind = field.get("type") if isinstance(field, Mapping) else None
            write(
                f"(field {printable_line(str(name))[:80]!r} is of a type this CLI cannot ask, "
                f"{printable_line(str(kind))[:40]!r}: declined)\n"
            )
            return ("decline", None)
    title = schema.get("title")
    if isinstance(title, str) and title:
        write(f"{_shown(title)}\n")
    start = read("Answer? [y]es / [n]o (decline) / [c]ancel: ").strip().lower()
    chosen = _choice(start)
    if chosen is None or chosen[0] != "accept":
        return chosen or ("cancel", None)
    content: dict[str, Any] = {}
    for name, field in fields.items():
        if _kind(field) is None:
            continue
        value = _field(str(name), field, str(name) in needed, read, write)
        if value is not None:
            content[str(name)] = value
    return ("accept", content)


def _kind(field: Any) -> str | None:
    if not isinstance(field, Mapping):
        return None
    kind = field.get("type")
    return kind if kind in ("string", "number", "integer", "boolean", "array") else None


def _options(field: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(value, label) of a single-select string (`enum`/`oneOf`) or a multi-select's items."""
    source: Any = field
    if field.get("type") == "array":
        source = field.get("items") if isinstance(field.get("items"), Mapping) else {}
    found: list[tuple[str, str]] = []
    if isinstance(source.get("enum"), list):
        found = [(v, v) for v in source["enum"] if isinstance(v, str)]
    for key in ("oneOf", "anyOf"):
        if isinstance(source.get(key), list):
            for option in source[key]:
                if isinstance(option, Mapping) and isinstance(option.get("const"), str):
                    label = option.get("title")
                    found.append(
                        (option["const"], label if isinstance(label, str) else option["const"])
                    )
    return found[:MAX_FIELDS]


def _field(
    name: str,
    field: Mapping[str, Any],
    required: bool,
    read: Callable[[str], str],
    write: Callable[[str], None],
) -> Any:
    kind = str(field.get("type"))
    title = field.get("title")
    label = title if isinstance(title, str) else name
    description = field.get("description")
    if isinstance(description, str) and description:
        write(f"  {_shown(description)}\n")
    options = _options(field)
    for number, (_, shown) in enumerate(options, 1):
        write(f"  {number}. {printable_line(shown)[:200]}\n")
    hint = {"boolean": "y/n", "array": "numbers, comma-separated"}.get(kind, kind)
    if options and kind == "string":
        hint = "a number"
    prompt = f"{printable_line(label)[:200]} ({hint}{'' if required else ', Enter to skip'}): "
    for _ in range(ATTEMPTS):
        text = read(prompt).strip()
        if not text:
            if not required:
                return None
            write("  (required)\n")
            continue
        value = _parse(kind, text, options)
        if value is not None:
            return value
        write(f"  (not a valid {hint})\n")
    raise _Cancelled


def _parse(kind: str, text: str, options: list[tuple[str, str]]) -> Any:
    if options:
        picks = [p.strip() for p in text.split(",")] if kind == "array" else [text]
        chosen = []
        for pick in picks:
            if not pick.isdigit() or not 1 <= int(pick) <= len(options):
                return None
            chosen.append(options[int(pick) - 1][0])
        return chosen if kind == "array" else chosen[0]
    if kind == "string":
        return text
    if kind == "boolean":
        return {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}.get(
            text.lower()
        )
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return None


def reply_for(
    request: ElicitationRequest, *, read: Callable[[str], str], write: Callable[[str], None]
) -> ElicitationReply:
    """The user's `ElicitationReply` to `request`, asked with `read`/`write`. An accepted form
    whose content the library would refuse (`check_content`) is declined, with the reason
    shown, rather than stopping the client."""
    action, content = ask(
        request.message,
        request.mode,
        schema=request.requested_schema,
        url=request.url,
        read=read,
        write=write,
    )
    if action == "accept" and content is not None:
        try:
            check_content(request, content)
        except ValueError as exc:
            write(
                f"(the answer does not fit the form: {printable_line(str(exc))[:300]}; declined)\n"
            )
            return ElicitationReply("decline")
    return ElicitationReply(action, content)  # type: ignore[arg-type]


def terminal_asker(view: Any) -> Callable[[ElicitationRequest], ElicitationReply]:
    """An ``on_elicitation`` for `acp-fast run` on a terminal: the view paused while the
    questions are on stderr, the answers read from stdin."""

    def read(prompt: str) -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    def on_elicitation(request: ElicitationRequest) -> ElicitationReply:
        target = getattr(view, "screen", view)
        status = getattr(target, "status", None)
        if status is not None:
            status(None)
        pause = getattr(view, "pause", None)
        if pause is not None:
            pause()
        else:
            finish = getattr(view, "finish", None)
            if finish is not None:
                finish()
            end = getattr(target, "end_lines", None)
            if end is not None:
                end()
        try:
            return reply_for(request, read=read, write=write)
        finally:
            resume = getattr(view, "resume", None)
            if resume is not None:
                resume()

    return on_elicitation

"""The host side's glue for `Client` (design/host.md): the capability config as the core reads
it, and `observer.on_activity` fed `ClientActivity` records."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ._text import printable_line
from ._types import (
    # The one list (re-exported): the library's rules and the CLI's options take the same kinds.
    TOOL_KINDS as TOOL_KINDS,
)

if TYPE_CHECKING:
    from ._core import Update
from ._types import (
    ClientActivity,
    ClientCapabilityConfig,
    ClientMethod,
    PermissionRule,
)


def checked_capabilities(config: ClientCapabilityConfig | None) -> ClientCapabilityConfig | None:
    """The capability config as the core reads it (by attribute name), or None; TypeError for
    anything else."""
    if config is not None and not isinstance(config, ClientCapabilityConfig):
        raise TypeError(f"capabilities must be a ClientCapabilityConfig (got {config!r})")
    return config


def activity_callback(on_activity: Any) -> Any:
    """`observer.on_activity` fed `ClientActivity` records built from the core's tuples."""
    if on_activity is None:
        return None

    def record(row: tuple[Any, ...]) -> None:
        method, allowed, path, command, terminal_id, reason, session_id, code = row
        on_activity(
            ClientActivity(
                ClientMethod(method), allowed, path, command, terminal_id, reason, session_id, code
            )
        )

    return record


def tool_kind(text: str, where: str) -> str:
    """`text` as an ACP tool kind (any case), else `ValueError` listing the kinds: a misspelt
    kind would match nothing, and a deny rule that matches nothing denies nothing."""
    kind = text.strip().lower()
    if kind not in TOOL_KINDS:
        raise ValueError(
            f"{where}: unknown tool kind {printable_line(text)!r}; "
            f"the ACP tool kinds are {', '.join(TOOL_KINDS)}"
        )
    return kind


def parse_rule(text: str) -> PermissionRule:
    """A CLI rule, ``[KIND][:TITLE]``: ``edit`` (that kind), ``execute:git `` (that kind and
    title substring), ``:Read`` (any kind, title substring); a TITLE written ``/…/`` is a regular
    expression searched in the title. KIND is one of `TOOL_KINDS`, in any case."""
    kind, _, title = text.partition(":")
    if kind:
        kind = tool_kind(kind, f"rule {printable_line(text)!r}")
    pattern: str | re.Pattern[str] | None = title or None
    if title.startswith("/") and title.endswith("/") and len(title) >= 2:
        try:
            pattern = re.compile(title[1:-1])
        except re.error as exc:
            raise ValueError(f"rule {text!r}: {exc}") from exc
    if not kind and pattern is None:
        raise ValueError(f"rule {text!r} names neither a kind nor a title")
    return PermissionRule(kind=kind or None, title=pattern)


def activity_line(activity: ClientActivity) -> str:
    """One stderr line per host request: ``fs/write_text_file /w/hello.txt: allowed``."""
    target = activity.path or ""
    if activity.method == ClientMethod.TERMINAL_CREATE and activity.command:
        target = f"{activity.command} (in {activity.path})" if activity.path else activity.command
    elif activity.terminal_id and not target:
        target = activity.terminal_id
    if not activity.allowed:
        verdict = f"refused: {activity.reason}"
    elif activity.error_code is not None:
        verdict = f"allowed, failed with {activity.error_code}"
    else:
        verdict = "allowed"
    line = f"{activity.method.value} {target}: {verdict}".replace("  ", " ")
    return printable_line(line)  # paths, commands, ids and reasons are the agent's


#: What the core appends to a failed `terminal/create`'s message when the command looked like a
#: shell line and no `terminal_shell` was set (crates/acp-client/src/host/serve.rs, NO_SHELL_HINT).
_NO_SHELL_MARK = "the command was run without a shell"

SHELL_HINT = (
    "the agent sent terminal/create a whole shell line, which ran without a shell and failed; "
    "to run such lines, add --terminal-shell /bin/sh (ClientCapabilityConfig(terminal_shell=...))"
)


def shell_hint(line: str) -> str | None:
    """`SHELL_HINT` when `line`, a message the client sent, answers a `terminal/create` that
    failed for want of a shell: the agent is told, and the person at the terminal should be."""
    if _NO_SHELL_MARK not in line:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    error = message.get("error") if isinstance(message, dict) else None
    text = error.get("message") if isinstance(error, dict) else None
    if isinstance(text, str) and _NO_SHELL_MARK in text:
        return SHELL_HINT
    return None


def notice_line(update: Update) -> str:
    """``notice (warning): Billing — Your credits are low``: a ``notice`` update on one line,
    the agent's text made printable and cut."""
    body = update.json()
    severity = body.get("severity")
    level = f" ({printable_line(severity[:20])})" if isinstance(severity, str) and severity else ""
    line = f"notice{level}: {printable_line(update.text[:300]) or '(untitled)'}"
    description = body.get("description")
    if isinstance(description, str) and description:
        line += f" — {printable_line(description[:1000])}"
    return line

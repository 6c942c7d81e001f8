"""The live terminal view of one turn for ``acp-fast run`` (needs the optional ``rich``).

The observer callbacks only update plain state (cheap, on the client's thread); rich's refresh
thread renders it a few times a second while the client reads with the GIL released. At the end
the whole final state is printed once, the full reply included, so it stays in the scrollback.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

import acp_fast
from acp_fast._host import activity_line

#: The reply kept for display (the client keeps its own, within its limits).
REPLY_CHARS = 256 * 1024
#: Activity lines kept for the final frame, and shown while the turn runs (the latest).
ACTIVITY_KEPT = 500
ACTIVITY_SHOWN = 6
STATUS_MARK = {"pending": "○", "in_progress": "◐", "completed": "●", "failed": "✗"}


def _status_style(status: str) -> str:
    return {"completed": "green", "failed": "red", "in_progress": "yellow"}.get(status, "dim")


class LiveView:
    """An observer that shows the turn live: the reply streaming, the current plan, tool calls
    with their status, permission decisions, the host's file and terminal activity (one line
    each, as the plain output prints them), and a footer with updates/s and bytes."""

    def __init__(self, console: Console, journal_path: str | None = None) -> None:
        self._console = console
        self._journal_path = journal_path
        self._journal: Any = None
        self._reply: deque[str] = deque()
        self._reply_chars = 0
        self._reply_dropped = False
        self._thought = ""
        self._plan: list[tuple[str, str]] = []
        self._tools: dict[str, list[str]] = {}  # id -> [title, kind, status]
        self._permissions: list[tuple[str, str]] = []
        self._activity: deque[tuple[str, str]] = deque(maxlen=ACTIVITY_KEPT)  # (line, style)
        self._activity_count = 0
        self._mode = ""
        self.updates = 0
        self.bytes = 0
        self._began = time.monotonic()
        self._first: float | None = None
        self._last = self._began
        self._final = False
        self._live = Live(
            console=console,
            get_renderable=self._render,
            refresh_per_second=8,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def attach_journal(self, journal: Any) -> None:
        """Show the journal's record count in the footer."""
        self._journal = journal

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop refreshing and print the final state in full (the whole reply)."""
        if self._final:
            return
        # The live area is erased and the final state printed as ordinary output, so the
        # whole of it (a reply taller than the screen too) stays in the scrollback.
        self._live.transient = True
        self._live.stop()
        self._final = True
        self._console.print(self._render())

    # --- observer callbacks (the client's thread) ---------------------------------------------

    def on_update(self, update: acp_fast.Update) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = now
        self._last = now
        self.updates += 1
        self.bytes += len(update.envelope.encode()) + 1
        kind = update.kind
        if kind == acp_fast.UpdateKind.AGENT_MESSAGE_CHUNK:
            text = update.text
            if text:
                self._reply.append(text)
                self._reply_chars += len(text)
                while self._reply_chars > REPLY_CHARS and len(self._reply) > 1:
                    self._reply_chars -= len(self._reply.popleft())
                    self._reply_dropped = True
        elif kind == acp_fast.UpdateKind.AGENT_THOUGHT_CHUNK:
            self._thought = (self._thought + update.text)[-2000:]
        elif kind == acp_fast.UpdateKind.PLAN:
            entries = update.json().get("entries")
            plan = []
            for entry in entries if isinstance(entries, list) else ():
                if isinstance(entry, dict):
                    plan.append((str(entry.get("content", "")), str(entry.get("status", ""))))
            self._plan = plan
        elif kind in (acp_fast.UpdateKind.TOOL_CALL, acp_fast.UpdateKind.TOOL_CALL_UPDATE):
            body = update.json()
            call_id = update.tool_call_id or ""
            row = self._tools.setdefault(call_id, [call_id or "(untitled)", "", ""])
            if update.text:
                row[0] = update.text
            for index, name in ((1, "kind"), (2, "status")):
                value = body.get(name)
                if isinstance(value, str) and value:
                    row[index] = value
        elif kind == acp_fast.UpdateKind.CURRENT_MODE_UPDATE:
            self._mode = update.text

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        title = request.title or request.tool_call_id or "(untitled)"
        decision = f"{request.outcome} {request.option_id}".rstrip()
        reason = getattr(request, "reason", "")
        if reason:
            decision += f" ({reason})"
        self._permissions.append((title, decision))

    def on_activity(self, activity: acp_fast.ClientActivity) -> None:
        if not activity.allowed:
            style = "red"
        elif activity.error_code is not None:
            style = "yellow"
        else:
            style = "green"
        self._activity.append((activity_line(activity), style))
        self._activity_count += 1

    # --- rendering (rich's refresh thread, and the final frame) -------------------------------

    def reply_text(self) -> str:
        return "".join(list(self._reply))

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = []
        reply = self.reply_text()
        if not self._final:
            # Only the tail that fits: the rest of the screen is the other sections.
            shown = min(len(self._activity), ACTIVITY_SHOWN)
            room = max(
                3, self._console.size.height - 8 - len(self._plan) - len(self._tools) - shown
            )
            width = max(20, self._console.size.width - 4)
            # Wrap only a tail that surely fills the room: wrapping is costly and runs under
            # the GIL, which the client's reader needs back.
            tail = reply[-room * width :]
            lines = Text(tail).wrap(self._console, width)
            reply = "\n".join(line.plain for line in list(lines)[-room:])
        elif self._reply_dropped:
            reply = "…" + reply
        parts.append(
            Panel(
                Text(reply or "…", style="" if reply else "dim"),
                title="reply",
                title_align="left",
                border_style="blue",
            )
        )
        if self._thought and not self._final:
            last = self._thought.strip().splitlines()[-1:] or [""]
            parts.append(
                Text(f"thinking: {last[0]}", style="dim italic", overflow="ellipsis", no_wrap=True)
            )
        if self._plan:
            plan = Table.grid(padding=(0, 1))
            for content, status in list(self._plan):
                plan.add_row(
                    Text(STATUS_MARK.get(status, "·"), style=_status_style(status)),
                    Text(content),
                    Text(status, style=_status_style(status)),
                )
            parts.append(Panel(plan, title="plan", title_align="left", border_style="dim"))
        if self._tools or self._permissions:
            table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
            table.add_column("tool call")
            table.add_column("kind", style="dim")
            table.add_column("status")
            for title, tool_kind, status in (list(v) for v in list(self._tools.values())):
                table.add_row(title, tool_kind, Text(status, style=_status_style(status)))
            for title, decision in list(self._permissions):
                style = "green" if "allow" in decision else "red"
                table.add_row(f"permission: {title}", "", Text(decision, style=style))
            parts.append(table)
        if self._activity:
            parts.append(self._activity_lines())
        parts.append(self._footer())
        return Group(*parts)

    def _activity_lines(self) -> Text:
        """The host's activity: the latest few while live, every kept one at the end."""
        kept = list(self._activity)
        lines = kept if self._final else kept[-ACTIVITY_SHOWN:]
        text = Text()
        hidden = self._activity_count - len(lines)
        if hidden:
            text.append(f"host: {hidden:,} earlier\n", style="dim")
        for index, (line, style) in enumerate(lines):
            text.append("host: ", style="dim")
            text.append(line, style=style)
            if index < len(lines) - 1:
                text.append("\n")
        return text

    def _footer(self) -> Text:
        span = (self._last - self._first) if self._first is not None else 0.0
        rate = self.updates / span if span > 0 else 0.0
        elapsed = time.monotonic() - self._began
        pieces = [
            f"{self.updates:,} updates",
            f"{rate:,.0f} updates/s",
            f"{_human_bytes(self.bytes)}",
            f"{elapsed:.1f} s",
        ]
        if self._mode:
            pieces.append(f"mode {self._mode}")
        if self._journal_path is not None:
            records = getattr(self._journal, "last_record", None)
            suffix = f" ({records:,} records)" if isinstance(records, int) else ""
            pieces.append(f"journal {self._journal_path}{suffix}")
        return Text(" · ".join(pieces), style="bold cyan")


def _human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{count} B"

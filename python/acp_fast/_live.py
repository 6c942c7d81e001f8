"""The live terminal view of one turn for ``acp-fast run`` and ``chat`` (needs the optional
``rich``).

The observer callbacks only update plain state (cheap, on the client's thread); rich's refresh
thread renders it a few times a second while the client reads with the GIL released. At the end
the whole final state is printed once, the full reply included (up to `REPLY_CHARS`; beyond
that the frame says how much was left out and that the journal has it all), so it stays in the
scrollback. Every piece of agent text is made printable (`acp_fast._text`) before rich sees it:
rich would send an ESC in a title or a reply to the terminal as it is.
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
from acp_fast._host import activity_line, notice_line, shell_hint
from acp_fast._text import printable, printable_line

#: The reply kept for display (the client keeps its own, within its limits): the final frame
#: shows it whole up to this size; a longer reply's start is left out and the frame says so.
REPLY_CHARS = 1024 * 1024
#: Tool calls kept for the table (the latest; an agent may send any number).
TOOLS_KEPT = 200
#: Seconds of silence before the footer says what the view waits for.
WAIT_AFTER = 1.0
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
        self._reply_dropped = 0  # characters left out of the start of the reply
        self._thought = ""
        self._status: str | None = None
        self._hint: str | None = None
        self._since = time.monotonic()
        self._plan: list[tuple[str, str]] = []
        self._tools: dict[str, list[str]] = {}  # id -> [title, kind, status], printable
        self._tools_dropped = 0
        self._permissions: list[tuple[str, str]] = []
        self._activity: deque[tuple[str, str]] = deque(maxlen=ACTIVITY_KEPT)  # (line, style)
        self._activity_count = 0
        self._mode = ""
        # ACP v2: the session's state, and the message being streamed (its id, and how much of
        # the kept reply came before it) so that a whole-message upsert replaces its text.
        self._state = ""
        self._message_id: str | None = None
        self._message_at = 0
        self.updates = 0
        self.bytes = 0
        self._began = time.monotonic()
        self._first: float | None = None
        self._last = self._began
        self._final = False
        self._live = self._new_live()

    def _new_live(self) -> Live:
        return Live(
            console=self._console,
            get_renderable=self._render,
            refresh_per_second=8,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def status(self, text: str | None) -> None:
        """What the view waits for ("starting the agent…"), shown after a second of silence."""
        self._status = text
        self._since = time.monotonic()

    def pause(self) -> None:
        """Erase the live area and stop drawing (a question is asked on the terminal)."""
        if self._final:
            return
        self._live.transient = True
        self._live.stop()

    def resume(self) -> None:
        if not self._final:
            # A fresh Live: a stopped one still holds the height of its last frame and would
            # move the cursor up that many lines on its first refresh, erasing the question,
            # its answer and the lines above them.
            self._live = self._new_live()
            self._live.start()

    def note(self, text: str) -> None:
        """A line of the CLI's own above the live area (printable already)."""
        self._console.print(Text(text), soft_wrap=True)

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
        self._last = self._since = now
        self.updates += 1
        self.bytes += len(update.envelope.encode()) + 1
        kind = update.kind
        if kind == acp_fast.UpdateKind.AGENT_MESSAGE_CHUNK:
            self._add_reply(update.text, update.message_id)
        elif kind == acp_fast.UpdateKind.AGENT_MESSAGE:
            if update.message_id == self._message_id:
                self._cut_reply(self._message_at)
            self._add_reply(update.text, update.message_id)
        elif kind == acp_fast.UpdateKind.STATE_UPDATE:
            self._state = printable_line(update.text[:40])
        elif kind == acp_fast.UpdateKind.PLAN_UPDATE:
            self._plan = [(printable_line(e[:1000]), "") for e in update.text.split("\n") if e][:50]
        elif kind == acp_fast.UpdateKind.AGENT_THOUGHT_CHUNK:
            self._thought = (self._thought + printable(update.text))[-2000:]
            self._since = now
        elif kind == acp_fast.UpdateKind.PLAN:
            entries = update.json().get("entries")
            plan = []
            for entry in entries if isinstance(entries, list) else ():
                if isinstance(entry, dict):
                    content = printable_line(str(entry.get("content", ""))[:1000])
                    plan.append((content, printable_line(str(entry.get("status", ""))[:40])))
            self._plan = plan[:50]
        elif kind in (acp_fast.UpdateKind.TOOL_CALL, acp_fast.UpdateKind.TOOL_CALL_UPDATE):
            body = update.json()
            call_id = update.tool_call_id or ""
            row = self._tools.get(call_id)
            if row is None:
                if len(self._tools) >= TOOLS_KEPT:
                    del self._tools[next(iter(self._tools))]
                    self._tools_dropped += 1
                row = self._tools[call_id] = [printable_line(call_id) or "(untitled)", "", ""]
            if update.text:
                row[0] = printable_line(update.text[:1000])
            for index, name in ((1, "kind"), (2, "status")):
                value = body.get(name)
                if isinstance(value, str) and value:
                    row[index] = printable_line(value[:40])
        elif kind == acp_fast.UpdateKind.CURRENT_MODE_UPDATE:
            self._mode = printable_line(update.text[:100])
        elif kind == acp_fast.UpdateKind.NOTICE:
            severity = update.json().get("severity")
            style = "yellow" if severity in ("warning", "error") else "cyan"
            self._activity.append((notice_line(update), style))
            self._activity_count += 1

    def _add_reply(self, text: str, message_id: str | None) -> None:
        if message_id != self._message_id:
            self._message_id, self._message_at = message_id, self._reply_chars
        if text:
            self._reply.append(text)
            self._reply_chars += len(text)
            while self._reply_chars > REPLY_CHARS and len(self._reply) > 1:
                dropped = len(self._reply.popleft())
                self._reply_chars -= dropped
                self._reply_dropped += dropped
                self._message_at = max(0, self._message_at - dropped)

    def _cut_reply(self, keep: int) -> None:
        """Drops the kept reply's text after its first `keep` characters."""
        while self._reply and self._reply_chars > keep:
            last = self._reply.pop()
            self._reply_chars -= len(last)
            if self._reply_chars < keep:
                self._reply.append(last[: keep - self._reply_chars])
                self._reply_chars = keep

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        title = printable_line(request.title or request.tool_call_id or "(untitled)")
        decision = f"{request.outcome} {request.option_id}".rstrip()
        reason = getattr(request, "reason", "")
        if reason:
            decision += f" ({reason})"
        self._since = time.monotonic()
        if len(self._permissions) < ACTIVITY_KEPT:
            self._permissions.append((title, printable_line(decision)))

    def on_activity(self, activity: acp_fast.ClientActivity) -> None:
        if not activity.allowed:
            style = "red"
        elif activity.error_code is not None:
            style = "yellow"
        else:
            style = "green"
        self._activity.append((activity_line(activity), style))
        self._activity_count += 1
        self._since = time.monotonic()

    def on_sent(self, line: str) -> None:
        if self._hint is None:
            self._hint = shell_hint(line)

    # --- rendering (rich's refresh thread, and the final frame) -------------------------------

    def reply_text(self) -> str:
        """The reply kept for display, as the agent sent it (the last `REPLY_CHARS`)."""
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
            tail = printable(reply[-room * width :])
            lines = Text(tail).wrap(self._console, width)
            reply = "\n".join(line.plain for line in list(lines)[-room:])
        else:
            reply = printable(reply)
        if self._final and self._reply_dropped:
            where = (
                f"the journal {printable_line(self._journal_path)} has the whole reply"
                if self._journal_path is not None
                else "--journal PATH keeps the whole reply, --view plain streams it all"
            )
            parts.append(
                Text(
                    f"the first {self._reply_dropped:,} characters of the reply are left out "
                    f"of this view (it keeps the last {REPLY_CHARS:,}); {where}",
                    style="yellow",
                )
            )
        parts.append(
            Panel(
                Text(reply or "…", style="" if reply else "dim"),
                title="reply",
                title_align="left",
                border_style="blue",
            )
        )
        if self._thought:
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
            if self._tools_dropped:
                table.add_row(Text(f"({self._tools_dropped:,} earlier)", style="dim"), "", "")
            # Text, not str: rich would read [markup] in an agent's title (a [link=…] is an
            # OSC 8 hyperlink).
            for title, tool_kind, status in (list(v) for v in list(self._tools.values())):
                table.add_row(
                    Text(title), Text(tool_kind), Text(status, style=_status_style(status))
                )
            for title, decision in list(self._permissions):
                style = "green" if "allow" in decision else "red"
                table.add_row(Text(f"permission: {title}"), "", Text(decision, style=style))
            parts.append(table)
        if self._activity:
            parts.append(self._activity_lines())
        if self._hint is not None:
            parts.append(Text(f"hint: {self._hint}", style="yellow"))
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
            "1 update" if self.updates == 1 else f"{self.updates:,} updates",
            f"{rate:,.0f} updates/s",
            f"{_human_bytes(self.bytes)}",
            f"{elapsed:.1f} s",
        ]
        if self._mode:
            pieces.append(f"mode {self._mode}")
        if self._state:
            pieces.append(f"state {self._state}")
        if self._journal_path is not None:
            records = getattr(self._journal, "last_record", None)
            suffix = ""
            if isinstance(records, int):
                suffix = " (1 record)" if records == 1 else f" ({records:,} records)"
            pieces.append(f"journal {printable_line(self._journal_path)}{suffix}")
        quiet = time.monotonic() - self._since
        if self._status is not None and not self._final and quiet >= WAIT_AFTER:
            pieces.append(f"{self._status} ({quiet:.0f} s)")
        return Text(" · ".join(pieces), style="bold cyan")


def _human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{count} B"

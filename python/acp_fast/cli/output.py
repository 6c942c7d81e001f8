"""The plain view: the reply streams to stdout, everything else goes to stderr one line each,
every piece of agent text made printable first; and the "waiting for the agent" line a
terminal shows after a second of silence."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

import acp_fast
from acp_fast._host import activity_line, notice_line, shell_hint
from acp_fast._text import printable, printable_line

#: Seconds of silence before the waiting line appears on a terminal.
WAIT_AFTER = 1.0
_ERASE = "\r\x1b[2K"


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


class Screen:
    """stdout and stderr as the plain view writes them: which one ends mid-line, and a
    transient status line on stderr (a terminal only) drawn by a thread of its own after
    `WAIT_AFTER` seconds without output and erased before anything else is written.

    The lock orders the observer's writes (the client's thread) with the status line's."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self._lock = threading.Lock()
        self._out_tty = isatty(out)
        self._err_tty = isatty(err)
        #: Reply text is exact into a pipe or a file (it is data) and made printable on a
        #: terminal, where an escape sequence would be obeyed.
        self.raw_reply = not self._out_tty
        self.out_mid_line = False
        self.err_mid_line = False
        self._status: str | None = None  # what to say while waiting; None: say nothing
        self._shown = False
        self._since = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- writing --------------------------------------------------------------------------

    def _erase(self) -> None:
        if self._shown:
            self._shown = False
            try:
                self.err.write(_ERASE)
                self.err.flush()
            except (OSError, ValueError):
                pass

    def write_out(self, text: str) -> None:
        """Reply text (made printable on a terminal)."""
        if not text:
            return
        shown = text if self.raw_reply else printable(text)
        with self._lock:
            self._erase()
            self._since = time.monotonic()
            self.out.write(shown)
            self.out.flush()
            self.out_mid_line = not shown.endswith("\n")

    def write_err(self, text: str) -> None:
        """Text the CLI composed (agent pieces already made printable)."""
        if not text:
            return
        with self._lock:
            self._erase()
            self._since = time.monotonic()
            self.err.write(text)
            self.err.flush()
            self.err_mid_line = not text.endswith("\n")

    def end_lines(self) -> None:
        """End a reply or stderr line left open, so the next message starts on its own line.
        stdout gets its newline only when it is a terminal or the reply was cut mid-line."""
        with self._lock:
            self._erase()
            if self.err_mid_line:
                self.err_mid_line = False
                self._try(self.err, "\n")
            if self.out_mid_line:
                self.out_mid_line = False
                self._try(self.out, "\n")

    @staticmethod
    def _try(stream: TextIO, text: str) -> None:
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):
            pass

    # --- the waiting line -----------------------------------------------------------------

    def status(self, text: str | None) -> None:
        """Say `text` after a second of silence from now (None: say nothing, erase it)."""
        with self._lock:
            self._status = text
            self._since = time.monotonic()
            if text is None:
                self._erase()
        if text is not None and self._err_tty and self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="acp-fast-status", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self.status(None)
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=1.0)

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                status = self._status
                quiet = time.monotonic() - self._since
                same_line = self.err_mid_line or (self._out_tty and self.out_mid_line)
                if status is None or quiet < WAIT_AFTER or same_line:
                    continue
                try:
                    self.err.write(f"{_ERASE}acp-fast: {status} ({quiet:.0f} s)")
                    self.err.flush()
                    self._shown = True
                except (OSError, ValueError):
                    return


#: The text of the message being streamed kept to compare with ACP v2's whole message.
MESSAGE_KEPT = 1 << 20


class ConsoleObserver:
    """Streams agent message chunks to stdout and reports everything else, one line each, on
    stderr. Consecutive thought chunks are joined on one ``thought:`` line."""

    def __init__(self, out: TextIO, err: TextIO, screen: Screen | None = None) -> None:
        self.screen = screen if screen is not None else Screen(out, err)
        self._in_thought = False
        self._titles: dict[str, str] = {}
        self._hinted = False
        #: ACP v2: the message being streamed (its id and the text shown of it, up to
        #: `MESSAGE_KEPT`), so a whole-message ``agent_message`` adds only what is new.
        self._message_id: str | None = None
        self._message_text = ""
        self._thought_id: str | None = None  # the thought whose chunks were shown last
        #: The reply text streamed so far ends with a newline (or nothing was streamed).
        self.reply_written = False
        self.reply_ends_with_newline = True

    def _end_thought(self) -> None:
        if self._in_thought:
            self._in_thought = False
            self.screen.write_err("\n")

    def _say(self, line: str) -> None:
        self._end_thought()
        if self.screen.out_mid_line and self.screen.raw_reply is False:
            self.screen.end_lines()  # one terminal: a line of ours never joins the reply's
        self.screen.write_err(line + "\n")

    def finish(self) -> None:
        """End any open stderr line."""
        self._end_thought()

    def _reply(self, text: str, message_id: str | None) -> None:
        if message_id != self._message_id:
            self._message_id, self._message_text = message_id, ""
        if len(self._message_text) < MESSAGE_KEPT:
            self._message_text += text
        self._end_thought()
        self.screen.write_out(text)
        self.reply_written = True
        self.reply_ends_with_newline = text.endswith("\n")

    def _whole_message(self, update: acp_fast.Update) -> None:
        """ACP v2's ``agent_message``: the message's whole text. What extends the streamed
        text is appended; a message never streamed is written whole; one whose text changed
        (printed text cannot be taken back) is written again on a line of its own, after a
        note on stderr."""
        text, message_id = update.text, update.message_id
        shown = self._message_text if message_id == self._message_id else ""
        if message_id == self._message_id and len(shown) >= MESSAGE_KEPT:
            return  # too long to compare: the streamed text stands
        if text.startswith(shown):
            if len(text) > len(shown):
                self._reply(text[len(shown) :], message_id)
            return
        self._say("acp-fast: the agent revised its message; the final text follows")
        self.screen.end_lines()
        self._message_id, self._message_text = message_id, ""
        self._reply(text, message_id)

    def on_update(self, update: acp_fast.Update) -> None:
        kind = update.kind
        if kind == acp_fast.UpdateKind.AGENT_MESSAGE_CHUNK:
            text = update.text
            if text:
                self._reply(text, update.message_id)
        elif kind == acp_fast.UpdateKind.AGENT_MESSAGE:
            self._whole_message(update)
        elif kind == acp_fast.UpdateKind.STATE_UPDATE:
            if update.text == "requires_action":
                self._say("state: waiting for you (requires action)")
        elif kind == acp_fast.UpdateKind.PLAN_UPDATE:
            self._end_thought()
            for entry in update.text.split("\n") if update.text else ():
                self._say(f"plan: - {printable_line(entry)}")
        elif kind == acp_fast.UpdateKind.AGENT_THOUGHT:
            # ACP v2's whole thought: shown only when its chunks were not (they were, as they
            # came, for the thought being streamed).
            if update.text and update.message_id != self._thought_id:
                self._say(f"thought: {printable_line(update.text)}")
        elif kind == acp_fast.UpdateKind.AGENT_THOUGHT_CHUNK:
            text = update.text
            self._thought_id = update.message_id
            if not text:
                return
            if not self._in_thought:
                if self.screen.out_mid_line and not self.screen.raw_reply:
                    self.screen.end_lines()
                self.screen.write_err("thought: ")
                self._in_thought = True
            self.screen.write_err(printable(text))
        elif kind == acp_fast.UpdateKind.PLAN:
            if not update.text:
                self._say("plan: (empty)")
                return
            self._end_thought()
            for entry in update.text.split("\n"):
                self._say(f"plan: - {printable_line(entry)}")
        elif kind in (acp_fast.UpdateKind.TOOL_CALL, acp_fast.UpdateKind.TOOL_CALL_UPDATE):
            call_id = update.tool_call_id or ""
            title = update.text
            if title:
                if len(self._titles) < 10_000 or call_id in self._titles:
                    self._titles[call_id] = title
            else:
                title = self._titles.get(call_id) or call_id or "(untitled)"
            status = update.json().get("status")
            suffix = f" [{printable_line(status)}]" if isinstance(status, str) and status else ""
            self._say(f"tool: {printable_line(title)}{suffix}")
        elif kind == acp_fast.UpdateKind.CURRENT_MODE_UPDATE:
            self._say(f"mode: {printable_line(update.text)}")
        elif kind == acp_fast.UpdateKind.NOTICE:
            self._say(notice_line(update))
        elif kind == acp_fast.UpdateKind.COMPACTION_UPDATE:
            status = update.json().get("status")
            shown = printable_line(status[:40]) if isinstance(status, str) else "?"
            self._say(f"compaction: {shown}")

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        self._say(f"permission: {permission_line(request)}")

    def on_activity(self, activity: acp_fast.ClientActivity) -> None:
        self._say(activity_line(activity))

    def on_sent(self, line: str) -> None:
        if not self._hinted:
            hint = shell_hint(line)
            if hint is not None:
                self._hinted = True
                self._say(f"acp-fast: hint: {hint}")


def permission_line(request: acp_fast.PermissionRequest) -> str:
    """``Write a.txt -> selected allow``, every agent piece made printable."""
    title = request.title or request.tool_call_id or "(untitled)"
    decision = f"{request.outcome} {request.option_id}".rstrip()
    return f"{printable_line(title)} -> {printable_line(decision)}"


def say(line: str) -> None:
    """One line of the CLI's own on stderr (its agent pieces already made printable)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def live_view(parser: Any, view: str, journal_path: str | None) -> Any:
    """The live view when asked for (or, with "auto", when stdout is a terminal and rich is
    installed); None for plain lines."""
    if view == "plain" or (view == "auto" and not isatty(sys.stdout)):
        return None
    try:
        from rich.console import Console

        from acp_fast._live import LiveView
    except ImportError:
        if view == "live":
            parser.fail("--view live needs rich: pip install 'acp-fast[live]'")
        return None
    return LiveView(Console(), journal_path)

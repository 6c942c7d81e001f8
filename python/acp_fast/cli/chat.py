"""``acp-fast chat [options]``: a conversation of many turns with an agent in the terminal.

Each line typed is a prompt; its turn is shown as ``run`` shows one (the live view on a
terminal with rich, else plain lines). Slash commands: ``/cancel /mode /model /config
/sessions /new /load /quit /help``; a line starting ``//`` sends the rest, ``/`` included, and
``/name`` sends itself when the agent advertises a command of that name. While a turn runs,
a permission request the rules do not decide is asked on the terminal (y: allow once, a:
always, n: reject; stdin not a terminal: the rules alone decide, anything else is rejected).
Ctrl-C cancels the running turn (one ``session/cancel``; a question being asked is answered
cancelled); a second Ctrl-C within 2 s stops the agent and leaves (status 130). At the prompt,
Ctrl-C drops the line typed; Ctrl-D (or ``/quit``) leaves (status 0).

The turn runs on a thread of its own so that the main thread can keep reading the terminal
(``/cancel``, the questions) and take Ctrl-C at once; the agent's updates are shown from the
turn's thread.
"""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import acp_fast
from acp_fast import journal as journal_module
from acp_fast._text import printable_line

from . import agent, elicit, errors, options
from .lines import LineReader
from .options import Parser, command_parser
from .output import ConsoleObserver, Screen, isatty, live_view, say

#: A second Ctrl-C within this many seconds stops the agent.
DOUBLE_INTERRUPT = 2.0

HELP = """commands:
  /cancel            cancel the running turn (Ctrl-C does it too)
  /mode [ID]         list the session's modes, or switch to ID
  /model [ID]        list the session's models, or switch to ID
  /config [ID VAL]   list the session's config options, or set ID to VAL
  /sessions          list the agent's sessions
  /new               open a new session and talk in it
  /load ID           load the session ID (the agent replays it) and talk in it
  /quit              leave (Ctrl-D too)
  //text             send /text to the agent"""


def add_parser(commands: Any) -> None:
    chat = command_parser(
        commands,
        "chat",
        help="talk to an agent, turn after turn, in the terminal",
        description="Start an agent and talk to it: each line is a prompt. /help lists the "
        "slash commands. Permission requests the rules do not decide are asked on the "
        "terminal. Ctrl-C cancels a turn (twice within 2 s: leave), Ctrl-D leaves.",
    )
    options.add_agent_options(chat)
    chat.set_defaults(handler=run)


class _Interrupt(Exception):
    """Ctrl-C, raised on the main thread; `again` when it is the second within 2 s."""

    def __init__(self, again: bool) -> None:
        super().__init__("interrupted")
        self.again = again


class _Leave(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class _Question:
    #: A `PermissionRequest` or an `ElicitationRequest`.
    request: Any
    answer: Any = None
    done: threading.Event = field(default_factory=threading.Event)


class Relay:
    """The client's observer for the whole chat: forwards each callback to the current view
    (the turn's, or a plain one between turns) and asks permission questions through the main
    thread."""

    def __init__(self, plain: ConsoleObserver, ask: bool) -> None:
        self.plain = plain
        self.view: Any = plain
        self.questions: queue.Queue[_Question] = queue.Queue()
        self.journal: Any = None
        self.cancelled = threading.Event()
        if ask:
            self.on_permission = self._ask
            self.on_elicitation = self._elicit

    def attach_journal(self, journal: Any) -> None:
        """Each turn's live view counts the journal's records in its footer."""
        self.journal = journal

    def on_update(self, update: acp_fast.Update) -> None:
        self.view.on_update(update)

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        self.view.on_permission_commit(request)

    def on_activity(self, activity: acp_fast.ClientActivity) -> None:
        self.view.on_activity(activity)

    def on_sent(self, line: str) -> None:
        self.view.on_sent(line)

    def _ask(self, request: acp_fast.PermissionRequest) -> Any:
        """On the turn's thread: hand the question to the main thread and wait for its answer
        (a cancelled turn answers it cancelled)."""
        if self.cancelled.is_set():
            return acp_fast.PermissionOutcome(acp_fast.PermissionDecision.CANCEL)
        question = _Question(request)
        self.questions.put(question)
        while not question.done.wait(0.1):
            if self.cancelled.is_set():
                return acp_fast.PermissionOutcome(acp_fast.PermissionDecision.CANCEL)
        return question.answer

    def _elicit(self, request: acp_fast.ElicitationRequest) -> Any:
        """As `_ask`, for an elicitation (a cancelled turn answers it "cancel")."""
        if self.cancelled.is_set():
            return acp_fast.ElicitationReply("cancel")
        question = _Question(request, answer=acp_fast.ElicitationReply("cancel"))
        self.questions.put(question)
        while not question.done.wait(0.1):
            if self.cancelled.is_set():
                return acp_fast.ElicitationReply("cancel")
        return question.answer


def _always_option(request: acp_fast.PermissionRequest) -> str | None:
    for option in request.options:
        if option.kind == "allow_always":
            return option.option_id
    return None


class Chat:
    def __init__(
        self,
        parser: Parser,
        args: argparse.Namespace,
        reader: LineReader,
        relay: Relay,
        screen: Screen,
    ) -> None:
        self.parser = parser
        self.args = args
        self.reader = reader
        self.relay = relay
        self.screen = screen
        self.client: acp_fast.Client | None = None
        self.session: acp_fast.Session | None = None
        self.cwd: str | None = None
        self._last_interrupt = -DOUBLE_INTERRUPT * 2
        # While a turn runs and nobody is being asked, Ctrl-C is only noted here and acted on
        # by the waiting loop: an exception raised by the handler could land anywhere (in the
        # view's code, in a cancel already under way) and end the chat instead of the turn.
        self._polling = False
        self._pending: _Interrupt | None = None
        self._leaving = False
        self.command: list[str] = []

    # --- Ctrl-C ---------------------------------------------------------------------------

    def on_sigint(self, signum: int, frame: object) -> None:
        now = time.monotonic()
        again = now - self._last_interrupt <= DOUBLE_INTERRUPT
        self._last_interrupt = now
        if self._polling:
            if self._pending is None or again:
                self._pending = _Interrupt(again)
            return
        raise _Interrupt(again)

    def _take_interrupt(self, session: acp_fast.Session, view: Any) -> None:
        """Acts on a Ctrl-C noted while the turn ran: cancels it, or leaves on a second."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if pending.again:
            raise _Leave(130)
        self._cancel(session, view)

    # --- the conversation -----------------------------------------------------------------

    def banner(self) -> None:
        assert self.client is not None and self.session is not None
        info = self.client.initialize.agent_info or {}
        name = info.get("title") or info.get("name") if isinstance(info, dict) else None
        who = printable_line(str(name)) if name else options.agent_name(self.command)
        mode = self.session.modes.current
        extra = f", mode {printable_line(mode)}" if mode else ""
        if self.client.protocol_version == 2:
            extra += ", ACP v2"
        say(
            f"acp-fast chat with {who}: session {printable_line(self.session.session_id)}"
            f"{extra}. /help lists commands; Ctrl-C cancels a turn; Ctrl-D leaves."
        )

    def loop(self) -> int:
        while True:
            try:
                line = self.reader.read("you> " if self.reader.tty else "")
            except _Interrupt as interrupt:
                if interrupt.again:
                    raise _Leave(130) from None
                say("")
                say(
                    "acp-fast: (the line was dropped; Ctrl-C again within 2 s, Ctrl-D or /quit "
                    "to leave)"
                )
                continue
            if line is None:
                if self.reader.tty:
                    say("")
                return 0
            text = line.strip()
            if not text:
                continue
            if text.startswith("//"):
                self.turn(line.lstrip()[1:])
            elif text.startswith("/"):
                if self.command_line(text) is False:
                    return 0
            else:
                self.turn(line)
            if self._leaving:
                return 0

    def command_line(self, text: str) -> bool | None:
        """A slash command; False to leave."""
        assert self.client is not None and self.session is not None
        name, _, rest = text[1:].partition(" ")
        rest = rest.strip()
        session = self.session
        actions: dict[str, Callable[[], Any]] = {
            "help": lambda: say(HELP),
            "cancel": lambda: say("acp-fast: no turn is running"),
            "mode": lambda: self._mode(rest),
            "model": lambda: self._model(rest),
            "config": lambda: self._config(rest),
            "sessions": self._sessions,
            "new": self._new,
            "load": lambda: self._load(rest),
        }
        if name in ("quit", "exit"):
            return False
        action = actions.get(name)
        if action is None:
            advertised = {getattr(c, "name", None) for c in session.available_commands}
            if name in advertised:
                self.turn(text)
                return None
            say(
                f"acp-fast: unknown command /{printable_line(name)} (/help lists them; //text "
                "sends /text to the agent)"
            )
            return None
        try:
            action()
        except (acp_fast.AcpError, RuntimeError, KeyError, ValueError, TypeError) as exc:
            errors.report(exc)
        return None

    def _mode(self, wanted: str) -> None:
        assert self.session is not None
        self._choose("mode", self.session.modes, self.session.set_mode, wanted)

    def _model(self, wanted: str) -> None:
        assert self.session is not None
        self._choose("model", self.session.models, self.session.set_model, wanted)

    @staticmethod
    def _choose(what: str, offered: Any, choose: Any, wanted: str) -> None:
        """`/mode` and `/model`: set the one named, or list what the agent offers."""
        if wanted:
            choose(wanted)
            say(f"acp-fast: {what} {printable_line(wanted)}")
            return
        if not offered.available:
            say(f"acp-fast: the agent offers no {what}s")
        for option in offered.available:
            mark = "*" if option.id == offered.current else " "
            say(f" {mark} {printable_line(option.id)}  {printable_line(option.name)}")

    def _config(self, rest: str) -> None:
        assert self.session is not None
        config_id, _, value = rest.partition(" ")
        if config_id:
            if not value.strip():
                say("acp-fast: /config ID VALUE (true or false for a yes/no option)")
                return
            raw = value.strip()
            chosen: str | bool = {"true": True, "false": False}.get(raw.lower(), raw)
            self.session.set_config_option(config_id, chosen)
            say(f"acp-fast: {printable_line(config_id)} = {printable_line(raw)}")
            return
        found = self.session.config_options
        if not found:
            say("acp-fast: the agent offers no config options")
        for option in found:
            current = getattr(getattr(option, "kind", None), "current_value", "?")
            say(
                f"   {printable_line(str(option.id))} = {printable_line(str(current))}  "
                f"{printable_line(str(option.name))}"
            )

    def _sessions(self) -> None:
        assert self.client is not None
        found = self.client.list_sessions()
        if not found:
            say("acp-fast: the agent lists no sessions")
        for info in found:
            mark = "*" if self.session and info.session_id == self.session.session_id else " "
            title = getattr(info, "title", None)
            title_text = f"  {printable_line(str(title))}" if isinstance(title, str) else ""
            say(f" {mark} {printable_line(info.session_id)}{title_text}")

    def _new(self) -> None:
        assert self.client is not None
        self.session = self.client.new_session(self.cwd)
        say(f"acp-fast: new session {printable_line(self.session.session_id)}")

    def _load(self, session_id: str) -> None:
        assert self.client is not None
        if not session_id:
            say("acp-fast: /load ID (/sessions lists them)")
            return
        self.session = self.client.load_session(session_id, self.cwd)
        self.screen.end_lines()
        say(f"acp-fast: loaded session {printable_line(session_id)}")

    # --- one turn -------------------------------------------------------------------------

    def turn(self, text: str) -> None:
        assert self.client is not None and self.session is not None
        session = self.session
        live = live_view(self.parser, self.args.view, self.args.journal)
        view: Any = live if live is not None else self.relay.plain
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["result"] = session.prompt(text, timeout=self.args.timeout)
            except BaseException as exc:  # handed to the main thread
                outcome["error"] = exc

        self.relay.cancelled.clear()
        self.relay.view = view
        if live is not None:
            if self.relay.journal is not None:
                live.attach_journal(self.relay.journal)
            live.__enter__()
        agent.status(view, "waiting for the agent…")
        worker = threading.Thread(target=work, name="acp-fast-turn", daemon=True)
        self._pending = None
        self._polling = True
        worker.start()
        try:
            self._wait(worker, session, view)
        finally:
            self._polling = False
            # A Ctrl-C noted as the turn ended: a first one has nothing left to cancel; a
            # second (within 2 s of the first) still leaves.
            pending, self._pending = self._pending, None
            agent.status(view, None)
            if live is not None:
                live.stop()
            else:
                self.relay.plain.finish()
                self.screen.end_lines()
            self.relay.view = self.relay.plain
        if pending is not None and pending.again:
            raise _Leave(130)
        error = outcome.get("error")
        if error is not None:
            # The turn failed, the client did not: say so and take the next line.
            recoverable = (
                acp_fast.TurnTimeout,
                acp_fast.CapabilityError,
                acp_fast.RequestCapacityExceeded,
            )
            if isinstance(error, recoverable):
                errors.report(error)
                return
            raise error
        result = outcome.get("result")
        if result is not None:
            if result.overflow is not None:
                say(
                    f"acp-fast: the reply was cut at the {result.overflow.kind.value} limit "
                    f"({result.overflow.admitted_bytes:,} bytes kept)"
                )
            if result.stop_reason != "end_turn":
                say(f"stop reason: {errors.one_line(result.stop_reason)}")

    def _cancel(self, session: acp_fast.Session, view: Any) -> None:
        self.relay.cancelled.set()
        session.cancel()
        if isinstance(view, ConsoleObserver):
            mid = self.screen.out_mid_line or self.screen.err_mid_line
            view.finish()
            self.screen.end_lines()
            if not mid and isatty(sys.stderr):
                self.screen.write_err("\n")  # after the ^C the terminal echoed
        message = "acp-fast: cancelling the turn (Ctrl-C again within 2 s to leave)"
        note = getattr(view, "note", None)
        if note is not None:
            note(message)
        else:
            self.screen.write_err(message + "\n")

    def _wait(self, worker: threading.Thread, session: acp_fast.Session, view: Any) -> None:
        """The main thread while the turn runs: questions, /cancel, Ctrl-C."""
        while worker.is_alive():
            try:
                self._take_interrupt(session, view)
                try:
                    question = self.relay.questions.get_nowait()
                except queue.Empty:
                    question = None
                if question is not None:
                    # A question reads the terminal: Ctrl-C must interrupt that read.
                    self._polling = False
                    try:
                        self._take_interrupt(session, view)
                        self._ask(question, view)
                    finally:
                        self._polling = True
                    continue
                if self.reader.tty and not self.reader.ended:
                    line = self.reader.take_new(0.05, ("/cancel", "/quit", "/exit"))
                    if line is not None:
                        self._cancel(session, view)
                        self._leaving = line != "/cancel"
                else:
                    worker.join(0.05)
            except _Interrupt as interrupt:
                if interrupt.again:
                    raise _Leave(130) from None
                self._cancel(session, view)
        worker.join()

    def _ask(self, question: _Question, view: Any) -> None:
        if isinstance(question.request, acp_fast.ElicitationRequest):
            self._ask_elicitation(question, view)
            return
        request = question.request
        title = printable_line(request.title or request.tool_call_id or "(untitled)")
        kind = f" ({printable_line(request.tool_kind)})" if request.tool_kind else ""
        answer: Any = acp_fast.PermissionOutcome(acp_fast.PermissionDecision.CANCEL)
        agent.status(view, None)  # no waiting line over the question
        pause = getattr(view, "pause", None)
        if pause is not None:
            pause()
        else:
            self.relay.plain.finish()
            self.screen.end_lines()
        try:
            say(f"acp-fast: the agent asks permission: {title}{kind}")
            while True:
                reply = self.reader.read("allow? [y]es once, [a]lways, [n]o: ", fresh=True)
                if reply is None:
                    answer = acp_fast.PermissionOutcome(acp_fast.PermissionDecision.DENY)
                    self._leaving = True
                    break
                word = reply.strip().lower()
                if word in ("y", "yes"):
                    answer = acp_fast.PermissionOutcome(acp_fast.PermissionDecision.ALLOW)
                    break
                if word in ("a", "always"):
                    answer = acp_fast.PermissionOutcome(
                        acp_fast.PermissionDecision.ALLOW, option_id=_always_option(request)
                    )
                    break
                if word in ("n", "no"):
                    answer = acp_fast.PermissionOutcome(acp_fast.PermissionDecision.DENY)
                    break
                say("acp-fast: answer y, a or n (Ctrl-C cancels the turn)")
        except _Interrupt:
            if pause is not None:
                # The cursor is after the question: the live view resumes below it (the plain
                # view's cancel ends the line itself).
                say("")
            raise
        finally:
            question.answer = answer
            question.done.set()
            resume = getattr(view, "resume", None)
            if resume is not None:
                resume()
            agent.status(view, "waiting for the agent…")

    def _ask_elicitation(self, question: _Question, view: Any) -> None:
        """The elicitation's questions on the terminal (`elicit.reply_for`); end of input
        cancels it and leaves after the turn."""

        def read(prompt: str) -> str:
            line = self.reader.read(prompt, fresh=True)
            if line is None:
                self._leaving = True
                raise EOFError
            return line

        agent.status(view, None)
        pause = getattr(view, "pause", None)
        if pause is not None:
            pause()
        else:
            self.relay.plain.finish()
            self.screen.end_lines()
        try:
            question.answer = elicit.reply_for(question.request, read=read, write=say_text)
        except _Interrupt:
            if pause is not None:
                say("")
            raise
        finally:
            question.done.set()
            resume = getattr(view, "resume", None)
            if resume is not None:
                resume()
            agent.status(view, "waiting for the agent…")


def say_text(text: str) -> None:
    """`say` for text that brings its own line ends (the elicitation questions)."""
    for line in text.rstrip("\n").split("\n"):
        say(line)


def run(parser: Parser, args: argparse.Namespace) -> int:
    command = options.agent_command(parser, args)
    policy = options.permission_policy(parser, args)
    options.capabilities(parser, args)
    try:
        cwd = options.session_cwd(args)
    except NotADirectoryError as exc:
        errors.report(exc)
        return 1
    if sys.stdin is None:
        parser.fail("chat reads its prompts from stdin, and there is none")
    reader = LineReader()
    screen = Screen(sys.stdout, sys.stderr)
    plain = ConsoleObserver(sys.stdout, sys.stderr, screen)
    relay = Relay(plain, ask=reader.tty)
    chat = Chat(parser, args, reader, relay, screen)
    chat.command = command
    chat.cwd = cwd
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, chat.on_sigint)
    client: acp_fast.Client | None = None
    try:
        with ExitStack() as stack, errors.warnings_to_stderr():
            stack.callback(screen.close)
            client = agent.open_client(stack, parser, args, command, relay, None, cwd)
            # "Always" answers are kept for the session's (kind, title): asked once.
            client.permission_policy = acp_fast.PermissionPolicy(
                allow=policy.allow, deny=policy.deny, remember=True
            )
            chat.client = client
            screen.status(f"starting {options.agent_name(command)}…")
            client.start(timeout=args.timeout)
            screen.status(None)
            warning = agent.ask_host(client, args)
            if warning is not None:
                errors.report(warning, prefix="warning")
            chat.session = client.default_session
            chat.banner()
            status = chat.loop()
    except _Leave as leave:
        screen.close()
        screen.end_lines()
        if leave.status == 130:
            say("acp-fast: interrupted")
        return leave.status
    except (_Interrupt, KeyboardInterrupt):
        screen.close()
        screen.end_lines()
        if isatty(sys.stderr):
            sys.stderr.write("\n")
        say("acp-fast: interrupted")
        return 130
    except (acp_fast.AcpError, journal_module.JournalError, OSError) as exc:
        screen.close()
        if errors.closed_stdout(exc):
            errors.silence_stdout()
            return errors.EXIT_PIPE
        screen.end_lines()
        errors.report(exc, tail=agent.stderr_tail(client))
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return status

"""A small, real ACP agent for demos, tests and benchmarks (standard library only).

Run it as ``python -m acp_fast.demo_agent`` (or by path). It speaks ACP v1, and v2 (preview)
when ``initialize`` offers it (see "ACP v2" below): JSON-RPC 2.0, one JSON object per line on
stdin/stdout. It writes nothing but protocol messages on stdout (minified
JSON, one message per line, flushed per message) and exits with status 0 when stdin ends.

Methods
-------
``initialize``
    Answers protocol version 1, ``loadSession`` false, prompt capabilities image false, audio
    false, embeddedContext true, no auth methods, and ``agentInfo`` name ``acp-fast-demo``.
``session/new``
    Answers ``sessionId`` ``demo-1``, ``demo-2``, ... (a counter per process) and two modes,
    ``ask`` (current; asks before changing files) and ``code`` (writes files without asking).
    The session remembers ``params.cwd`` (default: the agent's working directory).
``session/set_mode``
    ``ask`` or ``code``: sends a ``current_mode_update`` update, then answers ``{}``.
``session/prompt``
    Streams ``session/update`` notifications, then answers ``{"stopReason": "end_turn"}``.
``session/cancel`` (notification)
    Stops the running prompt of that session, which answers ``{"stopReason": "cancelled"}``.

Anything else with an id gets the error ``-32601 "method not found"``; other notifications and
stray responses are ignored; a line that is not JSON gets ``-32700 "parse error"`` with id null;
JSON that is not a JSON-RPC message gets ``-32600 "invalid request"``. Bad ``session/prompt``
params (no such session, ``prompt`` not a list) get ``-32602``.

The prompt turn (exact rules, so tests can predict every byte)
---------------------------------------------------------------
Let ``P`` be the ``text`` of the prompt's ``{"type": "text"}`` blocks joined by one space, with
every run of whitespace then collapsed to one space and the ends stripped
(``" ".join(text.split())``). Other blocks are ignored.

File detection: the *file name* ``F`` is the first match in ``P`` of the regular expression
``[\\w./-]*\\w\\.[A-Za-z]+\\b`` (a word containing a dot followed by letters, e.g. ``hello.txt``,
``src/app.py``); when there is none but ``P`` contains the word ``file`` or ``files`` (any
case), ``F`` is ``notes.txt``; otherwise there is no file.

The updates, in order:

1. ``agent_thought_chunk`` with text ``"Thinking about: " + P``.
2. ``plan`` with entries ``"Read the prompt"``, then ``"Write " + F`` when there is a file, then
   ``"Reply to the user"``; each with priority ``medium`` and status ``pending``.
3. When there is a file: ``tool_call`` with ``toolCallId`` ``call-N`` (N counts tool calls per
   session from 1), ``title`` ``"Write " + F``, ``kind`` ``edit``, ``status`` ``pending`` and
   ``locations`` ``[{"path": <abs path>}]`` where the path is F joined to the session cwd (a
   leading ``/`` and any ``..`` escaping the cwd are dropped). Then, unless the session is in mode
   ``code`` or was granted ``allow-always`` before, a ``session/request_permission`` REQUEST with
   id ``perm-M`` (M counts per process from 1), ``toolCall`` ``{toolCallId, title, kind: "edit",
   status: "pending"}`` and the options ``allow`` (allow_once), ``allow-always`` (allow_always)
   and ``reject`` (reject_once). The agent waits for the answer while still reading stdin. The
   write is allowed when the outcome is ``selected`` with option ``allow`` or ``allow-always``.
   Then a ``tool_call_update`` for the same ``toolCallId`` with status ``completed`` (allowed)
   or ``failed``. NO FILE IS EVER WRITTEN: the agent only pretends.
4. The reply ``R``, as ``agent_message_chunk`` updates, word by word: ``R`` is split on single
   spaces and every chunk but the last keeps its trailing space, so the chunks concatenate to
   exactly ``R``. Without a file ``R = "Hello! You said: " + P + "."``, except that no ``"."`` is
   added when P already ends with ``.``, ``!`` or ``?``. With a file, one sentence is appended
   after a space:

   - allowed: ``"I wrote " + F + "."``
   - selected any other option: ``"I did not write " + F + ": permission was rejected."``
   - outcome ``cancelled``: ``"I did not write " + F + ": permission was cancelled."``
   - an error answer: ``"I did not write " + F + ": the permission request failed."``

   e.g. P = ``make hello.txt`` allowed gives ``Hello! You said: make hello.txt. I wrote
   hello.txt.``

Host mode: when the client advertises ``fs.writeTextFile`` in ``initialize``, an allowed write
is real, done through the client as real agents do: ``fs/read_text_file`` of the path first
(when ``fs.readTextFile`` is advertised too; an error answer means a new file), then
``fs/write_text_file`` with the content ``"Hello from the acp-fast demo agent. You said: " + P
+ "\n"``. Host requests have ids ``host-K`` (K counts per process from 1). A write answered
with an error fails the tool call and the sentence is ``"I could not write " + F + ": " +
<the error's message> + "."``. When the client also advertises ``terminal``, a written file is
then checked with a command: a second ``tool_call`` (``call-N+1``, ``title`` ``"Run wc -c " +
F``, ``kind`` ``execute``), permission asked as for the write (same options and rules), then
``terminal/create`` (``command`` ``wc``, ``args`` ``["-c", F']`` where F' is the path relative
to the cwd, ``cwd`` the session's, ``outputByteLimit`` 4096), ``terminal/wait_for_exit``,
``terminal/output`` and ``terminal/release``; the reply gains `` "wc -c " + F' + " printed: "
+ <the output, stripped> + "."`` (or ``"I did not run wc: permission was " + <reason> + "."``,
or ``"I could not run wc: " + <message> + "."``). The prompt keyword ``shell`` (as a word, any
case) sends the command as one shell line instead (``command`` ``"wc -c " + F'``, no
``args``), as claude-code-acp does: a host without a shell for such lines refuses it and
says how to allow it.

``ACP_DEMO_DELAY`` (seconds, float, default 0; or ``--delay``) is waited before every reply
chunk after the first. ``session/cancel`` for the session, at any point of the turn (also while
waiting for a permission answer, which then ends with a ``failed`` tool_call_update), stops the
turn at once: the prompt is answered ``{"stopReason": "cancelled"}``. Requests that arrive while
a prompt streams are answered at once, except further ``session/prompt`` requests, which run
after it. The end of stdin never cuts a turn short: the agent finishes the running turn and any
queued prompts (a permission request still unanswered counts as ``cancelled``), then exits 0.

ACP v2: ``initialize`` with ``protocolVersion`` 2 (or more) is answered with 2, ``info`` (the
``agentInfo`` above), ``capabilities.session.prompt.embeddedContext``, and the agent speaks v2
from then on; an offer of 1 (or none) gets exactly the v1 agent above, and so does every offer
with ``--max-protocol 1`` (a v1-only agent, for trying a client's fallback). The same turn, in v2's
shape: ``session/prompt`` is answered at once with ``{"messageId": "msg-K"}`` (K counts message
ids per process from 1), then ``state_update`` ``running`` and the ``user_message`` ``msg-K``
with the prompt's blocks; the thought and the reply chunks carry a ``messageId`` each (one per
turn for the thought, one for the reply); ``tool_call`` is sent as a ``tool_call_update``
upsert; ``plan`` as ``plan_update`` (``plan: {"type": "items", "planId": "plan", "entries"}``);
a permission request has ``title`` (the tool call's), ``subject: {"type": "tool_call",
"toolCall"}``, with ``state_update`` ``requires_action`` before it and ``running`` after its
answer. The turn ends with the whole reply as one ``agent_message`` (the same text the chunks
streamed), then ``state_update`` ``idle`` with ``stopReason`` ``end_turn``, or at once with
``idle`` ``cancelled`` on ``session/cancel``. v2 has no modes: ``session/new`` answers the two
as a ``mode`` select config option (``configOptions``), set by ``session/set_config_option``
(``configId`` ``mode``; answers ``{"configOptions"}``); ``session/set_mode`` is ``-32601``. No
host mode in v2 (it has no ``fs/*`` or ``terminal/*``). Flood mode in v2 wraps the N chunks
(with the turn's ``messageId``) in the acknowledgement, ``running`` and ``idle``.

Flood mode (benchmarks): ``--flood-count N [--flood-bytes B]`` (B defaults to 64) replaces every
prompt turn by exactly N ``agent_message_chunk`` updates whose text is B ASCII letters
(``abc...z`` repeated), written in large batches, then the ``end_turn`` answer. No thought, plan
or tool call is sent; ``session/cancel`` is checked between batches.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from functools import partial
from typing import Any, BinaryIO

from . import _agent_v2 as v2

_FILE_RE = re.compile(r"[\w./-]*\w\.[A-Za-z]+\b")
# A file name lies within one run of these characters and, if a run holds one, a match starts
# at the run's first character; so matching anchored at each run's start finds the same name as
# searching, in linear time (a search retries every start of a long token: quadratic).
_NAME_RUN_RE = re.compile(r"[\w./-]+")
_FILE_WORD_RE = re.compile(r"\bfiles?\b", re.IGNORECASE)
_SHELL_WORD_RE = re.compile(r"\bshell\b", re.IGNORECASE)
_DEFAULT_FILE = "notes.txt"
_ALLOW_OPTIONS = ("allow", "allow-always")

_MODES: dict[str, Any] = {
    "currentModeId": "ask",
    "availableModes": [
        {"id": "ask", "name": "Ask", "description": "Asks before changing files"},
        {"id": "code", "name": "Code", "description": "Writes files without asking"},
    ],
}
_PERMISSION_OPTIONS: list[dict[str, str]] = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]

# Queue items produced by the reader thread: ("msg", parsed) | ("bad", None) | ("eof", None).
_Item = tuple[str, Any]

_FLOOD_BATCH_LINES = 256
_FLOOD_BATCH_BYTES = 1 << 20


def _version() -> str:
    module = sys.modules.get("acp_fast")
    found = getattr(module, "__version__", None)
    if isinstance(found, str) and found:
        return found
    try:
        from importlib.metadata import version

        return version("acp-fast")
    except Exception:
        return "unknown"


def _dumps(message: Any) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def find_file_name(prompt_text: str) -> str | None:
    """The file name a prompt mentions, by the rule in the module docstring, or None."""
    for run in _NAME_RUN_RE.finditer(prompt_text):
        match = _FILE_RE.match(prompt_text, run.start(), run.end())
        if match is not None:
            return match.group(0)
    if _FILE_WORD_RE.search(prompt_text):
        return _DEFAULT_FILE
    return None


def _path_under(cwd: str, name: str) -> str:
    relative = os.path.normpath(name.lstrip("/"))
    if relative == ".." or relative.startswith("../"):
        relative = os.path.basename(relative) or _DEFAULT_FILE
    return os.path.join(os.path.abspath(cwd), relative)


def reply_chunks(reply: str) -> list[str]:
    """Split a reply into word chunks that concatenate back to it exactly."""
    words = reply.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]


class _Session:
    __slots__ = ("always_allow", "cwd", "flood_line", "id", "mode", "tool_calls")

    def __init__(self, session_id: str, cwd: str) -> None:
        self.id = session_id
        self.cwd = cwd
        self.mode = "ask"
        self.always_allow = False
        self.tool_calls = 0
        self.flood_line: bytes | None = None


class _Stop(Exception):
    """The running turn was cancelled."""


class DemoAgent:
    """The agent's state and loop. `run()` returns when the input ends."""

    def __init__(
        self,
        stdin: BinaryIO,
        out_fd: int,
        *,
        delay: float = 0.0,
        flood_count: int | None = None,
        flood_bytes: int = 64,
        max_protocol: int = 2,
    ) -> None:
        self._stdin = stdin
        self._out = out_fd
        self._delay = delay
        self._flood_count = flood_count
        self._flood_bytes = flood_bytes
        self._max_protocol = max_protocol
        self._inbox: queue.Queue[_Item] = queue.Queue()
        self._backlog: deque[Any] = deque()
        self._sessions: dict[str, _Session] = {}
        self._session_counter = 0
        self._permission_counter = 0
        self._eof = False
        # State of the running turn.
        self._turn_session: str | None = None
        self._cancelled = False
        self._answers: dict[str, Any] = {}
        self._early: dict[str, Any] = {}
        # What the client serves (initialize's clientCapabilities): host mode uses it.
        self._can_read = False
        self._can_write = False
        self._can_run = False
        self._host_counter = 0
        self._prompt_text = ""
        # ACP v2 (initialize offered 2): the running turn's encoder, and the message ids.
        self._v2 = False
        self._v2_turn: v2.V2Turn | None = None
        self._message_ids = v2.counter("msg")

    # --- plumbing ------------------------------------------------------------------------

    def _read_stdin(self) -> None:
        put = self._inbox.put
        try:
            for raw in self._stdin:
                line = raw.strip()
                if not line:
                    continue
                try:
                    put(("msg", json.loads(line)))
                except ValueError:
                    put(("bad", None))
        except (OSError, ValueError):
            pass
        finally:
            put(("eof", None))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._out, view)
            view = view[written:]

    def _send(self, message: Any) -> None:
        self._write(_dumps(message))

    def _respond(self, request_id: Any, result: Any) -> None:
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _error(self, request_id: Any, code: int, message: str) -> None:
        self._send(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        )

    def _update(self, session_id: str, update: dict[str, Any]) -> None:
        if self._v2_turn is not None:  # a turn's update, in v2's shape
            update = self._v2_turn.encode(update)
        self._send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            }
        )

    # --- main loop -----------------------------------------------------------------------

    def run(self) -> int:
        reader = threading.Thread(target=self._read_stdin, name="demo-agent-stdin", daemon=True)
        reader.start()
        while True:
            if self._backlog:
                self._run_prompt(self._backlog.popleft())
            elif self._eof:
                return 0
            else:
                self._handle(self._inbox.get(), in_turn=False)

    def _handle(self, item: _Item, *, in_turn: bool) -> None:
        tag, message = item
        if tag == "eof":
            self._eof = True
            return
        if tag == "bad":
            self._error(None, -32700, "parse error")
            return
        if not isinstance(message, dict):
            self._error(None, -32600, "invalid request")
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                if method == "session/prompt":
                    if in_turn:
                        self._backlog.append(message)
                    else:
                        self._run_prompt(message)
                else:
                    self._request(message["id"], method, message.get("params"))
            elif method == "session/cancel":
                params = message.get("params")
                sid = params.get("sessionId") if isinstance(params, dict) else None
                if in_turn and sid == self._turn_session:
                    self._cancelled = True
            return
        if "id" in message and ("result" in message or "error" in message):
            request_id = message["id"]
            if isinstance(request_id, str):
                if request_id in self._answers:
                    self._answers[request_id] = message
                elif len(self._early) < 64:
                    # An answer ahead of its question (a scripted client): keep it for later.
                    self._early[request_id] = message
            return
        if "id" in message:
            self._error(message["id"], -32600, "invalid request")

    def _request(self, request_id: Any, method: str, params: Any) -> None:
        if method == "initialize":
            self._v2 = v2.negotiate(params, self._max_protocol) == 2
            if self._v2:  # no host mode in v2: it has no fs/* or terminal/*
                prompt: dict[str, Any] = {"prompt": {"embeddedContext": {}}}
                self._respond(request_id, v2.initialize_result(_info(), prompt))
                return
            capabilities = params.get("clientCapabilities") if isinstance(params, dict) else None
            capabilities = capabilities if isinstance(capabilities, dict) else {}
            fs = capabilities.get("fs")
            fs = fs if isinstance(fs, dict) else {}
            self._can_read = fs.get("readTextFile") is True
            self._can_write = fs.get("writeTextFile") is True
            self._can_run = capabilities.get("terminal") is True
            self._respond(
                request_id,
                {
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": False,
                        "promptCapabilities": {
                            "image": False,
                            "audio": False,
                            "embeddedContext": True,
                        },
                    },
                    "authMethods": [],
                    "agentInfo": _info(),
                },
            )
        elif method == "session/new":
            cwd = params.get("cwd") if isinstance(params, dict) else None
            if not isinstance(cwd, str) or not cwd:
                cwd = os.getcwd()
            self._session_counter += 1
            session = _Session(f"demo-{self._session_counter}", cwd)
            self._sessions[session.id] = session
            if self._v2:  # v2 has no modes: the same two as a config option
                options = [_mode_option(session.mode)]
                self._respond(request_id, {"sessionId": session.id, "configOptions": options})
            else:
                self._respond(request_id, {"sessionId": session.id, "modes": _MODES})
        elif method == "session/set_config_option" and self._v2:
            found = self._session_of(params)
            value = params.get("value") if isinstance(params, dict) else None
            if found is None or params.get("configId") != "mode" or value not in ("ask", "code"):
                self._error(request_id, -32602, "invalid params")
                return
            found.mode = str(value)
            self._respond(request_id, {"configOptions": [_mode_option(found.mode)]})
        elif method == "session/set_mode" and not self._v2:
            found = self._session_of(params)
            mode = params.get("modeId") if isinstance(params, dict) else None
            if found is None or mode not in ("ask", "code"):
                self._error(request_id, -32602, "invalid params")
                return
            found.mode = str(mode)
            self._update(found.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
            self._respond(request_id, {})
        else:
            self._error(request_id, -32601, "method not found")

    def _session_of(self, params: Any) -> _Session | None:
        if not isinstance(params, dict):
            return None
        sid = params.get("sessionId")
        return self._sessions.get(sid) if isinstance(sid, str) else None

    # --- the prompt turn -----------------------------------------------------------------

    def _poll(self) -> None:
        """Handle whatever input is waiting, without blocking; raise _Stop if cancelled."""
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            self._handle(item, in_turn=True)
        self._check()

    def _wait(self, seconds: float) -> None:
        """Wait `seconds` while handling input; raise _Stop if cancelled."""
        if seconds <= 0:
            self._poll()
            return
        deadline = time.monotonic() + seconds
        while True:
            self._check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                item = self._inbox.get(timeout=remaining)
            except queue.Empty:
                break
            self._handle(item, in_turn=True)
        self._poll()

    def _check(self) -> None:
        if self._cancelled:
            raise _Stop

    def _run_prompt(self, message: dict[str, Any]) -> None:
        request_id = message["id"]
        params = message.get("params")
        session = self._session_of(params)
        if session is None:
            self._error(request_id, -32602, "invalid params: unknown sessionId")
            return
        assert isinstance(params, dict)
        blocks = params.get("prompt")
        if not isinstance(blocks, list):
            self._error(request_id, -32602, "invalid params: prompt must be a list")
            return
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        prompt_text = " ".join(" ".join(texts).split())
        self._turn_session = session.id
        self._cancelled = False
        turn = None
        if self._v2:  # the answer only acknowledges; `idle` ends the turn
            turn = v2.V2Turn(partial(self._update, session.id), self._message_ids)
            self._respond(request_id, {"messageId": turn.user_id})
            turn.start(blocks)
            self._v2_turn = turn
        stop = "end_turn"
        try:
            if self._flood_count is not None:
                self._flood(session)
            else:
                self._turn(session, prompt_text)
                if turn is not None:
                    turn.final_message()
        except _Stop:
            stop = "cancelled"
        finally:
            self._v2_turn = None
            self._turn_session = None
            self._cancelled = False
        if turn is None:
            self._respond(request_id, {"stopReason": stop})
        else:
            turn.end(stop)

    def _turn(self, session: _Session, prompt_text: str) -> None:
        sid = session.id
        self._prompt_text = prompt_text
        self._poll()
        self._update(
            sid,
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": f"Thinking about: {prompt_text}"},
            },
        )
        file_name = find_file_name(prompt_text)
        steps = ["Read the prompt"]
        if file_name is not None:
            steps.append(f"Write {file_name}")
        steps.append("Reply to the user")
        self._poll()
        self._update(
            sid,
            {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": step, "priority": "medium", "status": "pending"} for step in steps
                ],
            },
        )
        reply = f"Hello! You said: {prompt_text}"
        if not prompt_text.endswith((".", "!", "?")):
            reply += "."
        if file_name is not None:
            shell = _SHELL_WORD_RE.search(prompt_text) is not None
            reply += " " + self._write_file(session, file_name, shell)
        for index, chunk in enumerate(reply_chunks(reply)):
            if index:
                self._wait(self._delay)
            else:
                self._poll()
            self._update(
                sid,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": chunk},
                },
            )

    def _write_file(self, session: _Session, file_name: str, shell: bool = False) -> str:
        """Run the write (tool call, permission, and in host mode the client's fs/* and
        terminal/*); return the reply's sentence."""
        path = _path_under(session.cwd, file_name)
        call_id, reason = self._tool_call(session, f"Write {file_name}", "edit", path)
        if reason is not None:
            self._tool_status(session, call_id, "failed")
            if reason == "error":
                return f"I did not write {file_name}: the permission request failed."
            return f"I did not write {file_name}: permission was {reason}."
        if not self._can_write:  # the client serves no files: pretend
            self._tool_status(session, call_id, "completed")
            return f"I wrote {file_name}."
        if self._can_read:
            self._host_call("fs/read_text_file", {"sessionId": session.id, "path": path})
        content = f"Hello from the acp-fast demo agent. You said: {self._prompt_text}\n"
        params = {"sessionId": session.id, "path": path, "content": content}
        _, error = self._host_call("fs/write_text_file", params)
        if error is not None:
            self._tool_status(session, call_id, "failed")
            return f"I could not write {file_name}: {error}."
        self._tool_status(session, call_id, "completed")
        sentence = f"I wrote {file_name}."
        if self._can_run:
            sentence += " " + self._run_check(session, path, shell)
        return sentence

    def _run_check(self, session: _Session, path: str, shell: bool) -> str:
        """Host mode with a terminal: ``wc -c`` the written file; the reply's sentence."""
        relative = os.path.relpath(path, os.path.abspath(session.cwd))
        command = f"wc -c {relative}"
        call_id, reason = self._tool_call(session, f"Run {command}", "execute", path)
        if reason is not None:
            self._tool_status(session, call_id, "failed")
            if reason == "error":
                return "I did not run wc: the permission request failed."
            return f"I did not run wc: permission was {reason}."
        create: dict[str, Any] = {
            "sessionId": session.id,
            "cwd": os.path.abspath(session.cwd),
            "outputByteLimit": 4096,
        }
        if shell:
            create["command"] = command
        else:
            create.update(command="wc", args=["-c", relative])
        result, error = self._host_call("terminal/create", create)
        terminal = result.get("terminalId") if isinstance(result, dict) else None
        if error is not None or not isinstance(terminal, str):
            self._tool_status(session, call_id, "failed")
            return f"I could not run wc: {error or 'no terminal id'}."
        ids = {"sessionId": session.id, "terminalId": terminal}
        self._host_call("terminal/wait_for_exit", ids)
        output, error = self._host_call("terminal/output", ids)
        self._host_call("terminal/release", ids)
        text = output.get("output") if isinstance(output, dict) else None
        if error is not None or not isinstance(text, str):
            self._tool_status(session, call_id, "failed")
            return f"I could not run wc: {error or 'no output'}."
        self._tool_status(session, call_id, "completed")
        return f"{command} printed: {text.strip()}."

    def _tool_call(
        self, session: _Session, title: str, kind: str, path: str
    ) -> tuple[str, str | None]:
        """Announce a tool call and ask for it unless the session allows all; (its id, None
        when allowed or the refusal: "rejected", "cancelled" or "error")."""
        session.tool_calls += 1
        call_id = f"call-{session.tool_calls}"
        self._poll()
        self._update(
            session.id,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": title,
                "kind": kind,
                "status": "pending",
                "locations": [{"path": path}],
            },
        )
        if session.mode == "code" or session.always_allow:
            return call_id, None
        try:
            return call_id, self._ask_permission(session, call_id, title, kind)
        except _Stop:
            self._tool_status(session, call_id, "failed")
            raise

    def _tool_status(self, session: _Session, call_id: str, status: str) -> None:
        self._update(
            session.id,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status},
        )

    def _call_client(self, request_id: str, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the client and wait for its answer (handling input meanwhile);
        None when stdin ended first. A cancel raises _Stop."""
        self._answers[request_id] = self._early.pop(request_id, None)
        try:
            self._poll()
            self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            while self._answers[request_id] is None and not self._eof:
                self._handle(self._inbox.get(), in_turn=True)
                self._check()
            return self._answers[request_id]
        finally:
            del self._answers[request_id]

    def _host_call(self, method: str, params: dict[str, Any]) -> tuple[Any, str | None]:
        """A host request (fs/*, terminal/*): (its result, None) or (None, the error's
        message)."""
        self._host_counter += 1
        answer = self._call_client(f"host-{self._host_counter}", method, params)
        if answer is None:
            return None, "the client went away"
        error = answer.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            return None, str(message or "an error")
        return answer.get("result"), None

    def _ask_permission(
        self, session: _Session, call_id: str, title: str, kind: str = "edit"
    ) -> str | None:
        """Ask the client; None when allowed, else "rejected", "cancelled" or "error"."""
        self._permission_counter += 1
        tool_call = {"toolCallId": call_id, "title": title, "kind": kind, "status": "pending"}
        params = {"sessionId": session.id, "toolCall": tool_call, "options": _PERMISSION_OPTIONS}
        if self._v2:
            params = v2.permission_params(session.id, tool_call, _PERMISSION_OPTIONS)
            self._update(session.id, v2.state("requires_action"))
        answer = self._call_client(
            f"perm-{self._permission_counter}", "session/request_permission", params
        )
        if self._v2:
            self._update(session.id, v2.state("running"))
        if answer is None:  # stdin ended: no answer can come
            return "cancelled"
        result = answer.get("result")
        if not isinstance(result, dict):
            return "error"
        outcome = result.get("outcome")
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return "cancelled"
        option_id = outcome.get("optionId")
        if option_id not in _ALLOW_OPTIONS:
            return "rejected"
        if option_id == "allow-always":
            session.always_allow = True
        return None

    def _flood(self, session: _Session) -> None:
        count = self._flood_count or 0
        line = session.flood_line
        if self._v2_turn is not None:  # v2: the turn's message id in every chunk
            line = self._flood_line(session, self._v2_turn.message_id("agent_message_chunk"))
        elif line is None:
            line = session.flood_line = self._flood_line(session, None)
        per_batch = max(1, min(_FLOOD_BATCH_LINES, _FLOOD_BATCH_BYTES // len(line)))
        batch = line * per_batch
        inbox = self._inbox
        sent = 0
        while sent < count:
            if not inbox.empty():
                self._poll()
            if count - sent >= per_batch:
                self._write(batch)
                sent += per_batch
            else:
                self._write(line * (count - sent))
                sent = count

    def _flood_line(self, session: _Session, message_id: str | None) -> bytes:
        alphabet = "abcdefghijklmnopqrstuvwxyz"
        text = (alphabet * (self._flood_bytes // len(alphabet) + 1))[: self._flood_bytes]
        update: dict[str, Any] = {"sessionUpdate": "agent_message_chunk"}
        if message_id is not None:
            update["messageId"] = message_id
        update["content"] = {"type": "text", "text": text}
        params = {"sessionId": session.id, "update": update}
        return _dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


def _info() -> dict[str, str]:
    return {"name": "acp-fast-demo", "title": "acp-fast demo agent", "version": _version()}


def _mode_option(current: str) -> dict[str, Any]:
    """v2's stand-in for the two modes: a `mode` select config option."""
    choices = [{"value": m["id"], "name": m["name"]} for m in _MODES["availableModes"]]
    return {
        "configId": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": current,
        "options": choices,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m acp_fast.demo_agent",
        description="A small ACP agent on stdin/stdout for demos, tests and benchmarks.",
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=None,
        help="seconds to wait before each reply chunk after the first "
        "(default: $ACP_DEMO_DELAY or 0)",
    )
    parser.add_argument(
        "--flood-count",
        type=int,
        default=None,
        metavar="N",
        help="flood mode: answer every prompt with N agent_message_chunk updates",
    )
    parser.add_argument(
        "--flood-bytes",
        type=int,
        default=64,
        metavar="B",
        help="flood mode: ASCII bytes of text per chunk (default 64)",
    )
    parser.add_argument(
        "--max-protocol",
        type=int,
        choices=(1, 2),
        default=2,
        help="the highest ACP version it answers (default 2; 1: a v1-only agent)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo agent on this process's stdin/stdout until stdin ends; return 0."""
    parser = _parser()
    args = parser.parse_args(argv)
    delay = args.delay
    if delay is None:
        raw = os.environ.get("ACP_DEMO_DELAY", "").strip()
        try:
            delay = float(raw) if raw else 0.0
        except ValueError:
            parser.error(f"ACP_DEMO_DELAY must be a number of seconds, not {raw!r}")
    if delay < 0 or math.isnan(delay):
        parser.error("the delay must be a non-negative number of seconds")
    if args.flood_count is not None and args.flood_count < 0:
        parser.error("--flood-count must be >= 0")
    if args.flood_bytes < 0:
        parser.error("--flood-bytes must be >= 0")
    agent = DemoAgent(
        sys.stdin.buffer,
        sys.stdout.fileno(),
        delay=delay,
        flood_count=args.flood_count,
        flood_bytes=args.flood_bytes,
        max_protocol=args.max_protocol,
    )
    try:
        return agent.run()
    except BrokenPipeError:
        # The client went away; nothing left to say to it.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

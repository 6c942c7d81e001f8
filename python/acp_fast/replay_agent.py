"""An ACP agent that plays a recorded conversation back to any client.

    python -m acp_fast.replay_agent PATH [--epoch E] [--log LOG] [--wait-cancel] [--map-path A=B]
    acp-fast replay PATH [--epoch E] [--log LOG] [--wait-cancel] [--map-path A=B]

PATH is an acp-fast journal (JSONL or SQLite, see `acp_fast.journal`) or an interop transcript
(one ``{"t", "dir": "->" | "<-" | "stderr", "msg"}`` object a line). A journal appended to by
several clients holds several runs (each starts with the client's ``initialize``, or without the
wire tap with a new epoch): the agent plays the one whose updates carry ``--epoch E``, by
default the last (saying so on stderr when there are more). The agent writes the
recorded agent-to-client lines in order: a journal's exactly as recorded, byte for byte (a
transcript's as compact JSON), and a transcript's stderr lines to stderr. Before an answer to
one of the client's requests (``initialize``, ``session/new``, ``session/prompt``, and any other
request the recording answered) it waits for the live client to send that request and answers
with the live id; answers to requests this client never sends (``authenticate``) are left out.
After each request of its own (a permission request, ``fs/*``, ...) it waits for the client's
answer with the recorded id. With --wait-cancel it also waits, where the recording has the
client's ``session/cancel``, until the live client has sent one. Every line the client writes is
appended to LOG. With --map-path A=B every A in a string of the recording (the recorded
cwd, the paths of ``fs/*`` requests, a terminal's output) reads as NEW, both in what the agent
writes and in the client messages it expects, so a recording made in one directory plays in
another (its lines are then written as compact JSON).

It checks the client's messages against the recorded ones, in order, and says on stderr where
they differ (``replay: client message 3 (record 5) differs at params.cwd: ...``); it plays on
regardless. A journal recorded without the core's wire tap has no client lines and no answers:
the agent then answers ``initialize``, ``session/new`` (the first recorded session id) and one
``session/prompt`` (``end_turn``) itself, with every recorded update and permission request in
that one turn.

When the recording answered every request, the agent then answers any further
``session/prompt`` with ``end_turn`` until its input ends; when it did not (the recorded agent
hung or died), it exits, so the client sees its output end. It gives up (status 3, one line on
stderr) after waiting 10 s for the client.

ACP v2 (preview): a recording whose ``initialize`` was answered with ``protocolVersion`` 2 is
played as v2, the answer byte for byte as any other (so the live client must offer 2: its
``protocol="auto"`` or ``"v2"``). A v2 turn ends at the session's ``state_update`` ``idle``, not
at the acknowledging answer: a recording whose last turn has no ``idle`` after its ``running``
counts as unanswered (the agent exits after it), and further prompts get the acknowledgement
``{"messageId": "replay-N"}``, ``running`` and ``idle`` ``end_turn``. A journal without the wire
tap whose updates are v2's (``state_update``, the whole-message upserts, ``messageId``...) gets a
made-up v2 handshake: ``initialize`` answered 2, the prompt acknowledged, and ``running`` before
and ``idle`` ``end_turn`` after the recorded updates when they hold no such state of their own.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import contains
from typing import Any, BinaryIO

from . import _json, _replay_v2, journal

CLIENT_METHODS = ("initialize", "session/new", "session/prompt")
WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Entry:
    """One recorded event. `direction`: "->" client to agent, "<-" agent to client, "stderr".
    `raw`: the exact line, when the recording kept it; `origin`: where it was recorded (for
    messages naming the recording); `synthetic`: made up by the replay, not recorded."""

    direction: str
    message: Any
    raw: str | None = None
    origin: str = ""
    synthetic: bool = False


class RecordingError(Exception):
    """The recording cannot be loaded."""


def wire(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def key(request_id: Any) -> str:
    return json.dumps(request_id)


@dataclass(frozen=True)
class Recording:
    """The events of a recording, and which of the client's requests a live client will send
    again: a journal's client is acp-fast, so every one (None); a transcript's was another
    program, so only `CLIENT_METHODS`."""

    entries: list[Entry]
    methods: tuple[str, ...] | None


def map_paths(value: Any, old: str, new: str) -> Any:
    """`value` with every `old` inside its strings (keys stay) replaced by `new`."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {name: map_paths(item, old, new) for name, item in value.items()}
    if isinstance(value, list):
        return [map_paths(item, old, new) for item in value]
    return value


def mapped(recording: Recording, old: str, new: str) -> Recording:
    """The recording with `old` read as `new` in every message (raw lines dropped)."""
    entries = [
        Entry(e.direction, map_paths(e.message, old, new), None, e.origin, e.synthetic)
        if isinstance(e.message, dict)
        else e
        for e in recording.entries
    ]
    return Recording(entries, recording.methods)


def load(path: str, epoch: int | None = None) -> Recording:
    """The events of a journal (its run with `epoch`, else its last) or a transcript, in
    order."""
    try:
        kind = journal.journal_kind(path)
    except journal.JournalError:
        kind = None
    if kind is not None:
        return Recording(_from_journal(path, epoch), None)
    limit = journal.MAX_RECORD_BYTES
    lines = []
    try:
        with open(path, encoding="utf-8") as handle:
            number = 0
            while line := handle.readline(limit + 1):
                number += 1
                if len(line) > limit:
                    raise RecordingError(
                        f"{path}: line {number} is longer than {limit} characters: not read"
                    )
                if line.strip():
                    lines.append((number, line))
    except OSError as exc:
        raise RecordingError(f"{path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise RecordingError(f"{path}: neither a journal nor a transcript") from None
    entries = []
    for number, line in lines:
        try:
            entry = _json.loads_lenient(line)
            direction = entry["dir"]
        except (ValueError, KeyError, TypeError):
            raise RecordingError(
                f"{path}: line {number}: neither a journal nor a transcript line"
            ) from None
        if direction == "stderr":
            entries.append(Entry("stderr", str(entry.get("line", "")), origin=f"line {number}"))
        else:
            entries.append(Entry(direction, entry.get("msg"), origin=f"line {number}"))
    return Recording(entries, CLIENT_METHODS)


@dataclass
class _Run:
    """The records of one client connection in a journal."""

    records: list[journal.JournalRecord]
    epochs: set[int]


def _runs(path: str) -> list[_Run]:
    """A journal's records split into client connections: a new one starts at each
    `initialize` the client sent (with the wire tap) or, without it, at each new epoch."""
    runs: list[_Run] = []
    for record in journal.read(path):
        starts = not runs
        if record.kind == journal.RecordKind.SENT:
            starts = starts or '"method":"initialize"' in record.envelope.replace(" ", "")
        elif record.kind == journal.RecordKind.UPDATE and runs:
            current = runs[-1]
            wired = any(r.kind == journal.RecordKind.SENT for r in current.records)
            starts = (
                not wired
                and bool(current.epochs)
                and record.transport_epoch not in (current.epochs)
            )
        if starts:
            runs.append(_Run([], set()))
        runs[-1].records.append(record)
        if record.kind == journal.RecordKind.UPDATE:
            runs[-1].epochs.add(record.transport_epoch)
    return runs


def _from_journal(path: str, epoch: int | None) -> list[Entry]:
    runs = _runs(path)
    if epoch is not None:
        chosen = [run for run in runs if epoch in run.epochs]
        if not chosen:
            found = sorted({e for run in runs for e in run.epochs})
            raise RecordingError(
                f"{path}: no run with epoch {epoch} (epochs: {', '.join(map(str, found)) or '-'})"
            )
        run = chosen[-1]
    else:
        run = runs[-1] if runs else _Run([], set())
        if len(runs) > 1:
            epochs = ", ".join(str(min(r.epochs)) if r.epochs else "?" for r in runs)
            _err(
                f"replay: {path} holds {len(runs)} runs (epochs {epochs}); playing the last "
                "(choose one with --epoch)"
            )
    entries = []
    first_session = ""
    wire_lines = False
    v2 = False
    for record in run.records:
        kind = record.kind
        origin = f"record {record.number}"
        if kind == journal.RecordKind.ACTIVITY:
            continue  # derived from a request the journal also holds as a received line
        if kind in (journal.RecordKind.SENT, journal.RecordKind.RECEIVED):
            wire_lines = True
        if not first_session and record.session_id:
            first_session = record.session_id
        try:
            message = _json.loads_lenient(record.envelope)
        except ValueError:
            message = None
        direction = "->" if kind == journal.RecordKind.SENT else "<-"
        entries.append(Entry(direction, message, record.envelope, origin))
        if kind == journal.RecordKind.UPDATE and not v2:
            v2 = _replay_v2.is_v2_update(message)
    if wire_lines:
        return entries

    # No wire tap: make up the handshake and one prompt turn around the recorded updates.
    def made(direction: str, message: dict[str, Any]) -> Entry:
        return Entry(direction, message, synthetic=True, origin="(made up)")

    def request(number: int, method: str) -> Entry:
        return made("->", {"jsonrpc": "2.0", "id": number, "method": method})

    def answer(number: int, result: Any) -> Entry:
        return made("<-", {"jsonrpc": "2.0", "id": number, "result": result})

    session_id = first_session or "replay-1"
    if v2:
        before, after = _replay_v2.made_up_turn(session_id, entries)
        return [*(made(*m) for m in before), *entries, *(made(*m) for m in after)]
    capabilities = {"loadSession": False}
    return [
        request(0, "initialize"),
        answer(0, {"protocolVersion": 1, "agentCapabilities": capabilities, "authMethods": []}),
        request(1, "session/new"),
        answer(1, {"sessionId": session_id}),
        request(2, "session/prompt"),
        *entries,
        answer(2, {"stopReason": "end_turn"}),
    ]


def _difference(recorded: Any, live: Any, where: str = "") -> str | None:
    """Where two JSON values first differ (a dotted path), or None when equal."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        for name in list(recorded) + [k for k in live if k not in recorded]:
            path = f"{where}.{name}" if where else str(name)
            if name not in live:
                return f"{path}: recorded {_short(recorded[name])}, missing"
            if name not in recorded:
                return f"{path}: not recorded, received {_short(live[name])}"
            found = _difference(recorded[name], live[name], path)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(live, list):
        for index, (a, b) in enumerate(zip(recorded, live, strict=False)):
            found = _difference(a, b, f"{where}[{index}]")
            if found:
                return found
        if len(recorded) != len(live):
            return f"{where or 'the message'}: recorded {len(recorded)} items, received {len(live)}"
        return None
    if recorded == live and type(recorded) is type(live):
        return None
    return f"{where or 'the message'}: recorded {_short(recorded)}, received {_short(live)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


class Replay:
    def __init__(
        self, recorded_client: Sequence[Entry], log: BinaryIO | None, err: Callable[[str], None]
    ) -> None:
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.requests: dict[str, deque[Any]] = defaultdict(deque)
        # How many requests of each method the client has sent in all (answered or not).
        self.received: Counter[str] = Counter()
        self.answers: dict[str, dict[str, Any]] = {}
        self.cancels = 0
        self.sessions: dict[str, str] = {}  # live request id (its key) -> params.sessionId
        self.ended = False
        self.log = log
        self.err = err
        self.recorded_client = recorded_client
        self.seen = 0  # client messages taken so far
        self.differences = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in sys.stdin.buffer:
            if self.log is not None:
                self.log.write(raw if raw.endswith(b"\n") else raw + b"\n")
                self.log.flush()
            try:
                value = _json.loads_lenient(raw.decode("utf-8"))
            except ValueError:
                value = {"unparsed": raw.decode("utf-8", "replace").rstrip("\n")}
            if isinstance(value, dict):
                self.inbox.put(value)
        self.inbox.put(None)

    def _check(self, message: dict[str, Any]) -> None:
        number = self.seen
        self.seen += 1
        if not self.recorded_client:
            return
        if number >= len(self.recorded_client):
            if number == len(self.recorded_client):
                self.differences += 1
                method = message.get("method", "an answer")
                self.err(
                    f"replay: client message {number + 1} ({method}) and later ones were not "
                    "recorded"
                )
            return
        entry = self.recorded_client[number]
        found = _difference(entry.message, message)
        if found:
            self.differences += 1
            self.err(f"replay: client message {number + 1} ({entry.origin}) differs at {found}")

    def session_of(self, request_id: Any) -> str:
        """The session a live request named (for the answers the replay makes up)."""
        return self.sessions.get(key(request_id), "")

    def _take(self, timeout: float) -> bool:
        try:
            message = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return False
        if message is None:
            self.ended = True
            return False
        self._check(message)
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            self.requests[method].append(message["id"])
            self.received[method] += 1
            params = message.get("params")
            session = params.get("sessionId") if isinstance(params, dict) else None
            if isinstance(session, str) and len(self.sessions) < 4096:
                self.sessions[key(message["id"])] = session
        elif method == "session/cancel":
            self.cancels += 1
        elif method is None and "id" in message:
            self.answers[key(message["id"])] = message
        return True

    def wait(
        self, done: Callable[[], bool], what: str, seconds: float | None = WAIT_SECONDS
    ) -> None:
        """Takes the client's messages until `done()`; exits when the client goes away, and
        with status 3 (saying so on stderr) after `seconds` (None: no limit)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not done():
            if self.ended:
                sys.exit(0)
            left = 0.1 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                self.err(f"replay: gave up waiting for {what}")
                sys.exit(3)
            self._take(min(left, 0.1))

    def send(self, data: bytes) -> None:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            sys.exit(0)


def _err(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def _sent_at_least(received: Counter[str], method: str, count: int) -> bool:
    return received[method] >= count


def play(recording: Recording, log: BinaryIO | None, wait_cancel: bool) -> None:
    entries = recording.entries

    def replayed(method: str) -> bool:
        return bool(method) and (recording.methods is None or method in recording.methods)

    recorded_method: dict[str, str] = {}
    for entry in entries:
        message = entry.message
        if entry.direction == "->" and isinstance(message, dict) and "id" in message:
            if isinstance(message.get("method"), str):
                recorded_method[key(message["id"])] = message["method"]
    recorded_client = [e for e in entries if e.direction == "->" and not e.synthetic]
    replay = Replay(recorded_client, log, _err)
    # Requests of the client the recording answered; the rest were never answered.
    answered = {
        key(e.message["id"])
        for e in entries
        if e.direction == "<-"
        and isinstance(e.message, dict)
        and "method" not in e.message
        and "id" in e.message
    }
    unanswered = {
        k for k, method in recorded_method.items() if replayed(method) and k not in answered
    }
    version = _replay_v2.recorded_version(entries)
    # A v2 turn ends at `idle`, not at its acknowledging answer: one that never went idle is
    # as unanswered as a v1 prompt never answered.
    unfinished = version == 2 and not _replay_v2.last_turn_ended(entries)
    # What the recorded agent wrote after a request of the client's, it wrote because of it:
    # nothing recorded after the client's n-th request of a method is sent before the live
    # client has sent that many (a turn's updates never run ahead of its session/prompt).
    recorded_requests: Counter[str] = Counter()
    for entry in entries:
        direction, message = entry.direction, entry.message
        if direction == "->" and isinstance(message, dict) and "id" in message:
            method = message.get("method")
            if isinstance(method, str) and replayed(method):
                recorded_requests[method] += 1
                count = recorded_requests[method]
                replay.wait(partial(_sent_at_least, replay.received, method, count), method)
        if direction == "stderr":
            _err(str(message))
        elif direction == "->" and wait_cancel and isinstance(message, dict):
            if message.get("method") == "session/cancel":
                replay.wait(lambda: replay.cancels > 0, "session/cancel")
        elif direction == "<-" and isinstance(message, dict):
            if "method" not in message and "id" in message:  # an answer to a client request
                method = recorded_method.get(key(message["id"]), "")
                if not replayed(method):
                    continue  # the live client never sends it
                live = replay.requests[method]
                replay.wait(partial(bool, live), method)
                live_id = live.popleft()
                if entry.raw is not None and live_id == message["id"]:
                    replay.send(entry.raw.encode() + b"\n")
                else:
                    replay.send(wire(dict(message, id=live_id)))
            else:
                replay.send(entry.raw.encode() + b"\n" if entry.raw is not None else wire(message))
                if "id" in message and "method" in message:  # a request of the agent's own
                    wanted = key(message["id"])
                    replay.wait(partial(contains, replay.answers, wanted), f"answer {wanted}")
        elif direction == "<-" and entry.raw is not None:
            replay.send(entry.raw.encode() + b"\n")  # a recorded line that is not JSON
    if unanswered or unfinished:
        # The recorded agent never answered these: wait until the live client has sent them
        # too, then end the output as the recording did.
        for method in {recorded_method[k] for k in unanswered}:
            live = replay.requests[method]
            replay.wait(partial(bool, live), method)
        return
    prompts = replay.requests["session/prompt"]
    made_up = 0
    while True:
        replay.wait(lambda: bool(prompts), "another prompt", None)
        live_id = prompts.popleft()
        if version == 1:
            replay.send(
                wire({"jsonrpc": "2.0", "id": live_id, "result": {"stopReason": "end_turn"}})
            )
            continue
        made_up += 1
        for message in _replay_v2.further_turn(live_id, replay.session_of(live_id), made_up):
            replay.send(wire(message))


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="python -m acp_fast.replay_agent",
        description="An ACP agent that plays a recorded journal or transcript back.",
    )
    add_arguments(result)
    return result


def add_arguments(result: argparse.ArgumentParser) -> None:
    result.add_argument("path", metavar="PATH", help="a journal (JSONL or SQLite) or a transcript")
    result.add_argument("--log", metavar="LOG", help="append every line the client writes to LOG")
    result.add_argument(
        "--epoch",
        type=int,
        metavar="E",
        help="a journal holding several runs (clients): play the one with this transport "
        "epoch (default: the last run)",
    )
    result.add_argument(
        "--wait-cancel",
        action="store_true",
        help="where the recording has the client's session/cancel, wait for the live one",
    )
    result.add_argument(
        "--map-path",
        metavar="OLD=NEW",
        help="read every OLD in the recording's strings as NEW (e.g. the recorded cwd as the "
        "live one)",
    )


def run(
    path: str,
    log_path: str | None,
    wait_cancel: bool,
    epoch: int | None = None,
    map_path: str | None = None,
) -> int:
    """Play `path`; the exit status (1 with one line on stderr when it cannot be loaded)."""
    if map_path is not None and ("=" not in map_path or not map_path.split("=", 1)[0]):
        _err(f"acp-fast replay: error: --map-path {map_path!r}: expected OLD=NEW")
        return 1
    try:
        recording = load(path, epoch)
    except (RecordingError, journal.JournalError) as exc:
        _err(f"acp-fast replay: error: {exc}")
        return 1
    if map_path is not None:
        old, new = map_path.split("=", 1)
        recording = mapped(recording, old, new)
    log = None
    if log_path is not None:
        try:
            log = open(log_path, "ab")
        except OSError as exc:
            _err(f"acp-fast replay: error: {log_path}: {exc.strerror}")
            return 1
    try:
        play(recording, log, wait_cancel)
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run(args.path, args.log, args.wait_cancel, args.epoch, args.map_path)


if __name__ == "__main__":
    sys.exit(main())

"""A scripted agent that plays back a recorded transcript (tests/interop/data/*.jsonl).

    python replay_agent.py TRANSCRIPT LOG [--wait-cancel]

It writes the recorded agent-to-client lines in order (compact JSON, UTF-8), and the recorded
stderr lines to stderr. Before an answer to one of the client's requests (`initialize`,
`session/new`, `session/prompt`) it waits for the live client to send that request and answers
with the live id; answers to requests this client never sends (`authenticate`) are left out.
After each request of its own (permission, fs/...) it waits for the client's answer with the
recorded id. With --wait-cancel it also waits, where the recording has the client's
`session/cancel`, until the live client has sent one. Every line the client writes is appended
to LOG as received.

When the recording answered every request, the agent then answers any further `session/prompt`
with `end_turn` until its input ends; when it did not (the recorded agent hung or died), the
agent exits, so the client sees its output end.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections import defaultdict, deque
from typing import Any

CLIENT_METHODS = ("initialize", "session/new", "session/prompt")
WAIT_SECONDS = 10.0


def wire(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def key(request_id: Any) -> str:
    return json.dumps(request_id)


class Replay:
    def __init__(self, log_path: str) -> None:
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.requests: dict[str, deque[Any]] = defaultdict(deque)
        self.answers: dict[str, dict[str, Any]] = {}
        self.cancels = 0
        self.ended = False
        self.log = open(log_path, "ab")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in sys.stdin.buffer:
            self.log.write(raw if raw.endswith(b"\n") else raw + b"\n")
            self.log.flush()
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                self.inbox.put(value)
        self.inbox.put(None)

    def _take(self, timeout: float) -> bool:
        try:
            message = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return False
        if message is None:
            self.ended = True
            return False
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            self.requests[method].append(message["id"])
        elif method == "session/cancel":
            self.cancels += 1
        elif method is None and "id" in message:
            self.answers[key(message["id"])] = message
        return True

    def wait(self, done: Any, what: str, seconds: float | None = WAIT_SECONDS) -> None:
        """Takes the client's messages until `done()`; exits when the client goes away, and
        with status 3 (saying so on stderr) after `seconds` (None: no limit)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not done():
            if self.ended:
                sys.exit(0)
            left = 0.1 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                sys.stderr.write(f"replay: gave up waiting for {what}\n")
                sys.exit(3)
            self._take(min(left, 0.1))

    def send(self, message: dict[str, Any]) -> None:
        try:
            sys.stdout.buffer.write(wire(message))
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            sys.exit(0)


def main() -> None:
    transcript, log_path = sys.argv[1], sys.argv[2]
    wait_cancel = "--wait-cancel" in sys.argv[3:]
    with open(transcript) as handle:
        entries = [json.loads(line) for line in handle if line.strip()]
    recorded_method: dict[str, str] = {}
    for entry in entries:
        message = entry.get("msg")
        if entry["dir"] == "->" and isinstance(message, dict) and "id" in message:
            if "method" in message:
                recorded_method[key(message["id"])] = message["method"]
    replay = Replay(log_path)
    unanswered = {k for k, method in recorded_method.items() if method in CLIENT_METHODS}
    for entry in entries:
        direction, message = entry["dir"], entry.get("msg")
        if direction == "stderr":
            sys.stderr.write(str(entry.get("line", "")) + "\n")
            sys.stderr.flush()
        elif direction == "->" and wait_cancel and isinstance(message, dict):
            if message.get("method") == "session/cancel":
                replay.wait(lambda: replay.cancels > 0, "session/cancel")
        elif direction == "<-" and isinstance(message, dict):
            if "method" not in message and "id" in message:  # an answer to a client request
                method = recorded_method.get(key(message["id"]), "")
                unanswered.discard(key(message["id"]))
                if method not in CLIENT_METHODS:
                    continue  # the live client never sends it
                live = replay.requests[method]
                replay.wait(lambda live=live: bool(live), method)
                replay.send(dict(message, id=live.popleft()))
            elif "id" in message:  # a request of the agent's own
                replay.send(message)
                wanted = key(message["id"])
                replay.wait(lambda wanted=wanted: wanted in replay.answers, f"answer {wanted}")
            else:
                replay.send(message)
    if unanswered:
        # The recorded agent never answered these: wait until the live client has sent them
        # too, then end the output as the recording did.
        for method in {recorded_method[k] for k in unanswered}:
            live = replay.requests[method]
            replay.wait(lambda live=live: bool(live), method)
        return
    prompts = replay.requests["session/prompt"]
    while True:
        replay.wait(lambda: bool(prompts), "another prompt", None)
        replay.send(
            {"jsonrpc": "2.0", "id": prompts.popleft(), "result": {"stopReason": "end_turn"}}
        )


if __name__ == "__main__":
    main()

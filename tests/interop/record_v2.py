"""Records ACP v2 transcripts of v2 agents written by others (tests/interop/data/v2/*.jsonl) with a
small hand-written v2 client, the way the v1 transcripts were made: initialize (protocol 2),
session/new, a plain prompt, "write hello.txt" allowed, then rejected, and "slow" cancelled with
session/cancel. One JSON object a line: ``{"t": seconds, "dir": "->" | "<-" | "stderr", "msg":
…}``; the run's temporary cwd is written as ``/workspace``.

    python -m interop.record_v2 OUTFILE -- AGENT_COMMAND...   (from tests/)

These are the reference for the v2 work (issue 25) and its corpus; the v1 replay and model
corpus tests read only the files directly in data/, not data/v2/.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RECORDED_ROOT = "/workspace"


class Recorder:
    def __init__(self, command: list[str], cwd: str) -> None:
        self.started = time.monotonic()
        self.lines: list[dict[str, Any]] = []
        self.cwd = cwd
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self.next_id = 0
        self.pending = b""

    def _log(self, direction: str, message: Any) -> None:
        t = round(time.monotonic() - self.started, 3)
        self.lines.append({"t": t, "dir": direction, "msg": message})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        self._log("->", message)

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def read_until(self, done: Any, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Messages until `done(message)` is true (inclusive), answering nothing. Reads the fd
        itself: a buffered reader's select() would not see lines already buffered."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                message = json.loads(line)
                self._log("<-", message)
                got.append(message)
                if done(message):
                    return got
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                self.pending += chunk
        raise TimeoutError(f"the agent did not finish: {got[-3:]}")

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for line in self.proc.stderr.read().decode("utf-8", "replace").splitlines():
            self._log("stderr", line)


def state(message: dict[str, Any]) -> str | None:
    update = message.get("params", {}).get("update", {})
    return update.get("state") if update.get("sessionUpdate") == "state_update" else None


def turn(rec: Recorder, session: str, text: str, answer: str | None = None) -> None:
    """One prompt: its acknowledgement and updates until the turn's idle (the first idle after
    a running: an agent may report idle before the prompt starts, as simple_agent_v2 does); a
    permission request answered with `answer`."""
    prompt = rec.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    acked = ran = ended = False
    while not (acked and ended):
        for message in rec.read_until(lambda m: True):
            if message.get("id") == prompt and "method" not in message:
                acked = True
            elif state(message) in ("running", "requires_action"):
                ran = True
            elif state(message) == "idle" and ran:
                ended = True
            elif message.get("method") == "session/request_permission":
                outcome = {"outcome": "selected", "optionId": answer or "reject"}
                rec.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})


def record(command: list[str], out: Path) -> None:
    with tempfile.TemporaryDirectory() as cwd:
        rec = Recorder(command, cwd)
        try:
            info = {"name": "acp-fast-recorder", "version": "1"}
            init = rec.request(
                "initialize", {"protocolVersion": 2, "info": info, "capabilities": {}}
            )
            rec.read_until(lambda m: m.get("id") == init)
            new = rec.request("session/new", {"cwd": cwd, "mcpServers": []})
            session = rec.read_until(lambda m: m.get("id") == new)[-1]["result"]["sessionId"]
            turn(rec, session, "hello there")
            turn(rec, session, "write hello.txt", "allow")
            turn(rec, session, "write hello.txt", "reject")
            slow = rec.request(
                "session/prompt",
                {"sessionId": session, "prompt": [{"type": "text", "text": "slow"}]},
            )
            seen = rec.read_until(lambda m: m.get("id") == slow)
            time.sleep(0.5)
            rec.send(
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}
            )
            if not any(state(m) == "idle" for m in seen):  # an echo agent may be done already
                rec.read_until(lambda m: state(m) == "idle", timeout=5.0)
        finally:
            rec.close()
        text = "".join(json.dumps(line) + "\n" for line in rec.lines)
        out.write_text(text.replace(cwd, RECORDED_ROOT), encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: python -m interop.record_v2 OUTFILE -- AGENT_COMMAND...")
    record(sys.argv[3:], Path(sys.argv[1]))
    os.write(1, f"recorded {sys.argv[1]}\n".encode())

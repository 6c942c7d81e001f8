"""The agent side of benches/host_bench.py: a prompt "N PATH" makes it send N
`fs/read_text_file` requests for PATH, one at a time (each after the previous answer), then
answer the prompt `end_turn`. The prompt "N terminal BYTES LIMIT" instead creates one terminal
printing BYTES bytes (`head -c BYTES /dev/zero`), waits for its exit, reads its output once;
"N permission" sends N permission requests (kind "edit", title "Write src/x.py")."""

from __future__ import annotations

import json
import sys

out = sys.stdout.buffer
inp = sys.stdin.buffer


def send(message: dict[str, object]) -> None:
    out.write(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode() + b"\n")
    out.flush()


def ask(request_id: str, method: str, params: dict[str, object]) -> bytes:
    send({"id": request_id, "method": method, "params": params})
    line = inp.readline()
    if b'"error"' in line[:200] and b'"result"' not in line[:200]:
        sys.exit(f"fs_agent: {method} failed: {line[:300]!r}")
    return line


for raw in inp:
    message = json.loads(raw)
    method = message.get("method")
    if method == "initialize":
        send({"id": message["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"id": message["id"], "result": {"sessionId": "bench"}})
    elif method == "session/prompt":
        words = message["params"]["prompt"][0]["text"].split()
        if words[1] == "permission":
            tool = {"toolCallId": "t", "title": "Write src/x.py", "kind": "edit"}
            options = [
                {"optionId": "y", "name": "Allow", "kind": "allow_once"},
                {"optionId": "n", "name": "Reject", "kind": "reject_once"},
            ]
            for n in range(int(words[0])):
                params = {"sessionId": "bench", "toolCall": tool, "options": options}
                ask(f"p{n}", "session/request_permission", params)
        elif words[1] == "terminal":
            size, limit = words[2], int(words[3])
            params = {"sessionId": "bench", "command": "head", "args": ["-c", size, "/dev/zero"]}
            ask("t0", "terminal/create", {**params, "outputByteLimit": limit})
            ask("t1", "terminal/wait_for_exit", {"sessionId": "bench", "terminalId": "term-1"})
            ask("t2", "terminal/output", {"sessionId": "bench", "terminalId": "term-1"})
            ask("t3", "terminal/release", {"sessionId": "bench", "terminalId": "term-1"})
        else:
            count, path = int(words[0]), words[1]
            for n in range(count):
                ask(f"r{n}", "fs/read_text_file", {"sessionId": "bench", "path": path})
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})

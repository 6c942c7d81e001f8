"""An agent whose permission request carries a 300 KiB option id and tool kind (standard library
only): one request per prompt, then the turn ends with no reply text."""

from __future__ import annotations

import json
import sys

BIG = "k" * (300 * 1024)


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(ident: object, result: object) -> None:
    send({"jsonrpc": "2.0", "id": ident, "result": result})


def main() -> None:
    prompt = None
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            answer(message["id"], {"protocolVersion": 1, "agentCapabilities": {}})
        elif method == "session/new":
            answer(message["id"], {"sessionId": "s1"})
        elif method == "session/prompt":
            prompt = message["id"]
            params = {
                "sessionId": "s1",
                "toolCall": {"toolCallId": "c1", "title": "t", "kind": BIG},
                "options": [{"optionId": "o" + BIG, "name": "n", "kind": "allow_once"}],
            }
            send({"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission",
                  "params": params})  # fmt: skip
        elif message.get("id") == "p1":
            answer(prompt, {"stopReason": "end_turn"})


if __name__ == "__main__":
    main()

"""A scripted agent: ``python line_agent.py SCRIPT``. SCRIPT holds lines sent verbatim on each
``session/prompt`` (a line whose id starts with ``"p`` is a request: the agent waits for one
line, its answer, before going on), then ``end_turn``."""

import json
import sys

script = open(sys.argv[1]).read().splitlines()
out = sys.stdout


def send(line: str) -> None:
    out.write(line + "\n")
    out.flush()


for raw in sys.stdin:
    msg = json.loads(raw)
    m = msg.get("method")
    if m == "initialize":
        result = {"protocolVersion": 1, "agentCapabilities": {}}
        send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
    elif m == "session/new":
        send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s1"}}))
    elif m == "session/prompt":
        for line in script:
            send(line)
            if line.startswith('{"jsonrpc":"2.0","id":"p'):
                sys.stdin.readline()
        result = {"stopReason": "end_turn"}
        send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))

"""A scripted agent that advertises ``_session/steering``: ``python steer_agent.py SCRIPT``.

SCRIPT is a JSON object: ``supported`` (what ``_meta.steering.supported`` says), ``wait`` (a
turn waits for a steering request before it ends, and echoes the steered text), ``answer``
(the steering answer while a turn runs; default ``{"outcome": "injected"}``), ``silent``
(the turn ends without answering the steering request) and ``log`` (a
file every line the client writes is appended to). A steering request with no turn running is
answered ``promptRequired``, as claude-agent-acp 0.101 answers ``idleBehavior:
"promptRequired"``."""

import json
import sys

script = json.load(open(sys.argv[1]))
log = open(script["log"], "a")
turn = None  # the running session/prompt request


def send(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def chunk(text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s1", "update": update},
        }
    )


for raw in sys.stdin:
    log.write(raw if raw.endswith("\n") else raw + "\n")
    log.flush()
    msg = json.loads(raw)
    method = msg.get("method")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {},
                    "_meta": {"steering": {"supported": script.get("supported", True)}},
                },
            }
        )
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        chunk("working. ")
        if script.get("wait"):
            turn = msg
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
    elif method == "_session/steering":
        if turn is None:
            result = {"outcome": "promptRequired", "reason": "noRunningTurn"}
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            continue
        if not script.get("silent"):
            result = script.get("answer", {"outcome": "injected"})
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        steered = " ".join(b.get("text", "") for b in msg["params"]["prompt"])
        chunk("steered: " + steered)
        send({"jsonrpc": "2.0", "id": turn["id"], "result": {"stopReason": "end_turn"}})
        turn = None
    elif method == "session/cancel" and turn is not None:
        send({"jsonrpc": "2.0", "id": turn["id"], "result": {"stopReason": "cancelled"}})
        turn = None
    elif "id" in msg and method is not None:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}})

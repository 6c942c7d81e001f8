"""A scripted ACP v2 agent for the v2 facade tests.

``python v2_agent.py SCRIPT LOG``: SCRIPT is a JSON file; every line the agent receives is
appended to LOG. It answers ``initialize`` with protocol version 2 (or, when the client offers
1 and the script says ``"speaks_v1": true``, with a v1 answer; ``"only_v1": true`` answers 1
whatever is offered), opens sessions ``s1``, ``s2``… and plays a prompt's turn from
``SCRIPT["turns"][first word of the prompt]``, a list of steps (a turn not listed: running,
one agent message, idle ``end_turn``):

- ``{"update": {...}}``: a ``session/update`` with that body (to ``"session"`` when given).
- ``{"exit": N}``: exits with status N. ``{"error": CODE}``: an error answer to the prompt.
- ``{"ack": true}``: the prompt's acknowledgement, ``{"messageId": "u<turn>"}``.
- ``{"ask": {...}}``: a ``session/request_permission`` with these params (``sessionId``
  added); waits for the answer and sends the chosen option id as an agent message chunk
  (``outcome <id or cancelled>``).
- ``{"request": {"method": ..., "params": ...}}``: a request to the client; waits for the
  answer and sends ``error <code>`` (or ``answered``) as an agent message chunk.
- ``{"wait_cancel": true}``: waits for ``session/cancel``.
- ``{"sleep": S}``.

In every string ``$S`` is the session id and ``$T`` the turn's number. Without an ``ack`` step
the acknowledgement is sent last. ``session/resume`` with ``replayFrom`` plays
``SCRIPT["replay"]`` (steps) before answering; ``replays`` in LOG lets a test see it was asked.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

script: dict[str, Any] = json.loads(open(sys.argv[1]).read())
log = open(sys.argv[2], "a", buffering=1)
out = sys.stdout

DEFAULT_TURN: list[dict[str, Any]] = [
    {"update": {"sessionUpdate": "state_update", "state": "running"}},
    {"ack": True},
    {
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "a$T",
            "content": {"type": "text", "text": "ok"},
        }
    },
    {"update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}},
]


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")) + "\n")
    out.flush()


def fill(value: Any, session_id: str, turn: int) -> Any:
    if isinstance(value, str):
        return value.replace("$S", session_id).replace("$T", str(turn))
    if isinstance(value, list):
        return [fill(v, session_id, turn) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, session_id, turn) for k, v in value.items()}
    return value


def read() -> dict[str, Any] | None:
    """The next message (logged); None at the end of input."""
    for raw in sys.stdin:
        line = raw.strip()
        if line:
            log.write(line + "\n")
            return json.loads(line)  # type: ignore[no-any-return]
    return None


cancelled: set[str] = set()
request_ids = iter(range(1000, 10**9))


def wait_for(predicate: Any) -> dict[str, Any] | None:
    """Reads until a message matches; a cancel on the way is remembered."""
    while True:
        message = read()
        if message is None:
            return None
        if message.get("method") == "session/cancel":
            cancelled.add(message["params"]["sessionId"])
        if predicate(message):
            return message


def play(steps: list[dict[str, Any]], session_id: str, turn: int, prompt_id: Any) -> None:
    acked = prompt_id is None
    for raw_step in steps:
        step = fill(raw_step, session_id, turn)
        if "update" in step:
            target = step.get("session", session_id)
            send(
                {
                    "method": "session/update",
                    "params": {"sessionId": target, "update": step["update"]},
                }
            )
        elif "exit" in step:
            sys.exit(int(step["exit"]))
        elif "error" in step and not acked:
            send({"id": prompt_id, "error": {"code": int(step["error"]), "message": "refused"}})
            acked = True
        elif "ack" in step and not acked:
            send({"id": prompt_id, "result": {"messageId": f"u{turn}"}})
            acked = True
        elif "ask" in step:
            ask_id = next(request_ids)
            params = {"sessionId": session_id, **step["ask"]}
            send({"id": ask_id, "method": "session/request_permission", "params": params})
            reply = wait_for(lambda m, i=ask_id: m.get("id") == i and "method" not in m)
            outcome = (reply or {}).get("result", {}).get("outcome", {})
            chosen = outcome.get("optionId") or outcome.get("outcome")
            body = {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"a{turn}",
                "content": {"type": "text", "text": f"outcome {chosen}"},
            }
            send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})
        elif "request" in step:
            req_id = next(request_ids)
            send({"id": req_id, **step["request"]})
            reply = wait_for(lambda m, i=req_id: m.get("id") == i and "method" not in m) or {}
            code = (reply.get("error") or {}).get("code")
            body = {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"a{turn}",
                "content": {"type": "text", "text": f"error {code}" if code else "answered"},
            }
            send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})
        elif "wait_cancel" in step:
            if session_id not in cancelled:
                wait_for(lambda m: m.get("method") == "session/cancel")
        elif "sleep" in step:
            time.sleep(float(step["sleep"]))
    if not acked:
        send({"id": prompt_id, "result": {"messageId": f"u{turn}"}})


def initialize_result(offered: Any) -> dict[str, Any]:
    if script.get("only_v1") or (offered == 1 and script.get("speaks_v1")):
        return {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    result: dict[str, Any] = {
        "protocolVersion": 2,
        "info": {"name": "v2-scripted", "version": "1"},
        "capabilities": {"session": {"resume": {}, "close": {}}},
        "authMethods": [],
    }
    result.update(script.get("initialize", {}))
    return result


next_session = 1
turn = 0
while True:
    message = read()
    if message is None:
        break
    method = message.get("method")
    params = message.get("params") or {}
    request_id = message.get("id")
    if method == "initialize":
        send({"id": request_id, "result": initialize_result(params.get("protocolVersion"))})
    elif method == "session/new":
        send({"id": request_id, "result": {"sessionId": f"s{next_session}"}})
        next_session += 1
    elif method == "session/resume":
        session_id = params["sessionId"]
        if "replayFrom" in params:
            play(script.get("replay", []), session_id, 0, None)
        send({"id": request_id, "result": {}})
    elif method == "session/cancel":
        cancelled.add(params["sessionId"])
    elif method == "session/prompt":
        session_id = params["sessionId"]
        cancelled.discard(session_id)
        turn += 1
        text = " ".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
        word = (text.split() or ["default"])[0]
        play(script.get("turns", {}).get(word, DEFAULT_TURN), session_id, turn, request_id)
    elif request_id is not None and method is not None:
        send({"id": request_id, "result": {}})

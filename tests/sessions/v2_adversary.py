"""A scripted ACP v2 agent that breaks the turn lifecycle on purpose (test_v2_turns.py).

``python v2_adversary.py CONFIG LOG``: CONFIG is a JSON file ``{"turns": [[action, ...], ...]}``,
one list of actions per ``session/prompt`` in order (past the last, a well-behaved turn that
replies ``ok``); every line the agent receives is appended to LOG. It answers ``initialize``
with v2 (``session: {}``) and ``session/new`` with ``s1``, ``s2``, ... An action is a list:

- ``["ack"]``: the prompt's acknowledgement ``{"messageId": "u<N>"}``; ``["ack_raw", R]``: the
  answer ``result: R`` exactly; ``["error", code, message]``: an error answer to the prompt.
- ``["state", S]`` / ``["state", S, stopReason]``: a ``state_update`` of the prompt's session;
  ``["state_for", SESSION, S, ...]`` the same for another session id.
- ``["chunk", ID, TEXT]``: ``agent_message_chunk`` of message ID; ``["message", ID, TEXT]``:
  ``agent_message`` upsert with TEXT as its one block; ``["chunks", N]``: N chunks ``x`` with
  distinct message ids ``d0``...; ``["big_ids", N, SIZE]``: N chunks ``a``, each of its own
  message whose id is SIZE bytes long; ``["update", BODY]``: any update body.
- ``["permission"]``: a v2 permission request (tool call ``t1``), waiting for its answer;
  ``["permission_raw", PARAMS]``: one with these params (and the session id), likewise.
- ``["wait_cancel", SECONDS]``: reads input until a ``session/cancel`` (or SECONDS pass);
  ``["idle_if_cancelled"]``: ``idle`` with ``cancelled`` if one came, else ``end_turn``.
- ``["sleep", SECONDS]``.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from typing import Any

config: dict[str, Any] = json.loads(open(sys.argv[1]).read())
log = open(sys.argv[2], "a", buffering=1)
turns: list[list[list[Any]]] = config.get("turns", [])
WELL_BEHAVED = [["ack"], ["state", "running"], ["chunk", "ok", "ok"], ["state", "idle", "end_turn"]]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def update(session_id: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def state(session_id: str, name: Any, *stop: Any) -> None:
    body: dict[str, Any] = {"sessionUpdate": "state_update", "state": name}
    if stop:
        body["stopReason"] = stop[0]
    update(session_id, body)


buffered = b""


def read_line(timeout: float | None) -> dict[str, Any] | None:
    """The next message (logged), or None at the end of input or after `timeout` seconds."""
    global buffered
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in buffered:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], left)
        if not ready:
            return None
        data = os.read(sys.stdin.fileno(), 65536)
        if not data:
            return None
        buffered += data
    line, buffered = buffered.split(b"\n", 1)
    text = line.decode()
    log.write(text + "\n")
    message: dict[str, Any] = json.loads(text)
    return message


cancelled = False
prompts = 0
sessions = 0


def wait_for(done: Any, seconds: float) -> None:
    """Reads (and answers what a turn in flight must) until `done(message)` or `seconds`."""
    global cancelled
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        message = read_line(left)
        if message is None:
            return
        if message.get("method") == "session/cancel":
            cancelled = True
        if done(message):
            return


def play(actions: list[list[Any]], request_id: Any, session_id: str, number: int) -> None:
    global cancelled
    for action in actions:
        name, args = action[0], action[1:]
        if name == "ack":
            send({"id": request_id, "result": {"messageId": f"u{number}"}})
        elif name == "ack_raw":
            send({"id": request_id, "result": args[0]})
        elif name == "error":
            send({"id": request_id, "error": {"code": args[0], "message": args[1]}})
        elif name == "state":
            state(session_id, *args)
        elif name == "state_for":
            state(args[0], *args[1:])
        elif name == "chunk":
            content = {"type": "text", "text": args[1]}
            body = {"sessionUpdate": "agent_message_chunk", "messageId": args[0]}
            update(session_id, {**body, "content": content})
        elif name == "message":
            content = [{"type": "text", "text": args[1]}]
            update(
                session_id,
                {"sessionUpdate": "agent_message", "messageId": args[0], "content": content},
            )
        elif name == "chunks":
            for index in range(int(args[0])):
                body = {"sessionUpdate": "agent_message_chunk", "messageId": f"d{index}"}
                update(session_id, {**body, "content": {"type": "text", "text": "x"}})
        elif name == "big_ids":
            for index in range(int(args[0])):
                message_id = f"{index}-" + "i" * int(args[1])
                body = {"sessionUpdate": "agent_message_chunk", "messageId": message_id}
                update(session_id, {**body, "content": {"type": "text", "text": "a"}})
        elif name == "update":
            update(session_id, args[0])
        elif name == "permission":
            tool_call = {"toolCallId": "t1", "title": "Write a", "kind": "edit"}
            params = {
                "sessionId": session_id,
                "title": "Write a",
                "subject": {"type": "tool_call", "toolCall": tool_call},
                "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}],
            }
            send({"id": f"perm-{number}", "method": "session/request_permission", "params": params})
            wait_for(lambda m: m.get("id") == f"perm-{number}" and "method" not in m, 10.0)
        elif name == "permission_raw":
            params = {"sessionId": session_id, **args[0]}
            send({"id": f"raw-{number}", "method": "session/request_permission", "params": params})
            wait_for(lambda m: m.get("id") == f"raw-{number}" and "method" not in m, 10.0)
        elif name == "wait_cancel":
            if not cancelled:
                wait_for(lambda m: m.get("method") == "session/cancel", float(args[0]))
        elif name == "idle_if_cancelled":
            state(session_id, "idle", "cancelled" if cancelled else "end_turn")
        elif name == "sleep":
            time.sleep(float(args[0]))


while True:
    message = read_line(None)
    if message is None:
        break
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": 2, "info": {"name": "adversary", "version": "1"}}
        send({"id": request_id, "result": {**result, "capabilities": {"session": {}}}})
    elif method == "session/new":
        sessions += 1
        send({"id": request_id, "result": {"sessionId": f"s{sessions}"}})
    elif method == "session/prompt":
        cancelled = False
        actions = turns[prompts] if prompts < len(turns) else WELL_BEHAVED
        prompts += 1
        play(actions, request_id, params.get("sessionId", ""), prompts)
    elif method == "session/cancel":
        cancelled = True
    elif request_id is not None and method is not None:
        send({"id": request_id, "error": {"code": -32601, "message": "method not found"}})

"""A scripted ACP agent for the host tests: it asks the client for things (permissions, files,
terminals) and reports the answers.

``python host_agent.py LOG``: every line it receives is appended to LOG. `initialize` and
`session/new` are answered at once (sessions ``s1``, ``s2`` ...). A prompt's text is a JSON list
of steps, run in order:

- ``{"update": {...}}``: a `session/update` of this session with that `update` object.
- ``{"request": {"method": M, "params": {...}}}``: a request (ids ``h1``, ``h2`` ...); the
  agent waits for its answer. ``params.sessionId`` defaults to the prompt's session.
- ``{"send": {"method": M, "params": {...}}}``: the same without waiting; its answer is
  collected by a later ``{"collect": N}`` (waits for N outstanding answers).
- ``{"notify": {...}}``: a raw notification, e.g. ``$/cancel_request``.
- ``{"wait_cancel": true}``: waits for this session's `session/cancel`.
- ``{"raw": LINE, "id": ID}``: LINE (a request written by hand: duplicate keys, bad escapes)
  sent as it is; the agent waits for the answer to ID.
- ``{"repeat": N, "requests": [...]}``: N rounds of those requests, each waited for; instead
  of every answer, one ``{"tally": {outcome: count}}`` (outcome: the content read, "{}", or
  the error message).

Then one `agent_message_chunk` whose text is the JSON list of every answer received (in
arrival order), and the prompt's answer: ``cancelled`` after a cancel, else ``end_turn``.

ACP v2 (``initialize`` offering 2; for the rules both versions share): the same turn as v2's
(`acp_fast._agent_v2`): acknowledged with ``{messageId}`` and ``running``, the ``update`` steps
encoded (``tool_call`` → ``tool_call_update``, ``plan`` → ``plan_update``, chunks with a
``messageId``), a ``session/request_permission`` step sent with v2's ``title`` (the tool call's,
"" without one) and ``subject``, and ``idle`` with the stop reason instead of the answer.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import Any

from acp_fast import _agent_v2 as v2

log = open(sys.argv[1], "a", buffering=1)
out = sys.stdout
next_request = 0
sessions = 0
cancelled: set[str] = set()
waiting: dict[str, Any] = {}  # request id -> None until answered
answers: list[Any] = []
version = 1  # what initialize agreed
message_ids = v2.counter("m")


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")) + "\n")
    out.flush()


def read() -> dict[str, Any] | None:
    """The next message ({} after an answer to our requests is collected or a cancel noted);
    None at the end of input."""
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        log.write(line + "\n")
        message: dict[str, Any] = json.loads(line)
        if "method" not in message and message.get("id") in waiting:
            waiting.pop(message["id"])
            answers.append(message)
            return {}
        if message.get("method") == "session/cancel":
            cancelled.add(message["params"]["sessionId"])
            return {}
        return message
    return None


def request(session_id: str, body: dict[str, Any]) -> None:
    global next_request
    next_request += 1
    request_id = f"h{next_request}"
    params = {"sessionId": session_id, **body.get("params", {})}
    if version == 2 and body["method"] == "session/request_permission":
        tool_call = params.get("toolCall") or {}
        params = v2.permission_params(session_id, tool_call, params.get("options", []))
        params["title"] = tool_call.get("title") or ""
    waiting[request_id] = None
    send({"id": request_id, "method": body["method"], "params": params})


def wait_for(condition: Any) -> None:
    while not condition():
        message = read()
        if message is None:
            sys.exit(0)
        handle(message)


def send_update(session_id: str, update: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": update}})


def run(session_id: str, prompt_id: Any, steps: list[dict[str, Any]], prompt: Any) -> None:
    answers.clear()
    turn = None
    if version == 2:
        turn = v2.V2Turn(partial(send_update, session_id), message_ids)
        send({"id": prompt_id, "result": {"messageId": turn.user_id}})
        turn.start(prompt)
    for step in steps:
        if "update" in step:
            update = step["update"] if turn is None else turn.encode(step["update"])
            send_update(session_id, update)
        elif "request" in step:
            request(session_id, step["request"])
            wait_for(lambda: not waiting)
        elif "send" in step:
            request(session_id, step["send"])
        elif "collect" in step:
            wanted = len(answers) + step["collect"]
            wait_for(lambda wanted=wanted: len(answers) >= wanted)
        elif "notify" in step:
            send(step["notify"])
        elif "raw" in step:
            waiting[step["id"]] = None
            out.write(step["raw"] + "\n")
            out.flush()
            wait_for(lambda: not waiting)
        elif "repeat" in step:
            tally: dict[str, int] = {}
            for _ in range(step["repeat"]):
                for body in step["requests"]:
                    request(session_id, body)
                    wait_for(lambda: not waiting)
                    answer = answers.pop()
                    if "error" in answer:
                        outcome = str(answer["error"].get("message"))
                    else:
                        outcome = str(answer["result"].get("content", "{}"))
                    tally[outcome] = tally.get(outcome, 0) + 1
            answers.append({"tally": tally})
        elif "wait_cancel" in step:
            wait_for(lambda: session_id in cancelled)
    text = json.dumps(answers, separators=(",", ":"))
    reply = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send_update(session_id, reply if turn is None else turn.encode(reply))
    stop = "cancelled" if session_id in cancelled else "end_turn"
    cancelled.discard(session_id)
    if turn is None:
        send({"id": prompt_id, "result": {"stopReason": stop}})
    else:
        turn.end(stop)


def handle(message: dict[str, Any]) -> None:
    global sessions, version
    if not message:
        return
    method = message.get("method")
    request_id = message.get("id")
    if method == "initialize" and v2.negotiate(message.get("params")) == 2:
        version = 2
        info = {"name": "host-agent", "version": "1"}
        result = v2.initialize_result(info, {"additionalDirectories": {}})
        send({"id": request_id, "result": result})
    elif method == "initialize":
        capabilities = {"sessionCapabilities": {"additionalDirectories": {}}}
        result = {"protocolVersion": 1, "agentCapabilities": capabilities}
        send({"id": request_id, "result": result})
    elif method == "session/new":
        sessions += 1
        send({"id": request_id, "result": {"sessionId": f"s{sessions}"}})
    elif method == "session/prompt":
        params = message["params"]
        steps = json.loads(params["prompt"][0]["text"])
        run(params["sessionId"], request_id, steps, params["prompt"])
    elif request_id is not None:
        send({"id": request_id, "error": {"code": -32601, "message": "method not found"}})


while True:
    incoming = read()
    if incoming is None:
        break
    handle(incoming)

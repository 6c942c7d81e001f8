"""A scripted multi-session ACP agent for the session tests.

``python session_agent.py CONFIG LOG``: CONFIG is a JSON file (what to advertise, which
sessions exist, what each prompt does); every line the agent receives is appended to LOG.
A prompt's text picks its behaviour:

- ``stream N``: N agent message chunks ``c0 c1 …``, then ``end_turn``.
- ``interleave N OTHER``: N chunks to this session and N ``agent_thought_chunk`` updates to
  session OTHER, alternating, then ``end_turn``.
- ``hang``: nothing until ``session/cancel``, then ``cancelled``.
- ``permission``: a permission request; after the answer, one chunk naming the outcome, then
  ``cancelled`` if a cancel came, else ``end_turn``.
- ``late S``: nothing until ``session/cancel``; then waits S seconds and answers ``cancelled``.
- ``tools``: tool_call / tool_call_update / plan / usage updates, a permission request for an
  unannounced tool call, then ``end_turn``.
- ``after``: answers ``end_turn``, then sends two updates after the response.
- ``flood N``: N chunks written at once, then ``end_turn``.
- ``duet N``: waits for a second ``duet N`` prompt on another session, then streams N chunks to
  each, alternating (``a<i>`` to the first, ``b<i>`` to the second), and answers both.
- ``ask_then_stream N``: a permission request, then N chunks; after the answer, as ``permission``.

Methods listed in the config's ``hang_methods`` are never answered.

ACP v2: offered ``protocolVersion`` 2 (and the config's ``initialize`` is v1's, as by default), it
answers 2 with the same capabilities in v2's shape and plays the same behaviours as v2 turns
(`acp_fast._agent_v2`): a prompt is acknowledged with ``{messageId}`` at once, ``running`` and the
``user_message`` follow, chunks carry message ids, ``tool_call``/``plan`` go as
``tool_call_update``/``plan_update``, a permission request has ``title`` and ``subject`` between
``requires_action`` and ``running``, and where v1 answers the prompt with a stop reason v2 sends
``state_update`` ``idle`` with it. ``session/load`` and ``session/set_mode`` are not v2 methods
(``-32601``); ``session/resume`` with ``replayFrom`` replays as ``session/load`` does;
``auth/login``/``auth/logout`` are v2's ``authenticate``/``logout``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from typing import Any

from acp_fast import _agent_v2 as v2

config: dict[str, Any] = json.loads(open(sys.argv[1]).read())
log = open(sys.argv[2], "a", buffering=1)
out = sys.stdout


def send(message: dict[str, Any]) -> None:
    message = {"jsonrpc": "2.0", **message}
    out.write(json.dumps(message, separators=(",", ":")) + "\n")
    out.flush()


version = 1  # what initialize agreed
turns: dict[str, v2.V2Turn] = {}  # v2: session id -> its running turn
outside: dict[str, v2.V2Turn] = {}  # v2: the encoders of updates outside a turn
message_ids = v2.counter("m")


def encoder(session_id: str) -> v2.V2Turn:
    found = turns.get(session_id) or outside.get(session_id)
    if found is None:
        found = outside[session_id] = v2.V2Turn(partial(raw_update, session_id), message_ids)
    return found


def raw_update(session_id: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def update(session_id: str, body: dict[str, Any]) -> None:
    if version == 2:
        body = encoder(session_id).encode(body)
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def chunk(session_id: str, text: str, kind: str = "agent_message_chunk") -> None:
    update(session_id, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})


YES_NO = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


def ask(
    request_id: Any,
    session_id: str,
    tool_call: dict[str, Any],
    options: list[dict[str, Any]] = YES_NO,
) -> None:
    """A `session/request_permission` request."""
    params = {"sessionId": session_id, "toolCall": tool_call, "options": options}
    if version == 2:
        params = v2.permission_params(session_id, tool_call, options)
        raw_update(session_id, v2.state("requires_action"))
    send({"id": request_id, "method": "session/request_permission", "params": params})


def answer(request_id: Any, result: Any) -> None:
    send({"id": request_id, "result": result})


def begin(session_id: str, request_id: Any, prompt: list[Any]) -> None:
    """A prompt turn starts: in v2 the acknowledgement, `running` and the user message."""
    if version == 2:
        turn = turns[session_id] = v2.V2Turn(partial(raw_update, session_id), message_ids)
        answer(request_id, {"messageId": turn.user_id})
        turn.start(prompt)


def finish(session_id: str, request_id: Any, stop_reason: str) -> None:
    """A prompt turn ends: v1 answers the prompt, v2 goes `idle` with the stop reason."""
    if version == 2:
        turn = turns.pop(session_id, None)
        if turn is not None:
            turn.end(stop_reason)
    else:
        answer(request_id, {"stopReason": stop_reason})


def v2_initialize(v1: dict[str, Any]) -> dict[str, Any]:
    """The config's v1 initialize answer in v2's shape."""
    info = v1.get("agentInfo") or {"name": "session-agent", "version": "1"}
    session = v2.session_capabilities(v1.get("agentCapabilities") or {})
    methods = v2.auth_methods(v1.get("authMethods", []))
    return v2.initialize_result(info, session, authMethods=methods)


def session_result() -> dict[str, Any]:
    result: dict[str, Any] = {}
    # v2 has no modes or models (config options stand in).
    for key in ("modes", "configOptions", "models") if version == 1 else ("configOptions",):
        if key in config:
            result[key] = config[key]
    if version == 2 and "configOptions" in result:
        result["configOptions"] = v2.config_options(result["configOptions"])
    return result


next_session = 1
pending: dict[str, Any] = {}  # session id -> (prompt id, behaviour, extra)
asked: dict[Any, str] = {}  # permission request id -> session id
cancelled: set[str] = set()
duet: list[tuple[str, Any]] = []  # (session id, prompt id) of a duet waiting for its partner

for raw in sys.stdin:
    line = raw.strip()
    if not line:
        continue
    log.write(line + "\n")
    message = json.loads(line)
    method = message.get("method")
    params = message.get("params") or {}
    request_id = message.get("id")
    if method is None and request_id in asked:
        session_id = asked.pop(request_id)
        outcome = message["result"]["outcome"]
        if version == 2:
            raw_update(session_id, v2.state("running"))
        chunk(session_id, "outcome " + json.dumps(outcome, separators=(",", ":")))
        prompt_id, _, _ = pending.pop(session_id)
        finish(session_id, prompt_id, "cancelled" if session_id in cancelled else "end_turn")
        continue
    if method in config.get("hang_methods", ()):
        continue
    if method == "initialize":
        result = config.get("initialize", {"protocolVersion": 1})
        if v2.negotiate(params) == 2 and result.get("protocolVersion") == 1:
            version = 2
            result = v2_initialize(result)
        answer(request_id, result)
    elif method == "session/new":
        if config.get("auth_required"):
            error = {"code": -32000, "message": "Authentication required"}
            send({"id": request_id, "error": error})
            continue
        answer(request_id, {"sessionId": f"s{next_session}", **session_result()})
        next_session += 1
    elif version == 2 and method in ("session/load", "session/set_mode"):
        send({"id": request_id, "error": {"code": -32601, "message": "method not found"}})
    elif method in ("session/load", "session/resume"):
        session_id = params["sessionId"]
        if session_id not in config.get("known", []):
            send({"id": request_id, "error": {"code": -32002, "message": "no such session"}})
            continue
        if method == "session/load" or params.get("replayFrom"):
            for body in config.get("replay", []):
                update(session_id, body)
        answer(request_id, config.get("load_result"))
    elif method == "session/list":
        pages = config["pages"]
        cursor = params.get("cursor")
        index = 0 if cursor is None else int(cursor)
        page: dict[str, Any] = {"sessions": pages[index]}
        if config.get("loop_cursor") and index == 1:
            page["nextCursor"] = "1"
        elif index + 1 < len(pages):
            page["nextCursor"] = str(index + 1)
        answer(request_id, page)
    elif method in (
        "session/delete",
        "session/close",
        "session/set_mode",
        "session/set_model",
        "authenticate",
        "logout",
        "auth/login",
        "auth/logout",
    ):
        answer(request_id, None if config.get("null_results") else {})
    elif method == "session/set_config_option":
        options = config.get("configOptions", [])
        for option in options:
            if option["id"] == params["configId"]:
                option["currentValue"] = params["value"]
        if version == 2:
            options = v2.config_options(options)
        answer(request_id, {"configOptions": options} if config.get("echo_options", True) else {})
    elif method == "session/cancel":
        session_id = params["sessionId"]
        cancelled.add(session_id)
        if session_id in pending:
            prompt_id, behaviour, extra = pending[session_id]
            if behaviour == "hang":
                pending.pop(session_id)
                finish(session_id, prompt_id, "cancelled")
            elif behaviour == "late":
                pending.pop(session_id)
                time.sleep(float(extra))
                finish(session_id, prompt_id, "cancelled")
    elif method == "session/prompt":
        session_id = params["sessionId"]
        cancelled.discard(session_id)
        text = " ".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
        words = text.split()
        behaviour = words[0] if words else "stream"
        if behaviour != "duet":
            begin(session_id, request_id, params["prompt"])
        if behaviour == "stream":
            for i in range(int(words[1])):
                chunk(session_id, f"c{i} ")
            finish(session_id, request_id, "end_turn")
        elif behaviour == "flood":
            body = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "x" * 32},
            }
            if version == 2:
                body = encoder(session_id).encode(body)
            line_out = (
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {"sessionId": session_id, "update": body},
                    },
                    separators=(",", ":"),
                )
                + "\n"
            )
            count = int(words[1])
            for start in range(0, count, 1000):
                out.write(line_out * min(1000, count - start))
            out.flush()
            finish(session_id, request_id, "end_turn")
        elif behaviour == "interleave":
            other = words[2]
            for i in range(int(words[1])):
                chunk(session_id, f"a{i} ")
                chunk(other, f"b{i} ", "agent_thought_chunk")
            finish(session_id, request_id, "end_turn")
        elif behaviour == "duet":
            duet.append((session_id, request_id))
            if len(duet) == 2:
                (first, first_id), (second, second_id) = duet
                begin(first, first_id, [])
                begin(second, second_id, [])
                duet.clear()
                for i in range(int(words[1])):
                    chunk(first, f"a{i} ")
                    chunk(second, f"b{i} ")
                finish(first, first_id, "end_turn")
                finish(second, second_id, "end_turn")
        elif behaviour == "ask_then_stream":
            pending[session_id] = (request_id, "permission", "")
            asked["perm-2"] = session_id
            ask("perm-2", session_id, {"toolCallId": "t9", "title": "write y", "kind": "edit"})
            for i in range(int(words[1])):
                chunk(session_id, f"s{i} ")
        elif behaviour in ("hang", "late"):
            pending[session_id] = (request_id, behaviour, words[1] if len(words) > 1 else "")
        elif behaviour == "permission":
            pending[session_id] = (request_id, behaviour, "")
            asked["perm-1"] = session_id
            ask("perm-1", session_id, {"toolCallId": "t1", "title": "write x", "kind": "edit"})
        elif behaviour == "tools":
            update(
                session_id,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "t1",
                    "title": "Read a",
                    "kind": "read",
                    "status": "pending",
                },
            )
            update(
                session_id,
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "t1",
                    "status": "completed",
                    "rawOutput": {"ok": True},
                },
            )
            update(
                session_id,
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "t1",
                    "rawOutput": None,
                    "title": None,
                },
            )
            update(
                session_id,
                {"sessionUpdate": "tool_call_update", "toolCallId": "zz", "status": "failed"},
            )
            update(
                session_id,
                {
                    "sessionUpdate": "plan",
                    "entries": [{"content": "one", "priority": "high", "status": "pending"}],
                },
            )
            update(
                session_id,
                {
                    "sessionUpdate": "plan",
                    "entries": [{"content": "two", "priority": "low", "status": "completed"}],
                },
            )
            update(session_id, {"sessionUpdate": "usage_update", "used": 10, "size": 100})
            update(session_id, {"sessionUpdate": "current_mode_update", "currentModeId": "code"})
            pending[session_id] = (request_id, "permission", "")
            asked[7] = session_id
            ask(
                7,
                session_id,
                {"toolCallId": "t2", "title": "Run ls", "kind": "execute"},
                [{"optionId": "no", "name": "No", "kind": "reject_once"}],
            )
        elif behaviour == "after":
            finish(session_id, request_id, "end_turn")
            update(session_id, {"sessionUpdate": "usage_update", "used": 1, "size": 2})
            update(
                session_id,
                {
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": [{"name": "web", "description": "w"}],
                },
            )
        elif behaviour == "aftertalk":
            finish(session_id, request_id, "end_turn")
            chunk(session_id, "stale ")
        elif behaviour == "cancel_request":
            send({"method": "$/cancel_request", "params": {"requestId": 99}})
            chunk(session_id, "still here")
            finish(session_id, request_id, "end_turn")
    elif request_id is not None and method is not None:
        send({"id": request_id, "error": {"code": -32601, "message": "method not found"}})

# End of input: an agent that persists its sessions on the way out.
if config.get("exit_marker"):
    time.sleep(0.2)
    open(config["exit_marker"], "w").write("exited by itself")
# Or one that leaves the persisting to a process of its group and exits at once (as
# claude-agent-acp leaves it to its `claude` child); `child_seconds` long.
if config.get("child_marker"):
    persist = (
        "import sys, time; time.sleep(float(sys.argv[2])); open(sys.argv[1], 'w').write('done')"
    )
    seconds = str(config.get("child_seconds", 0.3))
    subprocess.Popen([sys.executable, "-c", persist, config["child_marker"], seconds])

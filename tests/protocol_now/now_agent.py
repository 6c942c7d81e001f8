"""A scripted agent for the protocol-now tests: ``python now_agent.py SCRIPT``.

SCRIPT is a JSON object: ``capabilities`` (its ``agentCapabilities``), ``turn`` (lines sent
verbatim on each ``session/prompt`` before its answer), ``prompt_result`` (extra keys of that
answer, e.g. ``usage``), ``session`` (extra keys of the new/load/resume/fork answers) and
``log`` (a file every line the client writes is appended to)."""

import json
import sys

script = json.load(open(sys.argv[1]))
out = sys.stdout
log = open(script["log"], "a") if script.get("log") else None


def send(line: str) -> None:
    out.write(line + "\n")
    out.flush()


def answer(msg: dict, result: object) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))


forks = 0
opened = 0
for raw in sys.stdin:
    if log is not None:
        log.write(raw if raw.endswith("\n") else raw + "\n")
        log.flush()
    msg = json.loads(raw)
    method = msg.get("method")
    if method == "initialize":
        answer(msg, {"protocolVersion": 1, "agentCapabilities": script.get("capabilities", {})})
    elif method == "session/new":
        opened += 1  # s1 (the default session), then s2, s3...
        answer(msg, {"sessionId": f"s{opened}", **script.get("session", {})})
    elif method in ("session/load", "session/resume"):
        answer(msg, script.get("session", {}))
    elif method == "session/fork":
        forks += 1
        answer(msg, {"sessionId": f"fork{forks}", **script.get("session", {})})
    elif method == "session/set_title":
        # Agents may normalise the title: this one trims it (or answers `title_answer`).
        answer(msg, script.get("title_answer", {"title": msg["params"]["title"].strip()}))
    elif method == "session/status":
        answer(msg, script.get("status", {"status": "idle"}))
    elif method == "session/prompt":
        for line in script.get("turn", []):
            send(line)
        answer(msg, {"stopReason": "end_turn", **script.get("prompt_result", {})})
    elif "id" in msg and method is not None:
        send(
            json.dumps(
                {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}
            )
        )

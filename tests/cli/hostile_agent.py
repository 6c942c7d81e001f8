"""An ACP agent that puts terminal control sequences in every field a client might print:
session id, modes, thought, plan, tool call ids and titles, statuses, a notification's method,
a file path and a command it asks the host for, a permission request, the reply, its stderr,
and (with ``--fail``) an error answer's message. Standard library only; one prompt turn."""

from __future__ import annotations

import json
import os
import sys

# OSC 0 (window title), CSI 2J (clear screen), OSC 52 (clipboard write), 8-bit CSI, a bidi
# override, a carriage return and a backspace: each was obeyed by a terminal once printed raw.
EVIL = "\x1b]0;PWNED\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07\u009b2J\u202e\r\x08"


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(session_id: str, body: dict[str, object]) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": body},
        }
    )


def main() -> int:
    fail = "--fail" in sys.argv
    sys.stderr.write(f"agent stderr {EVIL} line\n")
    sys.stderr.flush()
    session_id = f"s-{EVIL}"
    waiting: set[str] = set()
    prompt_id = None
    for raw in sys.stdin:
        message = json.loads(raw)
        method = message.get("method")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": {"loadSession": False},
                        "authMethods": [],
                        "agentInfo": {"name": f"evil{EVIL}", "version": "1"},
                    },
                }
            )
        elif method == "session/new":
            if fail:
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": 1, "message": f"refused {EVIL} here"},
                    }
                )
                continue
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "sessionId": session_id,
                        "modes": {
                            "currentModeId": f"m{EVIL}",
                            "availableModes": [{"id": f"m{EVIL}", "name": f"n{EVIL}"}],
                        },
                    },
                }
            )
        elif method == "session/prompt":
            prompt_id = message["id"]
            text = {"type": "text", "text": f"thought {EVIL}\n"}
            update(session_id, {"sessionUpdate": "agent_thought_chunk", "content": text})
            entries = [{"content": f"step {EVIL}", "priority": "high", "status": "pending"}]
            update(session_id, {"sessionUpdate": "plan", "entries": entries})
            call = f"call-{EVIL}"
            update(
                session_id,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call,
                    "title": f"title {EVIL}",
                    "kind": "edit",
                    "status": "pending",
                },
            )
            update(
                session_id,
                {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"},
            )
            update(session_id, {"sessionUpdate": "current_mode_update", "currentModeId": EVIL})
            send({"jsonrpc": "2.0", "method": f"x/{EVIL}", "params": {}})
            requests = [
                ("fs/read_text_file", {"path": f"/nowhere/{EVIL}.txt"}),
                ("fs/write_text_file", {"path": f"/nowhere/{EVIL}", "content": EVIL}),
                ("terminal/create", {"command": f"/bin/{EVIL}", "args": [EVIL]}),
                (
                    "session/request_permission",
                    {
                        "toolCall": {"toolCallId": call, "title": f"perm {EVIL}", "kind": "edit"},
                        "options": [
                            {"optionId": f"ok{EVIL}", "name": EVIL, "kind": "allow_once"},
                            {"optionId": f"no{EVIL}", "name": EVIL, "kind": "reject_once"},
                        ],
                    },
                ),
            ]
            for number, (name, params) in enumerate(requests):
                request_id = f"r{number}"
                waiting.add(request_id)
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "method": name,
                        "params": {"sessionId": session_id, "cwd": os.getcwd(), **params},
                    }
                )
        elif "id" in message and method is None:
            waiting.discard(message["id"])
            if not waiting and prompt_id is not None:
                for piece in (f"reply {EVIL}", "\n\tkept tab and newline\n"):
                    content = {"type": "text", "text": piece}
                    update(session_id, {"sessionUpdate": "agent_message_chunk", "content": content})
                send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
                prompt_id = None
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A small ACP agent for the pool's tests and benchmark (standard library only): it answers
``initialize`` after ``--init-delay`` seconds, opens sessions, answers a prompt with one chunk
(optionally after sending ``--tools`` tool calls, with titles of ``--title-bytes``), and
advertises ``session/close`` with ``--close``. ``--exit-at-init`` makes it exit instead of
answering ``initialize``; ``--hang-at-init`` makes it never answer; ``--mute-after-init``
closes its stdout after answering; ``--auth needed`` offers the method ``key`` and refuses
``session/new`` until it is used, ``--auth hangs`` never answers ``authenticate``. It exits
on stdin EOF."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def update(session_id: str, body: dict[str, object]) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": body},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--init-delay", type=float, default=0.0)
    parser.add_argument("--close", action="store_true")
    parser.add_argument("--exit-at-init", action="store_true")
    parser.add_argument("--hang-at-init", action="store_true")
    parser.add_argument("--mute-after-init", action="store_true")
    parser.add_argument("--auth", choices=("needed", "hangs"))
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--finish-tools", action="store_true")
    parser.add_argument("--title-bytes", type=int, default=8)
    options = parser.parse_args()
    sessions = 0
    authenticated = False
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, ident = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            if options.exit_at_init:
                sys.exit(3)
            if options.hang_at_init:
                continue
            time.sleep(options.init_delay)
            capabilities: dict[str, object] = {}
            if options.close:
                capabilities["sessionCapabilities"] = {"close": {}}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": capabilities,
                        "authMethods": [{"id": "key", "name": "Key"}] if options.auth else [],
                        "agentInfo": {"name": "slow-agent", "version": "1.0"},
                    },
                }
            )
            if options.mute_after_init:
                os.close(1)  # its output ends; the process lives on, reading stdin
        elif method == "authenticate":
            if options.auth == "hangs":
                continue
            authenticated = True
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        elif method == "session/new" and options.auth and not authenticated:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32000, "message": "authentication required"},
                }
            )
        elif method == "session/new":
            sessions += 1
            send({"jsonrpc": "2.0", "id": ident, "result": {"sessionId": f"slow-{sessions}"}})
        elif method == "session/prompt":
            sid = params.get("sessionId", "")
            for n in range(options.tools):
                update(
                    sid,
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": f"t{n}",
                        "title": "x" * options.title_bytes,
                        "kind": "read",
                        "status": "pending",
                    },
                )
                if options.finish_tools:
                    update(
                        sid,
                        {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": f"t{n}",
                            "status": "failed",
                        },
                    )
            update(
                sid,
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}},
            )
            send({"jsonrpc": "2.0", "id": ident, "result": {"stopReason": "end_turn"}})
        elif method == "session/close":
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        elif ident is not None:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}})


if __name__ == "__main__":
    main()

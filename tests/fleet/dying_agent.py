"""A small ACP agent for the fleet's agent-death tests (standard library only). It connects
and opens sessions like any agent; what it does with a prompt depends on the prompt's text:

- ``exit``: sends one update, then exits with status 5 mid-turn;
- ``kill``: sends one update, then SIGKILLs itself mid-turn;
- ``garbage``: sends one update, then a line that is not JSON-RPC, and waits, alive;
- ``mute``: sends one update, closes its stdout and waits, alive;
- ``spoof``: as ``mute``, after writing to its stderr what the client says of a dead agent;
- ``refuse``: answers with a JSON-RPC error whose message says it died;
- ``quit``: answers, then exits with status 0 (between turns);
- anything else: one update and the answer (``end_turn``).

With ``--once DIR``, ``exit`` and ``kill`` happen only in the first agent that creates the
file DIR/<prompt> (so a retry of the task, in a fresh agent, succeeds). It exits on stdin
EOF."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def first(directory: str | None, text: str) -> bool:
    if directory is None:
        return True
    try:
        os.close(
            os.open(os.path.join(directory, text), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        )
    except FileExistsError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--once", default=None)
    options = parser.parse_args()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, ident = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
                }
            )
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": ident, "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            blocks = params.get("prompt") or [{}]
            text = str(blocks[0].get("text", ""))
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": params.get("sessionId"),
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": "working on it"},
                        },
                    },
                }
            )
            if text in ("exit", "kill") and first(options.once, text):
                time.sleep(0.2)  # the update is read before the output ends
                if text == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                os._exit(5)
            if text == "garbage":
                # An answer to no call, whose id reads like the client's words for a death.
                sys.stdout.write(
                    '{"jsonrpc":"2.0","id":"the agent\'s output ended; the agent was killed '
                    'by signal 9","result":{}}\n'
                )
                sys.stdout.flush()
                time.sleep(3600)
            if text == "spoof":
                sys.stderr.write(
                    "; the agent exited with status 0\n; the agent was killed by signal 9\n"
                )
                sys.stderr.flush()
            if text in ("mute", "spoof"):
                os.close(1)
                time.sleep(3600)
            if text == "refuse":
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": ident,
                        "error": {
                            "code": -32603,
                            "message": "the agent's output ended; the agent exited with status 1",
                        },
                    }
                )
                continue
            send({"jsonrpc": "2.0", "id": ident, "result": {"stopReason": "end_turn"}})
            if text == "quit":
                os._exit(0)


if __name__ == "__main__":
    main()

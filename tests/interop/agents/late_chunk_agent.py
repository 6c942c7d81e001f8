"""A scripted ACP agent for one client defect found with claude-agent-acp: it answers each prompt
with one message chunk and its answer, then writes one more chunk of the same session right
after the answer (claude-agent-acp does so after answering a cancelled turn `cancelled`)."""

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def chunk(session_id: str, text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": update},
        }
    )


def main() -> None:
    turn = 0
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}}
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            turn += 1
            chunk("s1", f"reply {turn}.")
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}})
            chunk("s1", f" late after {turn}.")


if __name__ == "__main__":
    main()

"""A scripted ACP agent for the wire tap's tests: each prompt is answered with COUNT message
chunks of SIZE bytes of text each (argv: COUNT SIZE), every line written in 4 KiB pieces with a
pause between them, as a busy agent's long line reaches the pipe, then `end_turn`."""

import json
import sys
import time


def send(message: dict, pieces: int = 4096) -> None:
    line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    for start in range(0, len(line), pieces):
        sys.stdout.buffer.write(line[start : start + pieces])
        sys.stdout.buffer.flush()
        time.sleep(0.0005)


def main() -> None:
    count, size = int(sys.argv[1]), int(sys.argv[2])
    for raw in sys.stdin:
        message = json.loads(raw)
        method = message.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}}
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            for n in range(count):
                text = f"{n:04d}" + "x" * (size - 4)
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                }
                params = {"sessionId": "s1", "update": update}
                send({"jsonrpc": "2.0", "method": "session/update", "params": params})
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()

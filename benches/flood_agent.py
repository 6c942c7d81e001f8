"""A cheap ACP agent for benchmarks (stdlib only, no acp_fast import).

Every runner in the comparison talks to this same agent. It answers `initialize` and
`session/new`, and on each `session/prompt` does one of:

--updates N --text-bytes B   N agent_message_chunk updates of B ASCII bytes each, pre-built once
                             and written in large batches, then end_turn;
--permissions N              N session/request_permission round trips, each waiting for the
                             client's answer, then end_turn;
--wait-cancel                each prompt: one chunk, then nothing until session/cancel, which
                             is answered at once with stopReason cancelled;
--stream-bytes T --text-bytes B   chunks of B bytes until T bytes of text were sent (for the
                             memory case), then end_turn;
(no mode)                    end_turn at once (start-up case).

--v2                         speak ACP v2 (preview) when the client offers it (`initialize` with
                             protocolVersion 2; otherwise v1 as without it): each prompt is
                             acknowledged at once with `{messageId}`, then `state_update`
                             running, the same updates as `agent_message_chunk`s with a
                             `messageId` (permission requests in v2's shape: `title`,
                             `subject: {type: "tool_call", toolCall}`), and the turn ends with
                             `state_update` idle carrying the stop reason.

--message-ids                v1 with a `messageId` on each chunk, as claude-agent-acp 0.101 and
                             codex-acp write v1 chunks (the same line as --v2's chunks).

--ignore-term --grandchild   ignore SIGTERM and start a grandchild `sleep` (close() case);
                             the grandchild's pid is written to stderr as `grandchild PID`.
--ignore-eof                 keep running after stdin ends (a wedged agent; close() case).
--devnull                    write the flood to /dev/null and report lines/s and MB/s on stderr.
--raw                        write the flood straight to stdout (no protocol) and report
                             lines/s and MB/s on stderr: `flood_agent.py --raw | cat >/dev/null`
                             measures the pipe (`--pipe-size N`: ask for an N-byte pipe).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import time
from typing import Any

BATCH_BYTES = 1 << 20


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def update_line(session_id: str, text: str, message_id: str | None = None) -> bytes:
    """One agent_message_chunk; in v2 (`message_id` given) with its required `messageId`."""
    update: dict[str, object] = {"sessionUpdate": "agent_message_chunk"}
    if message_id is not None:
        update["messageId"] = message_id
    update["content"] = {"type": "text", "text": text}
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def state_update(fd: int, session_id: str, state: str, stop_reason: str | None = None) -> None:
    """A v2 `state_update` (running, idle with its stop reason)."""
    update: dict[str, object] = {"sessionUpdate": "state_update", "state": state}
    if stop_reason is not None:
        update["stopReason"] = stop_reason
    params = {"sessionId": session_id, "update": update}
    send(fd, {"jsonrpc": "2.0", "method": "session/update", "params": params})


def flood(
    fd: int, session_id: str, count: int, text_bytes: int, message_id: str | None = None
) -> None:
    text = ("abcdefghijklmnopqrstuvwxyz" * (text_bytes // 26 + 1))[:text_bytes]
    line = update_line(session_id, text, message_id)
    per_batch = max(1, BATCH_BYTES // len(line))
    batch = line * per_batch
    full, rest = divmod(count, per_batch)
    for _ in range(full):
        write_all(fd, batch)
    write_all(fd, line * rest)


def send(fd: int, message: dict[str, object]) -> None:
    write_all(fd, json.dumps(message, separators=(",", ":")).encode() + b"\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=0)
    parser.add_argument("--text-bytes", type=int, default=32)
    parser.add_argument("--stream-bytes", type=int, default=0)
    parser.add_argument("--permissions", type=int, default=0)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--grandchild", action="store_true")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--devnull", action="store_true")
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--pipe-size", type=int, default=0)
    parser.add_argument("--wait-cancel", action="store_true")
    parser.add_argument("--v2", action="store_true")
    parser.add_argument("--message-ids", action="store_true")
    args = parser.parse_args()

    if args.devnull or args.raw:
        fd = os.open(os.devnull, os.O_WRONLY) if args.devnull else sys.stdout.fileno()
        target = "/dev/null" if args.devnull else "stdout"
        if not args.devnull and stat.S_ISFIFO(os.fstat(fd).st_mode):
            size = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
            if args.pipe_size:
                size = fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, args.pipe_size)
            target = f"a {size // 1024} KiB pipe" if size < 1 << 20 else f"a {size >> 20} MiB pipe"
        count = args.updates or 100_000
        started = time.perf_counter()
        flood(fd, "bench-session", count, args.text_bytes)
        elapsed = time.perf_counter() - started
        line_bytes = len(update_line("bench-session", "x" * args.text_bytes))
        sys.stderr.write(
            f"flood agent to {target}: {count / elapsed:,.0f} lines/s, "
            f"{count * line_bytes / elapsed / 1e6:,.0f} MB/s ({args.text_bytes} B of text a line)\n"
        )
        return 0

    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.grandchild:
        child = subprocess.Popen(["sleep", "1000"])
        sys.stderr.write(f"grandchild {child.pid}\n")
        sys.stderr.flush()

    out = sys.stdout.fileno()
    stdin = sys.stdin.buffer
    session_id = "bench-session"
    v2 = False  # what initialize agreed
    turns = 0
    while True:
        line = stdin.readline()
        if not line:
            while args.ignore_eof:  # wedged: only a signal ends it
                time.sleep(3600)
            return 0
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        if method == "initialize":
            offered = (message.get("params") or {}).get("protocolVersion")
            v2 = args.v2 and isinstance(offered, int) and offered >= 2
            result: dict[str, object] = {"protocolVersion": 1}
            if v2:
                info = {"name": "flood-agent", "version": "1"}
                result = {"protocolVersion": 2, "info": info, "capabilities": {"session": {}}}
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "session/new":
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": session_id}})
        elif method == "session/prompt":
            turns += 1
            reply = None
            if v2:  # the acknowledgement first; the turn ends with idle
                ack = {"messageId": f"user-{turns}"}
                send(out, {"jsonrpc": "2.0", "id": request_id, "result": ack})
                state_update(out, session_id, "running")
                reply = f"agent-{turns}"
            elif args.message_ids:
                reply = f"agent-{turns}"
            stop = turn(args, stdin, out, session_id, reply, v2)
            if v2:
                state_update(out, session_id, "idle", stop)
            else:
                send(out, {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": stop}})
        elif request_id is not None:
            send(
                out,
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}},
            )


def turn(
    args: argparse.Namespace, stdin: Any, out: int, session_id: str, reply: str | None, v2: bool
) -> str:
    """One prompt's updates and permission round trips; its stop reason. `reply`: the message
    id of the agent's reply (None: chunks without one, v1)."""
    if args.updates:
        flood(out, session_id, args.updates, args.text_bytes, reply)
    elif args.stream_bytes:
        flood(out, session_id, args.stream_bytes // args.text_bytes, args.text_bytes, reply)
    if args.wait_cancel:
        # One chunk, then nothing until session/cancel, answered at once.
        flood(out, session_id, 1, args.text_bytes, reply)
        while True:
            line = stdin.readline()
            if not line or json.loads(line).get("method") == "session/cancel":
                return "cancelled"
    for number in range(args.permissions):
        tool_call = {"toolCallId": f"t{number}", "title": "run", "kind": "execute"}
        params: dict[str, object] = {"sessionId": session_id}
        if not v2:
            params["toolCall"] = tool_call
        else:
            params.update(title="run", subject={"type": "tool_call", "toolCall": tool_call})
        params["options"] = OPTIONS
        ask = {
            "jsonrpc": "2.0",
            "id": f"perm-{number}",
            "method": "session/request_permission",
            "params": params,
        }
        send(out, ask)
        while True:  # the answer (a session/cancel or other line may come first)
            answer = json.loads(stdin.readline() or b"{}")
            if answer.get("id") == f"perm-{number}" or not answer:
                break
    return "end_turn"


OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


if __name__ == "__main__":
    sys.exit(main())

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

BATCH_BYTES = 1 << 20


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def update_line(session_id: str, text: str) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def flood(fd: int, session_id: str, count: int, text_bytes: int) -> None:
    text = ("abcdefghijklmnopqrstuvwxyz" * (text_bytes // 26 + 1))[:text_bytes]
    line = update_line(session_id, text)
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
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": session_id}})
        elif method == "session/prompt":
            if args.updates:
                flood(out, session_id, args.updates, args.text_bytes)
            elif args.stream_bytes:
                flood(out, session_id, args.stream_bytes // args.text_bytes, args.text_bytes)
            if args.wait_cancel:
                # One chunk, then nothing until session/cancel, answered at once.
                flood(out, session_id, 1, args.text_bytes)
                while True:
                    line = stdin.readline()
                    if not line or json.loads(line).get("method") == "session/cancel":
                        break
                cancelled = {"stopReason": "cancelled"}
                send(out, {"jsonrpc": "2.0", "id": request_id, "result": cancelled})
                continue
            for number in range(args.permissions):
                send(
                    out,
                    {
                        "jsonrpc": "2.0",
                        "id": f"perm-{number}",
                        "method": "session/request_permission",
                        "params": {
                            "sessionId": session_id,
                            "toolCall": {
                                "toolCallId": f"t{number}",
                                "title": "run",
                                "kind": "execute",
                            },
                            "options": [
                                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                            ],
                        },
                    },
                )
                while True:  # the answer (a session/cancel or other line may come first)
                    answer = json.loads(stdin.readline() or b"{}")
                    if answer.get("id") == f"perm-{number}" or not answer:
                        break
            stop = "end_turn"
            send(out, {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": stop}})
        elif request_id is not None:
            send(
                out,
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}},
            )


if __name__ == "__main__":
    sys.exit(main())

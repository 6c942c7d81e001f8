"""Sits between a client and an agent and writes the transcript of their traffic (the format of
tests/interop/data/README.md): one ``{"t", "dir", "msg"}`` object a line, "->" client to agent,
"<-" agent to client, "stderr" lines as ``{"line": ...}``.

    python transcript_proxy.py OUT -- COMMAND [ARG...]

The agent runs in the proxy's process group (a group kill reaches both); the proxy exits with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import IO, Any


def main() -> int:
    out_path, separator, *command = sys.argv[1:]
    assert separator == "--" and command, __doc__
    start = time.monotonic()
    lock = threading.Lock()
    out = open(out_path, "a", encoding="utf-8")

    def record(direction: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\n")
        entry: dict[str, Any] = {"t": round(time.monotonic() - start, 3), "dir": direction}
        if direction == "stderr":
            entry["line"] = text
        else:
            try:
                entry["msg"] = json.loads(text)
            except ValueError:
                entry["msg"] = text
        with lock:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")
            out.flush()

    agent = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert agent.stdin is not None and agent.stdout is not None and agent.stderr is not None

    def pump(source: IO[bytes], sink: IO[bytes] | None, direction: str) -> None:
        for raw in source:
            if raw.strip():
                record(direction, raw)
            if sink is not None:
                try:
                    sink.write(raw)
                    sink.flush()
                except (BrokenPipeError, ValueError):
                    pass
        if sink is not None and direction == "->":
            sink.close()

    threads = [
        threading.Thread(target=pump, args=(sys.stdin.buffer, agent.stdin, "->"), daemon=True),
        threading.Thread(target=pump, args=(agent.stdout, sys.stdout.buffer, "<-")),
        threading.Thread(target=pump, args=(agent.stderr, None, "stderr")),
    ]
    for thread in threads:
        thread.start()
    status = agent.wait()
    for thread in threads[1:]:
        thread.join()
    return status


if __name__ == "__main__":
    sys.exit(main())

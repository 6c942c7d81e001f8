"""Sits between a client and an agent and copies each direction's bytes into a log, like `tee` on
both pipes, with two differences the tests rely on:

- each chunk is appended to its log (and the write returns) *before* it is passed on, so once
  the client has read a line, the log holds all of it (`tee` writes its stdout first: a test
  reading the log could see a line over 8 KiB half-written, or not yet at all);
- it exits as soon as the agent does, with its status (or 127 when the agent cannot be started),
  so the client sees the agent end at once (a `tee` pipeline lived on, its first `tee` blocked on
  the client's open stdin, and a missing agent cost a test its whole time limit).

    python tap.py IN_LOG OUT_LOG -- COMMAND [ARG...]

The agent inherits the tap's stderr, environment and process group.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

CHUNK = 1 << 16


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pump(source: int, log: int, sink: int) -> None:
    """Copies `source` to `log`, then to `sink`, chunk by chunk, until EOF; once the sink is
    gone (its reader closed it) the rest is still logged."""
    while True:
        try:
            data = os.read(source, CHUNK)
        except OSError:
            return
        if not data:
            return
        _write_all(log, data)
        if sink >= 0:
            try:
                _write_all(sink, data)
            except OSError:
                sink = _closed(sink)


def _closed(fd: int) -> int:
    try:
        os.close(fd)
    except OSError:
        pass
    return -1


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write(__doc__ or "")
        return 2
    log_in, log_out, command = argv[0], argv[1], argv[3:]
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    fd_in, fd_out = os.open(log_in, flags, 0o600), os.open(log_out, flags, 0o600)
    try:
        agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    except OSError as error:
        sys.stderr.write(f"tap: cannot start {command[0]!r}: {error}\n")
        return 127
    assert agent.stdin is not None and agent.stdout is not None
    to_agent = agent.stdin.fileno()

    def client_to_agent() -> None:
        _pump(0, fd_in, to_agent)
        _closed(to_agent)  # the client closed its end: the agent sees EOF too

    threading.Thread(target=client_to_agent, daemon=True).start()
    _pump(agent.stdout.fileno(), fd_out, 1)
    _closed(1)
    return agent.wait()


if __name__ == "__main__":
    # os._exit: the client-to-agent thread may still be blocked reading the client's stdin.
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))

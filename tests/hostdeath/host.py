"""A host for the host-death tests, run as ``python host.py HOW DIR [PROTOCOL]``: three
clients (the demo agent; an agent that ignores SIGTERM and stdin EOF, with a grandchild; an agent
whose grandchild called setsid()) and a terminal-like process group registered with the guard, a
call in progress on another thread, then one line of JSON on stdout (the pids it knows) and it
waits for "go" on stdin. PROTOCOL (v1, the default, or v2) is what its clients ask for. HOW is a
signal the test sends (it just waits), or how it dies on "go": exit (os._exit(1)), raise (an
unhandled exception), abort (os.abort())."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time

import acp_fast as acp
from acp_fast import _core

how, folder = sys.argv[1], sys.argv[2]
protocol = sys.argv[3] if len(sys.argv) > 3 else "v1"
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # os.abort() leaves no core file
limits = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=1024,
    response_segment_count=1024,
)


def client(command: str, *args: str) -> acp.Client:
    return acp.Client(
        command,
        args=args,
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=limits,
        transport_epoch=1,
        **({} if protocol == "v1" else {"protocol": protocol}),
    )


def pid_in(name: str) -> int:
    path = os.path.join(folder, name)
    while True:
        try:
            with open(path) as handle:
                text = handle.read()
            if text.endswith("\n"):
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.005)


demo = client(sys.executable, "-m", "acp_fast.demo_agent")
demo.start()
stubborn = client(
    "/bin/sh",
    "-c",
    f"trap '' TERM HUP INT; sleep 1000 & echo $! > {folder}/stubborn.tmp; "
    f"mv {folder}/stubborn.tmp {folder}/stubborn; while :; do sleep 1000; done",
)
escaper = client(
    "/bin/sh",
    "-c",
    f"sh -c 'setsid sleep 1000 & echo $! > {folder}/setsid.tmp; "
    f"mv {folder}/setsid.tmp {folder}/setsid; wait' & wait",
)
# A terminal (host.md §3): a process group of its own, registered with the guard as agents are.
terminal = subprocess.Popen(["/bin/sh", "-c", "sleep 1000 & sleep 1000"], start_new_session=True)
assert _core._guard_watch(terminal.pid)
# A call in progress when the host dies: the stubborn agent never answers initialize.
threading.Thread(target=stubborn.start, daemon=True).start()
pids = [demo.pid, stubborn.pid, escaper.pid, terminal.pid, pid_in("stubborn"), pid_in("setsid")]
print(json.dumps({"pids": pids, "groups": [demo.pid, stubborn.pid, escaper.pid, terminal.pid]}))
sys.stdout.flush()
sys.stdin.readline()
if how == "exit":
    os._exit(1)
if how == "abort":
    os.abort()
if how == "raise":
    raise RuntimeError("the host crashes")
time.sleep(1000)

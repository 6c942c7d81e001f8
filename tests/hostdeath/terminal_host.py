"""A host for the terminal host-death test, run as ``python terminal_host.py DIR``: one client
offering terminals (design/host.md §3) to the scripted host agent, whose turn creates a terminal
running a shell that ignores SIGTERM with two grandchildren that ignore it too (one in the
terminal's group, one that called setsid()). Then one line of JSON on stdout (the pids: agent,
terminal leader, grandchildren) and it sleeps until killed."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import acp_fast as acp

folder = Path(sys.argv[1])
agent = Path(__file__).resolve().parent.parent / "host" / "host_agent.py"


def pid_in(name: str) -> int:
    path = folder / name
    while True:
        try:
            text = path.read_text()
            if text.endswith("\n"):
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.005)


script = (
    f"trap '' TERM HUP INT; echo $$ > {folder}/leader.tmp; mv {folder}/leader.tmp {folder}/leader; "
    f'sh -c \'trap "" TERM; echo $$ > {folder}/child.tmp; mv {folder}/child.tmp {folder}/child; '
    "exec sleep 1000' & "
    f'setsid sh -c \'trap "" TERM; echo $$ > {folder}/setsid.tmp; '
    f"mv {folder}/setsid.tmp {folder}/setsid; exec sleep 1000' & "
    "while :; do sleep 1000; done"
)


class Quiet:
    def on_update(self, update: acp.Update) -> None:
        pass


client = acp.Client(
    sys.executable,
    args=["-I", str(agent), str(folder / "agent.log")],
    reader_limits=acp.DEFAULT_READER_LIMITS,
    transfer_limits=acp.TransferLimits(
        request_bytes=1 << 20,
        response_bytes=1 << 20,
        update_bytes=1 << 20,
        update_count=1024,
        response_segment_count=1024,
    ),
    transport_epoch=1,
    cwd=str(folder),
    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    observer=Quiet(),
    capabilities=acp.ClientCapabilityConfig(read_text_file=False, write_text_file=False),
)
client.start()
create = {"command": "/bin/sh", "args": ["-c", script]}
answers = json.loads(
    client.prompt(json.dumps([{"request": {"method": "terminal/create", "params": create}}]))
)
assert answers[0]["result"] == {"terminalId": "term-1"}, answers
pids = {
    "agent": client.pid,
    "leader": pid_in("leader"),
    "child": pid_in("child"),
    "setsid": pid_in("setsid"),
}
print(json.dumps(pids))
sys.stdout.flush()
time.sleep(1000)

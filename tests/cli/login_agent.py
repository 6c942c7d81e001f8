"""An ACP agent with a terminal login, for the login tests.

As an agent (no ``--login``): answers ``initialize`` with the auth methods in ``$FAKE_AUTH_METHODS``
(JSON; default one terminal method adding ``--login`` and ``LOGIN_MARK=1``), offering terminal
methods only when the client advertised ``clientCapabilities.auth.terminal``. Other requests get
an error; it ends on stdin EOF.

As a login (``--login`` among its arguments): writes its argv, ``LOGIN_MARK``, ``PATH`` and the
line it reads from stdin to ``$LOGIN_OUT`` (JSON; its process group first, to
``$LOGIN_OUT.pgid``), starts ``sleep 300`` in its own process group
when ``$LOGIN_LEAVE_CHILD`` is set (what the host must stop), sleeps when ``$LOGIN_HANG`` is set,
and exits with ``$LOGIN_STATUS`` (default 0).
"""

import json
import os
import subprocess
import sys
import time

DEFAULT = [
    {
        "id": "tui",
        "name": "Log in",
        "type": "terminal",
        "args": ["--login"],
        "env": {"LOGIN_MARK": "1"},
    },
    {"id": "key", "name": "API key"},
]


def login() -> int:
    with open(os.environ["LOGIN_OUT"] + ".pgid", "w") as out:
        out.write(str(os.getpgrp()))
    if os.environ.get("LOGIN_LEAVE_CHILD"):
        subprocess.Popen(["sleep", "300"])
    if os.environ.get("LOGIN_HANG"):
        time.sleep(300)
    line = sys.stdin.readline().rstrip("\n")
    record = {
        "argv": sys.argv[1:],
        "mark": os.environ.get("LOGIN_MARK"),
        "path": os.environ.get("PATH"),
        "input": line,
        "pgid": os.getpgrp(),
        "pid": os.getpid(),
    }
    with open(os.environ["LOGIN_OUT"], "w") as out:
        json.dump(record, out)
    return int(os.environ.get("LOGIN_STATUS", "0"))


def agent() -> int:
    methods = json.loads(os.environ.get("FAKE_AUTH_METHODS") or json.dumps(DEFAULT))
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        if message.get("method") == "initialize":
            caps = message["params"].get("clientCapabilities") or {}
            terminal = (caps.get("auth") or {}).get("terminal") is True
            offered = [m for m in methods if terminal or m.get("type") != "terminal"]
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": offered}
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        else:
            error = {"code": -32601, "message": "not here"}
            answer = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(login() if "--login" in sys.argv[1:] else agent())

"""Terminals served for a scripted agent (design/host.md §3, §4): the round trip, limits on a
UTF-8 boundary, waits that do not stall the read loop, cancel, kill, confinement of the cwd,
and no terminal process outliving release, Session.close(), Client.close() or GC."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_TRANSFER_LIMITS
from procinfo import process_state

from .conftest import AGENT, MakeClient, Recorder, run

TERM = acp.ClientCapabilityConfig(read_text_file=False, write_text_file=False)


def create(script: str, **extra: Any) -> dict[str, Any]:
    params = {"command": "sh", "args": ["-c", script], **extra}
    return {"request": {"method": "terminal/create", "params": params}}


def term(method: str, terminal_id: str = "term-1", send: bool = False) -> dict[str, Any]:
    body = {"method": f"terminal/{method}", "params": {"terminalId": terminal_id}}
    return {"send" if send else "request": body}


def alive(pid: int) -> bool:
    state = process_state(pid)  # None: gone
    return state is not None and state != "Z"


def eventually(done: Any) -> None:
    """Waits for an event (a generous bound; no timing is asserted)."""
    until = time.monotonic() + 20
    while not done():
        assert time.monotonic() < until, "never happened"
        time.sleep(0.01)


def test_create_wait_output_release(make_host_client: MakeClient, tmp_path: Path) -> None:
    client, rec = make_host_client(capabilities=TERM)
    answers = run(
        client,
        [
            create("printf 'hi\\n'; echo oops >&2; exit 3"),
            term("wait_for_exit"),
            term("output"),
            term("release"),
            term("output"),
        ],
    )
    assert answers[0]["result"] == {"terminalId": "term-1"}
    assert answers[1]["result"] == {"exitCode": 3, "signal": None}
    assert answers[2]["result"] == {
        "output": "hi\noops\n",
        "truncated": False,
        "exitStatus": {"exitCode": 3, "signal": None},
    }
    assert answers[3]["result"] == {}
    assert answers[4]["error"] == {
        "code": -32602,
        "message": "unknown terminal",
        "data": {"terminalId": "term-1"},
    }
    assert rec.activity[0] == acp.ClientActivity(
        acp.ClientMethod.TERMINAL_CREATE,
        True,
        path=str(tmp_path),
        command="sh -c 'printf '\"'\"'hi\\n'\"'\"'; echo oops >&2; exit 3'",
        terminal_id="term-1",
        session_id="s1",
    )
    assert [a.method for a in rec.activity[1:]] == [
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
        "terminal/output",
    ]
    assert (rec.activity[4].allowed, rec.activity[4].reason) == (False, "unknown terminal")


def test_output_is_cut_on_a_character_boundary(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(capabilities=TERM)
    answers = run(
        client,
        [create("printf 'ééééééé'", outputByteLimit=5), term("wait_for_exit"), term("output")],
    )
    assert answers[2]["result"]["output"] == "éé"
    assert answers[2]["result"]["truncated"] is True


def test_terminal_output_bytes_caps_a_flood(make_host_client: MakeClient) -> None:
    config = acp.ClientCapabilityConfig(terminal_output_bytes=1000)
    client, _ = make_host_client(capabilities=config)
    answers = run(
        client,
        [create("yes 'ü' | head -n 2000000; echo end"), term("wait_for_exit"), term("output")],
    )
    output = answers[2]["result"]["output"]
    assert len(output.encode()) <= 1000 and output.endswith("ü\nend\n")
    assert answers[2]["result"]["truncated"] is True


def test_wait_for_exit_does_not_stall_updates(make_host_client: MakeClient) -> None:
    client, rec = make_host_client(capabilities=TERM)
    chunk = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "x"}}
    steps: list[dict[str, Any]] = [create("sleep 0.3; exit 7"), term("wait_for_exit", send=True)]
    steps += [{"update": chunk}] * 200
    steps += [term("output")]  # its request step also waits for the pending wait
    answers = run(client, steps)
    # The output answer overtook the pending wait; the wait came when the process exited.
    assert answers[1]["result"]["truncated"] is False
    assert "exitStatus" not in answers[1]["result"]
    assert answers[2]["result"] == {"exitCode": 7, "signal": None}
    assert sum(u.kind == acp.UpdateKind.AGENT_THOUGHT_CHUNK for u in rec.updates) == 200


def test_cancel_request_answers_a_pending_wait(make_host_client: MakeClient) -> None:
    client, rec = make_host_client(capabilities=TERM)
    cancel = {"method": "$/cancel_request", "params": {"requestId": "h2"}}
    answers = run(
        client,
        [
            create("sleep 1000"),
            term("wait_for_exit", send=True),
            {"notify": cancel},
            {"collect": 1},
            term("kill"),
            term("wait_for_exit"),
        ],
    )
    assert answers[1] == {
        "jsonrpc": "2.0",
        "id": "h2",
        "error": {"code": -32800, "message": "request cancelled"},
    }
    # SIGTERM then SIGKILL: sh dies of whichever it gets first.
    assert answers[3]["result"]["exitCode"] is None
    assert answers[3]["result"]["signal"] in ("SIGTERM", "SIGKILL")
    waits = [a for a in rec.activity if a.method == acp.ClientMethod.TERMINAL_WAIT_FOR_EXIT]
    assert [(w.allowed, w.error_code) for w in waits] == [(True, -32800), (True, None)]


def test_kill_reaches_a_grandchild_that_ignores_sigterm(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    pidfile = tmp_path / "grandchild"
    script = f"trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 1000' & wait"
    client, _ = make_host_client(capabilities=TERM)
    run(client, [create(script)])
    eventually(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"))
    grandchild = int(pidfile.read_text())
    answers = run(client, [term("kill"), term("wait_for_exit"), term("output")])
    assert answers[0]["result"] == {}
    assert answers[1]["result"] == {"exitCode": None, "signal": "SIGKILL"}
    assert "output" in answers[2]["result"]  # a killed terminal stays readable
    eventually(lambda: not alive(grandchild))


@pytest.mark.parametrize("how", ["session", "client", "gc", "request_cancel"])
def test_no_terminal_outlives_its_owner(
    make_host_client: MakeClient, tmp_path: Path, how: str
) -> None:
    pidfile = tmp_path / "pid"
    if how == "gc":  # a client nobody else holds (the fixture keeps its own)
        client = acp.Client(
            sys.executable,
            args=["-I", str(AGENT), str(tmp_path / "gc.log")],
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=TEST_TRANSFER_LIMITS,
            transport_epoch=1,
            observer=Recorder(),
            cwd=str(tmp_path),
            capabilities=TERM,
        )
        client.start()
    else:
        client, _ = make_host_client(capabilities=TERM)
    run(client, [create(f"trap '' TERM; echo $$ > {pidfile}; sleep 1000 & wait")])
    eventually(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"))
    pid = int(pidfile.read_text())
    assert alive(pid)
    if how == "session":
        assert client.default_session is not None
        client.default_session.close()
    elif how == "client":
        client.close()
    elif how == "request_cancel":
        client.request_cancel()
    else:
        del client
        gc.collect()
    eventually(lambda: not alive(pid))


def test_cwd_env_and_failures(make_host_client: MakeClient, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    outside = tmp_path.parent
    client, rec = make_host_client(capabilities=TERM, env={"PATH": os.environ["PATH"], "A": "1"})
    answers = run(
        client,
        [
            {
                "request": {
                    "method": "terminal/create",
                    "params": {
                        "command": "sh",
                        "args": ["-c", 'printf "%s %s %s" "$A" "$B" "$(pwd)"'],
                        "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "3"}],
                        "cwd": str(tmp_path / "sub"),
                    },
                }
            },
            term("wait_for_exit"),
            term("output"),
            create("true", cwd=str(outside)),
            create("true", cwd="sub"),
            {"request": {"method": "terminal/create", "params": {"command": "/no/such/program"}}},
        ],
    )
    assert answers[2]["result"]["output"] == f"3 2 {tmp_path / 'sub'}"
    assert answers[3]["error"]["message"] == "path outside the allowed roots"
    assert answers[4]["error"]["message"] == "path is not absolute"
    assert answers[5]["error"]["code"] == -32603
    assert "No such file" in answers[5]["error"]["message"]
    refused = rec.activity[3]
    assert (refused.allowed, refused.path, refused.terminal_id) == (False, str(outside), None)


def test_terminals_of_another_session_are_unknown(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(capabilities=TERM)
    run(client, [create("sleep 1000")])
    other = client.new_session()
    answers = run(other, [term("output"), term("kill"), term("release")])
    assert [a["error"]["message"] for a in answers] == ["unknown terminal"] * 3


def test_terminals_not_advertised(make_host_client: MakeClient) -> None:
    config = acp.ClientCapabilityConfig(terminal=False)
    client, rec = make_host_client(capabilities=config)
    answers = run(client, [create("true"), term("output")])
    assert [a["error"]["code"] for a in answers] == [-32601, -32601]
    assert rec.activity[0].reason == "capability not advertised: terminal"


def test_several_waits_on_one_terminal_are_all_answered(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(capabilities=TERM)
    answers = run(
        client,
        [
            create("sleep 0.2; exit 4"),
            term("wait_for_exit", send=True),
            term("wait_for_exit", send=True),
            {"collect": 2},
        ],
    )
    assert [a["result"] for a in answers[1:]] == [{"exitCode": 4, "signal": None}] * 2


EXIT_WITHOUT_CLOSE = """
import sys, time, acp_fast as acp
sys.path.insert(0, {tests!r})
client = acp.Client(sys.executable, args=["-I", {agent!r}, {log!r}],
    reader_limits=acp.DEFAULT_READER_LIMITS,
    transfer_limits=acp.TransferLimits(1 << 20, 1 << 20, 1 << 20, 1024, 1024),
    transport_epoch=1, cwd={cwd!r}, observer=type("O", (), {{"on_update": lambda s, u: None}})(),
    capabilities=acp.ClientCapabilityConfig())
client.start()
steps = [{{"request": {{"method": "terminal/create",
    "params": {{"command": "sh", "args": ["-c", "echo $$ > {pidfile}; exec sleep 1000"]}}}}}}]
import json
client.prompt(json.dumps(steps))
while not open({pidfile!r}).read().endswith("\\n"):
    time.sleep(0.01)
"""


def test_interpreter_exit_kills_terminals(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    pidfile.write_text("")
    code = EXIT_WITHOUT_CLOSE.format(
        tests=str(Path(__file__).parent),
        agent=str(AGENT),
        log=str(tmp_path / "log"),
        cwd=str(tmp_path),
        pidfile=str(pidfile),
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    pid = int(pidfile.read_text())
    eventually(lambda: not alive(pid))


def test_close_releases_every_descriptor_and_thread(make_host_client: MakeClient) -> None:
    fds, threads = set(os.listdir("/proc/self/fd")), set(os.listdir("/proc/self/task"))
    client, _ = make_host_client(capabilities=TERM)
    run(client, [create("sleep 1000"), create("echo hi"), term("wait_for_exit", "term-2")])
    assert set(os.listdir("/proc/self/task")) - threads  # the drain thread
    client.close()
    assert set(os.listdir("/proc/self/fd")) <= fds
    # close() joined the drain thread; the kernel may list a joined thread in /proc a moment
    # longer (its exit goes on after the join returns), so a short wait, not a sleep 1000.
    deadline = time.monotonic() + 2
    while not set(os.listdir("/proc/self/task")) <= threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(os.listdir("/proc/self/task")) <= threads

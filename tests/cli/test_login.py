"""Terminal authentication: the checks on the agent's method (`acp_fast._login.login_for`), the
login run on the caller's terminal with nothing left behind (`run_login`), and ``acp-fast
login`` on a pipe and on a terminal, with hostile methods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast
import procinfo
import pytest
from acp_fast import _login

from .ptykit import Pty, env

AGENT = str(Path(__file__).with_name("login_agent.py"))
TIMEOUT = 60


def raw(*methods: dict[str, Any]) -> dict[str, Any]:
    return {"protocolVersion": 1, "authMethods": list(methods)}


def terminal(**fields: Any) -> dict[str, Any]:
    return {"id": "tui", "name": "Log in", "type": "terminal", **fields}


def plan(method: dict[str, Any], **kwargs: Any) -> _login.TerminalLogin:
    options: dict[str, Any] = {"command": sys.executable, "args": [AGENT], "env": None, "cwd": None}
    options.update(kwargs)
    return _login.login_for(raw(method), "tui", **options)


def group_members(pgid: int) -> list[int]:
    return [
        pid
        for pid, (state, _, group, _) in procinfo.process_table().items()
        if group == pgid and state not in ("Z", "X")
    ]


# --- the method's checks ------------------------------------------------------------------


def test_the_method_adds_its_args_and_env_to_the_agents_command() -> None:
    login = plan(terminal(args=["--login"], env={"LOGIN_MARK": "1"}))
    assert login.argv == (os.path.abspath(sys.executable), AGENT, "--login")
    assert login.env["LOGIN_MARK"] == "1"
    assert login.env_overrides == (("LOGIN_MARK", "1"),)
    assert "--login" in login.describe() and "LOGIN_MARK=…" in login.describe()


def test_a_method_not_offered_as_terminal_is_a_capability_error_naming_the_offered() -> None:
    methods = raw(terminal(), {"id": "key", "name": "API key"})
    with pytest.raises(acp_fast.CapabilityError) as caught:
        _login.login_for(methods, "key", command="x", args=[], env={}, cwd=None)
    assert caught.value.capability == "auth.terminal"
    assert "'tui'" in str(caught.value) and "auth_terminal=True" in str(caught.value)
    with pytest.raises(acp_fast.CapabilityError):
        _login.login_for({"authMethods": "nope"}, "tui", command="x", args=[], env={}, cwd=None)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"args": "--login"}, "args is not a list"),
        ({"args": ["a"] * (_login.MAX_ARGS + 1)}, f"more than {_login.MAX_ARGS} args"),
        ({"args": ["a\0b"]}, "NUL"),
        ({"args": [7]}, "args[0] is not a string"),
        ({"args": ["x" * (_login.MAX_TEXT_BYTES + 1)]}, "longer than"),
        ({"env": ["A=1"]}, "env is not an object"),
        ({"env": {f"V{i}": "1" for i in range(_login.MAX_ENV + 1)}}, "more than"),
        ({"env": {"LD_PRELOAD": "/tmp/evil.so"}}, "refused to set LD_PRELOAD"),
        ({"env": {"DYLD_INSERT_LIBRARIES": "/tmp/evil.dylib"}}, "refused"),
        ({"env": {"A=B": "1"}}, "illegal env name"),
        ({"env": {"": "1"}}, "illegal env name"),
        ({"env": {"A": 1}}, "is not a string"),
    ],
)
def test_hostile_methods_are_refused_before_anything_runs(
    fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(acp_fast.AgentProtocolError, match=said.replace("[", r"\[")):
        plan(terminal(**fields))


def test_the_program_is_found_once_with_the_clients_path_not_the_methods(tmp_path: Path) -> None:
    ours, planted = tmp_path / "ours", tmp_path / "planted"
    for directory in (ours, planted):
        directory.mkdir()
        program = directory / "the-agent"
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
    login = plan(
        terminal(env={"PATH": str(planted)}),
        command="the-agent",
        args=[],
        env={"PATH": str(ours)},
    )
    assert login.argv[0] == str(ours / "the-agent")
    assert login.env["PATH"] == str(planted)  # the login itself may see the method's PATH


def test_control_bytes_in_agent_text_are_never_shown_raw() -> None:
    login = plan(terminal(args=["\x1b[2J--login"], env={"X\x1b]0;t\x07": "1"}))
    shown = login.describe()
    assert "\x1b" not in shown and "\x07" not in shown
    with pytest.raises(acp_fast.CapabilityError) as caught:
        _login.login_for(
            raw(terminal(id="\x1b[31mred")), "\x1b[2J", command="x", args=[], env={}, cwd=None
        )
    assert "\x1b" not in str(caught.value)


# --- running it ---------------------------------------------------------------------------

DRIVER = """
import json, subprocess, sys
from acp_fast import _login
login = _login.login_for(json.loads(sys.argv[1]), "tui", command=sys.executable,
                         args=[sys.argv[2]], env=None, cwd=None)
timeout = float(sys.argv[3]) if len(sys.argv) > 3 else None
try:
    print("status", _login.run_login(login, timeout=timeout), flush=True)
except subprocess.TimeoutExpired:
    print("timeout", flush=True)
"""


Ran = tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]


def run_with_record(tmp_path: Path, argv: list[str], stdin: str, variables: dict[str, str]) -> Ran:
    """Runs `argv` with the login agent's record file set; what it printed, and the record the
    login wrote (None when no login ran)."""
    out = tmp_path / "login.json"
    done = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env(LOGIN_OUT=str(out), **variables),
        check=False,
    )
    return done, json.loads(out.read_text()) if out.exists() else None


def drive(tmp_path: Path, *extra: str, stdin: str = "secret\n", **variables: str) -> Ran:
    method = terminal(args=["--login"], env={"LOGIN_MARK": "1"})
    argv = [sys.executable, "-c", DRIVER, json.dumps(raw(method)), AGENT, *extra]
    return run_with_record(tmp_path, argv, stdin, variables)


def test_the_login_runs_with_the_methods_args_and_env_and_its_status_is_returned(
    tmp_path: Path,
) -> None:
    done, record = drive(tmp_path, LOGIN_STATUS="3")
    assert done.stdout.strip() == "status 3", done.stderr
    assert record is not None
    assert record["argv"] == ["--login"] and record["mark"] == "1"
    assert record["input"] == "secret"  # the caller's stdin is the login's


def test_what_the_login_leaves_running_in_its_group_is_stopped(tmp_path: Path) -> None:
    done, record = drive(tmp_path, LOGIN_LEAVE_CHILD="1")
    assert done.stdout.strip() == "status 0", done.stderr
    assert record is not None
    assert record["pgid"] == record["pid"]  # a group of its own, not the host's
    deadline = time.monotonic() + 10
    while group_members(record["pgid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(record["pgid"]) == []


def test_a_login_past_its_timeout_is_stopped_with_its_group(tmp_path: Path) -> None:
    started = time.monotonic()
    done, record = drive(tmp_path, "0.5", LOGIN_HANG="1", LOGIN_LEAVE_CHILD="1")
    assert done.stdout.strip() == "timeout", done.stderr
    assert record is None
    assert time.monotonic() - started < 30  # not the login's 300 s
    pgid = int((tmp_path / "login.json.pgid").read_text())
    deadline = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(pgid) == []


def test_a_bad_timeout_is_refused() -> None:
    login = plan(terminal())
    with pytest.raises(ValueError, match="timeout"):
        _login.run_login(login, timeout=0)


# --- acp-fast login -------------------------------------------------------------------------


def cli(tmp_path: Path, *args: str, stdin: str = "", **variables: str) -> Ran:
    argv = [sys.executable, "-m", "acp_fast", "login", "--agent", f"{sys.executable} {AGENT}"]
    return run_with_record(tmp_path, [*argv, *args], stdin, variables)


def test_cli_login_runs_the_agents_only_terminal_method(tmp_path: Path) -> None:
    done, record = cli(tmp_path, "--yes", stdin="secret\n")
    assert done.returncode == 0, done.stderr
    assert "login 'tui' runs:" in done.stderr and "logged in" in done.stderr
    assert record is not None and record["input"] == "secret" and record["mark"] == "1"


def test_cli_login_lists_the_methods(tmp_path: Path) -> None:
    done, record = cli(tmp_path, "--list")
    assert done.returncode == 0, done.stderr
    assert "tui (terminal): Log in" in done.stdout and "key (agent): API key" in done.stdout
    assert record is None


def test_cli_login_says_when_the_agent_offers_no_terminal_login(tmp_path: Path) -> None:
    methods = json.dumps([{"id": "key", "name": "API key"}])
    done, _ = cli(tmp_path, "--yes", FAKE_AUTH_METHODS=methods)
    assert done.returncode == 1
    assert "offers no terminal login" in done.stderr and "key (agent)" in done.stderr


def test_cli_login_asks_which_method_or_wants_one_named(tmp_path: Path) -> None:
    two = [terminal(args=["--login"]), terminal(id="other", args=["--login"])]
    done, record = cli(tmp_path, "--yes", FAKE_AUTH_METHODS=json.dumps(two))
    assert done.returncode == 2 and "choose with --method" in done.stderr
    assert record is None
    done, record = cli(
        tmp_path, "--yes", "--method", "other", stdin="x\n", FAKE_AUTH_METHODS=json.dumps(two)
    )
    assert done.returncode == 0, done.stderr
    assert record is not None


def test_cli_login_without_a_terminal_runs_only_with_yes(tmp_path: Path) -> None:
    done, record = cli(tmp_path, stdin="secret\n")
    assert done.returncode == 1 and "give --yes" in done.stderr
    assert record is None


def test_cli_login_passes_the_logins_failure_on(tmp_path: Path) -> None:
    done, _ = cli(tmp_path, "--yes", stdin="x\n", LOGIN_STATUS="5")
    assert done.returncode == 5 and "status 5" in done.stderr


def test_cli_login_shows_hostile_methods_printably_and_refuses_loader_variables(
    tmp_path: Path,
) -> None:
    hostile = [terminal(name="\x1b]0;pwned\x07", env={"LD_PRELOAD": "/tmp/x.so"})]
    done, record = cli(tmp_path, "--yes", FAKE_AUTH_METHODS=json.dumps(hostile))
    assert done.returncode == 1 and "LD_PRELOAD" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert record is None
    done, _ = cli(tmp_path, "--list", FAKE_AUTH_METHODS=json.dumps(hostile))
    assert "\x1b" not in done.stdout


def test_cli_login_on_a_terminal_asks_then_hands_the_terminal_over(tmp_path: Path) -> None:
    out = tmp_path / "login.json"
    pty = Pty(
        ["login", "--agent", f"{sys.executable} {AGENT}"],
        cwd=tmp_path,
        extra_env={"LOGIN_OUT": str(out)},
    )
    try:
        pty.expect(r"Run it\? \[y/N\]")
        pty.send("y\r")
        _wait_foreground_leaves(pty)
        pty.send("typed on the terminal\r")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    record = json.loads(out.read_text())
    assert record["input"] == "typed on the terminal"


def test_ctrl_c_on_a_terminal_reaches_the_login_not_the_host(tmp_path: Path) -> None:
    pty = Pty(
        ["login", "--agent", f"{sys.executable} {AGENT}", "--yes"],
        cwd=tmp_path,
        extra_env={"LOGIN_OUT": str(tmp_path / "login.json"), "LOGIN_HANG": "1"},
    )
    try:
        _wait_foreground_leaves(pty)
        pty.send(b"\x03")
        status = pty.finish()
    finally:
        pty.close()
    # The login died of SIGINT (its status says so); the host reported it and exited itself.
    assert status == 130, pty.text
    assert "the login ended with status -2" in pty.text


def _wait_foreground_leaves(pty: Pty) -> None:
    """Until the terminal's foreground group is no longer acp-fast's (the login's is)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        pty._read(0.05)
        try:
            if os.tcgetpgrp(pty.master) not in (pty.proc.pid, 0):
                return
        except OSError:
            pass
    raise AssertionError("the login never became the terminal's foreground:\n" + pty.text)


# --- Client.terminal_login and AsyncClient.terminal_login ---------------------------------

CLIENT_DRIVER = """
import asyncio, sys
import acp_fast as acp
caps = acp.ClientCapabilityConfig(auth_terminal=True)
if sys.argv[2] == "blocking":
    with acp.Client(sys.executable, [sys.argv[1]], capabilities=caps) as client:
        client.start(new_session=False)
        print("status", client.terminal_login("tui"), flush=True)
else:
    async def main():
        async with acp.AsyncClient(sys.executable, [sys.argv[1]], capabilities=caps) as client:
            await client.start(new_session=False)
            if sys.argv[2] == "async":
                print("status", await client.terminal_login("tui"), flush=True)
                return
            task = asyncio.ensure_future(client.terminal_login("tui"))
            await asyncio.sleep(1.0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                print("cancelled", flush=True)
    asyncio.run(main())
"""


@pytest.mark.parametrize("driver", ["blocking", "async"])
def test_the_client_runs_the_agents_terminal_login(tmp_path: Path, driver: str) -> None:
    argv = [sys.executable, "-c", CLIENT_DRIVER, AGENT, driver]
    done, record = run_with_record(tmp_path, argv, "secret\n", {"LOGIN_STATUS": "4"})
    assert done.stdout.strip() == "status 4", done.stderr
    assert record is not None and record["input"] == "secret" and record["mark"] == "1"
    assert record["argv"] == ["--login"]


def test_cancelling_the_async_login_stops_its_group(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", CLIENT_DRIVER, AGENT, "cancel"]
    variables = {"LOGIN_HANG": "1", "LOGIN_LEAVE_CHILD": "1"}
    started = time.monotonic()
    done, record = run_with_record(tmp_path, argv, "", variables)
    assert done.stdout.strip() == "cancelled", done.stderr
    assert record is None and time.monotonic() - started < 30
    pgid = int((tmp_path / "login.json.pgid").read_text())
    assert group_members(pgid) == []


def test_terminal_login_needs_a_started_client_and_an_offered_method(tmp_path: Path) -> None:
    with acp_fast.Client(sys.executable, [AGENT], env=env(LOGIN_OUT=str(tmp_path / "x"))) as client:
        with pytest.raises(RuntimeError, match="start"):
            client.terminal_login("tui")
        client.start(new_session=False)
        # Not advertised: the agent offers its terminal method only to a client that asks.
        assert [m.id for m in client.initialize.auth_methods] == ["key"]
        with pytest.raises(acp_fast.CapabilityError, match="auth_terminal=True"):
            client.terminal_login("tui")
    caps = acp_fast.ClientCapabilityConfig(auth_terminal=True)
    with acp_fast.Client(sys.executable, [AGENT], capabilities=caps) as client:
        client.start(new_session=False)
        assert [m.type for m in client.initialize.auth_methods] == ["terminal", ""]
        with pytest.raises(acp_fast.CapabilityError):
            client.terminal_login("key")  # an agent method, not a terminal one
    assert not (tmp_path / "x").exists()

"""The agent process: its death, its group, its teardown by close(), garbage collection and
interpreter exit, signals, and calls from other threads."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import (
    TEST_TRANSFER_LIMITS,
    Journal,
    agent,
    chunk_line,
    emit,
    is_dead,
    kill_if_alive,
    process_state,
    read_lines,
    sq,
    stop_line,
    wait_dead,
    wait_for,
)


def stubborn_agent(pid_file: Path, prompt_action: str = ":") -> str:
    """An agent that ignores SIGTERM, starts a `sleep 100` grandchild (its pid written to
    `pid_file`), answers initialize/session/new, and does not exit when its stdin closes: only
    signals end it."""
    return (
        "trap '' TERM\n"
        "sleep 100 &\n"
        f"printf '%s\\n' \"$!\" > {sq(str(pid_file))}\n"
        + agent(None, prompt_action)
        + "exec sleep 30\n"
    )


def grandchild_pid(pid_file: Path) -> int:
    assert wait_for(lambda: bool(read_lines(pid_file))), "the agent never wrote its child's pid"
    return int(read_lines(pid_file)[0])


def alive(pid: int) -> bool:
    return not is_dead(pid)


def acp_fast_path() -> str:
    """The directory holding the imported acp_fast package, for child interpreters."""
    return os.path.dirname(os.path.dirname(os.path.abspath(acp.__file__)))


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([acp_fast_path(), *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_agent_dying_mid_prompt(make_client, journal: Journal) -> None:
    client = make_client(agent(None, emit(chunk_line("partial")) + "; exit 3"))
    client.start()
    started = time.monotonic()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    assert time.monotonic() - started < 2.0
    assert "output ended" in str(caught.value).lower()
    assert journal.texts == ["partial"]
    assert journal.sequences == [1]


def test_close_kills_term_ignoring_agent_and_grandchild(make_client, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    client = make_client(stubborn_agent(pid_file))
    client.start()
    pid = client.pid
    grandchild = grandchild_pid(pid_file)
    try:
        assert alive(pid)
        assert alive(grandchild)
        assert os.getpgid(grandchild) == pid
        started = time.monotonic()
        client.close()
        assert time.monotonic() - started < 2.0
        assert process_state(pid) is None, "close() must reap the agent"
        assert wait_dead(grandchild, timeout=1.0), "the grandchild outlived close()"
        client.close()
    finally:
        kill_if_alive(grandchild)
        kill_if_alive(pid)


def test_garbage_collected_client_kills_agent(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    client: Any = acp.Client(
        "/bin/sh",
        args=["-c", stubborn_agent(pid_file)],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=TEST_TRANSFER_LIMITS,
        transport_epoch=1,
        observer=Journal(),
    )
    client.start()
    pid = client.pid
    grandchild = grandchild_pid(pid_file)
    try:
        assert alive(pid)
        del client
        gc.collect()
        assert wait_dead(pid, timeout=2.0), "the agent outlived its garbage-collected client"
        assert wait_dead(grandchild, timeout=2.0), "the grandchild outlived the client"
    finally:
        kill_if_alive(grandchild)
        kill_if_alive(pid)


def test_interpreter_exit_kills_agent(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    program = textwrap.dedent(
        """
        import sys
        import acp_fast as acp

        CLIENT = acp.Client(
            "/bin/sh",
            args=["-c", sys.argv[1]],
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=acp.TransferLimits(
                request_bytes=1 << 20,
                response_bytes=1 << 20,
                update_bytes=1 << 20,
                update_count=1024,
                response_segment_count=1024,
            ),
            transport_epoch=1,
        )
        CLIENT.start()
        print(CLIENT.pid, flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program, stubborn_agent(pid_file)],
        capture_output=True,
        text=True,
        timeout=20,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    grandchild = grandchild_pid(pid_file)
    try:
        assert wait_dead(pid, timeout=2.0), "the agent outlived the interpreter"
        assert wait_dead(grandchild, timeout=2.0), "the grandchild outlived the interpreter"
    finally:
        kill_if_alive(grandchild)
        kill_if_alive(pid)


# Run in a child interpreter (in its main thread) so that a KeyboardInterrupt the client fails to
# raise where it should cannot escape into pytest and end the whole run.
SIGINT_PROGRAM = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import acp_fast as acp

    signal.signal(signal.SIGINT, signal.default_int_handler)
    report = {}
    client = acp.Client(
        "/bin/sh",
        args=["-c", sys.argv[1]],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=acp.TransferLimits(
            request_bytes=1 << 20,
            response_bytes=1 << 20,
            update_bytes=1 << 20,
            update_count=1024,
            response_segment_count=1024,
        ),
        transport_epoch=1,
        observer=acp.Observer(on_update=lambda update: None),
    )
    client.start()
    report["pid"] = client.pid
    fired = {}

    def interrupt():
        fired["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.3, interrupt)
    rescue = threading.Timer(5.0, client.close)  # unwedges a client that never checks signals
    rescue.daemon = True
    try:
        timer.start()
        rescue.start()
        try:
            client.prompt("never answered")
            report["raised"] = None
        except KeyboardInterrupt:
            report["raised"] = "KeyboardInterrupt"
        except BaseException as error:
            report["raised"] = type(error).__name__
        report["elapsed"] = time.monotonic() - fired.get("at", float("nan"))
        rescue.cancel()
        rescue = threading.Timer(3.0, client.close)
        rescue.daemon = True
        rescue.start()
        began = time.monotonic()
        try:
            client.prompt("after interrupt")
            report["after"] = None
        except acp.AcpError as error:
            report["after"] = type(error).__name__
        report["after_elapsed"] = time.monotonic() - began
        rescue.cancel()
        client.close()
        client.close()
        report["closed"] = True
    except KeyboardInterrupt:
        report["stray"] = "KeyboardInterrupt"
    print(json.dumps(report), flush=True)
    """
)


def test_sigint_interrupts_blocking_prompt(tmp_path: Path) -> None:
    script = agent(None, ":")
    done = subprocess.run(
        [sys.executable, "-c", SIGINT_PROGRAM, script],
        capture_output=True,
        text=True,
        timeout=20,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    try:
        assert "stray" not in report, "KeyboardInterrupt surfaced outside the prompt call"
        assert report["raised"] == "KeyboardInterrupt"
        assert report["elapsed"] < 0.5, f"KeyboardInterrupt came {report['elapsed']:.3f} s late"
        assert report["after"] is not None, "after an interrupt, prompt() must raise AcpError"
        assert report["after_elapsed"] < 1.0, "after an interrupt, prompt() must fail at once"
        assert report["closed"] is True
        assert wait_dead(report["pid"], timeout=2.0)
    finally:
        kill_if_alive(report.get("pid"))


def _blocking_agent(log: Path) -> str:
    """Answers initialize and session/new; never answers a prompt."""
    return agent(log, ":")


def _prompt_sent(log: Path) -> bool:
    return any('"method":"session/prompt"' in line for line in read_lines(log))


def test_second_thread_call_gets_runtime_error(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    go = tmp_path / "go"
    wait_then_answer = f"while [ ! -e {sq(str(go))} ]; do sleep 0.05; done; " + emit(
        chunk_line("first"), stop_line(2)
    )
    client = make_client(agent(log, wait_then_answer))
    client.start()
    outcome: list[BaseException | str] = []

    def second() -> None:
        try:
            wait_for(lambda: _prompt_sent(log), timeout=5.0)
            time.sleep(0.1)
            client.prompt("second")
            outcome.append("returned")
        except BaseException as error:
            outcome.append(error)
        finally:
            go.touch()

    rescue = threading.Timer(10.0, client.close)
    thread = threading.Thread(target=second)
    rescue.start()
    thread.start()
    try:
        assert client.prompt("first") == "first"
    finally:
        thread.join(10.0)
        rescue.cancel()
    assert len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, RuntimeError), error
    assert "another call" in str(error)
    assert len([line for line in read_lines(log) if '"session/prompt"' in line]) == 1


@pytest.mark.parametrize("method", ["request_cancel", "close"])
def test_other_thread_stops_a_blocking_prompt(make_client, tmp_path: Path, method: str) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(_blocking_agent(log))
    client.start()
    pid = client.pid
    stopped_at: list[float] = []

    def stop() -> None:
        wait_for(lambda: _prompt_sent(log), timeout=5.0)
        time.sleep(0.1)
        stopped_at.append(time.monotonic())
        getattr(client, method)()

    rescue = threading.Timer(10.0, client.close)
    thread = threading.Thread(target=stop)
    rescue.start()
    thread.start()
    try:
        with pytest.raises(acp.AgentProtocolError):
            client.prompt("hello")
        failed_at = time.monotonic()
    finally:
        thread.join(10.0)
        rescue.cancel()
    assert stopped_at, "the stopping thread never ran"
    assert failed_at - stopped_at[0] < 1.0
    assert wait_dead(pid, timeout=2.0)
    client.close()
    assert process_state(pid) is None


def test_agent_leads_its_own_group_and_session(make_client) -> None:
    client = make_client(agent(None, emit(stop_line(2))))
    pid = client.pid
    assert isinstance(pid, int)
    assert pid != os.getpid()
    assert os.getpgid(pid) == pid
    assert os.getsid(pid) == pid
    assert os.getpgid(pid) != os.getpgrp()
    client.start()
    assert client.pid == pid


def test_agent_stderr_is_discarded(make_client, capfd: pytest.CaptureFixture[str]) -> None:
    marker = "ACP-FAST-STDERR-MARKER"
    script = f"echo {marker} >&2\n" + agent(
        None, f"echo {marker} >&2; " + emit(chunk_line("ok"), stop_line(2))
    )
    client = make_client(script)
    client.start()
    assert client.prompt("hello") == "ok"
    client.close()
    captured = capfd.readouterr()
    assert marker not in captured.err
    assert marker not in captured.out

"""The agent's output ends: it exits (before answering initialize, between two updates, in the
middle of a line, with a non-zero code, by SIGKILL from outside), closes its stdout while it keeps
running, or exits while a process it started holds its stdout open.

Documented outcome: the call in flight raises `AgentProtocolError` ("output ended …", with the
exit status when it is known, and the tail of stderr with ``stderr="tail"``); a write to an agent
that has already exited raises `AgentTransportFailed`. In ACP v1 and v2 alike (the shell agents
speak the version through `watch.wire`).
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import time

import acp_fast as acp
import pytest
from conftest import SETSID, emit, sq, v1_only, wait_for

from .kit import Watch, alive, cat, raw_file, write_pid


@pytest.fixture
def fault_protocol(protocol: str) -> str:
    """An agent's end of output is the same fault in both versions."""
    return protocol


STDERR_TAIL = re.compile(r"\nagent stderr \(last (\d+) bytes\):\n(.*)\Z", re.S)


def test_exits_after_reading_initialize(watch: Watch) -> None:
    client = watch.client("read line; exit 0")
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.start()
    message = str(caught.value)
    assert "output ended before the response to initialize (id 0)" in message
    assert "exited with status 0" in message
    # The same, for a host that must not read messages (the fleet's retry).
    error = caught.value
    assert (error.output_ended, error.exit_code, error.exit_signal) == (True, 0, None)
    assert error.code is None
    assert client.session_id is None
    watch.assert_updates([])
    watch.assert_clean()


def test_exits_before_initialize_is_written(watch: Watch) -> None:
    """The agent is gone before start() writes: the write finds its stdin closed, which is
    the same failure to connect as its output ending (first-use.md §1)."""
    client = watch.client("exit 0")
    pid = client.pid
    assert pid is not None
    assert wait_for(lambda: not alive(pid), 5.0)
    with pytest.raises(acp.ConnectError, match="stdin is closed"):
        client.start()
    watch.assert_clean()


def test_fails_to_start_with_a_message_on_stderr(watch: Watch) -> None:
    """The case a host meets first (a missing API key): the agent says why on stderr and exits
    after reading `initialize`. The error carries the exit status and the stderr tail."""
    script = "read line; echo 'error: GEMINI_API_KEY is not set' >&2; exit 41"
    client = watch.client(script, stderr="tail")
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.start()
    message = str(caught.value)
    assert "exited with status 41" in message
    # A failure to connect, with how the agent ended on the error the host caught.
    assert isinstance(caught.value, acp.ConnectError)
    assert (caught.value.output_ended, caught.value.exit_code) == (True, 41)
    tail = STDERR_TAIL.search(message)
    assert tail is not None, message
    assert tail.group(2) == "error: GEMINI_API_KEY is not set\n"
    assert int(tail.group(1)) == len(tail.group(2).encode())
    assert client.stderr_tail() == "error: GEMINI_API_KEY is not set\n"
    watch.assert_clean()


def test_dies_at_once_with_a_message_on_stderr(watch: Watch) -> None:
    """An agent that dies before reading anything: start()'s write fails. The error still says
    why, with the exit status and the stderr tail, which is what a host needs here."""
    client = watch.client("echo 'fatal: no credentials' >&2; exit 2", stderr="tail")
    pid = client.pid
    assert pid is not None
    assert wait_for(lambda: not alive(pid), 5.0)
    assert wait_for(lambda: client.stderr_tail() != "", 2.0)
    with pytest.raises(acp.AcpError) as caught:
        client.start()
    assert isinstance(caught.value, acp.AgentTransportFailed | acp.AgentProtocolError)
    message = str(caught.value)
    assert "fatal: no credentials" in message, message
    assert "status 2" in message, message
    assert (caught.value.exit_code, caught.value.exit_signal) == (2, None)
    assert client.stderr_tail() == "fatal: no credentials\n"
    watch.assert_clean()


def test_exits_between_two_updates(watch: Watch) -> None:
    client = watch.client(
        watch.wire.agent(None, emit(watch.wire.chunk("one"), watch.wire.chunk("two")) + "; exit 0")
    )
    client.start()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    message = str(caught.value)
    if watch.protocol == "v1":
        assert "output ended before the response to session/prompt (id 2)" in message
    else:  # acknowledged: the turn's end (its idle) is what never came
        assert "output ended" in message
    assert "exited with status 0" in message
    watch.assert_updates(["one", "two"])
    watch.assert_clean()


def test_exits_in_the_middle_of_a_line(watch: Watch) -> None:
    half = watch.wire.chunk("lost")[:40]
    client = watch.client(
        watch.wire.agent(None, emit(watch.wire.chunk("kept")) + f"; printf '%s' '{half}'; exit 0")
    )
    client.start()
    with pytest.raises(acp.AgentProtocolError, match="invalid JSON") as caught:
        client.prompt("hello")
    # A fault in a line, not an end of output: nothing says the agent ended.
    error = caught.value
    assert (error.output_ended, error.exit_code, error.exit_signal) == (False, None, None)
    watch.assert_updates(["kept"])
    watch.assert_clean()


def test_exits_with_a_nonzero_code(watch: Watch) -> None:
    client = watch.client(watch.wire.agent(None, emit(watch.wire.chunk("before")) + "; exit 3"))
    client.start()
    with pytest.raises(acp.AgentProtocolError, match="exited with status 3") as caught:
        client.prompt("hello")
    error = caught.value
    assert (error.output_ended, error.exit_code, error.exit_signal) == (True, 3, None)
    watch.assert_updates(["before"])
    watch.assert_clean()


def test_killed_from_outside(watch: Watch) -> None:
    """SIGKILL from another process while the agent streams: the updates sent before are kept."""
    killed_at: list[float] = []

    class Killer:
        def __init__(self) -> None:
            self.pid = 0

        def on_update(self, update: acp.Update) -> None:
            watch.journal.on_update(update)
            if update.text == "second":
                os.kill(self.pid, signal.SIGKILL)
                killed_at.append(time.monotonic())

    killer = Killer()
    client = watch.client(
        watch.wire.agent(None, emit(watch.wire.chunk("first"), watch.wire.chunk("second"))),
        observer=killer,
    )
    assert client.pid is not None
    killer.pid = client.pid
    client.start()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    assert time.monotonic() - killed_at[0] < 0.5
    assert "killed by signal 9" in str(caught.value)
    error = caught.value
    assert (error.output_ended, error.exit_code, error.exit_signal) == (True, None, 9)
    # Carried across processes (Ray, multiprocessing) as they are: by pickle.
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy)) == (type(error), str(error))
    assert (copy.output_ended, copy.exit_code, copy.exit_signal) == (True, None, 9)
    watch.assert_updates(["first", "second"])
    watch.assert_clean()


def test_closes_stdout_and_keeps_running(watch: Watch) -> None:
    """The agent closes its stdout but keeps running with stdin open: the call fails at once;
    close() still kills it."""
    pid_file = watch.pid_file("agent.pid")
    action = (
        emit(watch.wire.chunk("last words"))
        + "; exec 1>&-; "
        + write_pid(pid_file)
        + "; while :; do sleep 1; done"
    )
    client = watch.client(watch.wire.agent(None, action))
    client.start()
    started = time.monotonic()
    with pytest.raises(acp.AgentProtocolError, match="output ended") as caught:
        client.prompt("hello")
    assert time.monotonic() - started < 0.5
    # Ended output, no exit status: the agent lives on (what the fleet calls a protocol fault).
    error = caught.value
    assert (error.output_ended, error.exit_code, error.exit_signal) == (True, None, None)
    (pid,) = watch.wait_pids(pid_file)
    assert pid == client.pid
    assert alive(pid), "the agent should still run with its stdout closed"
    watch.assert_updates(["last words"])
    watch.assert_clean()


@pytest.mark.parametrize("stderr", ["discard", "tail"])
def test_grandchild_holds_stdout_after_the_agent_exits(watch: Watch, stderr: str) -> None:
    """The agent starts a process that inherits its stdout (and stderr), then exits: the call
    fails within 0.5 s saying the agent exited, instead of waiting for the pipe to end."""
    pid_file = watch.pid_file("grandchild.pid")
    action = (
        emit(watch.wire.chunk("started a helper"))
        + "; echo 'agent: giving up' >&2; sleep 100 & "
        + write_pid(pid_file, "$!")
        + "; exit 5"
    )
    client = watch.client(watch.wire.agent(None, action), stderr=stderr)
    client.start()
    started = time.monotonic()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert elapsed < 0.5, f"the call took {elapsed:.3f} s to notice the agent's exit"
    assert "exited with status 5" in message
    if stderr == "tail":
        assert message.endswith("agent stderr (last 17 bytes):\nagent: giving up\n"), message
    (grandchild,) = watch.wait_pids(pid_file)
    assert alive(grandchild)
    watch.assert_updates(["started a helper"])
    watch.assert_clean()


def test_setsid_grandchild_holds_stdout_after_the_agent_exits(watch: Watch) -> None:
    """As above, but the helper left the agent's session (setsid) before the agent exited: the
    call still ends within 0.5 s. The helper was re-parented away before close() could see it,
    so it is out of reach (documented); the test kills it."""
    pid_file = watch.pid_file("helper.pid")
    action = (
        emit(watch.wire.chunk("detaching"))
        + f"; {SETSID} sh -c {sq(write_pid(pid_file) + '; exec sleep 100')} & "
        + f"while [ ! -s {sq(str(pid_file))} ]; do sleep 0.01; done; exit 0"
    )
    client = watch.client(watch.wire.agent(None, action))
    client.start()
    started = time.monotonic()
    with pytest.raises(acp.AgentProtocolError, match="exited with status 0"):
        client.prompt("hello")
    assert time.monotonic() - started < 0.5
    (helper,) = watch.wait_pids(pid_file)
    watch.out_of_reach(helper)
    watch.assert_updates(["detaching"])
    watch.assert_clean()


@v1_only("the v2 shell agent acknowledges first; v2's error answers: sessions/test_v2_turns")
def test_stderr_tail_is_appended_only_when_output_ends(watch: Watch) -> None:
    """An error answer is not an end of output: its message is the agent's, with no tail."""
    error = '{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"quota exceeded"}}'
    client = watch.client(watch.wire.agent(None, "echo 'noise' >&2; " + emit(error)), stderr="tail")
    client.start()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    assert caught.value.code == -32000
    assert "agent stderr" not in str(caught.value)
    assert wait_for(lambda: client.stderr_tail() == "noise\n")
    watch.assert_clean()


def test_last_line_without_newline_before_exit_is_kept(watch: Watch) -> None:
    """The agent's last line needs no newline: a response written just before exiting counts."""
    stop = raw_file(
        watch, "stop.jsonl", (watch.wire.chunk("done") + "\n" + watch.wire.end(2)).encode()
    )
    client = watch.client(watch.wire.agent(None, cat(stop) + "; exit 0"))
    client.start()
    result = client.prompt_detailed("hello")
    assert result.response == "done"
    assert result.stop_reason == "end_turn"
    watch.assert_updates(["done"])
    watch.assert_clean()

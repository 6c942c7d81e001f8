"""Ctrl-C during a turn (first-use.md §1): with ``interrupt="cancel"`` the first one trips the
turn's cancel latch (one ``session/cancel``, a permission being asked answered cancelled) and
the turn returns; a second within 2 s stops the client; the handler is always put back."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import (
    GET_ID,
    INIT_RESULT,
    NEW_RESULT,
    agent,
    chunk_line,
    emit,
    read_lines,
    sq,
    stop_line,
    with_id,
)
from test_first_use import answers, permission_line, sh_client


@pytest.fixture
def clients() -> Any:
    made: list[acp.Client] = []
    yield made
    for client in made:
        client.close()


# --- Ctrl-C --------------------------------------------------------------------------------------

RUNNING = '{"jsonrpc":"2.0","id":@ID@,"result":{"stopReason":"cancelled"}}'


def cancel_agent(log: Path, *extra: str) -> str:
    """Starts each turn with a "working" chunk (and `extra` lines), then waits for
    `session/cancel` and ends the turn "cancelled"; a plain "done" turn when the prompt says so."""
    return (
        "while IFS= read -r line; do\n"
        f"  printf '%s\\n' \"$line\" >> {sq(str(log))}\n"
        '  case "$line" in\n'
        f'    *\'"method":"initialize"\'*) {emit(INIT_RESULT)} ;;\n'
        f'    *\'"method":"session/new"\'*) {emit(NEW_RESULT)} ;;\n'
        f'    *\'"text":"quick"\'*) {GET_ID}; '
        + with_id('{"jsonrpc":"2.0","id":@ID@,"result":{"stopReason":"end_turn"}}')
        + " ;;\n"
        f'    *\'"method":"session/prompt"\'*) {GET_ID}; turn=$id; '
        f"{emit(chunk_line('working'), *extra)} ;;\n"
        f'    *\'"method":"session/cancel"\'*) id=$turn; {with_id(RUNNING)} ;;\n'
        "  esac\n"
        "done\n"
    )


class Interrupter:
    """An observer that sends this process SIGINT `times` times on the "working" chunk."""

    def __init__(self, times: int = 1) -> None:
        self.times = times
        self.committed: list[acp.PermissionRequest] = []

    def on_update(self, update: acp.Update) -> None:
        if update.text == "working":
            for _ in range(self.times):
                signal.raise_signal(signal.SIGINT)
                sum(range(10))  # a few bytecodes: the handler runs before the next signal

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.committed.append(request)


def test_ctrl_c_cancels_the_turn_first(clients: list[acp.Client], tmp_path: Path) -> None:
    log = tmp_path / "log"
    before = signal.getsignal(signal.SIGINT)
    client = sh_client(cancel_agent(log), observer=Interrupter(), interrupt="cancel")
    clients.append(client)
    client.start()
    result = client.default_session.prompt("long task")  # type: ignore[union-attr]
    assert (result.response, result.stop_reason) == ("working", "cancelled")
    assert sum('"method":"session/cancel"' in line for line in read_lines(log)) == 1
    assert signal.getsignal(signal.SIGINT) is before  # put back after the turn
    assert client.default_session.prompt("quick").stop_reason == "end_turn"  # type: ignore[union-attr]
    # Ctrl-C in the next turn, within 2 s of the last one, is that turn's first: it cancels.
    again = client.default_session.prompt("long task")  # type: ignore[union-attr]
    assert again.stop_reason == "cancelled"


def test_ctrl_c_cancels_a_permission_being_asked(clients: list[acp.Client], tmp_path: Path) -> None:
    log = tmp_path / "log"

    class AskAndInterrupt(Interrupter):
        def on_update(self, update: acp.Update) -> None:
            pass

        def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionOutcome:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C while the user is being asked
            return acp.PermissionOutcome(acp.PermissionDecision.ALLOW)

    observer = AskAndInterrupt()
    client = sh_client(cancel_agent(log, permission_line()), observer=observer)
    clients.append(client)
    client.start()
    session = client.default_session
    assert session is not None
    result = session.prompt("long task", interrupt="cancel")  # per turn
    assert result.stop_reason == "cancelled"
    assert answers(log) == [{"outcome": "cancelled"}]
    assert [r.decision for r in observer.committed] == ["cancel"]


def test_a_second_ctrl_c_within_2_s_stops_the_client(
    clients: list[acp.Client], tmp_path: Path
) -> None:
    log = tmp_path / "log"
    before = signal.getsignal(signal.SIGINT)
    client = sh_client(cancel_agent(log), observer=Interrupter(times=2), interrupt="cancel")
    clients.append(client)
    client.start()
    with pytest.raises(KeyboardInterrupt):
        client.prompt("long task")
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(acp.AgentProtocolError, match="stopped"):
        client.prompt("quick")


def test_ctrl_c_raises_by_default(clients: list[acp.Client], tmp_path: Path) -> None:
    client = sh_client(cancel_agent(tmp_path / "log"), observer=Interrupter())
    clients.append(client)
    client.start()
    with pytest.raises(KeyboardInterrupt):
        client.prompt("long task")
    with pytest.raises(ValueError, match="interrupt must be"):
        sh_client("exit 0", interrupt="ignore")


def test_the_sigint_handler_is_put_back_when_a_turn_fails(
    clients: list[acp.Client], tmp_path: Path
) -> None:
    before = signal.getsignal(signal.SIGINT)
    # The agent answers the prompt with an error: the turn raises.
    error = with_id('{"jsonrpc":"2.0","id":@ID@,"error":{"code":-32603,"message":"boom"}}')
    client = sh_client(agent(None, f"{GET_ID}; {error}"), interrupt="cancel")
    clients.append(client)
    client.start()
    with pytest.raises(acp.AgentProtocolError, match="boom"):
        client.prompt("x")
    assert signal.getsignal(signal.SIGINT) is before
    # A timed-out turn likewise.
    slow = sh_client(agent(None, "sleep 5"), interrupt="cancel", cancel_grace=0.2)
    clients.append(slow)
    slow.start()
    with pytest.raises(acp.TurnTimeout):
        slow.default_session.prompt("x", timeout=0.2)  # type: ignore[union-attr]
    assert signal.getsignal(signal.SIGINT) is before


def test_interrupt_cancel_off_the_main_thread_leaves_signals_alone(
    clients: list[acp.Client], tmp_path: Path
) -> None:
    seen: list[Any] = []

    class Watch:
        def on_update(self, update: acp.Update) -> None:
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    client = sh_client(
        agent(None, emit(chunk_line("a"), stop_line(2))), observer=Watch(), interrupt="cancel"
    )
    clients.append(client)
    client.start()
    replies: list[str] = []
    worker = threading.Thread(target=lambda: replies.append(client.prompt("x")))
    worker.start()
    worker.join(10)
    assert replies == ["a"]
    assert seen == [before]  # no handler was installed for a turn on another thread

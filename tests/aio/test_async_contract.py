"""`AsyncClient` against the contract gaps issue 21 found: the agent's `$/cancel_request` for a
request whose `on_permission` is still awaited, control calls while a turn runs (async.md §4),
no thread per client for the stderr tail (async.md §2)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, TEST_TRANSFER_LIMITS, Journal

HOST_AGENT = Path(__file__).parents[1] / "host" / "host_agent.py"
SESSION_AGENT = Path(__file__).parents[1] / "sessions" / "session_agent.py"

COMMON: dict[str, Any] = {
    "reader_limits": acp.DEFAULT_READER_LIMITS,
    "transfer_limits": TEST_TRANSFER_LIMITS,
    "transport_epoch": 3,
    "client_info": TEST_CLIENT_INFO,
}
OPTIONS = [
    {"optionId": "ao", "name": "Allow", "kind": "allow_once"},
    {"optionId": "ro", "name": "Reject", "kind": "reject_once"},
]


def permission_step(title: str = "edit x") -> dict[str, Any]:
    tool = {"toolCallId": "t1", "title": title, "kind": "edit"}
    return {
        "send": {
            "method": "session/request_permission",
            "params": {"toolCall": tool, "options": OPTIONS},
        }
    }


def cancel_step(request_id: Any) -> dict[str, Any]:
    return {"notify": {"method": "$/cancel_request", "params": {"requestId": request_id}}}


class Slow(Journal):
    """Answers every permission `allow` after `delay` seconds unless cancelled first (the
    awaitable is a future the test can look at afterwards)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.futures: list[asyncio.Future[acp.PermissionOutcome]] = []
        self.previews: list[acp.PermissionRequest] = []

    def on_permission(self, request: acp.PermissionRequest) -> Any:
        self.previews.append(request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[acp.PermissionOutcome] = loop.create_future()
        allow = acp.PermissionOutcome(acp.PermissionDecision.ALLOW)
        loop.call_later(self.delay, lambda: future.done() or future.set_result(allow))
        self.futures.append(future)
        return future

    @property
    def cancelled(self) -> list[bool]:
        return [future.cancelled() for future in self.futures]


def host_client(tmp_path: Path, observer: object, **options: Any) -> acp.AsyncClient:
    return acp.AsyncClient(
        sys.executable,
        args=["-I", str(HOST_AGENT), str(tmp_path / "agent.log")],
        **COMMON,
        observer=observer,
        cwd=str(tmp_path),
        **options,
    )


async def scripted(client: acp.AsyncClient, steps: list[dict[str, Any]]) -> list[Any]:
    session = client.default_session
    assert session is not None
    turn = await session.prompt(json.dumps(steps))
    answers: list[Any] = json.loads(turn.response)
    return answers


def test_cancel_request_from_the_agent_cancels_an_awaited_permission(tmp_path: Path) -> None:
    observer = Slow(delay=30.0)
    client = host_client(tmp_path, observer)

    async def main() -> list[Any]:
        async with client:
            await client.start()
            return await scripted(client, [permission_step(), cancel_step("h1"), {"collect": 1}])

    began = time.monotonic()
    answers = asyncio.run(main())
    # The answer went out when the agent withdrew the request, not after the 30 s delay.
    assert time.monotonic() - began < 10
    assert answers == [
        {"jsonrpc": "2.0", "id": "h1", "result": {"outcome": {"outcome": "cancelled"}}}
    ]
    assert observer.cancelled == [True]  # the awaitable was cancelled
    (record,) = observer.permissions
    assert (record.outcome, record.decision, record.reason) == (
        "cancelled",
        "cancel",
        "cancelled by the agent",
    )


def test_cancel_request_naming_another_id_leaves_the_awaited_permission_alone(
    tmp_path: Path,
) -> None:
    observer = Slow(delay=0.3)
    client = host_client(tmp_path, observer)
    steps = [
        permission_step(),
        cancel_step("h9"),  # no such request
        cancel_step(None),  # malformed
        {"notify": {"method": "$/cancel_request", "params": "h1"}},  # malformed
        cancel_step(1),  # a number, not the string id "h1"
        {"collect": 1},
    ]

    async def main() -> list[Any]:
        async with client:
            await client.start()
            return await scripted(client, steps)

    answers = asyncio.run(main())
    assert [a["result"]["outcome"] for a in answers] == [{"outcome": "selected", "optionId": "ao"}]
    assert observer.cancelled == [False]
    assert observer.permissions[0].reason == "observer"


def test_cancel_request_after_the_answer_is_ignored(tmp_path: Path) -> None:
    observer = Slow(delay=0.01)
    client = host_client(tmp_path, observer)
    steps = [permission_step(), {"collect": 1}, cancel_step("h1"), permission_step("again")]
    steps.append({"collect": 1})

    async def main() -> list[Any]:
        async with client:
            await client.start()
            return await scripted(client, steps)

    answers = asyncio.run(main())
    assert [a["result"]["outcome"]["outcome"] for a in answers] == ["selected", "selected"]
    assert [p.reason for p in observer.permissions] == ["observer", "observer"]


# --- control calls while a turn runs (async.md §4) ---------------------------------------------

MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}
CONFIG_OPTIONS = [
    {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": "fast",
        "options": [{"value": "fast", "name": "Fast"}, {"value": "slow", "name": "Slow"}],
    },
    {"id": "brave", "name": "Brave", "type": "boolean", "currentValue": False},
]


def test_control_calls_run_while_a_turn_runs(tmp_path: Path) -> None:
    config = {
        "initialize": {"protocolVersion": 1, "agentCapabilities": {}},
        "modes": MODES,
        "configOptions": CONFIG_OPTIONS,
    }
    (tmp_path / "agent.json").write_text(json.dumps(config))
    log = tmp_path / "agent.log"
    client = acp.AsyncClient(
        sys.executable,
        args=["-I", str(SESSION_AGENT), str(tmp_path / "agent.json"), str(log)],
        **COMMON,
        observer=Journal(),
        cwd=str(tmp_path),
    )

    async def main() -> tuple[str, str, Any]:
        async with client:
            await client.start()
            session = client.default_session
            assert session is not None
            turn = asyncio.ensure_future(session.prompt("hang"))
            await asyncio.sleep(0.05)
            await session.set_mode("code")
            await session.set_model("slow")
            await session.set_config_option("brave", True)
            with pytest.raises(RuntimeError, match="turn in flight"):
                await session.prompt("stream 1")  # only a second prompt is refused
            session.cancel()
            result = await turn
            return session.modes.current, session.models.current, result

    mode, model, result = asyncio.run(main())
    assert (mode, model, result.stop_reason) == ("code", "slow", "cancelled")
    assert result.current_mode_id == "code"
    methods = [json.loads(line).get("method") for line in log.read_text().splitlines()]
    assert methods.count("session/set_mode") == 1
    assert methods.count("session/set_config_option") == 2
    assert methods.index("session/set_mode") < methods.index("session/cancel")


# --- no thread per client (async.md §2) --------------------------------------------------------


# The session agent, after one line on stderr.
NOISY = (
    "import sys; sys.stderr.write('agent says hi\\n'); sys.stderr.flush(); "
    f"exec(compile(open({str(SESSION_AGENT)!r}).read(), 'session_agent', 'exec'))"
)


def _tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def test_64_clients_with_a_stderr_tail_start_no_thread(tmp_path: Path) -> None:
    config = {"initialize": {"protocolVersion": 1, "agentCapabilities": {}}}
    (tmp_path / "agent.json").write_text(json.dumps(config))
    before = (threading.active_count(), _tasks())

    async def main() -> tuple[int, int, list[str]]:
        clients = [
            acp.AsyncClient(
                sys.executable,
                args=["-I", "-c", NOISY, str(tmp_path / "agent.json"), os.devnull],
                **COMMON,
                observer=Journal(),
                cwd=str(tmp_path),
                stderr="tail",
            )
            for _ in range(64)
        ]
        try:
            await asyncio.gather(*(c.start() for c in clients))
            during = (threading.active_count(), _tasks())
            # The loop drains each tail (no thread does): wait for every line to arrive.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not all(c.stderr_tail() for c in clients):
                await asyncio.sleep(0.01)
            tails = [c.stderr_tail() for c in clients]
        finally:
            for c in clients:
                c.close()
        return during[0], during[1], tails

    threads, tasks, tails = asyncio.run(main())
    # No more than before (a thread left by an earlier test of the suite may end meanwhile;
    # a thread per client would add 64).
    assert threads <= before[0] and tasks <= before[1], (threads, tasks, before)
    assert tails == ["agent says hi\n"] * 64


# --- CapabilityError names its agent -----------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_capability_error_carries_the_agent_id(tmp_path: Path, asynchronous: bool) -> None:
    (tmp_path / "agent.json").write_text(json.dumps({"initialize": {"protocolVersion": 1}}))
    args = ["-I", str(SESSION_AGENT), str(tmp_path / "agent.json"), os.devnull]
    options: dict[str, Any] = {**COMMON, "observer": Journal(), "cwd": str(tmp_path)}
    if not asynchronous:
        with acp.Client(sys.executable, args=args, agent_id="planted", **options) as client:
            client.start()
            with pytest.raises(acp.CapabilityError) as caught:
                client.list_sessions()
    else:

        async def main() -> pytest.ExceptionInfo[acp.CapabilityError]:
            async with acp.AsyncClient(
                sys.executable, args=args, agent_id="planted", **options
            ) as client:
                await client.start()
                with pytest.raises(acp.CapabilityError) as caught:
                    await client.list_sessions()
                return caught

        caught = asyncio.run(main())
    error = caught.value
    assert (error.agent_id, error.capability) == ("planted", "sessionCapabilities.list")
    assert (
        str(error)
        == "ACP agent 'planted' did not advertise the 'sessionCapabilities.list' capability."
    )


def test_the_loop_drains_the_stderr_tail_under_uvloop(tmp_path: Path) -> None:
    uvloop = pytest.importorskip("uvloop")
    config = {"initialize": {"protocolVersion": 1, "agentCapabilities": {}}}
    (tmp_path / "agent.json").write_text(json.dumps(config))
    before = _tasks()

    async def main() -> tuple[str, int]:
        async with acp.AsyncClient(
            sys.executable,
            args=["-I", "-c", NOISY, str(tmp_path / "agent.json"), os.devnull],
            **COMMON,
            observer=Journal(),
            cwd=str(tmp_path),
            stderr="tail",
        ) as client:
            await client.start()
            deadline = time.monotonic() + 20
            while not client.stderr_tail() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return client.stderr_tail(), _tasks()

    tail, tasks = uvloop.run(main())
    assert tail == "agent says hi\n"
    # No thread added (one an earlier test left may end meanwhile: at most as many as before).
    assert tasks <= before, (tasks, before)

"""Every real agent through `AsyncClient`: the handshake, a plain prompt whose reply is exactly
the streamed chunks, and (for agents whose model can ask for a tool) a permission request
answered by an awaited `on_permission` while the agent's updates keep arriving; each with
`protocol="v1"` and `"auto"` (which these agents answer with 1; the ones that answer 2 are
driven in v2 by test_v2_agents.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import acp_fast as acp
import pytest

from .conftest import Harness
from .support import AGENTS, MODEL_AGENTS, Journal, global_problem, v1_and_auto
from .test_agents import plain_reply

pytestmark = pytest.mark.time_limit(90)

_problem = global_problem()
if _problem:
    pytest.skip(_problem, allow_module_level=True)


@pytest.mark.parametrize(("harness", "protocol"), v1_and_auto(list(AGENTS)), indirect=True)
def test_plain_prompt_through_async_client(harness: Harness) -> None:
    run = harness.start(tap=True, asynchronous=True)
    client: acp.AsyncClient = run.client

    async def main() -> tuple[acp.PromptResult, int]:
        async with client:
            await client.start()
            assert client.session_id and client.initialize.protocol_version == 1
            assert client.protocol_version == 1
            result = await client.prompt_detailed("Say hello")
            return result, client.next_update_sequence

    result, next_sequence = asyncio.run(main())
    assert result == acp.PromptResult(
        response=plain_reply(harness, run, 0, "Say hello"), stop_reason="end_turn", overflow=None
    )
    sequences = [u.update_sequence for u in run.journal.updates]
    assert sequences == list(range(1, len(sequences) + 1))
    assert next_sequence == len(sequences) + 1
    assert client.pid is None  # `async with` closed it


class AwaitingObserver(Journal):
    """Answers permission requests after a short await, choosing the spec's allow option."""

    def __init__(self, allow_option: str) -> None:
        super().__init__()
        self.allow_option = allow_option
        self.asked: list[acp.PermissionRequest] = []

    def on_permission(self, request: acp.PermissionRequest) -> Any:
        self.asked.append(request)

        async def decide() -> acp.PermissionReply:
            await asyncio.sleep(0.05)
            (option,) = [o for o in request.options if o.option_id == self.allow_option]
            return acp.PermissionReply("selected", option.option_id, option.kind)

        return decide()


@pytest.mark.parametrize(("harness", "protocol"), v1_and_auto(MODEL_AGENTS), indirect=True)
def test_awaited_permission_through_async_client(harness: Harness) -> None:
    spec = harness.spec
    observer = AwaitingObserver(spec.allow_option)
    run = harness.start(asynchronous=True, observer=observer)
    client: acp.AsyncClient = run.client

    async def main() -> acp.PromptResult:
        async with client:
            await client.start()
            return await client.prompt_detailed("Please write hello.txt")

    result = asyncio.run(main())
    assert len(observer.asked) == 1
    (record,) = observer.permissions
    assert (record.outcome, record.option_id) == ("selected", spec.allow_option)
    assert result.stop_reason == "end_turn"
    if spec.writes_file:
        assert (harness.cwd / "hello.txt").read_text().startswith("hi from")

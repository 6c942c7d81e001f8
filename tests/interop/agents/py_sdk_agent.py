"""An ACP agent written with the official Python SDK (PyPI `agent-client-protocol`, module `acp`),
the way its README shows: an `Agent` class run by `acp.run_agent`. It runs on 0.12 and on 1.0 (the
updates are built from `acp.schema` classes: 1.0 removed the helpers such as
`update_agent_message_text` and `start_edit_tool_call`).

It echoes the prompt back, like the SDK's example echo agent. Two prompts do more, so the interop
tests can drive the same checks as against the model-backed agents:

- a prompt containing "write hello.txt": announces a tool call (kind `edit`), asks the client's
  permission, writes `hello.txt` in the session's cwd only when allowed, reports the tool call
  `completed` or `failed`, then says what happened;
- a prompt containing "slow": streams "tick N. " chunks 0.3 s apart (at most 40) and ends the turn
  `cancelled` as soon as `session/cancel` arrives.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import acp
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    PermissionOption,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)


class SdkAgent:
    def __init__(self) -> None:
        self._conn: Any = None
        self._cwd: dict[str, str] = {}
        self._cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> acp.InitializeResponse:
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="py-sdk-agent", title="Python SDK agent", version="1"),
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> acp.NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._cwd[session_id] = cwd
        return acp.NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    async def _say(self, session_id: str, text: str) -> None:
        chunk = AgentMessageChunk(
            session_update="agent_message_chunk", content=TextContentBlock(type="text", text=text)
        )
        await self._conn.session_update(session_id, chunk)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> acp.PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        cancelled = self._cancelled[session_id] = asyncio.Event()
        if "write hello.txt" in text:
            return await self._write(session_id)
        if "slow" in text:
            for tick in range(40):
                await self._say(session_id, f"tick {tick}. ")
                try:
                    await asyncio.wait_for(cancelled.wait(), 0.3)
                except TimeoutError:
                    continue
                return acp.PromptResponse(stop_reason="cancelled")
            return acp.PromptResponse(stop_reason="end_turn")
        await self._say(session_id, text)
        return acp.PromptResponse(stop_reason="end_turn")

    async def _write(self, session_id: str) -> acp.PromptResponse:
        path = os.path.join(self._cwd[session_id], "hello.txt")
        call_id = "call_" + uuid.uuid4().hex[:8]
        await self._say(session_id, "I'll write the file.")
        start = ToolCallStart(
            session_update="tool_call",
            tool_call_id=call_id,
            title="Write hello.txt",
            kind="edit",
            status="pending",
            locations=[ToolCallLocation(path=path)],
            raw_input={"path": path, "content": "hi from the SDK agent\n"},
        )
        await self._conn.session_update(session_id, start)
        answer = await self._conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(
                tool_call_id=call_id, title="Write hello.txt", kind="edit", status="pending"
            ),
            options=[
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
        )
        outcome = answer.outcome
        allowed = outcome.outcome == "selected" and outcome.option_id == "allow"
        if allowed:
            with open(path, "w") as handle:
                handle.write("hi from the SDK agent\n")
        done = ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=call_id,
            status="completed" if allowed else "failed",
        )
        await self._conn.session_update(session_id, done)
        await self._say(session_id, " Written." if allowed else " Not written.")
        return acp.PromptResponse(stop_reason="end_turn")


async def main() -> None:
    await acp.run_agent(SdkAgent())


if __name__ == "__main__":
    asyncio.run(main())

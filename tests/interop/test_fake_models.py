"""The fake model server's newer wire formats, checked over 127.0.0.1 without any agent:
OpenAI Chat Completions (opencode) and codex 0.166's Responses requests, whose tools come in an
`additional_tools` input item and whose JavaScript `exec` tool is freeform."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from .fake_models import FakeModelServer, ModelRequest, Reply, ToolCall

WRITE = ToolCall("write", {"filePath": "/w/hello.txt", "content": "hi\n"})
EXEC = ToolCall("exec", {}, freeform='await tools.exec_command({"cmd": "true"});')


def _post(server: FakeModelServer, path: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        server.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    # No proxy, whatever the environment says: the request must go to 127.0.0.1 only.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        data: bytes = response.read()
    return data


def _events(data: bytes) -> list[Any]:
    """The `data:` payloads of a server-sent event stream ("[DONE]" kept as the string)."""
    out = []
    for line in data.decode().splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def _chat_body(stream: bool, **extra: Any) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}
    messages = [{"role": "user", "content": "Please write hello.txt"}]
    return {"model": "fake-model", "stream": stream, "tools": [tool], "messages": messages, **extra}


def test_chat_completions_stream_text_then_one_tool_call() -> None:
    seen: list[ModelRequest] = []

    def plan(request: ModelRequest) -> Reply:
        seen.append(request)
        return Reply(("I'll ", "write."), WRITE)

    with FakeModelServer(plan) as server:
        events = _events(_post(server, "/v1/chat/completions", _chat_body(True)))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "I'll write."
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if "tool_calls" in c["choices"][0]["delta"]
    ]
    assert len(calls) == 1 and calls[0][0]["index"] == 0
    assert calls[0][0]["function"]["name"] == "write"
    assert json.loads(calls[0][0]["function"]["arguments"]) == WRITE.args
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" and chunks[-1]["usage"]
    assert seen[0].api == "openai-chat" and seen[0].main and seen[0].tool_names() == ["write"]


def test_chat_completions_without_tools_is_a_side_request_and_unstreamed_is_one_object() -> None:
    with FakeModelServer(lambda request: Reply(("main",))) as server:
        body = _chat_body(False)
        del body["tools"]
        side = json.loads(_post(server, "/v1/chat/completions", body))
        main = json.loads(_post(server, "/v1/chat/completions", _chat_body(False)))
        tool_result = _chat_body(False, messages=[{"role": "tool", "content": "done"}])
        _post(server, "/v1/chat/completions", tool_result)
        requests = list(server.requests)
    assert side["object"] == "chat.completion"
    assert side["choices"][0]["message"]["content"] == "ok"  # what side requests get
    assert main["choices"][0]["message"] == {"role": "assistant", "content": "main"}
    assert main["choices"][0]["finish_reason"] == "stop"
    assert [r.has_tool_result() for r in requests] == [False, False, True]


def _codex_body(*extra_input: dict[str, Any]) -> dict[str, Any]:
    tools = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [
            {
                "type": "namespace",
                "name": "functions",
                "tools": [{"type": "custom", "name": "exec"}, {"type": "function", "name": "wait"}],
            }
        ],
    }
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    return {"model": "m", "stream": True, "input": [tools, user, *extra_input]}


def test_codex_additional_tools_make_a_main_turn_and_exec_is_a_custom_tool_call() -> None:
    seen: list[ModelRequest] = []

    def plan(request: ModelRequest) -> Reply:
        seen.append(request)
        return Reply(("Running.",), EXEC)

    with FakeModelServer(plan) as server:
        events = _events(_post(server, "/v1/responses", _codex_body()))
        output = {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"}
        _post(server, "/v1/responses", _codex_body(output))
    assert seen[0].main and seen[0].tool_names() == ["exec", "wait"]
    assert not seen[0].has_tool_result() and seen[1].has_tool_result()
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    call = done[-1]
    assert call["type"] == "custom_tool_call" and call["name"] == "exec"
    assert call["input"] == EXEC.freeform and "arguments" not in call
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert added[-1]["input"] == "" and added[-1]["status"] == "in_progress"
    completed = events[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["output"][-1] == call

"""The fake model's OpenAI Chat Completions endpoint (`POST /v1/chat/completions`), as opencode
calls an OpenAI-compatible provider: streamed as `chat.completion.chunk` events ending in
`data: [DONE]`, or one `chat.completion` object when `stream` is false. A tool call is one
`tool_calls` delta with the whole JSON arguments, then `finish_reason: "tool_calls"`."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fake_models import _Handler


def chat_completions(
    handler: _Handler, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    from .fake_models import ModelRequest

    streamed = bool(body.get("stream"))
    request = ModelRequest("openai-chat", "POST", path, body, headers, streamed)
    request.main = bool(request.tool_names())
    handler.fake.record(request)
    reply = handler._reply(request)
    model = str(body.get("model") or "fake-model")
    completion_id = handler.fake.new_id("chatcmpl-fake")
    call = reply.tool_call
    call_id = handler.fake.new_id("call_fake")
    finish = "tool_calls" if call is not None else "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    tool_calls = (
        [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args)},
            }
        ]
        if call is not None
        else None
    )
    base = {"id": completion_id, "created": int(time.time()), "model": model}
    if not streamed:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        choice = {"index": 0, "message": message, "finish_reason": finish}
        handler._json(200, dict(base, object="chat.completion", choices=[choice], usage=usage))
        return

    def chunk(delta: dict[str, Any], reason: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return dict(base, object="chat.completion.chunk", choices=[choice], **extra)

    handler._start_stream()
    handler._event(None, chunk({"role": "assistant", "content": ""}))
    for number, text in enumerate(reply.chunks):
        if number:
            handler._pause(reply.delay)
        handler._event(None, chunk({"content": text}))
    if tool_calls:
        handler._event(None, chunk({"tool_calls": [dict(tool_calls[0], index=0)]}))
    handler._event(None, chunk({}, finish, usage=usage))
    handler._send_chunk(b"data: [DONE]\n\n")
    handler._end_stream()

"""Fake model APIs for the real agents: one HTTP server on 127.0.0.1 that speaks the wire formats
the agents use, Gemini (`streamGenerateContent?alt=sse`, `generateContent`, `countTokens`),
Anthropic Messages (`POST /v1/messages`, streamed), OpenAI Responses (`POST /v1/responses`,
streamed; codex 0.166's tools in an `additional_tools` input item and its freeform `exec` tool
answered with a `custom_tool_call`) and OpenAI Chat Completions (`POST /v1/chat/completions`,
streamed, as opencode calls an OpenAI-compatible provider: fake_chat.py).

What the model "says" is decided per request by a planner, `plan(request) -> Reply`, which the
tests write: text chunks (optionally slow), optionally followed by one tool call. Every request is
recorded (`server.requests`) so tests can assert what the agent sent to its model.

Standard library only (`http.server` in a thread). Streams stop early when the server is shut
down or the agent hangs up, so nothing outlives a test.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """A call of the agent's tool `name` with JSON arguments `args`."""

    name: str
    args: dict[str, Any]
    #: The input of a freeform (`custom`) tool such as codex's JavaScript `exec`: the call is
    #: then a `custom_tool_call` carrying this text instead of JSON arguments.
    freeform: str | None = None


@dataclass(frozen=True)
class Reply:
    """One model turn: text chunks (streamed `delay` seconds apart), then an optional tool call."""

    chunks: tuple[str, ...] = ()
    tool_call: ToolCall | None = None
    delay: float = 0.0

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class ModelRequest:
    """One request an agent made to its model API."""

    api: str  # "gemini" | "anthropic" | "openai"
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    streamed: bool
    #: True for the agent's real conversation turn (it offers tools); side requests such as
    #: title generation, token counting or "who speaks next" checks offer none.
    main: bool = False

    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False)

    def tool_names(self) -> list[str]:
        body = self.body
        tools = list(body.get("tools") or [])
        for item in body.get("input") or []:  # codex 0.166: an `additional_tools` input item
            if isinstance(item, dict) and item.get("type") == "additional_tools":
                tools += item.get("tools") or []
        names: list[str] = []
        while tools:
            tool = tools.pop(0)
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":  # openai: a group of tools
                tools += tool.get("tools") or []
            elif "name" in tool:  # anthropic, openai
                names.append(str(tool["name"]))
            elif isinstance(tool.get("function"), dict):  # openai chat completions
                names.append(str(tool["function"].get("name")))
            for declaration in tool.get("functionDeclarations") or []:  # gemini
                names.append(str(declaration.get("name")))
        return names

    def has_tool_result(self) -> bool:
        """Whether the conversation sent already holds the result of a tool call."""
        if self.api == "gemini":
            return any(
                "functionResponse" in part
                for content in self.body.get("contents") or []
                for part in content.get("parts") or []
            )
        if self.api == "anthropic":
            return any(
                isinstance(block, dict) and block.get("type") == "tool_result"
                for message in self.body.get("messages") or []
                if isinstance(message.get("content"), list)
                for block in message["content"]
            )
        if self.api == "openai-chat":
            return any(
                isinstance(message, dict) and message.get("role") == "tool"
                for message in self.body.get("messages") or []
            )
        return any(
            isinstance(item, dict)
            and item.get("type") in ("function_call_output", "custom_tool_call_output")
            for item in self.body.get("input") or []
        )


Planner = Callable[[ModelRequest], Reply]


def side_reply(request: ModelRequest) -> Reply | None:
    """What the fake model answers to agents' side requests (no tools offered); None for a
    main turn. Gemini asks "who speaks next" as JSON; everything else gets a short text."""
    if request.main:
        return None
    if request.api == "gemini" and "next_speaker" in request.text():
        return Reply(('{"reasoning": "The model finished its turn.", "next_speaker": "user"}',))
    return Reply(("ok",))


@dataclass
class _Counters:
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def next(self, prefix: str) -> str:
        return f"{prefix}{next(self.ids):06d}"


class FakeModelServer:
    """The fake model API on 127.0.0.1 (a free port). Use as a context manager."""

    def __init__(self, plan: Planner) -> None:
        self.plan = plan
        self.requests: list[ModelRequest] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self._counters = _Counters()
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def main_requests(self) -> list[ModelRequest]:
        with self._lock:
            return [request for request in self.requests if request.main]

    def start(self) -> FakeModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def record(self, request: ModelRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return self._counters.next(prefix)


class _ClientGone(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # --- plumbing -----------------------------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}
        return value if isinstance(value, dict) else {"_value": value}

    def _read_chunked(self) -> bytes:
        data = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return data
            data += self.rfile.read(size)
            self.rfile.readline()

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, data: bytes) -> None:
        if self.fake.stopping.is_set():
            raise _ClientGone
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except OSError as error:
            raise _ClientGone from error

    def _event(self, event: str | None, data: Any) -> None:
        head = f"event: {event}\n" if event else ""
        self._send_chunk((head + "data: " + json.dumps(data) + "\n\n").encode())

    def _end_stream(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def _pause(self, seconds: float) -> None:
        if seconds > 0 and self.fake.stopping.wait(seconds):
            raise _ClientGone

    def _reply(self, request: ModelRequest) -> Reply:
        side = side_reply(request)
        if side is not None:
            return side
        try:
            return self.fake.plan(request)
        except Exception as error:  # the test's planner failed: record it, answer something
            self.fake.errors.append(f"planner failed: {error!r}")
            return Reply(("planner failed",))

    # --- routing ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._json(404, {"error": {"message": f"not faked: GET {self.path}"}})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self._body()
        path = self.path.split("?")[0]
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            if path.startswith("/v1beta/models/") or path.startswith("/v1/models/"):
                self._gemini(path, body, headers)
            elif path.rstrip("/").endswith("/messages/count_tokens"):
                self.fake.record(ModelRequest("anthropic", "POST", path, body, headers, False))
                self._json(200, {"input_tokens": 10})
            elif path.rstrip("/").endswith("/messages"):
                self._anthropic(path, body, headers)
            elif path.rstrip("/").endswith("/responses"):
                self._openai(path, body, headers)
            elif path.rstrip("/").endswith("/chat/completions"):
                from .fake_chat import chat_completions

                chat_completions(self, path, body, headers)
            else:
                self.fake.record(ModelRequest("unknown", "POST", path, body, headers, False))
                self._json(404, {"error": {"message": f"not faked: POST {path}"}})
        except _ClientGone:
            self.close_connection = True

    # --- Gemini -------------------------------------------------------------------------------

    def _gemini(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        model, _, action = path.rsplit("/", 1)[-1].partition(":")
        streamed = action == "streamGenerateContent"
        request = ModelRequest("gemini", "POST", path, body, headers, streamed)
        request.main = streamed and bool(request.tool_names())
        self.fake.record(request)
        if action == "countTokens":
            self._json(200, {"totalTokens": 10})
            return
        if action == "embedContent":
            self._json(200, {"embedding": {"values": [0.0] * 8}})
            return
        if action not in ("generateContent", "streamGenerateContent"):
            self._json(404, {"error": {"code": 404, "message": f"not faked: {action}"}})
            return
        reply = self._reply(request)
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}

        def chunk(parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            value: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
            if finish:
                candidate["finishReason"] = "STOP"
                value["usageMetadata"] = usage
            return value

        parts_all: list[dict[str, Any]] = [{"text": reply.text}] if reply.chunks else []
        call = reply.tool_call
        if call is not None:
            parts_all.append({"functionCall": {"name": call.name, "args": call.args}})
        if not streamed:
            self._json(200, chunk(parts_all or [{"text": ""}], True))
            return
        self._start_stream()
        for index, text in enumerate(reply.chunks):
            if index:
                self._pause(reply.delay)
            last = index == len(reply.chunks) - 1 and call is None
            self._event(None, chunk([{"text": text}], last))
        if call is not None:
            self._pause(reply.delay if reply.chunks else 0)
            self._event(
                None, chunk([{"functionCall": {"name": call.name, "args": call.args}}], True)
            )
        if not reply.chunks and call is None:
            self._event(None, chunk([{"text": ""}], True))
        self._end_stream()

    # --- Anthropic ----------------------------------------------------------------------------

    def _anthropic(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        streamed = bool(body.get("stream"))
        request = ModelRequest("anthropic", "POST", path, body, headers, streamed)
        request.main = bool(request.tool_names())
        self.fake.record(request)
        reply = self._reply(request)
        model = str(body.get("model") or "claude-fake")
        message_id = self.fake.new_id("msg_fake")
        call = reply.tool_call
        tool_id = self.fake.new_id("toolu_fake")
        stop_reason = "tool_use" if call is not None else "end_turn"
        if not streamed:
            content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}]
            if call is not None:
                content.append(
                    {"type": "tool_use", "id": tool_id, "name": call.name, "input": call.args}
                )
            self._json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
            )
            return
        self._start_stream()
        self._event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
        index = 0
        if reply.chunks:
            self._event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for number, text in enumerate(reply.chunks):
                if number:
                    self._pause(reply.delay)
                self._event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": text},
                    },
                )
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if call is not None:
            self._event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": call.name,
                        "input": {},
                    },
                },
            )
            self._event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(call.args)},
                },
            )
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})
        self._event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        self._event("message_stop", {"type": "message_stop"})
        self._end_stream()

    # --- OpenAI Responses ---------------------------------------------------------------------

    def _openai(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        streamed = bool(body.get("stream", True))
        request = ModelRequest("openai", "POST", path, body, headers, streamed)
        request.main = bool(request.tool_names())
        self.fake.record(request)
        reply = self._reply(request)
        response_id = self.fake.new_id("resp_fake")
        message_id = self.fake.new_id("msg_fake")
        call = reply.tool_call
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        message_item = {
            "type": "message",
            "id": message_id,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
        call_item: dict[str, Any] | None = None
        if call is not None and call.freeform is not None:
            call_item = {
                "type": "custom_tool_call",
                "id": self.fake.new_id("ctc_fake"),
                "call_id": self.fake.new_id("call_fake"),
                "name": call.name,
                "input": call.freeform,
                "status": "completed",
            }
        elif call is not None:
            call_item = {
                "type": "function_call",
                "id": self.fake.new_id("fc_fake"),
                "call_id": self.fake.new_id("call_fake"),
                "name": call.name,
                "arguments": json.dumps(call.args),
                "status": "completed",
            }
        output = ([message_item] if reply.chunks else []) + ([call_item] if call_item else [])
        response = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model", "gpt-fake"),
            "output": output,
            "usage": usage,
        }
        if not streamed:
            self._json(200, response)
            return
        self._start_stream()
        self._event(
            "response.created",
            {
                "type": "response.created",
                "response": dict(response, status="in_progress", output=[], usage=None),
            },
        )
        output_index = 0
        if reply.chunks:
            self._event(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": output_index,
                    "item": dict(message_item, status="in_progress", content=[]),
                },
            )
            for number, text in enumerate(reply.chunks):
                if number:
                    self._pause(reply.delay)
                self._event(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": message_id,
                        "output_index": output_index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            self._event(
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": output_index,
                    "item": message_item,
                },
            )
            output_index += 1
        if call_item is not None:
            self._event(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": output_index,
                    "item": dict(
                        call_item,
                        status="in_progress",
                        **({"input": ""} if "input" in call_item else {"arguments": ""}),
                    ),
                },
            )
            self._event(
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": output_index,
                    "item": call_item,
                },
            )
        self._event("response.completed", {"type": "response.completed", "response": response})
        self._end_stream()

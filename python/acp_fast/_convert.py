"""Conversions between the facade's records and the Rust core's values, in both directions:
content blocks, MCP servers and observer answers as the core's tuples; the core's turn tuple,
``initialize`` record and JSON lists as the facade's records. Used by both clients' calls; nothing
here talks to the core."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from . import _json
from ._types import (
    Audio,
    AuthMethod,
    BlobResource,
    ContentBlock,
    Image,
    Initialize,
    McpServer,
    Overflow,
    OverflowKind,
    PermissionOutcome,
    PermissionReply,
    PermissionRequest,
    ResourceLink,
    Text,
    TextResource,
    TokenUsage,
    TurnResult,
)

# --- facade -> core ----------------------------------------------------------------------------


def observer_answer(reply: object) -> tuple[str, str, str, str] | None:
    """`on_permission`'s answer as the core reads it: ("reply", outcome, option id, option kind)
    or ("outcome", decision, option id, reason); None abstains."""
    if reply is None:
        return None
    if isinstance(reply, PermissionReply):
        return ("reply", reply.outcome, reply.option_id, reply.option_kind)
    if isinstance(reply, PermissionOutcome):
        return ("outcome", reply.decision.value, reply.option_id or "", reply.reason or "")
    raise TypeError(
        "on_permission must return a PermissionReply, a PermissionOutcome or None "
        f"(got {type(reply).__name__})"
    )


def permission_preview(on_permission: Any, deferrable: bool) -> Any:
    """What the core calls with each `PermissionRequest` preview: ``on_permission``'s answer as
    `observer_answer` reads it; with ``deferrable`` (the asyncio client) an awaitable answer is
    handed back as it is (the core waits for it while reading goes on). None without one."""
    if on_permission is None:
        return None
    asked = on_permission
    if deferrable:
        import inspect  # the asyncio facade's import (inspect loads ~40 modules)

    def preview(request: PermissionRequest) -> Any:
        reply = asked(request)
        if deferrable and inspect.isawaitable(reply):
            return reply  # the core waits for it while reading goes on
        return observer_answer(reply)

    return preview


def content_tuple(block: ContentBlock) -> tuple[Any, ...]:
    match block:
        case Text(text=text):
            return ("text", text)
        case Image(mime_type=mime, data=data, uri=uri):
            return ("image", mime, data, uri)
        case Audio(mime_type=mime, data=data, uri=uri):
            return ("audio", mime, data, uri)
        case TextResource(uri=uri, text=text, mime_type=mime):
            return ("resource_text", uri, text, mime)
        case BlobResource(uri=uri, blob=blob, mime_type=mime):
            return ("resource_blob", uri, blob, mime)
        case ResourceLink(
            uri=uri, name=name, mime_type=mime, title=title, description=desc, size=size
        ):
            return ("resource_link", uri, name, mime, title, desc, size)
    raise TypeError(f"not a content block: {block!r}")


def content_tuples(content: str | Iterable[Any]) -> list[tuple[Any, ...]]:
    """A prompt's blocks as the core's tuples: `str` is one text block; typed model blocks (any
    object with ``to_json()``) are written as they encode themselves."""
    if isinstance(content, str):
        return [("text", content)]
    if isinstance(content, (bytes, bytearray, Mapping)) or not isinstance(content, Iterable):
        # A dict would iterate its keys: say what a prompt is instead.
        raise TypeError(
            "the prompt must be a str or a sequence of content blocks (acp_fast.Text, Image, "
            f"...; or acp_fast.model blocks), not {type(content).__name__}"
        )
    blocks: list[tuple[Any, ...]] = []
    for block in content:
        if isinstance(block, str):
            blocks.append(("text", block))
            continue
        to_json = getattr(block, "to_json", None)
        if to_json is not None and not isinstance(block, Text):
            blocks.append(("raw", json.dumps(to_json(), separators=(",", ":"), ensure_ascii=False)))
        else:
            blocks.append(content_tuple(block))
    return blocks


def mcp_tuple(server: Any) -> tuple[Any, ...]:
    """`acp.McpServer` (stdio) or a typed `acp_fast.model` server (`McpServerStdio`,
    `McpServerHttp`, `McpServerSse`) as the core's tuple."""
    if isinstance(server, McpServer):
        return (
            "stdio",
            server.name,
            server.command,
            list(server.args),
            [(e.name, e.value) for e in server.env],
        )
    from . import model  # loaded only for typed servers

    # The model's tagged structs keep their tag ("http", "sse") in the class, not in a field.
    if isinstance(server, (model.McpServerHttp, model.McpServerSse)):
        kind = "http" if isinstance(server, model.McpServerHttp) else "sse"
        headers = [(h.name, h.value) for h in server.headers]
        return (kind, server.name, server.url, headers)
    if isinstance(server, model.McpServerStdio):
        env = [(e.name, e.value) for e in server.env]
        return ("stdio", server.name, server.command, list(server.args), env)
    # Any object shaped like one (``type`` "http"/"sse" with a url, or a stdio command).
    shape = getattr(server, "type", None)
    if shape in ("http", "sse") and hasattr(server, "url"):
        headers = [(h.name, h.value) for h in getattr(server, "headers", ()) or ()]
        return (shape, server.name, server.url, headers)
    if hasattr(server, "command") and hasattr(server, "name"):
        env = [(e.name, e.value) for e in getattr(server, "env", ()) or ()]
        return ("stdio", server.name, server.command, list(getattr(server, "args", ())), env)
    raise TypeError(
        "mcp_servers must hold acp_fast.McpServer or acp_fast.model.McpServerStdio, "
        f"McpServerHttp or McpServerSse items (got {type(server).__name__})"
    )


def mcp_list(servers: object, name: str) -> list[tuple[Any, ...]]:
    if isinstance(servers, (str, bytes, McpServer)) or not isinstance(servers, Iterable):
        raise TypeError(f"{name} must be a sequence of MCP servers (got {type(servers).__name__})")
    return [mcp_tuple(s) for s in servers]


# --- core -> facade ----------------------------------------------------------------------------


def decode_list(raw: str | None, kind: str) -> tuple[Any, ...] | None:
    """A JSON array of the agent's as typed `acp_fast.model` objects (lenient: what real agents
    send must not fail a call); items that cannot be read at all are left out."""
    if raw is None:
        return None
    value = json.loads(raw)
    if not isinstance(value, list):
        return ()
    from . import model

    cls = getattr(model, kind)
    decoded = []
    for item in value:
        try:
            decoded.append(cls.from_json(item, strict=False))
        except model.ProtocolDecodeError:
            continue
    return tuple(decoded)


def turn_result(payload: Any, *, typed: bool = True) -> TurnResult:
    """The core's `Turn` record as a `TurnResult`; with ``typed`` False the record of the turn
    (tool calls, plan, commands, usage) is left out rather than decoded."""
    response, stop_reason, overflow = payload.response, payload.stop_reason, payload.overflow
    session_id, tool_calls, plan = payload.session_id, payload.tool_calls, payload.plan
    commands, usage = payload.available_commands, payload.usage
    current_mode_id = payload.current_mode_id
    notices, compactions, tokens = payload.notices, payload.compactions, payload.prompt_usage
    record = None
    if overflow is not None:
        kind, admitted_bytes, admitted_segments, withheld = overflow
        record = Overflow(OverflowKind(kind), admitted_bytes, admitted_segments, withheld)
    typed_usage = None
    calls: tuple[Any, ...] = ()
    if not typed:
        tool_calls, plan, commands, usage = [], None, None, None
        notices, compactions, tokens = [], [], None
    # The agent's values, nested as deep as it liked: deeper than the bound reads as null.
    tool_calls = [_json.prune(call) for call in tool_calls or ()]
    plan, commands, usage = (None if v is None else _json.prune(v) for v in (plan, commands, usage))
    if tool_calls:
        calls = _tool_calls(tool_calls)
    if usage is not None:
        from . import model

        try:
            typed_usage = model.UsageUpdate.from_json(json.loads(usage), strict=False)
        except model.ProtocolDecodeError:
            typed_usage = None
    return TurnResult(
        response=response,
        stop_reason=stop_reason,
        overflow=record,
        session_id=session_id,
        tool_calls=calls,
        plan=decode_list(plan, "PlanEntry"),
        available_commands=decode_list(commands, "AvailableCommand"),
        current_mode_id=current_mode_id or None,
        usage=typed_usage,
        notices=_decode_texts(notices, "Notice"),
        compactions=_decode_texts(compactions, "CompactionUpdate"),
        tokens=token_usage(tokens),
    )


def _tool_calls(texts: list[str]) -> tuple[Any, ...]:
    """The turn's tool calls as ``model.ToolCall`` (leniently; unreadable ones left out). ACP
    v2 announces a call by its first upsert, which may carry no title (the schema: "a new tool
    call starts without a title"); v1's class requires one, so it reads as "" rather than
    losing the call."""
    from . import model

    decoded = []
    for text in texts:
        value = json.loads(text)
        if isinstance(value, dict) and not isinstance(value.get("title"), str):
            value["title"] = ""
        try:
            decoded.append(model.ToolCall.from_json(value, strict=False))
        except model.ProtocolDecodeError:
            continue
    return tuple(decoded)


def _decode_texts(texts: list[str], kind: str) -> tuple[Any, ...]:
    """JSON object texts of the agent's as typed model objects (leniently; unreadable ones
    left out), each pruned to the depth bound first."""
    if not texts:
        return ()
    return decode_list("[" + ",".join(_json.prune(text) for text in texts) + "]", kind) or ()


_U64 = (1 << 64) - 1
_TOKEN_FIELDS = (
    ("total_tokens", "totalTokens"),
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("thought_tokens", "thoughtTokens"),
    ("cached_read_tokens", "cachedReadTokens"),
    ("cached_write_tokens", "cachedWriteTokens"),
)


def token_usage(raw: str | None) -> TokenUsage | None:
    """The prompt result's ``usage`` object (JSON text) as `TokenUsage`: each count an int in
    the schema's uint64 range or None (a bool, a float, a string, a negative or huge number
    from a hostile agent reads as None rather than failing the turn)."""
    if raw is None:
        return None
    value = json.loads(_json.prune(raw))
    if not isinstance(value, dict):
        return None

    def count(key: str) -> int | None:
        item = value.get(key)
        if type(item) is int and 0 <= item <= _U64:
            return item
        return None

    meta = value.get("_meta")
    return TokenUsage(
        **{name: count(wire) for name, wire in _TOKEN_FIELDS},
        meta=meta if isinstance(meta, dict) else None,
    )


def session_infos(raw: list[str]) -> tuple[Any, ...]:
    """``session/list``'s entries (JSON texts) as ``acp_fast.model.SessionInfo``."""
    from . import model

    return tuple(model.SessionInfo.from_json(json.loads(item), strict=False) for item in raw)


def initialize(info: Any) -> Initialize:
    """The core's record of the ``initialize`` answer (None before `start`) as `Initialize`."""
    if info is None:
        return Initialize()
    methods, agent_info, raw = info.auth_methods, info.agent_info, info.raw
    from . import model

    raw_object = json.loads(raw)
    capabilities = raw_object.get("agentCapabilities") if isinstance(raw_object, dict) else None
    if not isinstance(capabilities, dict):
        capabilities = {}
    return Initialize(
        protocol_version=info.protocol_version,
        load_session=info.load_session,
        prompt_image=info.prompt_image,
        prompt_audio=info.prompt_audio,
        prompt_embedded_content=info.prompt_embedded_content,
        auth_methods=tuple(AuthMethod(*m) for m in methods),
        agent_info=None if agent_info is None else json.loads(agent_info),
        raw=raw_object,
        agent_capabilities=model.AgentCapabilities.from_json(capabilities, strict=False),
    )

"""What the facade hands to the Rust core, checked and converted: the option object
(`_CoreOptions`), MCP servers and content blocks as the core's tuples, observer answers, and the
checks that name a wrong option (first-use.md §1)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._errors import InvalidLimits
from ._types import (
    Audio,
    BlobResource,
    ContentBlock,
    Image,
    McpServer,
    PermissionOutcome,
    PermissionPolicy,
    PermissionReply,
    ResourceLink,
    Text,
    TextResource,
    TransferLimits,
)


def _observer_answer(reply: object) -> tuple[str, str, str, str] | None:
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


@dataclass(frozen=True)
class _CoreOptions:
    """Everything `_core.CoreClient` reads, by name; it validates each value itself, so every
    limit's message lives in one place (the Rust binding)."""

    command: str
    args: list[str]
    message_bytes: object
    transfer_limits: TransferLimits
    transport_epoch: object
    cwd: str | None
    env: list[tuple[str, str]] | None
    client_info: tuple[str, str, str]
    mcp_servers: list[tuple[Any, ...]]
    permission_policy: PermissionPolicy
    on_update: Any
    permission_preview: Any
    permission_commit: Any
    on_sent: Any
    on_received: Any
    fold: Any
    stderr: str
    stderr_tail_bytes: object
    agent_id: str
    cancel_grace: float
    #: None (advertise nothing), else `_host.capability_tuple`'s tuple (host.md §1).
    capabilities: tuple[Any, ...] | None = None
    on_activity: Any = None
    #: A missing `on_update` / `on_permission_commit` fails the call (the seed's audit rule).
    durable: bool = False


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


def _mcp_list(servers: object, name: str) -> list[tuple[Any, ...]]:
    if isinstance(servers, (str, bytes, McpServer)) or not isinstance(servers, Iterable):
        raise TypeError(f"{name} must be a sequence of MCP servers (got {type(servers).__name__})")
    return [mcp_tuple(s) for s in servers]


def _check_type(value: object, expected: type | tuple[type, ...], name: str, what: str) -> None:
    """TypeError naming the option and the type expected (first-use.md §1)."""
    if not isinstance(value, expected):
        raise TypeError(f"{name} must be {what} (got {type(value).__name__} {value!r})")


def _journal_epoch(observer: object) -> int | None:
    """When `observer` is a journal: the epoch after every epoch it holds (what the CLI does),
    so appending runs never collide on (epoch, sequence). None for any other observer."""
    module = sys.modules.get("acp_fast.journal.observer")  # not loaded: not a journal
    if module is None or not isinstance(observer, module._Journal):
        return None
    writer = getattr(observer, "_writer", None)
    seen: list[int] = [
        observer.last_transport_epoch,
        observer.transport_epoch or 0,
        getattr(writer, "last_epoch", 0) or 0,
    ]
    epoch = max(seen) + 1
    if epoch > 2**64 - 1:  # a journal file is input: its epochs may be anything
        raise InvalidLimits(
            f"the journal {getattr(observer, 'path', '')!r} already holds epoch 2**64 - 1, so "
            "no later epoch exists: pass transport_epoch= yourself or start a new journal"
        )
    return epoch

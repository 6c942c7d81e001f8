"""acp-fast: host coding agents over the Agent Client Protocol, with a Rust core.

Start an agent in its own process group, open a session, send prompts, see every update it
streams (numbered, in order, exactly as sent), answer its permission requests, cap everything
it sends, and stop it and everything it started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _core
from ._client import Client
from ._core import Update
from ._elicitation import ElicitationField, ElicitationReply, ElicitationRequest
from ._errors import (
    AcpError,
    AgentProtocolError,
    AgentTransportFailed,
    CapabilityError,
    CapacityOverflow,
    ConnectError,
    InvalidLimits,
    MissingDurableObserver,
    ReaderMessageCapacityExceeded,
    RequestCapacityExceeded,
    TurnTimeout,
    UpdateCapacityExceeded,
    UpdateCountCapacityExceeded,
)
from ._options import ClientInfo, Observer
from ._session import Session
from ._spawn_args import demo_agent_command
from ._types import (
    DEFAULT_READER_LIMITS,
    DEFAULT_TRANSFER_LIMITS,
    TOOL_KINDS,
    Audio,
    AuthMethod,
    BlobResource,
    ClientActivity,
    ClientCapabilityConfig,
    ClientMethod,
    ContentBlock,
    ElicitationRule,
    EnvVariable,
    Image,
    Initialize,
    McpServer,
    Mode,
    ModelOption,
    Models,
    Modes,
    Overflow,
    OverflowKind,
    PermissionDecision,
    PermissionOption,
    PermissionOutcome,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    PermissionRule,
    PromptResult,
    ReaderLimits,
    ReaderStatus,
    ResourceLink,
    Text,
    TextResource,
    TokenUsage,
    TransferLimits,
    TurnResult,
    UpdateKind,
)

__version__: str = _core.__version__

if TYPE_CHECKING:
    from ._agent_spec import AgentSpec
    from ._async import AsyncClient, AsyncSession, Updates
    from .pool import AsyncPool, Pool, PoolStats

# The asyncio client is loaded when first named: importing asyncio took half of `import
# acp_fast` (80 of 160 ms), paid by every blocking host and every CLI run.
_ASYNC_NAMES = frozenset({"AsyncClient", "AsyncSession", "Updates"})


# The warm pools (acp_fast.pool) are loaded when first named, too.
_POOL_NAMES = frozenset({"Pool", "AsyncPool", "PoolStats"})


def __getattr__(name: str) -> object:
    if name == "AgentSpec":  # loaded when first named (acp_fast.fleet's spec of an agent)
        from ._agent_spec import AgentSpec

        globals()[name] = AgentSpec
        return AgentSpec
    if name in _POOL_NAMES:
        from . import pool

        value = getattr(pool, name)
        globals()[name] = value
        return value
    if name in _ASYNC_NAMES:
        from . import _async

        value = getattr(_async, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'acp_fast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _ASYNC_NAMES | _POOL_NAMES | {"AgentSpec"})


__all__ = [
    "DEFAULT_READER_LIMITS",
    "DEFAULT_TRANSFER_LIMITS",
    "TOOL_KINDS",
    "AcpError",
    "AgentProtocolError",
    "AgentSpec",
    "AgentTransportFailed",
    "AsyncClient",
    "AsyncPool",
    "AsyncSession",
    "Audio",
    "AuthMethod",
    "BlobResource",
    "CapabilityError",
    "CapacityOverflow",
    "Client",
    "ClientActivity",
    "ClientCapabilityConfig",
    "ClientInfo",
    "ClientMethod",
    "ConnectError",
    "ContentBlock",
    "ElicitationField",
    "ElicitationReply",
    "ElicitationRequest",
    "ElicitationRule",
    "EnvVariable",
    "Image",
    "Initialize",
    "InvalidLimits",
    "McpServer",
    "MissingDurableObserver",
    "Mode",
    "ModelOption",
    "Models",
    "Modes",
    "Observer",
    "Overflow",
    "OverflowKind",
    "PermissionDecision",
    "PermissionOption",
    "PermissionOutcome",
    "PermissionPolicy",
    "PermissionReply",
    "PermissionRequest",
    "PermissionRule",
    "Pool",
    "PoolStats",
    "PromptResult",
    "ReaderLimits",
    "ReaderMessageCapacityExceeded",
    "ReaderStatus",
    "RequestCapacityExceeded",
    "ResourceLink",
    "Session",
    "Text",
    "TextResource",
    "TokenUsage",
    "TransferLimits",
    "TurnResult",
    "TurnTimeout",
    "Update",
    "UpdateCapacityExceeded",
    "UpdateCountCapacityExceeded",
    "UpdateKind",
    "Updates",
    "__version__",
    "demo_agent_command",
]

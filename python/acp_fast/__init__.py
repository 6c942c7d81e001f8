"""acp-fast: host coding agents over the Agent Client Protocol, with a Rust core.

Start an agent in its own process group, open a session, send prompts, see every update it
streams (numbered, in order, exactly as sent), answer its permission requests, cap everything
it sends, and stop it and everything it started.
"""

from __future__ import annotations

from . import _core
from ._async import AsyncClient, AsyncSession, Updates
from ._client import Client
from ._core import Update
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
from ._session import Session
from ._types import (
    DEFAULT_READER_LIMITS,
    Audio,
    AuthMethod,
    BlobResource,
    ClientInfo,
    ContentBlock,
    EnvVariable,
    Image,
    Initialize,
    McpServer,
    Mode,
    ModelOption,
    Models,
    Modes,
    Observer,
    Overflow,
    OverflowKind,
    PermissionOption,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    PromptResult,
    ReaderLimits,
    ReaderStatus,
    ResourceLink,
    Text,
    TextResource,
    TransferLimits,
    TurnResult,
    UpdateKind,
)

__version__: str = _core.__version__

__all__ = [
    "DEFAULT_READER_LIMITS",
    "AcpError",
    "AgentProtocolError",
    "AgentTransportFailed",
    "AsyncClient",
    "AsyncSession",
    "Audio",
    "AuthMethod",
    "BlobResource",
    "CapabilityError",
    "CapacityOverflow",
    "Client",
    "ClientInfo",
    "ConnectError",
    "ContentBlock",
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
    "PermissionOption",
    "PermissionPolicy",
    "PermissionReply",
    "PermissionRequest",
    "PromptResult",
    "ReaderLimits",
    "ReaderMessageCapacityExceeded",
    "ReaderStatus",
    "RequestCapacityExceeded",
    "ResourceLink",
    "Session",
    "Text",
    "TextResource",
    "TransferLimits",
    "TurnResult",
    "TurnTimeout",
    "Update",
    "UpdateCapacityExceeded",
    "UpdateCountCapacityExceeded",
    "UpdateKind",
    "Updates",
    "__version__",
]

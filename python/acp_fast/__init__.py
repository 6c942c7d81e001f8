"""acp-fast: host coding agents over the Agent Client Protocol, with a Rust core.

Start an agent in its own process group, open a session, send prompts, see every update it
streams (numbered, in order, exactly as sent), answer its permission requests, cap everything
it sends, and stop it and everything it started.
"""

from __future__ import annotations

from ._client import Client
from ._core import Update
from ._errors import (
    AcpError,
    AgentProtocolError,
    AgentTransportFailed,
    CapacityOverflow,
    InvalidLimits,
    MissingDurableObserver,
    ReaderMessageCapacityExceeded,
    RequestCapacityExceeded,
    UpdateCapacityExceeded,
    UpdateCountCapacityExceeded,
)
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
    UpdateKind,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_READER_LIMITS",
    "AcpError",
    "AgentProtocolError",
    "AgentTransportFailed",
    "Audio",
    "AuthMethod",
    "BlobResource",
    "CapacityOverflow",
    "Client",
    "ClientInfo",
    "ContentBlock",
    "EnvVariable",
    "Image",
    "Initialize",
    "InvalidLimits",
    "McpServer",
    "MissingDurableObserver",
    "Mode",
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
    "Text",
    "TextResource",
    "TransferLimits",
    "Update",
    "UpdateCapacityExceeded",
    "UpdateCountCapacityExceeded",
    "UpdateKind",
    "__version__",
]

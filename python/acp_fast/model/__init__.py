"""``acp_fast.model``: the typed ACP v1 model, its codec and the session fold.

Decoding is opt-in. ``decode_update(line)`` turns a ``session/update`` line into a typed
update; ``SessionState.apply`` folds updates into session state (design/model.md).
"""

from __future__ import annotations

from ._base import (
    OMITTED,
    DecodeErrorKind,
    Json,
    Nullable,
    Omitted,
    Opt,
    ProtocolDecodeError,
)
from ._codec import decode_host_params, replace, session_update_from_json
from ._elicitation import (
    ElicitationAction,
    ElicitationCreateParams,
    ElicitationCreateResult,
    ElicitationFormParams,
    ElicitationRequestScope,
    ElicitationSessionScope,
    ElicitationUrlParams,
)
from ._encode import session_update_to_json
from ._fold import (
    DuplicateToolCall,
    FoldIssue,
    InvalidTimestamp,
    Message,
    Seq,
    SessionState,
    SessionUpdateFoldError,
    UnknownMode,
    UnknownToolCall,
    fold_updates,
    session_update_apply,
    session_update_fold,
)
from ._generated import *  # noqa: F403 (every schema class, listed in _generated.__all__)
from ._generated import __all__ as _generated_all
from ._rpc import (
    METHODS,
    Notification,
    Request,
    Response,
    RpcError,
    RpcMessage,
    decode_message,
    decode_permission_request,
    decode_update,
)
from ._walk import UnknownUpdate, parse_json, stringify_json

apply = session_update_apply

__all__ = [
    "METHODS",
    "OMITTED",
    "DecodeErrorKind",
    "DuplicateToolCall",
    "ElicitationAction",
    "ElicitationCreateParams",
    "ElicitationCreateResult",
    "ElicitationFormParams",
    "ElicitationRequestScope",
    "ElicitationSessionScope",
    "ElicitationUrlParams",
    "FoldIssue",
    "InvalidTimestamp",
    "Json",
    "Message",
    "Notification",
    "Nullable",
    "Omitted",
    "Opt",
    "ProtocolDecodeError",
    "Request",
    "Response",
    "RpcError",
    "RpcMessage",
    "Seq",
    "SessionState",
    "SessionUpdateFoldError",
    "UnknownMode",
    "UnknownToolCall",
    "UnknownUpdate",
    "apply",
    "decode_host_params",
    "decode_message",
    "decode_permission_request",
    "decode_update",
    "fold_updates",
    "parse_json",
    "replace",
    "session_update_apply",
    "session_update_from_json",
    "session_update_fold",
    "session_update_to_json",
    "stringify_json",
    *_generated_all,
]

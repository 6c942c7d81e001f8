"""JSON-RPC envelopes and the entry points the client calls (design/model.md §4)."""

from __future__ import annotations

from typing import Any

import msgspec

from . import _generated as g
from ._base import OMITTED, DecodeErrorKind, Json, Opt, ProtocolDecodeError
from ._codec import _decode_spec, fast_decoder, session_update_from_json
from ._elicitation import ElicitationCreateResult
from ._walk import UnknownUpdate, _dec, parse_json_bounded, shallow

K = DecodeErrorKind

__all__ = [
    "METHODS",
    "Notification",
    "Request",
    "Response",
    "RpcError",
    "RpcMessage",
    "decode_message",
    "decode_permission_request",
    "decode_update",
]


class RpcError(msgspec.Struct, frozen=True, kw_only=True):
    code: int
    message: str
    data: Opt[Json] = OMITTED


class Request(msgspec.Struct, frozen=True, kw_only=True):
    id: int | str | None
    method: str
    params: Any = OMITTED  # a model class for known methods, else the JSON as received


class Notification(msgspec.Struct, frozen=True, kw_only=True):
    method: str
    params: Any = OMITTED


class Response(msgspec.Struct, frozen=True, kw_only=True):
    id: int | str | None
    result: Any = OMITTED  # typed only when decode_message is told the request's method
    error: RpcError | None = None


RpcMessage = Request | Notification | Response

# method -> (params class, result class or None for a notification); from meta.json.
# A str names a union decoded by the reference walker (no single class to hand msgspec).
METHODS: dict[str, tuple[type[Any] | str | None, type[Any] | None]] = {
    "initialize": (g.InitializeParams, g.InitializeResult),
    "authenticate": (g.AuthenticateParams, g.AuthenticateResult),
    "logout": (g.LogoutParams, g.LogoutResult),
    "session/new": (g.NewSessionParams, g.NewSessionResult),
    "session/load": (g.LoadSessionParams, g.LoadSessionResult),
    "session/resume": (g.ResumeSessionParams, g.ResumeSessionResult),
    "session/list": (g.ListSessionsParams, g.ListSessionsResult),
    "session/close": (g.CloseSessionParams, g.CloseSessionResult),
    "session/delete": (g.DeleteSessionParams, g.DeleteSessionResult),
    "session/set_mode": (g.SetSessionModeParams, g.SetSessionModeResult),
    "session/set_config_option": (
        g.SetSessionConfigOptionParams,
        g.SetSessionConfigOptionResult,
    ),
    "session/prompt": (g.PromptParams, g.PromptResult),
    "session/cancel": (g.CancelParams, None),
    "session/update": (g.SessionNotification, None),
    "session/request_permission": (g.RequestPermissionRequest, g.RequestPermissionResponse),
    "fs/read_text_file": (g.ReadTextFileParams, g.ReadTextFileResult),
    "fs/write_text_file": (g.WriteTextFileParams, g.WriteTextFileResult),
    "terminal/create": (g.TerminalCreateParams, g.TerminalCreateResult),
    "terminal/output": (g.TerminalOutputParams, g.TerminalOutputResult),
    "terminal/release": (g.TerminalReleaseParams, g.TerminalReleaseResult),
    "terminal/wait_for_exit": (g.TerminalWaitForExitParams, g.TerminalWaitForExitResult),
    "terminal/kill": (g.TerminalKillParams, g.TerminalKillResult),
    "elicitation/create": ("ElicitationCreateParams", ElicitationCreateResult),
    "elicitation/complete": (g.ElicitationCompleteParams, None),
    "$/cancel_request": (g.CancelRequestParams, None),
}

_REQUEST_KEYS = frozenset(("jsonrpc", "id", "method", "params"))
_NOTIFICATION_KEYS = frozenset(("jsonrpc", "method", "params"))
_RESPONSE_KEYS = frozenset(("jsonrpc", "id", "result", "error"))


def _typed(cls: type[Any] | str | None, value: Any, path: str, strict: bool) -> Any:
    if cls is None:
        return value
    if isinstance(cls, str):
        return _dec(("u", cls), value, path, strict)
    return _decode_spec(cls, ("c", cls), value, strict, path)


def decode_message(
    line: str | bytes | dict[str, Any], *, strict: bool = True, request_method: str | None = None
) -> Request | Notification | Response:
    """One JSON-RPC message, params typed by the ACP method table.

    Methods starting with ``_`` are extensions: their params stay JSON even when strict.
    """
    obj = parse_json_bounded(line, strict) if isinstance(line, (str, bytes)) else line
    if type(obj) is not dict:
        raise ProtocolDecodeError(K.EXPECTED_OBJECT, "$")
    if strict:
        if "jsonrpc" not in obj:
            raise ProtocolDecodeError(K.MISSING_FIELD, "$.jsonrpc")
        if obj["jsonrpc"] != "2.0":
            raise ProtocolDecodeError(K.INVALID_FIELD, "$.jsonrpc", 'must be "2.0"')
    if "method" in obj:
        method = obj["method"]
        if type(method) is not str:
            raise ProtocolDecodeError(K.EXPECTED_STRING, "$.method")
        is_request = "id" in obj
        if strict:
            known = _REQUEST_KEYS if is_request else _NOTIFICATION_KEYS
            for key in obj:
                if key not in known:
                    raise ProtocolDecodeError(K.UNKNOWN_FIELD, f"$.{key}")
        entry = METHODS.get(method)
        params = obj.get("params", OMITTED)
        if entry is None:
            if strict and not method.startswith("_"):
                raise ProtocolDecodeError(K.INVALID_DISCRIMINATOR, "$.method", None, method)
        elif entry[0] is not None:
            if params is OMITTED:
                raise ProtocolDecodeError(K.MISSING_FIELD, "$.params")
            params = _typed(entry[0], params, "$.params", strict)
        if is_request:
            rid = _dec(("rid",), obj["id"], "$.id", strict)
            return Request(id=rid, method=method, params=params)
        return Notification(method=method, params=params)
    if "id" not in obj:
        raise ProtocolDecodeError(K.MISSING_FIELD, "$.id")
    rid = _dec(("rid",), obj["id"], "$.id", strict)
    if strict:
        for key in obj:
            if key not in _RESPONSE_KEYS:
                raise ProtocolDecodeError(K.UNKNOWN_FIELD, f"$.{key}")
    has_result, has_error = "result" in obj, "error" in obj
    if has_result and has_error:
        raise ProtocolDecodeError(K.INVALID_FIELD, "$", "a response has result or error, not both")
    if has_error:
        return Response(id=rid, error=_rpc_error(obj["error"], strict))
    if not has_result:
        raise ProtocolDecodeError(K.MISSING_FIELD, "$.result")
    result = obj["result"]
    if request_method is not None:
        entry = METHODS.get(request_method)
        if entry is not None and entry[1] is not None:
            result = _typed(entry[1], result, "$.result", strict)
    return Response(id=rid, result=result)


def _rpc_error(v: Any, strict: bool) -> RpcError:
    if type(v) is not dict:
        raise ProtocolDecodeError(K.EXPECTED_OBJECT, "$.error")
    for key in ("code", "message"):
        if key not in v:
            raise ProtocolDecodeError(K.MISSING_FIELD, f"$.error.{key}")
    code = _dec(("i", -(2**31), 2**31 - 1), v["code"], "$.error.code", strict)
    message = _dec(("s",), v["message"], "$.error.message", strict)
    if strict:
        for key in v:
            if key not in ("code", "message", "data"):
                raise ProtocolDecodeError(K.UNKNOWN_FIELD, f"$.error.{key}")
    return RpcError(code=code, message=message, data=v.get("data", OMITTED))


class _UpdateLine(msgspec.Struct):
    params: g.SessionNotification


class _PermissionLine(msgspec.Struct):
    params: g.RequestPermissionRequest


def _params_of(line: str | bytes, strict: bool) -> Any:
    obj = parse_json_bounded(line, strict)
    if type(obj) is not dict:
        raise ProtocolDecodeError(K.EXPECTED_OBJECT, "$")
    if "params" not in obj:
        raise ProtocolDecodeError(K.MISSING_FIELD, "$.params")
    return obj["params"]


def decode_update(
    value: str | bytes | dict[str, Any], *, strict: bool = True
) -> g.SessionUpdate | UnknownUpdate:
    """The typed update of a ``session/update`` notification.

    ``value`` is the whole line (str/bytes) or its ``params`` object. Error paths are rooted at
    the params (``$.update.content[2].type``), as ``acp.Update.decode()`` promises.
    """
    if isinstance(value, (str, bytes)):
        try:
            if shallow(value):
                out: g.SessionUpdate = fast_decoder(_UpdateLine).decode(value).params.update
                return out
        except msgspec.DecodeError:
            pass
        value = _params_of(value, strict)
    note = _typed(g.SessionNotification, value, "$", strict)
    update: g.SessionUpdate | UnknownUpdate = note.update
    return update


def decode_permission_request(
    value: str | bytes | dict[str, Any], *, strict: bool = True
) -> g.RequestPermissionRequest:
    """The typed params of a ``session/request_permission`` request (line or params)."""
    if isinstance(value, (str, bytes)):
        try:
            if shallow(value):
                out: g.RequestPermissionRequest = fast_decoder(_PermissionLine).decode(value).params
                return out
        except msgspec.DecodeError:
            pass
        value = _params_of(value, strict)
    req: g.RequestPermissionRequest = _typed(g.RequestPermissionRequest, value, "$", strict)
    return req


# Re-exported for callers that decode a bare update object.
session_update_from_json = session_update_from_json

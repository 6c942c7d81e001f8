"""Elicitation: ``elicitation/create`` params and result (seed 003's shapes on the v1 wire).

Hand-written rather than generated: the schema flattens a mode tag, a mode body and a scope
(session or request) into one object, and makes the result's ``content`` depend on ``action``.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from . import _codec as c
from . import _encode as e
from . import _walk as w
from ._base import (
    OMITTED,
    Custom,
    DecodeErrorKind,
    FieldSpec,
    JsonObject,
    Nullable,
    Opt,
    ProtocolDecodeError,
)
from ._walk import STRICT, _check_unknown, _dec, _dec_fields, _err, _tag_of

K = DecodeErrorKind

__all__ = [
    "ElicitationAction",
    "ElicitationCreateParams",
    "ElicitationCreateResult",
    "ElicitationFormParams",
    "ElicitationRequestScope",
    "ElicitationSessionScope",
    "ElicitationUrlParams",
]


class ElicitationAction(enum.StrEnum):
    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


class ElicitationSessionScope(msgspec.Struct, frozen=True, kw_only=True):
    """The elicitation belongs to a session (optionally a tool call): ``sessionId`` on the wire."""

    session_id: str
    tool_call_id: Nullable[str] = OMITTED


class ElicitationRequestScope(msgspec.Struct, frozen=True, kw_only=True):
    """The elicitation belongs to a request: ``requestId`` on the wire."""

    request_id: int | str | None


ElicitationScope = ElicitationSessionScope | ElicitationRequestScope


class ElicitationFormParams(Custom):
    """``elicitation/create`` in form mode: the client renders ``requested_schema``."""

    __slots__ = ("scope", "message", "requested_schema", "meta")  # noqa: RUF023 (wire order)
    scope: ElicitationScope
    message: str
    requested_schema: JsonObject
    meta: Nullable[JsonObject]

    def __init__(
        self,
        *,
        scope: ElicitationScope,
        message: str,
        requested_schema: JsonObject,
        meta: Nullable[JsonObject] = OMITTED,
    ) -> None:
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "requested_schema", requested_schema)
        object.__setattr__(self, "meta", meta)


class ElicitationUrlParams(Custom):
    """``elicitation/create`` in URL mode: the client sends the user to ``url``."""

    __slots__ = ("scope", "elicitation_id", "message", "url", "meta")  # noqa: RUF023
    scope: ElicitationScope
    elicitation_id: str
    message: str
    url: str
    meta: Nullable[JsonObject]

    def __init__(
        self,
        *,
        scope: ElicitationScope,
        elicitation_id: str,
        message: str,
        url: str,
        meta: Nullable[JsonObject] = OMITTED,
    ) -> None:
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "elicitation_id", elicitation_id)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "meta", meta)


ElicitationCreateParams = ElicitationFormParams | ElicitationUrlParams


class ElicitationCreateResult(Custom):
    """The client's answer to ``elicitation/create``; only ``accept`` may carry ``content``."""

    __slots__ = ("action", "content", "meta")
    action: ElicitationAction
    content: Nullable[dict[str, Any]]
    meta: Nullable[JsonObject]

    def __init__(
        self,
        *,
        action: ElicitationAction,
        content: Nullable[dict[str, Any]] = OMITTED,
        meta: Nullable[JsonObject] = OMITTED,
    ) -> None:
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "meta", meta)


# -- decoding ---------------------------------------------------------------------------------

_META = FieldSpec("meta", "_meta", ("o",), False, True, True, False, None)
_MESSAGE = FieldSpec("message", "message", ("s",), True, False, False, False, None)
_FORM = (FieldSpec("requested_schema", "requestedSchema", ("o",), True, False, False, False, None),)
_URL = (
    FieldSpec("elicitation_id", "elicitationId", ("s",), True, False, False, False, None),
    FieldSpec("url", "url", ("s",), True, False, False, False, None),
)
_SESSION = (
    FieldSpec("session_id", "sessionId", ("s",), True, False, False, False, None),
    FieldSpec("tool_call_id", "toolCallId", ("s",), False, True, True, False, None),
)
_CONTENT_VALUE_INT = ("i", -(2**63), 2**63 - 1)


def _scope(v: dict[str, Any], path: str, strict: int) -> tuple[ElicitationScope, set[str]]:
    has_session, has_request = "sessionId" in v, "requestId" in v
    if has_session and has_request and strict:
        raise _err(K.INVALID_FIELD, path, "a scope is a session or a request, not both")
    if has_session or not has_request:
        kw = _dec_fields(_SESSION, v, path, strict)
        return ElicitationSessionScope(**kw), {"sessionId", "toolCallId"}
    rid = _dec(("rid",), v["requestId"], f"{path}.requestId", strict)
    return ElicitationRequestScope(request_id=rid), {"requestId"}


def _dec_params(v: dict[str, Any], path: str, strict: int) -> ElicitationCreateParams:
    mode = _tag_of(v, "mode", path)
    if mode is None:
        raise _err(K.MISSING_FIELD, f"{path}.mode")
    if mode not in ("form", "url"):
        raise _err(K.INVALID_DISCRIMINATOR, f"{path}.mode", None, mode)
    body = _FORM if mode == "form" else _URL
    kw = _dec_fields((_MESSAGE, *body), v, path, strict)
    scope, scope_keys = _scope(v, path, strict)
    kw.update(_dec_fields((_META,), v, path, strict))
    if strict == STRICT:
        known = {"mode", "message", "_meta", *(f.wire for f in body), *scope_keys}
        _check_unknown(v, frozenset(known), path)
    if mode == "form":
        return ElicitationFormParams(scope=scope, **kw)
    return ElicitationUrlParams(scope=scope, **kw)


def _content_value(x: Any, path: str, strict: int) -> Any:
    if type(x) in (str, bool, float):
        return x
    if type(x) is int:
        return _dec(_CONTENT_VALUE_INT, x, path, strict)
    if type(x) is list:
        return [_dec(("s",), s, f"{path}[{i}]", strict) for i, s in enumerate(x)]
    raise _err(K.INVALID_FIELD, path, "a string, number, boolean or string array")


def _dec_result(v: dict[str, Any], path: str, strict: int) -> ElicitationCreateResult:
    action = _tag_of(v, "action", path)
    if action is None:
        raise _err(K.MISSING_FIELD, f"{path}.action")
    try:
        act = ElicitationAction(action)
    except ValueError:
        raise _err(K.INVALID_DISCRIMINATOR, f"{path}.action", None, action) from None
    content: Opt[dict[str, Any] | None] = OMITTED
    if "content" in v:
        raw = v["content"]
        if act is not ElicitationAction.ACCEPT:
            if strict:
                raise _err(K.INVALID_FIELD, f"{path}.content", "content only with accept")
        elif raw is None:
            content = None
        elif type(raw) is not dict:
            raise _err(K.EXPECTED_OBJECT, f"{path}.content")
        else:
            content = {k: _content_value(x, f"{path}.content.{k}", strict) for k, x in raw.items()}
    kw = _dec_fields((_META,), v, path, strict)
    if strict == STRICT:
        _check_unknown(v, frozenset(("action", "content", "_meta")), path)
    return ElicitationCreateResult(action=act, content=content, **kw)


# -- encoding ---------------------------------------------------------------------------------


def _scope_json(scope: ElicitationScope, out: dict[str, Any]) -> None:
    if type(scope) is ElicitationRequestScope:
        out["requestId"] = scope.request_id
        return
    assert type(scope) is ElicitationSessionScope
    out["sessionId"] = scope.session_id
    if scope.tool_call_id is not OMITTED:
        out["toolCallId"] = scope.tool_call_id


def _enc_form(o: ElicitationFormParams) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": "form", "message": o.message}
    out["requestedSchema"] = o.requested_schema
    _scope_json(o.scope, out)
    if o.meta is not OMITTED:
        out["_meta"] = o.meta
    return out


def _enc_url(o: ElicitationUrlParams) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": "url", "message": o.message}
    out["elicitationId"] = o.elicitation_id
    out["url"] = o.url
    _scope_json(o.scope, out)
    if o.meta is not OMITTED:
        out["_meta"] = o.meta
    return out


def _enc_result(o: ElicitationCreateResult) -> dict[str, Any]:
    if o.content is not OMITTED and o.action is not ElicitationAction.ACCEPT:
        # The wire has no place for it: fail instead of dropping it (seed 003).
        raise ProtocolDecodeError(K.INVALID_FIELD, "$.content", "content only with accept")
    out: dict[str, Any] = {"action": o.action.value}
    if o.content is not OMITTED:
        out["content"] = o.content
    if o.meta is not OMITTED:
        out["_meta"] = o.meta
    return out


def _hook(fn: Any) -> Any:
    def hook(v: Any) -> Any:
        if type(v) is not dict:
            raise _err(K.EXPECTED_OBJECT, "$")
        return fn(v, "$", True)

    return hook


def _dec_union_params(v: Any, path: str, strict: int) -> ElicitationCreateParams:
    if type(v) is not dict:
        raise _err(K.EXPECTED_OBJECT, path)
    return _dec_params(v, path, strict)


for _cls in (ElicitationFormParams, ElicitationUrlParams):
    w._SPECIAL[_cls] = _dec_params
    c._HOOKS[_cls] = _hook(_dec_params)
w._SPECIAL[ElicitationCreateResult] = _dec_result
c._HOOKS[ElicitationCreateResult] = _hook(_dec_result)
e._CUSTOM_ENCODERS[ElicitationFormParams] = _enc_form
e._CUSTOM_ENCODERS[ElicitationUrlParams] = _enc_url
e._CUSTOM_ENCODERS[ElicitationCreateResult] = _enc_result
w._EXTRA_UNIONS["ElicitationCreateParams"] = _dec_union_params

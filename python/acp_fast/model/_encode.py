"""Encoding: model objects to their wire JSON (design/model.md §4).

msgspec writes the Structs (tag first, fields in schema order, ``_meta`` last, OMITTED left
out); the few custom classes are flattened by the encoders below, through ``enc_hook``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from . import _generated as g
from ._base import OMITTED, FieldSpec, ProtocolDecodeError, codec
from ._walk import UnknownUpdate

__all__ = ["session_update_to_json", "to_builtins"]

_json_decode = msgspec.json.decode


def _wire_of_custom(obj: Any) -> Any:
    enc = _CUSTOM_ENCODERS.get(type(obj))
    if enc is None:
        raise TypeError(f"cannot encode {type(obj).__name__}")
    return enc(obj)


def to_builtins(obj: Any) -> Any:
    """The wire JSON of a model object: OMITTED -> key absent, None -> null, tag first."""
    # Through JSON text rather than to_builtins: arrays must come back as lists, like the input.
    try:
        return _json_decode(_ENCODER.encode(obj))
    except TypeError as e:
        if isinstance(e.__cause__, ProtocolDecodeError):
            raise e.__cause__ from None
        raise


_ENCODER = msgspec.json.Encoder(enc_hook=_wire_of_custom)


def _fields_json(obj: Any, specs: tuple[FieldSpec, ...], out: dict[str, Any]) -> None:
    for f in specs:
        v = getattr(obj, f.attr)
        if v is not OMITTED:
            out[f.wire] = v


def _enc_config_option(o: g.SessionConfigOption) -> dict[str, Any]:
    kind = o.kind
    out: dict[str, Any] = {"type": "select" if type(kind) is g.SessionConfigSelect else "boolean"}
    specs = g.SPECS[g.SessionConfigOption]
    _fields_json(o, specs[:-2], out)  # id, name, description, category
    _fields_json(kind, g.SPECS[type(kind)], out)
    if o.meta is not OMITTED:
        out["_meta"] = o.meta
    return out


def _enc_set_config(o: g.SetSessionConfigOptionParams) -> dict[str, Any]:
    out: dict[str, Any] = {"sessionId": o.session_id, "configId": o.config_id}
    if type(o.value) is bool:
        out["type"] = "boolean"
    out["value"] = o.value
    if o.meta is not OMITTED:
        out["_meta"] = o.meta
    return out


def _enc_permission(o: g.RequestPermissionRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"sessionId": o.session_id}
    if o.tool_call is not OMITTED:  # ACP v1's; a v2 request has its tool call in `subject`
        call = msgspec.to_builtins(o.tool_call, enc_hook=_wire_of_custom)
        del call["sessionUpdate"]  # the tag of the update variant; this use is untagged
        out["toolCall"] = call
    for name, wire in (("title", "title"), ("description", "description")):
        value = getattr(o, name)
        if value is not OMITTED:
            out[wire] = value
    if o.subject is not OMITTED:
        out["subject"] = o.subject
    out["options"] = o.options
    if o.meta is not OMITTED:
        out["_meta"] = o.meta
    return out


_CUSTOM_ENCODERS: dict[type[Any], Callable[[Any], Any]] = {
    g.SessionConfigOption: _enc_config_option,
    g.SetSessionConfigOptionParams: _enc_set_config,
    g.RequestPermissionRequest: _enc_permission,
}


def session_update_to_json(update: g.SessionUpdate | UnknownUpdate) -> dict[str, Any]:
    if type(update) is UnknownUpdate:
        return update.raw
    out: dict[str, Any] = to_builtins(update)
    return out


# The bases' `to_json` encodes through this module (see `_base.codec`).
codec.to_builtins = to_builtins

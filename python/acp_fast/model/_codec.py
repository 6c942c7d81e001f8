"""Decoding (design/model.md §2-4): the msgspec fast path and the entry points.

Every decode first tries msgspec straight into the public classes (strict, fast). When msgspec
rejects the value, or lenient decoding is asked for and msgspec rejected it, the pure-Python
walker (`_walk`) decodes the parsed JSON against the generated field table (``SPECS``): it is the
reference for what is accepted and the only source of error kinds and paths, so the reported
error never depends on msgspec's messages. msgspec must therefore never accept what the walker
rejects; the tests mutate valid messages to hold it to that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .. import _json
from . import _generated as g
from ._base import (
    B64,
    OMITTED,
    AbsPath,
    Base,
    Custom,
    Json,
    codec,
)
from ._walk import (
    STRICT_TYPES,
    T,
    UnknownUpdate,
    _dec,
    _dec_class,
    _dec_union,
    is_absolute,
    is_base64,
    parse_json_bounded,
)

__all__ = ["decode_as", "decode_host_params", "session_update_from_json"]


# -- the msgspec fast path ------------------------------------------------------------------


def _hook_abs(v: Any) -> str:
    if type(v) is str and is_absolute(v):
        return v
    raise ValueError("not an absolute path")


def _hook_b64(v: Any) -> str:
    if type(v) is str and is_base64(v):
        return v
    raise ValueError("not base64")


class _WireSelect(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="type",
    tag="select",
    rename={"current_value": "currentValue", "meta": "_meta"},
):
    """A select option as the wire flattens it; only the fast path uses it."""

    id: str
    name: str
    description: str | msgspec.UnsetType | None = OMITTED
    category: str | msgspec.UnsetType | None = OMITTED
    current_value: str
    options: tuple[g.SessionConfigSelectOption, ...]
    meta: dict[str, Any] | msgspec.UnsetType | None = OMITTED


class _WireGroupedSelect(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="type",
    tag="select",
    rename={"current_value": "currentValue", "meta": "_meta"},
):
    id: str
    name: str
    description: str | msgspec.UnsetType | None = OMITTED
    category: str | msgspec.UnsetType | None = OMITTED
    current_value: str
    options: tuple[g.SessionConfigSelectGroup, ...]
    meta: dict[str, Any] | msgspec.UnsetType | None = OMITTED


class _WireBoolean(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="type",
    tag="boolean",
    rename={"current_value": "currentValue", "meta": "_meta"},
):
    id: str
    name: str
    description: str | msgspec.UnsetType | None = OMITTED
    category: str | msgspec.UnsetType | None = OMITTED
    current_value: bool
    meta: dict[str, Any] | msgspec.UnsetType | None = OMITTED


_CATEGORIES = {c.value: c for c in g.SessionConfigOptionCategory}
_convert = msgspec.convert


def _v1_option(v: dict[str, Any]) -> dict[str, Any]:
    """ACP v2 spells a config option's id ``configId`` and a group's ``groupId``: read as v1's
    ``id`` and ``group``, so a host sees one ``SessionConfigOption`` in both versions."""
    out = {("id" if k == "configId" else k): x for k, x in v.items()}
    opts = out.get("options")
    if type(opts) is list:
        out["options"] = [
            {("group" if k == "groupId" else k): x for k, x in o.items()}
            if type(o) is dict and "groupId" in o and "group" not in o
            else o
            for o in opts
        ]
    return out


def _fast_config_option(v: Any) -> g.SessionConfigOption:
    """msgspec for the flattened option (the walker would cost ~10x); any doubt raises and the
    caller falls back to the walker for the exact error. One Struct per convert: msgspec
    caches a class's decoding plan but rebuilds a union's on every call."""
    if type(v) is dict and "configId" in v and "id" not in v:
        v = _v1_option(v)
    t = v.get("type") if type(v) is dict else None
    w: _WireSelect | _WireGroupedSelect | _WireBoolean
    kind: g.SessionConfigSelect | g.SessionConfigBoolean
    if t == "select":
        opts = v.get("options")
        grouped = type(opts) is list and bool(opts) and type(opts[0]) is dict and "group" in opts[0]
        sel: _WireSelect | _WireGroupedSelect = (
            _convert(v, _WireGroupedSelect) if grouped else _convert(v, _WireSelect)
        )
        kind = g.SessionConfigSelect(current_value=sel.current_value, options=sel.options)
        w = sel
    elif t == "boolean":
        flag: _WireBoolean = _convert(v, _WireBoolean)
        kind = g.SessionConfigBoolean(current_value=flag.current_value)
        w = flag
    else:
        raise ValueError("not a known config option type")
    cat = w.category
    return g.SessionConfigOption(
        id=w.id,
        name=w.name,
        description=w.description,
        category=_CATEGORIES.get(cat, cat) if type(cat) is str else cat,
        kind=kind,
        meta=w.meta,
    )


def _strict_union(name: str) -> Callable[[Any], Any]:
    return lambda v: _dec_union(name, v, "$", True)


def _strict_class(cls: type[Any]) -> Callable[[Any], Any]:
    return lambda v: _dec_class(cls, v, "$", True)


_HOOKS: dict[Any, Callable[[Any], Any]] = {
    AbsPath: _hook_abs,
    B64: _hook_b64,
    g.McpServer: _strict_union("McpServer"),
    g.AuthMethodUnion: _strict_union("AuthMethodUnion"),
    g.EmbeddedResourceResource: _strict_union("EmbeddedResourceResource"),
    g.SessionConfigSelectOptions: _strict_union("SessionConfigSelectOptions"),
    g.SessionConfigOption: _fast_config_option,
    g.SetSessionConfigOptionParams: _strict_class(g.SetSessionConfigOptionParams),
    g.RequestPermissionRequest: _strict_class(g.RequestPermissionRequest),
}


def _dec_hook(t: type[Any], v: Any) -> Any:
    hook = _HOOKS.get(t)
    if hook is None:
        raise NotImplementedError(t)
    return hook(v)


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def fast_decoder(t: Any) -> msgspec.json.Decoder[Any]:
    d = _DECODERS.get(t)
    if d is None:
        d = _DECODERS[t] = msgspec.json.Decoder(t, dec_hook=_dec_hook)
    return d


_TEXT = (str, bytes, bytearray, memoryview)


def decode_as(cls: type[T], value: Any, *, strict: bool = True, path: str = "$") -> T:
    """``cls.from_json``: str/bytes are parsed first; dicts are decoded as they are."""
    return _decode_spec(cls, ("c", cls), value, strict, path)  # type: ignore[no-any-return]


def _decode_spec(t: Any, spec: tuple[Any, ...], value: Any, strict: int, path: str) -> Any:
    if isinstance(value, _TEXT):
        text = value if isinstance(value, (str, bytes)) else bytes(value)
        if not _json.too_deep(text):
            try:
                return fast_decoder(t).decode(text)
            except msgspec.DecodeError:
                pass
        obj = parse_json_bounded(text, strict)
    else:
        obj = value
        try:
            return msgspec.convert(obj, t, dec_hook=_dec_hook)
        except msgspec.ValidationError:
            pass
    return _dec(spec, obj, path, strict)


def session_update_from_json(
    value: Json | str | bytes, *, strict: bool = True, path: str = "$"
) -> g.SessionUpdate | UnknownUpdate:
    if type(value) is dict:
        # msgspec rebuilds a union's plan on every convert; one class's plan is cached.
        cls = _UPDATE_CLASSES.get(value.get("sessionUpdate"))  # type: ignore[arg-type]
        if cls is not None:
            try:
                update: g.SessionUpdate = msgspec.convert(value, cls, dec_hook=_dec_hook)
                return update
            except msgspec.ValidationError:
                pass
        out: g.SessionUpdate | UnknownUpdate = _dec(("u", "SessionUpdate"), value, path, strict)
        return out
    out = _decode_spec(g.SessionUpdate, ("u", "SessionUpdate"), value, strict, path)
    return out


_UPDATE_CLASSES: dict[str, type[Any]] = g.UNIONS["SessionUpdate"][1]


def decode_host_params(cls: type[T], value: Any, *, path: str = "$") -> T:
    """Params of a request the host serves: the strict type rules, unknown keys allowed."""
    out: T = _decode_spec(cls, ("c", cls), value, STRICT_TYPES, path)
    return out


def decode_value(spec: tuple[Any, ...], value: Any, path: str, strict: int) -> Any:
    """The reference decoder on an already-parsed value (no fast path)."""
    return _dec(spec, value, path, strict)


def replace(obj: T, **changes: Any) -> T:
    """A copy of ``obj`` with some fields changed (model.md §1)."""
    if isinstance(obj, Base):
        out: T = msgspec.structs.replace(obj, **changes)
        return out
    if isinstance(obj, Custom):
        names: tuple[str, ...] = obj.__slots__
        for k in changes:
            if k not in names:
                raise TypeError(f"{type(obj).__name__} has no field {k!r}")
        kw = {n: changes.get(n, getattr(obj, n)) for n in names}
        return type(obj)(**kw)
    if isinstance(obj, msgspec.Struct):
        return msgspec.structs.replace(obj, **changes)
    raise TypeError(f"not a model object: {type(obj).__name__}")


# The bases' `from_json` decodes through this module (see `_base.codec`).
codec.decode_as = decode_as

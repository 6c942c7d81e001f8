"""The reference walker (design/model.md §2-4): decodes parsed JSON against the generated field
table (``SPECS``) when msgspec rejects a value or lenient decoding is asked for. It is the only
source of error kinds and paths; `_codec` holds the msgspec fast path and the entry points that
fall back to it. Also the JSON helpers both share, and `UnknownUpdate`.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from .. import _json
from . import _generated as g
from ._base import (
    DecodeErrorKind,
    FieldSpec,
    Json,
    ProtocolDecodeError,
    update_kind_of,
)

if TYPE_CHECKING:
    from .._kinds import UpdateKind

K = DecodeErrorKind
T = TypeVar("T")

# The walker's `strict` is an int: 0/False lenient, 1/True strict, STRICT_TYPES = the strict
# type rules with unknown keys allowed (host requests, host.md §2).
STRICT = 1
STRICT_TYPES = 2

__all__ = ["STRICT", "STRICT_TYPES", "UnknownUpdate", "parse_json", "stringify_json"]


class UnknownUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """A ``sessionUpdate`` this model does not know (lenient decoding only); ``raw`` is the
    whole update object as received."""

    session_update: str
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.raw

    @property
    def update_kind(self) -> UpdateKind:
        return update_kind_of("unknown")


# -- JSON text ------------------------------------------------------------------------------

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode


def parse_json(text: str | bytes) -> Json:
    """Parse one JSON text; JSON_PARSE at ``$`` with the parser's message on failure (a text
    nested deeper than ``_json.MAX_DEPTH`` is one)."""
    try:
        _json.check(text)
        return _json_decode(text)
    except _json.TooDeep as e:
        raise ProtocolDecodeError(K.JSON_PARSE, "$", str(e)) from None
    except msgspec.DecodeError as e:
        if str(e).startswith("Number out of range"):
            # A literal beyond a double (1e400): read as Python's json does (inf), not refused.
            return _json_decode_wide(text)
        raise ProtocolDecodeError(K.JSON_PARSE, "$", str(e)) from None


_json_decode_wide = msgspec.json.Decoder(float_hook=float).decode


def parse_json_bounded(text: str | bytes, strict: int) -> Json:
    """`parse_json`, except that decoding leniently reads values nested too deep as null."""
    if not strict and _json.too_deep(text):
        text = _json.prune(text if isinstance(text, str) else bytes(text).decode("utf-8"))
    return parse_json(text)


def shallow(value: Any) -> bool:
    """Whether msgspec may decode `value` (text) directly: it recurses once a level."""
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    return not isinstance(value, (str, bytes)) or not _json.too_deep(value)


def stringify_json(value: Json) -> str:
    """Minified JSON, keys in dict order, no trailing newline."""
    return _json_encode(value).decode()


# -- the reference decoder ------------------------------------------------------------------


def _err(
    kind: DecodeErrorKind, path: str, reason: str | None = None, value: str | None = None
) -> ProtocolDecodeError:
    return ProtocolDecodeError(kind, path, reason, value)


_WIN_ABS = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def is_absolute(path: str) -> bool:
    """POSIX absolute, or a Windows drive or UNC path: agents run on both."""
    return path.startswith("/") or _WIN_ABS.match(path) is not None


def is_base64(text: str) -> bool:
    try:
        binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _dec(spec: tuple[Any, ...], v: Any, path: str, strict: int, skip: bool = False) -> Any:
    k = spec[0]
    if v is None and k not in ("j", "rid"):
        raise _err(K.INVALID_FIELD, path, "null is not allowed here")
    if k == "s":
        if type(v) is str:
            return v
        raise _err(K.EXPECTED_STRING, path)
    if k == "c":
        return _dec_class(spec[1], v, path, strict)
    if k == "u":
        return _dec_union(spec[1], v, path, strict)
    if k == "o":
        if type(v) is dict:
            return v
        raise _err(K.EXPECTED_OBJECT, path)
    if k == "a":
        if type(v) is not list:
            raise _err(K.EXPECTED_ARRAY, path)
        item = spec[1]
        if strict or not skip:
            return tuple(_dec(item, x, f"{path}[{i}]", strict) for i, x in enumerate(v))
        out = []
        for i, x in enumerate(v):
            try:
                out.append(_dec(item, x, f"{path}[{i}]", strict))
            except ProtocolDecodeError:
                continue  # x-deserialize-skip-invalid-items
        return tuple(out)
    if k == "e":
        if type(v) is not str:
            raise _err(K.EXPECTED_STRING, path)
        try:
            return spec[1](v)
        except ValueError:
            raise _err(K.INVALID_FIELD, path, f"unknown {spec[1].__name__} {v!r}") from None
    if k == "E":
        if type(v) is not str:
            raise _err(K.EXPECTED_STRING, path)
        try:
            return spec[1](v)
        except ValueError:
            return v  # an open enum: unknown strings are kept as they came
    if k == "b":
        if type(v) is bool:
            return v
        raise _err(K.EXPECTED_BOOLEAN, path)
    if k == "i":
        if type(v) is int:
            if spec[1] <= v <= spec[2]:
                return v
            raise _err(K.INVALID_FIELD, path, f"integer out of range [{spec[1]}, {spec[2]}]")
        if type(v) is float:
            raise _err(K.INVALID_FIELD, path, "not an integer")
        raise _err(K.EXPECTED_NUMBER, path)
    if k == "f":
        if type(v) is float:
            return v
        if type(v) is int:
            return float(v)
        raise _err(K.EXPECTED_NUMBER, path)
    if k == "j":
        return v
    if k == "p":
        if type(v) is not str:
            raise _err(K.EXPECTED_STRING, path)
        if strict and not is_absolute(v):
            raise _err(K.INVALID_PATH, path, "must be an absolute path", v)
        return v
    if k == "64":
        if type(v) is not str:
            raise _err(K.EXPECTED_STRING, path)
        if strict and not is_base64(v):
            raise _err(K.INVALID_BASE64, path, "not valid base64")
        return v
    if k == "m":
        if type(v) is not dict:
            raise _err(K.EXPECTED_OBJECT, path)
        return {key: _dec(spec[1], x, f"{path}.{key}", strict) for key, x in v.items()}
    if k == "rid":
        if v is None or type(v) is str:
            return v
        if type(v) is int:
            if -(2**63) <= v < 2**63:
                return v
            raise _err(K.INVALID_FIELD, path, "request id out of the int64 range")
        raise _err(K.INVALID_FIELD, path, "a request id is a string, an integer or null")
    raise AssertionError(f"unknown spec {spec!r}")


def _dec_fields(
    specs: tuple[FieldSpec, ...], v: dict[str, Any], path: str, strict: int
) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for f in specs:
        wire = f.wire
        if wire not in v:
            if f.required:
                raise _err(K.MISSING_FIELD, f"{path}.{wire}")
            continue
        x = v[wire]
        p = f"{path}.{wire}"
        if x is None and f.nullable:
            kw[f.attr] = None
            continue
        if strict or not f.default_on_error:
            kw[f.attr] = _dec(f.spec, x, p, strict, f.skip_invalid)
            continue
        try:
            kw[f.attr] = _dec(f.spec, x, p, strict, f.skip_invalid)
        except ProtocolDecodeError:
            if f.required:  # lenient: a required field falls back to its schema default
                if f.lenient_default is None:
                    raise
                kw[f.attr] = f.lenient_default
    return kw


def _check_unknown(v: dict[str, Any], known: frozenset[str], path: str) -> None:
    for key in v:
        if key not in known and key != "_meta":
            raise _err(K.UNKNOWN_FIELD, f"{path}.{key}")


_KNOWN: dict[type[Any], frozenset[str]] = {
    cls: frozenset(f.wire for f in specs) for cls, specs in g.SPECS.items()
}


def _dec_class(cls: type[T], v: Any, path: str, strict: int, *, allow_tag: bool = True) -> T:
    if type(v) is not dict:
        raise _err(K.EXPECTED_OBJECT, path)
    special = _SPECIAL.get(cls)
    if special is not None:
        out: T = special(v, path, strict)
        return out
    kw = _dec_fields(g.SPECS[cls], v, path, strict)
    tag = g.TAGS.get(cls)
    known = _KNOWN[cls]
    if tag is not None and allow_tag and tag[0] in v:
        # A tagged class decoded on its own may carry its tag (msgspec accepts it too).
        t = v[tag[0]]
        if t != tag[1]:
            raise _err(K.INVALID_DISCRIMINATOR, f"{path}.{tag[0]}", None, _show(t))
        known = known | {tag[0]}
    if strict == STRICT and not _open_variant(cls, v):
        _check_unknown(v, known, path)
    return cls(**kw)


def _open_variant(cls: type[Any], v: dict[str, Any]) -> bool:
    """A custom or future variant of one of v2's open unions (its tag not a known value): the
    schema allows it any other fields, so strict decoding does not refuse them."""
    open_tag = g.OPEN_TAGS.get(cls)
    if open_tag is None:
        return False
    value = v.get(open_tag[0])
    return type(value) is str and value not in open_tag[1].__members__.values()


def _show(value: Any) -> str:
    return value if type(value) is str else stringify_json(value)


def _tag_of(v: Any, field: str, path: str) -> str | None:
    if type(v) is not dict:
        raise _err(K.EXPECTED_OBJECT, path)
    if field not in v:
        return None
    t = v[field]
    if type(t) is not str:
        raise _err(K.EXPECTED_STRING, f"{path}.{field}")
    return t


def _without(v: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: x for k, x in v.items() if k != key}


def _dec_union(name: str, v: Any, path: str, strict: int) -> Any:
    native = g.UNIONS.get(name)
    if native is not None:
        field, table = native
        t = _tag_of(v, field, path)
        if t is None:
            raise _err(K.MISSING_FIELD, f"{path}.{field}")
        cls = table.get(t)
        if cls is None:
            if name == "SessionUpdate" and not strict:
                return UnknownUpdate(session_update=t, raw=v)
            raise _err(K.INVALID_DISCRIMINATOR, f"{path}.{field}", None, t)
        return _dec_class(cls, v, path, strict)
    if name == "McpServer":
        t = _tag_of(v, "type", path)
        if t is None:
            return _dec_class(g.McpServerStdio, v, path, strict)
        if t == "stdio":  # accepted, never written (model.md §3)
            return _dec_class(g.McpServerStdio, _without(v, "type"), path, strict)
        if t == "http":
            return _dec_class(g.McpServerHttp, v, path, strict)
        if t == "sse":
            return _dec_class(g.McpServerSse, v, path, strict)
        raise _err(K.INVALID_DISCRIMINATOR, f"{path}.type", None, t)
    if name == "AuthMethodUnion":
        t = _tag_of(v, "type", path)
        if t is None:
            return _dec_class(g.AuthMethod, v, path, strict)
        if t == "terminal":
            return _dec_class(g.AuthMethodTerminal, v, path, strict)
        raise _err(K.INVALID_DISCRIMINATOR, f"{path}.type", None, t)
    if name == "EmbeddedResourceResource":
        if type(v) is not dict:
            raise _err(K.EXPECTED_OBJECT, path)
        has_text, has_blob = "text" in v, "blob" in v
        if has_text and has_blob:
            raise _err(K.INVALID_FIELD, path, "a resource has text or blob, not both")
        if has_text:
            return _dec_class(g.TextResourceContents, v, path, strict)
        if has_blob:
            return _dec_class(g.BlobResourceContents, v, path, strict)
        raise _err(K.INVALID_FIELD, path, "a resource needs text or blob")
    if name == "SessionConfigSelectOptions":
        if type(v) is not list:
            raise _err(K.EXPECTED_ARRAY, path)
        grouped = [type(x) is dict and "group" in x for x in v]
        if any(grouped) and not all(grouped):
            raise _err(K.INVALID_FIELD, path, "a select mixes grouped and ungrouped options")
        item = g.SessionConfigSelectGroup if grouped and grouped[0] else g.SessionConfigSelectOption
        return tuple(_dec_class(item, x, f"{path}[{i}]", strict) for i, x in enumerate(v))
    extra = _EXTRA_UNIONS.get(name)
    if extra is not None:
        return extra(v, path, strict)
    raise AssertionError(f"unknown union {name}")


# Unions defined outside the generated module (elicitation) register their decoder here.
_EXTRA_UNIONS: dict[str, Callable[[Any, str, int], Any]] = {}


# -- the custom classes ---------------------------------------------------------------------

_OPTION_BASE = g.SPECS[g.SessionConfigOption][:-2]  # id, name, description, category
_OPTION_META = g.SPECS[g.SessionConfigOption][-1:]


def _dec_config_option(v: dict[str, Any], path: str, strict: int) -> g.SessionConfigOption:
    kw = _dec_fields(_OPTION_BASE, v, path, strict)
    t = _tag_of(v, "type", path)
    if t is None:
        raise _err(K.MISSING_FIELD, f"{path}.type")
    kind_cls: type[Any]
    if t == "select":
        kind_cls = g.SessionConfigSelect
    elif t == "boolean":
        kind_cls = g.SessionConfigBoolean
    else:
        raise _err(K.INVALID_DISCRIMINATOR, f"{path}.type", None, t)
    kind = kind_cls(**_dec_fields(g.SPECS[kind_cls], v, path, strict))
    kw.update(_dec_fields(_OPTION_META, v, path, strict))
    if strict == STRICT:
        _check_unknown(v, _KNOWN[g.SessionConfigOption] | _KNOWN[kind_cls] | {"type"}, path)
    return g.SessionConfigOption(kind=kind, **kw)


_SET_BASE = g.SPECS[g.SetSessionConfigOptionParams][:2]
_SET_META = g.SPECS[g.SetSessionConfigOptionParams][-1:]


def _dec_set_config(v: dict[str, Any], path: str, strict: int) -> g.SetSessionConfigOptionParams:
    kw = _dec_fields(_SET_BASE, v, path, strict)
    t = _tag_of(v, "type", path)
    if "value" not in v:
        raise _err(K.MISSING_FIELD, f"{path}.value")
    value = v["value"]
    if t == "boolean":
        if type(value) is not bool:
            raise _err(K.EXPECTED_BOOLEAN, f"{path}.value")
    elif t is None or not strict:
        # Lenient: an unknown type with a string payload is a value id (the schema says so).
        if type(value) is not str:
            raise _err(K.EXPECTED_STRING, f"{path}.value")
    else:
        raise _err(K.INVALID_DISCRIMINATOR, f"{path}.type", None, t)
    kw.update(_dec_fields(_SET_META, v, path, strict))
    if strict == STRICT:
        _check_unknown(v, _KNOWN[g.SetSessionConfigOptionParams] | {"type"}, path)
    return g.SetSessionConfigOptionParams(value=value, **kw)


def _dec_permission(v: dict[str, Any], path: str, strict: int) -> g.RequestPermissionRequest:
    specs = g.SPECS[g.RequestPermissionRequest]
    kw = _dec_fields(specs[:1], v, path, strict)
    if "toolCall" in v:
        kw["tool_call"] = _dec_class(
            g.ToolCallUpdate, v["toolCall"], f"{path}.toolCall", strict, allow_tag=False
        )
    elif "title" not in v:  # ACP v2's request has a title (and its tool call in `subject`)
        raise _err(K.MISSING_FIELD, f"{path}.toolCall")
    kw.update(_dec_fields(specs[2:], v, path, strict))
    if strict == STRICT:
        _check_unknown(v, _KNOWN[g.RequestPermissionRequest], path)
    return g.RequestPermissionRequest(**kw)


_SPECIAL: dict[type[Any], Callable[[dict[str, Any], str, int], Any]] = {
    g.SessionConfigOption: _dec_config_option,
    g.SetSessionConfigOptionParams: _dec_set_config,
    g.RequestPermissionRequest: _dec_permission,
}

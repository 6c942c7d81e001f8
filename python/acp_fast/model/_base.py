"""Foundations of the model: OMITTED, the error class, the class bases and the type markers.

The generated classes (``_generated.py``) are msgspec Structs, so msgspec can decode a whole
line straight into them; the pure-Python decoder in ``_codec.py`` walks the same field table
(``SPECS``) whenever msgspec rejects a value, to report the exact model.md error, and for lenient
decoding. A few wire shapes msgspec cannot express are resolved by a ``dec_hook``: their field
annotations name an ABC "marker" at runtime (the real union for type checkers).
"""

from __future__ import annotations

import abc
import enum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET as OMITTED
from msgspec import UnsetType as Omitted

from .._errors import AcpError
from .._kinds import UpdateKind

__all__ = [
    "B64",
    "I32",
    "I64",
    "OMITTED",
    "U16",
    "U32",
    "U64",
    "U64_MAX",
    "AbsPath",
    "Base",
    "Custom",
    "DecodeErrorKind",
    "FieldSpec",
    "Json",
    "JsonObject",
    "Nullable",
    "Omitted",
    "Opt",
    "ProtocolDecodeError",
    "check_u64",
    "hook_marker",
    "update_kind_of",
]

T = TypeVar("T")
Json: TypeAlias = Any
JsonObject: TypeAlias = dict[str, Any]
#: T, JSON null (None) or key absent (OMITTED).
Nullable: TypeAlias = T | Omitted | None
#: T or key absent (OMITTED); JSON null is not allowed.
Opt: TypeAlias = T | Omitted


class DecodeErrorKind(enum.StrEnum):
    JSON_PARSE = "json_parse"
    EXPECTED_OBJECT = "expected_object"
    EXPECTED_ARRAY = "expected_array"
    EXPECTED_STRING = "expected_string"
    EXPECTED_BOOLEAN = "expected_boolean"
    EXPECTED_NUMBER = "expected_number"
    MISSING_FIELD = "missing_field"
    UNKNOWN_FIELD = "unknown_field"
    INVALID_FIELD = "invalid_field"
    INVALID_DISCRIMINATOR = "invalid_discriminator"
    INVALID_PATH = "invalid_path"
    INVALID_BASE64 = "invalid_base64"


class ProtocolDecodeError(AcpError, ValueError):
    """A message does not match the ACP v1 schema: what, where, why (design/model.md §2)."""

    def __init__(
        self,
        kind: DecodeErrorKind,
        path: str,
        reason: str | None = None,
        value: str | None = None,
    ) -> None:
        self.kind = kind
        self.path = path
        self.reason = reason
        self.value = value
        text = f"{kind.value} at {path}"
        if reason is not None:
            text += f": {reason}"
        if value is not None:
            text += f" (value {value})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.path, self.reason, self.value))


U64_MAX = 2**64 - 1


def check_u64(obj: Any, *attrs: str) -> None:
    """Raise ValueError if a uint64 field is above its range (msgspec bounds stop at int64)."""
    for a in attrs:
        v = getattr(obj, a)
        if type(v) is int and v > U64_MAX:
            raise ValueError(f"{a} is out of the uint64 range")


def update_kind_of(tag: str) -> UpdateKind:
    """The facade's ``acp.UpdateKind`` of a ``sessionUpdate`` tag."""
    return UpdateKind(tag)


class _Codec:
    """The decoder and encoder the bases' ``from_json``/``to_json`` call. They live in
    ``_codec``/``_encode``, which import this module (the generated classes derive from its
    bases): each sets its function here when it loads, so this module imports neither. The
    package (``model/__init__``) imports both before any class can be used."""

    decode_as: Any = None
    to_builtins: Any = None


codec = _Codec()


class FieldSpec(NamedTuple):
    attr: str
    wire: str
    spec: tuple[Any, ...]
    required: bool
    nullable: bool
    default_on_error: bool
    skip_invalid: bool
    lenient_default: Any


class _Marker(abc.ABC):  # noqa: B024 (a marker: nothing to implement)
    """A runtime stand-in that msgspec hands to ``dec_hook``; members are registered."""


def hook_marker(name: str) -> type[_Marker]:
    return type(name, (_Marker,), {"__module__": __name__})


if TYPE_CHECKING:
    AbsPath: TypeAlias = str
    B64: TypeAlias = str
    U64: TypeAlias = int
    U16: TypeAlias = int
    U32: TypeAlias = int
    I32: TypeAlias = int
    I64: TypeAlias = int
    _StructMeta = type
else:
    from typing import Annotated

    # Checked in dec_hook: msgspec has no absolute-path or base64-as-str rule.
    AbsPath = hook_marker("AbsPath")
    B64 = hook_marker("B64")
    AbsPath.register(str)
    B64.register(str)
    # msgspec bounds must fit an int64: the upper bound is checked in __post_init__.
    U64 = Annotated[int, msgspec.Meta(ge=0)]
    U16 = Annotated[int, msgspec.Meta(ge=0, le=2**16 - 1)]
    U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
    I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
    I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
    _StructMeta = type(msgspec.Struct)

    class _Meta(_StructMeta):
        # msgspec leaves __match_args__ empty for kw_only structs; model.md wants wire order.
        @property
        def __match_args__(cls) -> tuple[str, ...]:
            return cls.__struct_fields__


if TYPE_CHECKING:

    class Base(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
        @classmethod
        def from_json(
            cls: type[_S], value: Json | str | bytes, *, strict: bool = True, path: str = "$"
        ) -> _S: ...
        def to_json(self) -> dict[str, Any]: ...

else:

    class Base(
        msgspec.Struct, metaclass=_Meta, frozen=True, kw_only=True, forbid_unknown_fields=True
    ):
        @classmethod
        def from_json(cls, value, *, strict=True, path="$"):
            return codec.decode_as(cls, value, strict=strict, path=path)

        def to_json(self):
            return codec.to_builtins(self)


_S = TypeVar("_S")


class Custom:
    """Base of the few classes whose wire shape msgspec cannot express (flattened parts).

    Immutable, keyword-built, equal by class and fields, with repr, ``__match_args__`` in wire
    order and pickling, like the Structs.
    """

    __slots__: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        setattr(cls, "__match_args__", tuple(cls.__slots__))  # noqa: B010 (mypy: a ClassVar)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Custom)
        return self._fields() == other._fields()

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in self.__slots__ if getattr(self, n) is not OMITTED
        )
        return f"{type(self).__name__}({parts})"

    def __reduce__(self) -> tuple[Any, ...]:
        kw = dict(zip(self.__slots__, self._fields(), strict=True))
        return (_rebuild, (type(self), kw))

    @classmethod
    def from_json(
        cls: type[_C], value: Json | str | bytes, *, strict: bool = True, path: str = "$"
    ) -> _C:
        decoded: _C = codec.decode_as(cls, value, strict=strict, path=path)
        return decoded

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = codec.to_builtins(self)
        return out


_C = TypeVar("_C", bound=Custom)


def _rebuild(cls: type[Any], kw: dict[str, Any]) -> Any:
    return cls(**kw)

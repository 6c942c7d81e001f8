"""Hypothesis: valid objects generated from the field table round-trip; mutations of one field
(a wrong type, a missing required key, an unknown key, an out-of-range integer) raise with the
mutation's path — through the msgspec fast path (bytes) and the reference decoder (dict)."""

from __future__ import annotations

import base64
import json
from typing import Any

from acp_fast import model as m
from acp_fast.model import _generated as g
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

K = m.DecodeErrorKind
CUSTOM = {g.SessionConfigOption, g.SetSessionConfigOptionParams, g.RequestPermissionRequest}
# Every generated class is a root; the notification and the big results are drawn most.
ROOTS = [
    g.SessionNotification,
    g.InitializeResult,
    g.NewSessionParams,
    g.PromptParams,
    *(cls for cls in g.SPECS if cls not in CUSTOM),
]


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=4))
    return st.recursive(
        scalars,
        lambda c: st.one_of(
            st.lists(c, max_size=2), st.dictionaries(st.text(max_size=3), c, max_size=2)
        ),
        max_leaves=4,
    )


def value_of(spec: tuple[Any, ...], depth: int) -> st.SearchStrategy[Any]:
    k = spec[0]
    if k == "s":
        return st.text(max_size=6)
    if k == "b":
        return st.booleans()
    if k == "i":
        return st.integers(spec[1], spec[2])
    if k == "f":
        return st.floats(allow_nan=False, allow_infinity=False, width=64)
    if k in ("j",):
        return json_values()
    if k == "o":
        return st.dictionaries(st.text(max_size=3), json_values(), max_size=2)
    if k == "m":
        return st.dictionaries(st.text(max_size=3), value_of(spec[1], depth), max_size=2)
    if k in ("e", "E"):
        return st.sampled_from([e.value for e in spec[1]])
    if k == "a":
        return st.lists(value_of(spec[1], depth + 1), max_size=2 if depth < 3 else 0)
    if k == "c":
        return obj_of(spec[1], depth + 1)
    if k == "u":
        return union_of(spec[1], depth + 1)
    if k == "p":
        return st.text(max_size=5).map(lambda t: "/" + t)
    if k == "64":
        return st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode())
    if k == "rid":
        return st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3))
    raise AssertionError(spec)


def union_of(name: str, depth: int) -> st.SearchStrategy[Any]:
    if name in g.UNIONS:
        tag, table = g.UNIONS[name]
        return st.one_of(
            *[obj_of(cls, depth).map(lambda o, t=t: {tag: t, **o}) for t, cls in table.items()]
        )
    if name == "McpServer":
        return st.one_of(
            obj_of(g.McpServerStdio, depth),
            obj_of(g.McpServerHttp, depth).map(lambda o: {"type": "http", **o}),
        )
    if name == "AuthMethodUnion":
        return st.one_of(
            obj_of(g.AuthMethod, depth),
            obj_of(g.AuthMethodTerminal, depth).map(lambda o: {"type": "terminal", **o}),
        )
    if name == "EmbeddedResourceResource":
        return st.one_of(
            obj_of(g.TextResourceContents, depth), obj_of(g.BlobResourceContents, depth)
        )
    if name == "SessionConfigSelectOptions":
        return st.lists(obj_of(g.SessionConfigSelectOption, depth), max_size=2)
    raise AssertionError(name)


def obj_of(cls: type[Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    if cls is g.SessionConfigOption:
        return st.builds(
            lambda base, cur: {"type": "boolean", **base, "currentValue": cur},
            st.fixed_dictionaries({"id": st.text(max_size=3), "name": st.text(max_size=3)}),
            st.booleans(),
        )
    if cls is g.SetSessionConfigOptionParams:
        return st.just({"sessionId": "s", "configId": "c", "value": "v"})
    if cls is g.RequestPermissionRequest:
        return st.just({"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []})
    parts: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in g.SPECS[cls]:
        value = value_of(f.spec, depth)
        if f.nullable:
            value = st.one_of(st.none(), value)
        (parts if f.required else optional)[f.wire] = value
    if depth > 3:
        optional = {}
    return st.fixed_dictionaries(parts, optional=optional)


def sites(
    cls: type[Any], obj: dict[str, Any], path: str
) -> list[tuple[str, dict[str, Any], Any, Any]]:
    """Mutation sites: (path of the object, the object, its FieldSpec or None, its class)."""
    out: list[tuple[str, dict[str, Any], Any, Any]] = [(path, obj, None, cls)]
    if cls in CUSTOM:
        return out
    for f in g.SPECS[cls]:
        if f.wire not in obj or obj[f.wire] is None:
            out.append((path, obj, f, cls))
            continue
        out.append((path, obj, f, cls))
        out.extend(nested(f.spec, obj[f.wire], f"{path}.{f.wire}"))
    return out


def nested(spec: tuple[Any, ...], v: Any, path: str) -> list[Any]:
    k = spec[0]
    if k == "c":
        return sites(spec[1], v, path)
    if k == "a" and isinstance(v, list):
        return [s for i, x in enumerate(v) for s in nested(spec[1], x, f"{path}[{i}]")]
    if k == "u" and spec[1] in g.UNIONS and isinstance(v, dict):
        tag, table = g.UNIONS[spec[1]]
        return sites(table[v[tag]], v, path)
    return []


WRONG = {
    "s": (12, K.EXPECTED_STRING),
    "b": ("x", K.EXPECTED_BOOLEAN),
    "i": ("1", K.EXPECTED_NUMBER),
    "f": ("1", K.EXPECTED_NUMBER),
    "a": ({}, K.EXPECTED_ARRAY),
    "c": ([], K.EXPECTED_OBJECT),
    "o": ([], K.EXPECTED_OBJECT),
    "e": (5, K.EXPECTED_STRING),
    "p": (5, K.EXPECTED_STRING),
    "64": (5, K.EXPECTED_STRING),
}


def tagged(cls: type[Any], obj: dict[str, Any]) -> dict[str, Any]:
    """A tagged class on its own still writes its tag (to_json includes the discriminator)."""
    tag = g.TAGS.get(cls)
    return {tag[0]: tag[1], **obj} if tag else obj


def roots() -> st.SearchStrategy[tuple[type[Any], dict[str, Any]]]:
    return st.sampled_from(ROOTS).flatmap(lambda c: obj_of(c, 0).map(lambda o: (c, tagged(c, o))))


SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(roots())
def test_valid_objects_round_trip(case: tuple[type[Any], dict[str, Any]]) -> None:
    cls, obj = case
    text = json.dumps(obj)
    fast = cls.from_json(text.encode())
    assert fast == cls.from_json(obj) == cls.from_json(obj, strict=False)
    assert fast.to_json() == json.loads(text)


def _expect(cls: type[Any], obj: dict[str, Any], kind: m.DecodeErrorKind, path: str) -> None:
    for value in (json.dumps(obj).encode(), obj):
        try:
            cls.from_json(value)
        except m.ProtocolDecodeError as e:
            assert (e.kind, e.path) == (kind, path), (str(e), kind, path)
        else:
            raise AssertionError(f"accepted a mutation: {kind} at {path}")


@SETTINGS
@given(roots(), st.data())
def test_mutations_raise_with_the_mutation_path(
    case: tuple[type[Any], dict[str, Any]], data: st.DataObject
) -> None:
    cls, obj = case
    site_path, target, f, owner = data.draw(st.sampled_from(sites(cls, obj, "$")))
    mutation = data.draw(st.sampled_from(["wrong", "missing", "unknown", "range"]))
    if f is None or mutation == "unknown":
        if owner in CUSTOM and owner is not g.SessionConfigOption:
            return
        target["zzUnknown"] = 1
        _expect(cls, obj, K.UNKNOWN_FIELD, f"{site_path}.zzUnknown")
        return
    field_path = f"{site_path}.{f.wire}"
    if mutation == "missing" and f.required:
        del target[f.wire]
        _expect(cls, obj, K.MISSING_FIELD, field_path)
    elif mutation == "range" and f.spec[0] == "i":
        target[f.wire] = f.spec[2] + 1
        _expect(cls, obj, K.INVALID_FIELD, field_path)
    elif f.spec[0] in WRONG:
        bad, kind = WRONG[f.spec[0]]
        target[f.wire] = bad
        _expect(cls, obj, kind, field_path)

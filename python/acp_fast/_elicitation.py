"""Elicitations (``elicitation/create``): the agent asks the user for a few values (form mode: a
flat JSON Schema of primitive properties) or to visit a URL (url mode). The observer's
``on_elicitation(request)`` answers with an `ElicitationReply` (or an awaitable of one under
`AsyncClient`; None declines). The client advertises ``clientCapabilities.elicitation`` only when
the observer has ``on_elicitation``; without one every elicitation is declined.

Everything in a request is the agent's text: the core reads it within bounds (1 MiB, params 12
deep, 256 properties) before it gets here, and nothing here prints it or opens its URL. An
accept's content is checked against the request's schema (names and primitive types) before it
is sent, so a mistake raises `ValueError` naming the property instead of an agent error later.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ._policy import ElicitationRule
from ._text import printable_line

Action = Literal["accept", "decline", "cancel"]
_ACTIONS = ("accept", "decline", "cancel")

__all__ = ["ElicitationField", "ElicitationReply", "ElicitationRequest"]


@dataclass(frozen=True)
class ElicitationReply:
    """The answer to an elicitation.

    Args:
        action: "accept" (the user answered; ``content`` holds the values), "decline" (the user
            said no) or "cancel" (the user dismissed it without choosing).
        content: For "accept" in form mode: the values by property name, each a str, int,
            float, bool or list of str, as the request's schema types them. None otherwise.
    """

    action: Action
    content: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise ValueError(
                f'ElicitationReply.action must be "accept", "decline" or "cancel" '
                f"(got {self.action!r})"
            )
        if self.content is None:
            return
        if self.action != "accept":
            raise ValueError(f'only an "accept" carries content (got action {self.action!r})')
        if not isinstance(self.content, Mapping):
            kind = type(self.content).__name__
            raise TypeError(f"ElicitationReply.content must be a dict or None (got {kind})")
        for name, value in self.content.items():
            if not isinstance(name, str):
                raise TypeError(f"ElicitationReply.content keys must be str (got {name!r})")
            if _value_type(value) is None:
                raise TypeError(
                    f"ElicitationReply.content[{printable_line(name)!r}] must be a str, int, "
                    f"float, bool or list of str (got {type(value).__name__})"
                )


@dataclass(frozen=True)
class ElicitationField:
    """One property of a form, as the request's schema describes it (the agent's text: show it
    with `acp_fast._text.printable`).

    ``type`` is "string", "number", "integer", "boolean" or "array" (a multi-select of
    strings), or another value the protocol may add; ``choices`` are the allowed values of a
    single- or multi-select (empty otherwise)."""

    name: str
    type: str
    title: str | None = None
    description: str | None = None
    required: bool = False
    choices: tuple[str, ...] = ()
    default: Any = None


@dataclass(frozen=True)
class ElicitationRequest:
    """An ``elicitation/create`` from the agent, as ``on_elicitation`` is given it.

    ``mode`` is "form" (``requested_schema`` describes the values asked for; ``fields`` lists
    them) or "url" (the user is to visit ``url``; the library never opens it, and the agent
    later sends ``elicitation/complete`` for ``elicitation_id``). ``session_id`` is "" when the
    elicitation belongs to one of the client's requests (``scope_request_id``) rather than a
    session. ``envelope`` is the exact line."""

    session_id: str
    mode: str
    message: str
    requested_schema: dict[str, Any] | None
    url: str | None
    elicitation_id: str | None
    tool_call_id: str | None
    scope_request_id: int | str | None
    request_id: Any
    envelope: str

    @property
    def fields(self) -> tuple[ElicitationField, ...]:
        """The form's properties in the schema's order (empty in url mode)."""
        schema = self.requested_schema or {}
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return ()
        required = schema.get("required")
        wanted = set(required) if isinstance(required, list) else set()
        return tuple(
            _field(name, spec, name in wanted)
            for name, spec in properties.items()
            if isinstance(spec, dict)
        )

    def decode(self, *, strict: bool = True) -> Any:
        """The request's params typed (`acp_fast.model.ElicitationFormParams` or
        `ElicitationUrlParams`)."""
        from . import model

        return model.decode_message(self.envelope, strict=strict).params  # type: ignore[union-attr]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _choices(spec: Mapping[str, Any]) -> tuple[str, ...]:
    source: Any = spec.get("enum")
    if source is None and isinstance(spec.get("oneOf"), list):
        source = [o.get("const") for o in spec["oneOf"] if isinstance(o, dict)]
    items = spec.get("items")
    if source is None and isinstance(items, dict):
        source = items.get("enum")
        if source is None and isinstance(items.get("anyOf"), list):
            source = [o.get("const") for o in items["anyOf"] if isinstance(o, dict)]
    if not isinstance(source, list):
        return ()
    return tuple(v for v in source if isinstance(v, str))


def _field(name: str, spec: Mapping[str, Any], required: bool) -> ElicitationField:
    return ElicitationField(
        name=name,
        type=str(spec.get("type", "")),
        title=_text(spec.get("title")),
        description=_text(spec.get("description")),
        required=required,
        choices=_choices(spec),
        default=spec.get("default"),
    )


def _value_type(value: object) -> str | None:
    """The schema type a content value has ("number" for a float), None when it has none."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "array"
    return None


def check_content(request: ElicitationRequest, content: Mapping[str, Any]) -> str:
    """`content` as the JSON text sent, after checking it against the request's schema: every
    name one of its properties, each value of the property's type, every required property
    present. ValueError names the property (printably: names are the agent's text)."""
    if request.mode != "form":
        raise ValueError(f"an accept of a {request.mode} elicitation carries no content")
    fields = {f.name: f for f in request.fields}
    for name, value in content.items():
        shown = printable_line(name)
        field = fields.get(name)
        if field is None:
            known = ", ".join(printable_line(n) for n in fields) or "none"
            raise ValueError(f"the elicitation has no property {shown!r} (its properties: {known})")
        has = _value_type(value)
        wants = field.type
        fits = (
            has == wants
            or (wants == "number" and has == "integer")
            or wants not in ("string", "number", "integer", "boolean", "array")
        )
        if not fits:
            raise ValueError(
                f"property {shown!r} of the elicitation is of type {printable_line(wants)!r}; "
                f"got {type(value).__name__} {value!r:.80}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"property {shown!r}: {value!r} cannot be sent as JSON")
        chosen = [value] if isinstance(value, str) else value if has == "array" else []
        wrong = [v for v in chosen if field.choices and v not in field.choices]
        if wrong:
            allowed = ", ".join(repr(printable_line(c)) for c in field.choices)
            raise ValueError(
                f"property {shown!r}: {printable_line(wrong[0])!r} is not one of its choices "
                f"({allowed})"
            )
    missing = [f.name for f in fields.values() if f.required and f.name not in content]
    if missing:
        raise ValueError(
            "the elicitation requires "
            + ", ".join(repr(printable_line(n)) for n in missing)
            + " (missing from the content)"
        )
    plain = {k: list(v) if isinstance(v, tuple) else v for k, v in content.items()}
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class CoreAnswer(NamedTuple):
    """An answer as the core reads it: ("elicitation", action, content JSON or "", "")."""

    tag: str
    action: str
    content: str
    spare: str


def core_answer(request: ElicitationRequest, reply: object) -> CoreAnswer | None:
    """`on_elicitation`'s answer checked and made the core's tuple; None declines."""
    if reply is None:
        return None
    if hasattr(reply, "__await__"):
        close = getattr(reply, "close", None)
        if close is not None:
            close()  # a coroutine never awaited: no "never awaited" warning
        raise TypeError(
            "on_elicitation returned an awaitable: only AsyncClient awaits one "
            "(with Client, return the ElicitationReply itself)"
        )
    if not isinstance(reply, ElicitationReply):
        raise TypeError(
            "on_elicitation must return an acp_fast.ElicitationReply or None "
            f"(got {type(reply).__name__})"
        )
    content = ""
    if reply.action == "accept" and (reply.content is not None or request.mode == "form"):
        # A form accepted without content still owes its required properties.
        content = check_content(request, reply.content or {})
    return CoreAnswer("elicitation", reply.action, content, "")


def request_of(row: tuple[Any, ...]) -> ElicitationRequest:
    """The core's tuple as `ElicitationRequest` (the schema and ids parsed: the core bounded
    them)."""
    (session, mode, message, schema, url, eid, tool_call, scope, request_id, envelope) = row
    return ElicitationRequest(
        session_id=session,
        mode=mode,
        message=message,
        requested_schema=json.loads(schema) if schema is not None else None,
        url=url,
        elicitation_id=eid,
        tool_call_id=tool_call,
        scope_request_id=json.loads(scope) if scope is not None else None,
        request_id=json.loads(request_id),
        envelope=envelope,
    )


def preview(
    on_elicitation: Callable[[ElicitationRequest], Any] | None,
    deferrable: bool,
    declines: Callable[[], Sequence[ElicitationRule]] = tuple,
) -> Callable[[tuple[Any, ...]], Any] | None:
    """What the core calls with each elicitation's fields: ``on_elicitation``'s answer as a
    `CoreAnswer`; with ``deferrable`` (`AsyncClient`) an awaitable answer is wrapped so that it
    resolves to one (checked as a plain answer is). An elicitation one of ``declines()`` (the
    policy's `decline_elicitations`, read at each request) matches is declined without asking.
    None without ``on_elicitation``."""
    if on_elicitation is None:
        return None
    asked = on_elicitation
    if deferrable:
        import inspect

    def ask(row: tuple[Any, ...]) -> Any:
        request = request_of(row)
        if any(rule.matches(request.mode, request.message, request.url) for rule in declines()):
            return core_answer(request, ElicitationReply("decline"))
        reply = asked(request)
        if deferrable and inspect.isawaitable(reply):
            return _settled(request, reply)
        return core_answer(request, reply)

    return ask


def _settled(request: ElicitationRequest, reply: Awaitable[Any]) -> Any:
    """A future of the awaited reply's `CoreAnswer`. The reply runs as a task of its own from
    now, and cancelling the future (the agent withdrew the request, the turn is cancelled, the
    client closed) cancels it: a coroutine wrapped in another coroutine would never be awaited
    when the cancel comes before its first step."""
    import asyncio

    inner = asyncio.ensure_future(reply)
    outer: asyncio.Future[CoreAnswer | None] = inner.get_loop().create_future()

    def settle(task: asyncio.Future[Any]) -> None:
        if outer.done():
            return
        if task.cancelled():
            outer.cancel()
            return
        error = task.exception()
        if error is None:
            try:
                outer.set_result(core_answer(request, task.result()))
                return
            except (TypeError, ValueError) as wrong:
                error = wrong
        outer.set_exception(error)

    inner.add_done_callback(settle)
    outer.add_done_callback(lambda f: inner.cancel() if f.cancelled() else None)
    return outer


def answer_of(result: object, permission: Callable[[object], Any]) -> Any:
    """An awaited observer's result as the core reads it: an elicitation's `CoreAnswer` as it
    is, anything else through the permission reader (`_convert.observer_answer`)."""
    if isinstance(result, CoreAnswer):
        return result
    return permission(result)

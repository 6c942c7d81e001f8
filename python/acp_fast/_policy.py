"""The permission policy's records (`PermissionPolicy`, `PermissionRule`, `PermissionOutcome`,
`PermissionDecision`) and the tool kinds they name; `_types` re-exports them."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass


class PermissionDecision(enum.StrEnum):
    """What a permission tier decided; the record's `decision` is its value."""

    ALLOW = "allow"
    DENY = "deny"
    CANCEL = "cancel"


def _strings(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence of strings (got {type(value).__name__})")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{name} must hold strings (got {type(item).__name__})")
    return items


#: The tool kinds of ACP (``ToolKind`` in the schema), the values `PermissionRule.kind` and
#: `PermissionPolicy.allowed_tool_kinds` accept.
TOOL_KINDS = (
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
)


def tool_kind(value: object, name: str) -> str:
    """`value` as one of `TOOL_KINDS` (case-insensitive): a misspelt kind would silently match
    nothing, so a rule meant to deny would deny nothing."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str (got {type(value).__name__} {value!r})")
    kind = value.lower()
    if kind not in TOOL_KINDS:
        raise ValueError(
            f"{name} {value!r} is not an ACP tool kind; use one of: {', '.join(TOOL_KINDS)}"
        )
    return kind


@dataclass(frozen=True)
class PermissionRule:
    """One allow or deny rule of a `PermissionPolicy`.

    A rule matches a permission request when every field it sets matches.
    ``PermissionRule()`` matches every request.

    Args:
        kind: The tool kind (the request's, else the one announced for its tool call) must be
            this one of `TOOL_KINDS` (read, edit, delete, move, search, execute, think, fetch,
            switch_mode, other). Case-insensitive; stored lowercase. None: any kind.
        title: As a `str`, a case-insensitive substring of the request's title; as a
            compiled `re.Pattern`, it must ``.search()`` the title. An absent title is "".
            None: any title.
        name: The tool call's ``name`` (schema 1.22: the agent's own tool name, such as
            ``Bash`` or ``mcp__github__create_issue``; the request's, else the one announced
            for its tool call). As a `str`, exactly this name (case-sensitive; regex-looking
            text is plain text); as a compiled `re.Pattern`, it must ``.search()`` the name's
            first 16 KiB (a longer name matches deny rules and no allow rule). A request
            without a name never matches a rule with a name. None: any name.

    Raises:
        TypeError: ``kind`` is not a str, or ``title`` or ``name`` not a str or str pattern.
        ValueError: ``kind`` is not an ACP tool kind (the message lists them).
    """

    kind: str | None = None
    title: str | re.Pattern[str] | None = None
    name: str | re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        if self.kind is not None:
            object.__setattr__(self, "kind", tool_kind(self.kind, "PermissionRule.kind"))
        for field_name in ("title", "name"):
            value = getattr(self, field_name)
            if value is not None and not isinstance(value, str):
                if not isinstance(value, re.Pattern) or not isinstance(value.pattern, str):
                    raise TypeError(
                        f"PermissionRule.{field_name} must be a str, a str re.Pattern or None "
                        f"(got {value!r})"
                    )


#: How much of an elicitation's message or URL a pattern searches (as titles are cut).
RULE_TEXT_CHARS = 16 * 1024


@dataclass(frozen=True)
class ElicitationRule:
    """A rule of `PermissionPolicy.decline_elicitations`: an elicitation it matches is
    declined by the policy, without asking the observer's ``on_elicitation``.

    A rule matches when every field it sets matches; ``ElicitationRule()`` matches every
    elicitation.

    Args:
        mode: "form" or "url" (another value the protocol may add matches only itself).
            None: any mode.
        message: As a `str`, a case-insensitive substring of the request's message; as a
            compiled `re.Pattern`, it must ``.search()`` the message's first 16 KiB. None: any
            message.
        url: As ``message``, for a url-mode request's URL (a form never matches a rule that
            sets ``url``). None: any URL.

    Raises:
        TypeError: a field is not a str, a str pattern or None.
    """

    mode: str | None = None
    message: str | re.Pattern[str] | None = None
    url: str | re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        if self.mode is not None and not isinstance(self.mode, str):
            raise TypeError(f"ElicitationRule.mode must be a str or None (got {self.mode!r})")
        for field_name in ("message", "url"):
            value = getattr(self, field_name)
            if value is not None and not isinstance(value, str):
                if not isinstance(value, re.Pattern) or not isinstance(value.pattern, str):
                    raise TypeError(
                        f"ElicitationRule.{field_name} must be a str, a str re.Pattern or None "
                        f"(got {value!r})"
                    )

    def matches(self, mode: str, message: str, url: str | None) -> bool:
        """Whether an elicitation of `mode` with `message` (and `url`) matches this rule."""
        if self.mode is not None and self.mode != mode:
            return False
        if self.message is not None and not _text_matches(self.message, message):
            return False
        if self.url is not None and (url is None or not _text_matches(self.url, url)):
            return False
        return True


def _text_matches(rule: str | re.Pattern[str], text: str) -> bool:
    text = text[:RULE_TEXT_CHARS]
    if isinstance(rule, str):
        return rule.casefold() in text.casefold()
    return rule.search(text) is not None


def _rules(value: object, name: str) -> tuple[PermissionRule, ...]:
    if isinstance(value, (str, PermissionRule)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence of PermissionRule (got {value!r})")
    items = tuple(value)
    for item in items:
        if not isinstance(item, PermissionRule):
            raise TypeError(f"{name} must hold PermissionRule items (got {item!r})")
    return items


@dataclass(frozen=True)
class PermissionPolicy:
    """How the client answers the agent's permission requests; the first tier that decides wins:

    0. the session is being cancelled: ``cancelled`` (nobody is asked);
    1. ``remember`` and an "always" answer kept for this session's (kind, title);
    2. a ``deny`` rule matches: deny; 3. an ``allow`` rule matches: allow;
    4. the observer's ``on_permission`` returns a `PermissionReply` or `PermissionOutcome`;
    5. the kind is in ``allowed_tool_kinds`` or the title starts with an
       ``allowed_title_prefixes`` entry: allow;
    6. ``default``.

    Allow takes the first ``allow_once`` option, else the first ``allow_always``; deny the first
    ``reject_once``, else the last ``reject_always``; ``persist`` tries the ``*_always`` kind
    first. No fitting option answers ``cancelled`` (tier 5 falls back to rejecting).

    Rules are applied before anyone is asked: a request an allow or deny rule decides never
    reaches the observer's ``on_permission``.

    Args:
        allowed_tool_kinds: Tool kinds allowed at tier 5 (each one of `TOOL_KINDS`,
            case-insensitive).
        allowed_title_prefixes: Title prefixes allowed at tier 5.
        allow: `PermissionRule` items that allow a request (tier 3).
        deny: `PermissionRule` items that deny a request (tier 2; they win over ``allow``).
        default: What tier 6 decides: a `PermissionDecision` or its value ("deny" by default).
        persist: Prefer the agent's ``allow_always``/``reject_always`` options.
        remember: Remember an "always" answer per session, (kind, title), for later requests.
        decline_elicitations: `ElicitationRule` items: an elicitation one matches is declined
            without asking ``on_elicitation`` (rules decide before the observer, as ``deny``
            does for permission requests).

    Raises:
        TypeError: a field has the wrong type (a str where a list is expected, a rule that is
            not a `PermissionRule`, a flag that is not a bool).
        ValueError: an ``allowed_tool_kinds`` entry is not an ACP tool kind.
    """

    allowed_tool_kinds: tuple[str, ...] = ()
    allowed_title_prefixes: tuple[str, ...] = ()
    allow: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()
    default: PermissionDecision = PermissionDecision.DENY
    persist: bool = False
    remember: bool = False
    decline_elicitations: tuple[ElicitationRule, ...] = ()

    def __init__(
        self,
        allowed_tool_kinds: Iterable[str] = (),
        allowed_title_prefixes: Iterable[str] = (),
        allow: Iterable[PermissionRule] = (),
        deny: Iterable[PermissionRule] = (),
        default: PermissionDecision | str = PermissionDecision.DENY,
        persist: bool = False,
        remember: bool = False,
        decline_elicitations: Iterable[ElicitationRule] = (),
    ) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        kinds = _strings(allowed_tool_kinds, "allowed_tool_kinds")
        put("allowed_tool_kinds", tuple(tool_kind(k, "allowed_tool_kinds entry") for k in kinds))
        put("allowed_title_prefixes", _strings(allowed_title_prefixes, "allowed_title_prefixes"))
        put("allow", _rules(allow, "allow"))
        put("deny", _rules(deny, "deny"))
        if not isinstance(default, str) or default not in PermissionDecision._value2member_map_:
            raise TypeError(f"default must be a PermissionDecision (got {default!r})")
        put("default", PermissionDecision(default))
        for name, flag in (("persist", persist), ("remember", remember)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool (got {flag!r})")
            put(name, flag)
        if isinstance(decline_elicitations, (str, ElicitationRule)) or not isinstance(
            decline_elicitations, Iterable
        ):
            raise TypeError(
                "decline_elicitations must be a sequence of ElicitationRule "
                f"(got {decline_elicitations!r})"
            )
        declines = tuple(decline_elicitations)
        for rule in declines:
            if not isinstance(rule, ElicitationRule):
                raise TypeError(
                    f"decline_elicitations must hold ElicitationRule items (got {rule!r})"
                )
        put("decline_elicitations", declines)


@dataclass(frozen=True)
class PermissionOutcome:
    """An observer's decision (tier 4): the option is chosen as for the rules, preferring
    `option_id` when the agent offered it with a kind that agrees with `decision`."""

    decision: PermissionDecision
    option_id: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.decision, str) or (
            self.decision not in PermissionDecision._value2member_map_
        ):
            raise TypeError(f"decision must be a PermissionDecision (got {self.decision!r})")
        object.__setattr__(self, "decision", PermissionDecision(self.decision))
        for name in ("option_id", "reason"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None (got {value!r})")

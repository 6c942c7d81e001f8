"""Options, results and records of acp-fast: frozen data classes and string enums.

`Update` is the one record built on the hot path; it lives in the Rust core (see `_core.pyi`)
and behaves like the frozen data classes here (equality, repr, hash).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import InvalidLimits

if TYPE_CHECKING:
    from .model import CompactionUpdate, Notice

# The Rust core looks `UpdateKind` up here by name (crates/acp-fast-py/src/errors.rs); the
# permission policy's records are re-exported from `_policy` as well.
from ._kinds import UpdateKind as UpdateKind
from ._policy import TOOL_KINDS as TOOL_KINDS
from ._policy import ElicitationRule as ElicitationRule
from ._policy import PermissionDecision as PermissionDecision
from ._policy import PermissionOutcome as PermissionOutcome
from ._policy import PermissionPolicy as PermissionPolicy
from ._policy import PermissionRule as PermissionRule
from ._policy import _strings
from ._policy import tool_kind as tool_kind


class OverflowKind(enum.StrEnum):
    """Which reply limit a prompt reached."""

    RESPONSE_BYTES = "response_bytes"
    RESPONSE_SEGMENTS = "response_segments"


# --- options -------------------------------------------------------------------------------


_MIB = 1024 * 1024
# The largest value a size or count limit may take (the core holds them as 64-bit integers).
_LIMIT_MAX = 2**64 - 1


def _check_limit(owner: str, name: str, value: object) -> None:
    """A limit is an int above zero: TypeError names the option and the type expected,
    ValueError the value out of range (raised here, at construction, not later in `Client`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an int (got {type(value).__name__} {value!r})")
    if not 0 < value <= _LIMIT_MAX:
        raise InvalidLimits(
            f"{owner}.{name} must be above zero and at most 2**64 - 1 (got {value!r})"
        )


@dataclass(frozen=True)
class ReaderLimits:
    """The reader's limit on one line from the agent.

    Args:
        message_bytes: The longest line, in bytes, accepted from the agent (the newline not
            counted); the reader allocates ``message_bytes + 1`` bytes once. A longer line
            stops reading with `ReaderMessageCapacityExceeded`. Default 2 MiB.

    Raises:
        TypeError: ``message_bytes`` is not an int.
        InvalidLimits: ``message_bytes`` is zero, negative or above 2**64 - 1 (a value too
            large to allocate raises `CapacityOverflow` when the client is made).
    """

    message_bytes: int = 2 * _MIB

    def __post_init__(self) -> None:
        _check_limit("ReaderLimits", "message_bytes", self.message_bytes)


#: The reader's default: lines of up to 2 MiB.
DEFAULT_READER_LIMITS = ReaderLimits(message_bytes=2 * _MIB)


@dataclass(frozen=True)
class TransferLimits:
    """Caps on the traffic of one client. Every field is an int above zero; each defaults to
    the value in `DEFAULT_TRANSFER_LIMITS`, so ``TransferLimits(response_bytes=1 << 30)``
    changes one cap and keeps the others.

    Args:
        request_bytes: The largest message written to the agent, newline included (a prompt
            larger than this raises `RequestCapacityExceeded`; nothing is sent). Default 1 MiB.
        response_bytes: The most reply text (UTF-8 bytes) one prompt keeps; past it the reply
            is cut and `PromptResult.overflow` says where. Default 64 MiB.
        update_bytes: The largest ``session/update`` line accepted (surrounding whitespace
            trimmed); a larger one raises `UpdateCapacityExceeded`. Default 8 MiB.
        update_count: The most updates one client accepts over its whole life; past it calls
            raise `UpdateCountCapacityExceeded`. Default 2**63 - 1 (no practical cap).
        response_segment_count: The most agent message chunks one prompt's reply keeps.
            Default 1,000,000.

    Raises:
        TypeError: a field is not an int (``TransferLimits(1.5)``, ``TransferLimits("1")``).
        InvalidLimits: a field is zero, negative or above 2**64 - 1 (a `ValueError`).
    """

    request_bytes: int = 1 * _MIB
    response_bytes: int = 64 * _MIB
    update_bytes: int = 8 * _MIB
    update_count: int = 2**63 - 1
    response_segment_count: int = 1_000_000

    def __post_init__(self) -> None:
        for name in (
            "request_bytes",
            "response_bytes",
            "update_bytes",
            "update_count",
            "response_segment_count",
        ):
            _check_limit("TransferLimits", name, getattr(self, name))


#: The defaults of `Client`: 1 MiB requests, 64 MiB reply text per prompt, 8 MiB updates, no
#: practical lifetime update cap (2**63 - 1) and 1,000,000 chunks per reply.
DEFAULT_TRANSFER_LIMITS = TransferLimits(
    request_bytes=1 * _MIB,
    response_bytes=64 * _MIB,
    update_bytes=8 * _MIB,
    update_count=2**63 - 1,
    response_segment_count=1_000_000,
)


@dataclass(frozen=True)
class EnvVariable:
    """One environment variable for an MCP server."""

    name: str
    value: str


def _tuple_field(instance: object, name: str) -> None:
    object.__setattr__(instance, name, tuple(getattr(instance, name)))


@dataclass(frozen=True)
class McpServer:
    """A stdio MCP server the agent is asked to start for the session."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[EnvVariable, ...] = ()

    def __init__(
        self,
        name: str,
        command: str,
        args: Iterable[str] = (),
        env: Iterable[EnvVariable] = (),
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "env", tuple(env))


@dataclass(frozen=True)
class ClientCapabilityConfig:
    """What the client advertises in `initialize` and serves (design/host.md §1); fixed for the
    client's life. Files are confined to each session's cwd and additional directories (and
    ``additional_directories`` here) after resolving symlinks and ``..``; ``allow_any_path``
    lifts that and should stay off. Files and terminals are ACP v1's: v2 has no host side, so
    a client made with ``protocol="v2"`` refuses them (`ValueError`) and one made with
    ``protocol="auto"`` serves them only when the agent speaks v1 (``client.serves_host``)."""

    read_text_file: bool = True
    write_text_file: bool = True
    terminal: bool = True
    additional_directories: tuple[str, ...] = ()
    allow_any_path: bool = False
    #: The host's cap on a terminal's retained output, in bytes (> 0).
    terminal_output_bytes: int = 1 << 20
    #: A missing file inside the roots reads as "" (Gemini CLI's write tool reads first).
    read_missing_as_empty: bool = False
    #: Opt-in: a shell (absolute path, e.g. "/bin/sh") that runs a `terminal/create` without
    #: `args` as `[shell, "-c", command]`, for agents that send whole shell lines
    #: (claude-code-acp). None (default): commands run without a shell.
    terminal_shell: str | None = None
    #: Terminals one session may have at once (released ones free their slot); more are
    #: refused with an error naming this cap.
    max_terminals: int = 32
    #: Opt-in: advertise ``clientCapabilities.session.notices``, so an agent sends user-facing
    #: notices (billing, rate limits...) as ``notice`` updates (`TurnResult.notices`) instead
    #: of as reply text. Off by default: an agent that sees it changes what it sends.
    notices: bool = False
    #: Opt-in: advertise ``clientCapabilities.session.compaction``, so an agent reports its
    #: context compactions (`TurnResult.compactions`, the fold's ``compactions``).
    compaction: bool = False
    #: Opt-in: advertise ``clientCapabilities.auth.terminal``, so an agent may offer terminal
    #: login methods (``initialize.auth_methods`` of type "terminal", run with
    #: `Client.terminal_login`). Off by default: only a caller that can hand the agent a
    #: terminal should ask for them.
    auth_terminal: bool = False
    #: ``additional_directories`` as given (the realpaths are above): a directory given through
    #: a symlink answers requests in both forms (design/host.md §2).
    _given_directories: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "read_text_file",
            "write_text_file",
            "terminal",
            "allow_any_path",
            "read_missing_as_empty",
            "notices",
            "compaction",
            "auth_terminal",
        ):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool (got {getattr(self, name)!r})")
        directories = _strings(self.additional_directories, "additional_directories")
        for directory in directories:
            if not os.path.isabs(directory):
                raise ValueError(f"additional_directories must be absolute (got {directory!r})")
        object.__setattr__(self, "_given_directories", directories)
        object.__setattr__(
            self, "additional_directories", tuple(os.path.realpath(d) for d in directories)
        )
        size = self.terminal_output_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"terminal_output_bytes must be an int above zero (got {size!r})")
        cap = self.max_terminals
        if isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
            raise ValueError(f"max_terminals must be an int above zero (got {cap!r})")
        shell = self.terminal_shell
        if shell is not None:
            if not isinstance(shell, str):
                raise TypeError(f"terminal_shell must be a str or None (got {shell!r})")
            if not os.path.isabs(shell):
                raise ValueError(f"terminal_shell must be an absolute path (got {shell!r})")
            if not (os.path.isfile(shell) and os.access(shell, os.X_OK)):
                raise ValueError(f"terminal_shell {shell!r} is not an executable file")


class ClientMethod(enum.StrEnum):
    """A host request's method; values are the wire names."""

    FS_READ_TEXT_FILE = "fs/read_text_file"
    FS_WRITE_TEXT_FILE = "fs/write_text_file"
    TERMINAL_CREATE = "terminal/create"
    TERMINAL_OUTPUT = "terminal/output"
    TERMINAL_WAIT_FOR_EXIT = "terminal/wait_for_exit"
    TERMINAL_KILL = "terminal/kill"
    TERMINAL_RELEASE = "terminal/release"


@dataclass(frozen=True)
class ClientActivity:
    """One `fs/*` or `terminal/*` request from the agent and what was answered.

    ``allowed`` is False when the request was refused by the capability, params or
    confinement checks (``reason`` says why); an operation that ran and failed (a missing
    file) is allowed with its ``error_code``.
    """

    method: ClientMethod
    allowed: bool
    path: str | None = None
    command: str | None = None
    terminal_id: str | None = None
    reason: str | None = None
    session_id: str = ""
    error_code: int | None = None


# --- permission records ----------------------------------------------------------------------


@dataclass(frozen=True)
class PermissionOption:
    """One option the agent offers in a permission request.

    Args:
        option_id: The option's id, sent back when it is chosen.
        name: Its label for a person.
        kind: "allow_once", "allow_always", "reject_once" or "reject_always" (as sent).
    """

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True)
class PermissionReply:
    """An observer's own answer to a permission request.

    `outcome` is sent as is (`selected` or `cancelled`); `option_id` is sent as `optionId` when
    not empty; `option_kind` is only recorded.
    """

    outcome: str
    option_id: str = ""
    option_kind: str = ""


@dataclass(frozen=True)
class PermissionRequest:
    """A `session/request_permission` from the agent, with the client's decision.

    The preview handed to `on_permission` has outcome "pending", empty option fields and an
    empty envelope; `on_permission_commit` gets the decision and the exact line.
    """

    session_id: str
    tool_call_id: str
    title: str
    tool_kind: str
    status: str
    outcome: str
    option_id: str
    option_kind: str
    options: tuple[PermissionOption, ...]
    envelope: str
    request_id: str | int | float | bool | None
    #: The deciding tier's `PermissionDecision` value and why ("deny rule 0", "remembered",
    #: "session cancelled", "observer", "default" ...); both "" in the preview.
    decision: str = ""
    reason: str = ""
    #: The tool call's ``name`` (schema 1.22, e.g. "Bash"): the request's own, else the one
    #: its ``tool_call`` announced; "" when the agent sent neither. `PermissionRule(name=…)`
    #: matches it. The agent's text: escape it before printing it to a terminal.
    tool_name: str = ""

    def decode(self, *, strict: bool = True) -> Any:
        """The request's params as `acp_fast.model.RequestPermissionRequest`: from the
        committed record's envelope, or, on the preview handed to ``on_permission`` (whose
        ``envelope`` is ""), from the line the core keeps on it."""
        from . import model

        line = self.envelope or self.__dict__.get("_line", "")
        if not line:
            raise ValueError("this record has no request line to decode (it was made by hand)")
        return model.decode_permission_request(line, strict=strict)


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Overflow:
    """A record that a reply stopped at a limit. Byte counts are UTF-8 bytes."""

    kind: OverflowKind
    admitted_bytes: int
    admitted_segments: int
    withheld_update_sequence: int


@dataclass(frozen=True)
class PromptResult:
    """What a prompt returned.

    Args:
        response: The reply text (the agent message chunks of the turn, joined).
        stop_reason: Why the turn ended, as the agent said ("end_turn", "cancelled" ...).
        overflow: Set when the reply stopped at a `TransferLimits` cap (`Overflow`).
    """

    response: str
    stop_reason: str
    overflow: Overflow | None


@dataclass(frozen=True)
class TokenUsage:
    """The tokens of a turn, as the agent's ``session/prompt`` result says (its ``usage``
    object, unstable in the schema). A count the agent sent as anything but an integer from 0
    to 2**64 - 1 reads as None; ``meta`` is its ``_meta`` object, if any."""

    total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class TurnResult(PromptResult):
    """One turn of a session: the reply as `PromptResult` has it, and the final state of what
    the turn announced (tool calls, the latest plan, commands and usage), decoded leniently.

    ``usage`` is the turn's last ``usage_update`` (`acp_fast.model.UsageUpdate`: context window
    and cumulative ``cost``, its amount exactly as sent); ``tokens`` the prompt result's own
    ``usage`` (`TokenUsage`). ``notices`` are the turn's ``notice`` updates
    (`acp_fast.model.Notice`, in order, the first 256), never part of ``response``;
    ``compactions`` each compaction of the turn folded to its final state
    (`acp_fast.model.CompactionUpdate`: status, error, and the whole summary, chunks appended;
    the first 256 compactions, summaries within ``TransferLimits.response_bytes``)."""

    session_id: str = ""
    tool_calls: tuple[Any, ...] = ()
    plan: tuple[Any, ...] | None = None
    available_commands: tuple[Any, ...] | None = None
    current_mode_id: str | None = None
    usage: Any = None
    notices: tuple[Notice, ...] = ()
    compactions: tuple[CompactionUpdate, ...] = ()
    tokens: TokenUsage | None = None


@dataclass(frozen=True)
class ReaderStatus:
    """A snapshot of the line reader: its limit, buffer, bytes waiting, longest line seen,
    rejected lines, and whether reading has stopped (`terminal`)."""

    phase: str
    message_bytes: int
    storage_bytes: int
    buffered_bytes: int
    high_water_message_bytes: int
    rejected_message_count: int
    terminal: bool


@dataclass(frozen=True)
class AuthMethod:
    """One way to authenticate that the agent offers in ``initialize``.

    Args:
        id: The id to pass to ``authenticate``.
        name: Its label.
        description: What it does ("" when not given).
        type: "terminal", another string as sent (e.g. "env_var"), "" for agent methods.
    """

    id: str
    name: str
    description: str
    #: "terminal", another string as sent (e.g. codex's "env_var"), "" for agent methods.
    type: str = ""


@dataclass(frozen=True)
class Initialize:
    """The agent's answer to `initialize`. Before `start`: version 0, flags False, empty."""

    protocol_version: int = 0
    load_session: bool = False
    prompt_image: bool = False
    prompt_audio: bool = False
    prompt_embedded_content: bool = False
    auth_methods: tuple[AuthMethod, ...] = ()
    agent_info: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    #: The agent's ``agentCapabilities`` object as sent ({} before `start`).
    agent_capabilities: Any = field(default_factory=dict)


@dataclass(frozen=True)
class Mode:
    """A session mode the agent offers (its ``id``, ``name`` and ``description``)."""

    id: str
    name: str
    description: str


@dataclass(frozen=True)
class Modes:
    """A session's current mode id and the modes it offers ("" and () when none)."""

    current: str = ""
    available: tuple[Mode, ...] = ()


@dataclass(frozen=True)
class ModelOption:
    """A model the agent offers for a session (its ``id``, ``name`` and ``description``)."""

    id: str
    name: str
    description: str


@dataclass(frozen=True)
class Models:
    """A session's models: from its ``"model"`` config option, else the legacy ``models``
    object of the session result, else empty."""

    current: str = ""
    available: tuple[ModelOption, ...] = ()


# --- prompt content blocks ------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A text content block of a prompt."""

    text: str


@dataclass(frozen=True)
class Image:
    """An image content block (needs the agent's ``promptCapabilities.image``).

    Args:
        mime_type: e.g. "image/png".
        data: The image, base64-encoded.
        uri: Where it came from (optional).
    """

    mime_type: str
    data: str
    uri: str = ""


@dataclass(frozen=True)
class Audio:
    """An audio content block (needs the agent's ``promptCapabilities.audio``).

    Args:
        mime_type: e.g. "audio/wav".
        data: The audio, base64-encoded.
        uri: Where it came from (optional).
    """

    mime_type: str
    data: str
    uri: str = ""


@dataclass(frozen=True)
class TextResource:
    """An embedded text resource (needs ``promptCapabilities.embeddedContext``): a file's
    ``uri`` and its ``text``, with an optional ``mime_type``."""

    uri: str
    text: str
    mime_type: str = ""


@dataclass(frozen=True)
class BlobResource:
    """An embedded binary resource (needs ``promptCapabilities.embeddedContext``): its
    ``uri`` and ``blob`` (base64), with an optional ``mime_type``."""

    uri: str
    blob: str
    mime_type: str = ""


@dataclass(frozen=True)
class ResourceLink:
    """A link to a resource the agent may fetch itself: ``uri`` and ``name``, optionally
    ``mime_type``, ``title``, ``description`` and ``size`` in bytes."""

    uri: str
    name: str
    mime_type: str = ""
    title: str = ""
    description: str = ""
    size: int | None = None


ContentBlock = Text | Image | Audio | TextResource | BlobResource | ResourceLink


# --- observer -------------------------------------------------------------------------------

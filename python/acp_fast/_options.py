"""The client's options as the facade hands them to the Rust core: `ClientInfo`, `Observer`,
the option object (`_CoreOptions`), the checks that name a wrong option (first-use.md §1), the
journal's epoch, and which `start()` failures are a `ConnectError`. (Values are converted in
`_convert`.)"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import _core
from ._core import Update
from ._elicitation import ElicitationRequest
from ._errors import InvalidLimits
from ._types import (
    ClientActivity,
    ClientCapabilityConfig,
    PermissionOutcome,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    ReaderLimits,
    TransferLimits,
)


def _package_version() -> str:
    # The compiled module's: `ClientInfo` lives here, not in `_types`, which the core imports.
    return _core.__version__


@dataclass(frozen=True)
class ClientInfo:
    """What the client reports about itself in ``initialize`` (``clientInfo``).

    Args:
        name: The client's name. Default "acp-fast".
        title: A human-readable title. Default "acp-fast".
        version: The client's version. Default the installed acp-fast version.
    """

    name: str = "acp-fast"
    title: str = "acp-fast"
    version: str = field(default_factory=_package_version)

    def __post_init__(self) -> None:
        for name in ("name", "title", "version"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"ClientInfo.{name} must be a str (got {type(value).__name__})")


@dataclass(frozen=True)
class _CoreOptions:
    """Everything `_core.CoreClient` reads, by name; it validates each value itself, so every
    limit's message lives in one place (the Rust binding)."""

    command: str
    args: list[str]
    message_bytes: object
    transfer_limits: TransferLimits
    transport_epoch: object
    cwd: str | None
    env: list[tuple[str, str]] | None
    client_info: tuple[str, str, str]
    mcp_servers: list[tuple[Any, ...]]
    permission_policy: PermissionPolicy
    on_update: Any
    permission_preview: Any
    permission_commit: Any
    on_sent: Any
    on_received: Any
    fold: Any
    stderr: str
    stderr_tail_bytes: object
    agent_id: str
    cancel_grace: float
    #: None (advertise nothing), else the `ClientCapabilityConfig` (host.md §1), which the core
    #: reads by attribute name.
    capabilities: Any = None
    on_activity: Any = None
    #: A missing `on_update` / `on_permission_commit` fails the call (the seed's audit rule).
    durable: bool = False
    #: `observer.on_elicitation` wrapped by `_elicitation.preview` (None: not advertised).
    elicitation_preview: Any = None
    #: The ACP version to offer: "v1", "v2" or "auto" (offer 2, fall back to 1).
    protocol: str = "v1"


def _check_type(value: object, expected: type | tuple[type, ...], name: str, what: str) -> None:
    """TypeError naming the option and the type expected (first-use.md §1)."""
    if not isinstance(value, expected):
        raise TypeError(f"{name} must be {what} (got {type(value).__name__} {value!r})")


def _check_options(
    reader_limits: object,
    transfer_limits: object,
    permission_policy: object,
    client_info: ClientInfo | None,
    capabilities: object,
    durable: object,
    agent_id: object,
    cancel_grace: object,
    session_state: object,
    interrupt: object,
    protocol: object = "v1",
) -> ClientInfo:
    """The client's options that the core does not check itself (first-use.md §1); the
    `ClientInfo` to report (the default one for None)."""
    _check_type(reader_limits, ReaderLimits, "reader_limits", "a ReaderLimits")
    _check_type(transfer_limits, TransferLimits, "transfer_limits", "a TransferLimits")
    _check_type(permission_policy, PermissionPolicy, "permission_policy", "a PermissionPolicy")
    if client_info is None:
        client_info = ClientInfo()
    _check_type(client_info, ClientInfo, "client_info", "a ClientInfo or None")
    if capabilities is not None:
        _check_type(
            capabilities, ClientCapabilityConfig, "capabilities", "a ClientCapabilityConfig"
        )
    _check_type(durable, bool, "durable", "a bool")
    if agent_id is not None:
        _check_type(agent_id, str, "agent_id", "a str or None")
    if isinstance(cancel_grace, bool) or not isinstance(cancel_grace, (int, float)):
        raise TypeError(
            f"cancel_grace must be a number of seconds (got {type(cancel_grace).__name__})"
        )
    if session_state not in ("off", "lenient", "strict"):
        raise ValueError(
            f'session_state must be "off", "lenient" or "strict" (got {session_state!r})'
        )
    if interrupt not in ("raise", "cancel"):
        raise ValueError(f'interrupt must be "raise" or "cancel" (got {interrupt!r})')
    check_protocol(protocol, capabilities)
    return client_info


#: The values of `Client(protocol=...)`.
PROTOCOLS = ("v1", "v2", "auto")


def check_protocol(protocol: object, capabilities: object) -> None:
    """``protocol`` is one of `PROTOCOLS`; ``protocol="v2"`` with files or terminals to serve
    is refused: ACP v2 has no host side (no ``fs/*``, no ``terminal/*``), so a client that
    must serve them cannot keep that promise (with "auto" the agent decides; see
    `Client.serves_host`)."""
    if not isinstance(protocol, str):
        raise TypeError(
            f'protocol must be a str, one of "v1", "v2" or "auto" (got '
            f"{type(protocol).__name__} {protocol!r})"
        )
    if protocol not in PROTOCOLS:
        raise ValueError(f'protocol must be "v1", "v2" or "auto" (got {protocol!r})')
    if protocol == "v2" and isinstance(capabilities, ClientCapabilityConfig):
        served = host_side(capabilities)
        if served:
            raise ValueError(
                f'protocol="v2" cannot serve {", ".join(served)}: ACP v2 has no fs/* or '
                "terminal/* methods. Turn them off in capabilities=ClientCapabilityConfig("
                "read_text_file=False, write_text_file=False, terminal=False), or use "
                'protocol="auto" (served when the agent speaks v1) or protocol="v1"'
            )


def host_side(capabilities: ClientCapabilityConfig | None) -> list[str]:
    """The host-side capabilities (ACP v1 only) `capabilities` serves, as the options name
    them."""
    if capabilities is None:
        return []
    return [
        name
        for name in ("read_text_file", "write_text_file", "terminal")
        if getattr(capabilities, name)
    ]


def _journal_epoch(observer: object) -> int | None:
    """When `observer` is a journal: the epoch after every epoch it holds (what the CLI does),
    so appending runs never collide on (epoch, sequence). None for any other observer."""
    module = sys.modules.get("acp_fast.journal.observer")  # not loaded: not a journal
    if module is None or not isinstance(observer, module._Journal):
        return None
    writer = getattr(observer, "_writer", None)
    seen: list[int] = [
        observer.last_transport_epoch,
        observer.transport_epoch or 0,
        getattr(writer, "last_epoch", 0) or 0,
    ]
    epoch = max(seen) + 1
    if epoch > 2**64 - 1:  # a journal file is input: its epochs may be anything
        raise InvalidLimits(
            f"the journal {getattr(observer, 'path', '')!r} already holds epoch 2**64 - 1, so "
            "no later epoch exists: pass transport_epoch= yourself or start a new journal"
        )
    return epoch


@dataclass(frozen=True)
class Observer:
    """A ready observer holding up to five callables; any may be None."""

    on_update: Callable[[Update], None] | None = None
    on_permission: (
        Callable[[PermissionRequest], PermissionReply | PermissionOutcome | None] | None
    ) = None
    on_permission_commit: Callable[[PermissionRequest], None] | None = None
    on_activity: Callable[[ClientActivity], None] | None = None
    on_elicitation: Callable[[ElicitationRequest], Any] | None = None

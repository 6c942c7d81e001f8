"""The Rust core of acp-fast (built by maturin). Use `acp_fast.Client`; `CoreClient` is its
engine and takes already-validated options."""

from collections.abc import Callable
from typing import Any, NoReturn, final

from ._types import UpdateKind

__all__ = [
    "DEFAULT_MESSAGE_BYTES",
    "CoreClient",
    "Update",
    "_guard_forget",
    "_guard_pid",
    "_guard_watch",
    "_serve_guard",
    "_set_guard_launcher",
]

DEFAULT_MESSAGE_BYTES: int

@final
class Update:
    """One numbered update from the agent (frozen; equality, hash and repr as a data class)."""

    __match_args__ = (
        "kind",
        "session_update",
        "transport_epoch",
        "update_sequence",
        "session_id",
        "envelope",
        "text",
        "message_id",
        "tool_call_id",
    )

    def __new__(
        cls,
        *,
        kind: UpdateKind | str,
        session_update: str,
        transport_epoch: int,
        update_sequence: int,
        session_id: str,
        envelope: str,
        text: str,
        message_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> Update: ...
    @property
    def kind(self) -> UpdateKind: ...
    @property
    def session_update(self) -> str: ...
    @property
    def transport_epoch(self) -> int: ...
    @property
    def update_sequence(self) -> int: ...
    @property
    def session_id(self) -> str: ...
    @property
    def envelope(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def tool_call_id(self) -> str | None: ...
    def json(self) -> dict[str, Any]:
        """The parsed `params.update` object of the envelope."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

# (session_id, tool_call_id, title, tool_kind, status, outcome, option_id, option_kind,
#  [(option_id, name, kind)], envelope, request_id as a Python value)
_PermissionRecord = tuple[
    str, str, str, str, str, str, str, str, list[tuple[str, str, str]], str, Any
]
_Named = list[tuple[str, str, str]]

@final
class CoreClient:
    def __new__(
        cls,
        command: str,
        args: list[str],
        message_bytes: int,
        request_bytes: int,
        response_bytes: int,
        update_bytes: int,
        update_count: int,
        response_segment_count: int,
        transport_epoch: int,
        cwd: str | None,
        env: list[tuple[str, str]] | None,
        client_info: tuple[str, str, str],
        mcp_servers: list[tuple[str, str, list[str], list[tuple[str, str]]]],
        allowed_tool_kinds: list[str],
        allowed_title_prefixes: list[str],
        on_update: Callable[[Update], object] | None,
        permission_preview: Callable[[_PermissionRecord], tuple[str, str, str] | None] | None,
        permission_commit: Callable[[_PermissionRecord], object] | None,
        stderr: str = "discard",
        stderr_tail_bytes: int = 65536,
    ) -> CoreClient: ...
    def stderr_tail(self) -> str: ...
    def start(self, cwd: str | None = None) -> None: ...
    def prompt(
        self, blocks: list[tuple[Any, ...]]
    ) -> tuple[str, str, tuple[str, int, int, int] | None]: ...
    def request_cancel(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def next_update_sequence(self) -> int: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def agent_error(self) -> str | None: ...
    def initialize_info(
        self,
    ) -> tuple[int, bool, bool, bool, bool, _Named, str | None, str] | None: ...
    def modes_info(self) -> tuple[str, _Named]: ...
    def reader_status(self) -> tuple[str, int, int, int, int, int, bool]: ...

def _set_guard_launcher(argv: list[str] | None) -> None: ...
def _guard_pid() -> int | None: ...
def _serve_guard() -> NoReturn: ...
def _guard_watch(leader: int) -> bool: ...
def _guard_forget(leader: int) -> None: ...

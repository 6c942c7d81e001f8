"""The Rust core of acp-fast (built by maturin). Use `acp_fast.Client`; `CoreClient` is its
engine and takes already-validated options."""

from collections.abc import Callable
from typing import Any, Generic, NoReturn, TypeVar, final

from ._types import UpdateKind

_T = TypeVar("_T")

__all__ = [
    "DEFAULT_MESSAGE_BYTES",
    "CoreClient",
    "JournalWriter",
    "Prepared",
    "Report",
    "SqliteWriter",
    "Update",
    "__version__",
    "_guard_forget",
    "_guard_pid",
    "_guard_watch",
    "_rebuild_update",
    "_serve_guard",
    "_set_guard_launcher",
    "pack_records",
    "unpack_records",
]

DEFAULT_MESSAGE_BYTES: int
__version__: str

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
    def decode(self, *, strict: bool = True) -> Any:
        """The update as a typed `acp_fast.model` object."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...
    def __copy__(self) -> Update: ...
    def __deepcopy__(self, memo: Any, /) -> Update: ...

# (session_id, tool_call_id, title, tool_kind, status, outcome, option_id, option_kind,
#  [(option_id, name, kind)], envelope, request_id as a Python value)
_PermissionRecord = tuple[
    str, str, str, str, str, str, str, str, list[tuple[str, str, str]], str, Any
]
_Named = list[tuple[str, str, str]]
# (response, stop_reason, overflow, session_id, tool calls JSON, plan JSON, commands JSON,
#  usage JSON, current mode id)
_Turn = tuple[
    str,
    str,
    tuple[str, int, int, int] | None,
    str,
    list[str],
    str | None,
    str | None,
    str | None,
    str,
]
# ((current mode, modes), (current model, models), config options JSON, commands JSON)
_SessionInfo = tuple[tuple[str, _Named], tuple[str, _Named], str | None, str | None]

def _rebuild_update(
    kind: UpdateKind | str,
    session_update: str,
    transport_epoch: int,
    update_sequence: int,
    session_id: str,
    envelope: str,
    text: str,
    message_id: str | None,
    tool_call_id: str | None,
) -> Update: ...

@final
class Report:
    """What a step of the asyncio driver asks of the event loop."""

    @property
    def done(self) -> list[tuple[int, bool, Any]]: ...
    @property
    def asks(self) -> list[tuple[int, Any]]: ...
    @property
    def cancelled(self) -> list[int]: ...
    @property
    def more(self) -> bool: ...
    @property
    def write(self) -> bool: ...
    @property
    def paused(self) -> bool: ...
    @property
    def ended(self) -> bool: ...
    @property
    def stopped(self) -> bool: ...
    @property
    def backlog(self) -> bool: ...
    @property
    def timeout(self) -> float | None: ...

@final
class JournalWriter:
    """The record formatting and batched writing of a JSONL journal (`acp_fast.journal`): it
    appends to a duplicate of `fd`; "batch" and "never" write from a thread of its own."""

    def __new__(
        cls,
        path: str,
        fd: int,
        fsync: str,
        size: int,
        last_record: int,
        last_epoch: int,
        observer: Callable[[Update], object] | None = None,
    ) -> JournalWriter: ...
    def update(self, update: Update) -> None: ...
    def other(self, kind: str, epoch: int | None, rest: bytes) -> None: ...
    @property
    def last_record(self) -> int: ...
    @property
    def last_epoch(self) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def forked(self) -> None: ...

@final
class SqliteWriter:
    """The rows and batched commits of a SQLite journal (`acp_fast.journal`), through a
    connection of its own on the SQLite that the loaded `_sqlite3` module (file `library`)
    calls, of version number `version` (LookupError when it cannot be reached); "batch" and
    "never" commit from a thread of its own."""

    def __new__(
        cls,
        library: str,
        version: int,
        path: str,
        fsync: str,
        last_record: int,
        last_epoch: int,
        observer: Callable[[Update], object] | None = None,
        *,
        packed: bool = True,
    ) -> SqliteWriter: ...
    def update(self, update: Update) -> None: ...
    def other(self, kind: str, epoch: int | None, rest: bytes) -> None: ...
    @property
    def last_record(self) -> int: ...
    @property
    def last_epoch(self) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def forked(self) -> None: ...

@final
class CoreClient:
    """One agent and its sans-I/O Connection, driven by a blocking loop; `options` is the
    facade's `_CoreOptions` (read by attribute name and validated here)."""

    def __new__(cls, options: Any) -> CoreClient: ...
    def stderr_tail(self) -> str: ...
    # Each call gives a Prepared: run() runs it to its end (blocking), begin() starts it under
    # the asyncio driver (its id; a later step reports its value).
    def start(
        self, cwd: str, new_session: bool, timeout: float | None = None
    ) -> Prepared[str | None]: ...
    def new_session(
        self, cwd: str, mcp_servers: list[tuple[Any, ...]] | None, additional_directories: list[str]
    ) -> Prepared[str]: ...
    def load_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[tuple[Any, ...]] | None,
        additional_directories: list[str],
        resume: bool,
    ) -> Prepared[str]: ...
    def list_sessions(self, cwd: str | None = None) -> Prepared[list[str]]: ...
    def delete_session(self, session_id: str) -> Prepared[None]: ...
    def authenticate(self, method_id: str) -> Prepared[None]: ...
    def logout(self) -> Prepared[None]: ...
    def set_mode(self, session_id: str, mode_id: str) -> Prepared[None]: ...
    def set_model(self, session_id: str, model_id: str) -> Prepared[None]: ...
    def set_config_option(
        self, session_id: str, config_id: str, value: str | bool
    ) -> Prepared[str | None]: ...
    def close_session(self, session_id: str) -> Prepared[None]: ...
    def prompt(
        self,
        session_id: str,
        blocks: list[tuple[Any, ...]],
        timeout: float | None = None,
        gated: bool = True,
        meta: list[tuple[str, str]] = ...,
    ) -> Prepared[tuple[str, _Turn | None]]: ...
    def cancel(self, session_id: str) -> None: ...
    def drain(self, timeout: float) -> int: ...
    def set_policy(self, policy: Any) -> None: ...
    def host_roots(self, session_id: str, cwd: str, directories: list[str]) -> None: ...
    def host_forget(self, session_id: str) -> None: ...
    def stop(self, reason: str, cause: BaseException | None = None) -> None: ...
    def request_cancel(self) -> None: ...
    def close(self, grace: float = 0.0) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def stop_cause(self) -> BaseException | None: ...
    @property
    def stopped(self) -> bool: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def next_update_sequence(self) -> int: ...
    @property
    def agent_error(self) -> str | None: ...
    def session_ids(self) -> list[str]: ...
    def session_info(self, session_id: str) -> _SessionInfo | None: ...
    def initialize_info(
        self,
    ) -> (
        tuple[int, bool, bool, bool, bool, list[tuple[str, str, str, str]], str | None, str] | None
    ): ...
    def reader_status(self) -> tuple[str, int, int, int, int, int, bool]: ...
    # The asyncio driver (acp_fast._async): each step returns a Report.
    def aio_attach(self) -> tuple[int, int, int, int]: ...
    def aio_stderr_fd(self) -> int: ...
    def aio_stderr(self) -> bool: ...
    def aio_pump(self, budget: int, woken: bool = False, exited: bool = False) -> Report: ...
    def aio_decide(
        self,
        token: int,
        reply: tuple[str, str, str, str] | None,
        error: BaseException | None = None,
    ) -> Report: ...
    def aio_abandon(self, call: int) -> Report: ...
    def aio_set_fold(self, fold: Any | None) -> None: ...
    def aio_write(self) -> Report: ...

@final
class Prepared(Generic[_T]):
    """A call of a `CoreClient`, read once; `run()` or `begin()` it once."""

    def run(self) -> _T: ...
    def begin(self) -> int: ...

def _set_guard_launcher(argv: list[str] | None) -> None: ...
def _guard_pid() -> int | None: ...
def _serve_guard() -> NoReturn: ...
def _guard_watch(leader: int) -> bool: ...
def _guard_forget(leader: int) -> None: ...
def pack_records(lines: bytes) -> bytes:
    """A SQLite journal batch's lines as format version 3 stores them: their length (4 bytes,
    little-endian), then one LZ4 block."""

def unpack_records(packed: bytes) -> bytes:
    """The lines of a stored (packed) batch; ValueError when it is not one whole packed batch."""

"""The fleet's values: `Task`, `Retry`, `TaskResult` (failures as values), `Batch`."""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

#: A task id names its journal files on the hosts, so it is kept to a plain file-name
#: alphabet (no separators, no leading dot, bounded): a hostile id cannot leave the run's
#: directory or collide with another task's journal.
_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

#: Longest error message kept in a result (an agent's stderr tail can be long).
MESSAGE_LIMIT = 4096


def check_task_id(task_id: object) -> str:
    if not isinstance(task_id, str) or _TASK_ID.fullmatch(task_id) is None:
        raise ValueError(
            f"task id {task_id!r}: use 1-128 letters, digits, '_', '.', '-' "
            "(not starting with '.' or '-'): it names the task's journal files"
        )
    return task_id


@dataclass(frozen=True)
class Task:
    """One unit of work: a fresh agent session in ``cwd`` (on the host that runs it), sent
    ``prompts`` one turn after another."""

    id: str
    cwd: str
    prompts: tuple[str, ...]

    def __init__(self, id: str, cwd: str | os.PathLike[str], prompts: Sequence[str]) -> None:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        prompts = tuple(prompts)
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise ValueError("prompts must be one or more strings")
        object.__setattr__(self, "id", check_task_id(id))
        object.__setattr__(self, "cwd", os.fspath(cwd))
        object.__setattr__(self, "prompts", prompts)


@dataclass(frozen=True)
class Retry:
    """Per-task retries: up to ``attempts`` attempts in all, again only when the failure's
    error type name is in ``on``; attempt n+1 starts ``backoff * 2**(n-1)`` seconds after
    attempt n failed (at most 60 s), on another host when there is one."""

    attempts: int = 1
    on: tuple[str, ...] = (
        "ActorDiedError", "ActorUnavailableError", "AgentDied", "AgentTransportFailed"
    )  # fmt: skip
    backoff: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"attempts must be an int >= 1 (got {self.attempts!r})")
        if isinstance(self.on, str):
            raise TypeError("on must be a tuple of error type names, not one string")
        object.__setattr__(self, "on", tuple(self.on))
        if not self.backoff >= 0:
            raise ValueError(f"backoff must be >= 0 seconds (got {self.backoff!r})")

    def delay(self, failed_attempt: int) -> float:
        return float(min(60.0, self.backoff * 2 ** (failed_attempt - 1)))


@dataclass(frozen=True)
class AttemptError:
    """Why one attempt failed: the error's type name and message, the host it ran on, and
    the journal of the attempt (a path on that host's file system; when the host died, the
    path the attempt writes to, which does not exist if it died before the attempt began)."""

    attempt: int
    error_type: str
    message: str
    host: int
    journal: str | None


@dataclass(frozen=True)
class TaskResult:
    """The outcome of a task, a value either way. ``ok``: every prompt's turn completed;
    else ``error_type``/``message``/``journal`` describe the last attempt's failure and
    ``failures`` every failed attempt, in order."""

    id: str
    ok: bool
    attempts: int
    host: int | None
    journal: str | None
    responses: tuple[str, ...] = ()
    stop_reasons: tuple[str, ...] = ()
    updates: int = 0
    error_type: str | None = None
    message: str | None = None
    failures: tuple[AttemptError, ...] = field(default=())


@dataclass(frozen=True)
class Batch:
    """Consecutive updates of one attempt of a task, as recorded in its journal: ``data`` is
    their envelopes (the exact lines the agent sent), one per line; ``seqs`` their journal
    sequences (`Update.update_sequence`). Resume after it with
    ``stream(task_id, from_seq=batch.last_seq + 1, attempt=batch.attempt)``."""

    task_id: str
    attempt: int
    data: bytes
    seqs_raw: bytes  # array("Q") of the sequences, one per line of data

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(array("Q", self.seqs_raw))

    @property
    def first_seq(self) -> int:
        return array("Q", self.seqs_raw[:8])[0]

    @property
    def last_seq(self) -> int:
        return array("Q", self.seqs_raw[-8:])[0]

    def __len__(self) -> int:
        return len(self.seqs_raw) // 8

    def envelopes(self) -> Iterator[tuple[int, bytes]]:
        """(sequence, envelope) of each update, in order."""
        lines = self.data.split(b"\n")
        return zip(array("Q", self.seqs_raw), lines, strict=False)

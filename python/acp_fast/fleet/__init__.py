"""Agents across machines on Ray (fleet.md §3): `Fleet` runs `Task` s on host actors, one per
node, each with up to ``agents_per_host`` agents; results are values (`TaskResult`), retries
per task (`Retry`), live updates as journal-sequenced `Batch` es (`Fleet.stream`).

Needs the ``ray`` extra: ``pip install 'acp-fast[ray]'``. Ray schedules, places, restarts and
carries; this package adds agents, sessions, journals and the no-orphan guarantee."""

from __future__ import annotations

try:
    import ray as _ray  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    # The extra installs nothing where Ray publishes no wheel (pyproject.toml's marker): say so.
    raise ImportError(
        "acp_fast.fleet needs Ray: pip install 'acp-fast[ray]' (Ray publishes wheels for "
        "CPython 3.10-3.14 on Linux, Windows and Apple-silicon macOS; elsewhere the extra "
        "installs nothing)"
    ) from error

from .._agent_spec import AgentSpec
from ._fleet import Fleet
from ._types import AttemptError, Batch, Retry, Task, TaskResult

__all__ = ["AgentSpec", "AttemptError", "Batch", "Fleet", "Retry", "Task", "TaskResult"]

for _public in (AttemptError, Batch, Fleet, Retry, Task, TaskResult):
    _public.__module__ = __name__

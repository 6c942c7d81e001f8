"""The host actor: one per node, async, running up to ``agents_per_host`` agents, each task a
fresh `AsyncClient` journaled to a `JsonlJournal` on the host (fleet.md §3).

Ray places it (SPREAD, the ``acp_slots`` resource) and carries its calls; this module only
knows agents, sessions and journals. The client's host-death guard kills every agent group
when this actor's process dies, SIGKILL included, so no agent outlives its host."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import stat
import sys
import time
from typing import Any

from .._agent_spec import AgentSpec
from .._text import printable
from ._record import Record
from ._types import MESSAGE_LIMIT

#: What a host keeps in memory of its finished attempts' updates, for late streams.
FINISHED_RETAINED = 256 * 1024 * 1024


def _reap_own_children() -> None:
    """Ray's raylet subreaper option leaves SIGCHLD ignored in its workers (inherited from the
    raylet): the kernel then reaps our agents and terminals by itself and their exit statuses
    are lost (an agent that exited with 3 would be reported killed). Put the default back,
    from C (the actor's thread is not the main one, where Python's signal.signal must run);
    a real handler someone installed is left alone."""
    if sys.platform not in ("linux", "darwin"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    previous = libc.signal(signal.SIGCHLD, 0)  # SIG_DFL
    if previous not in (None, 0, 1):  # neither SIG_DFL nor SIG_IGN: a handler; restore it
        libc.signal(signal.SIGCHLD, previous)


def _check_own_directory(path: str) -> None:
    """The run's directory must be a real directory of ours: never write journals through a
    symlink or into a directory another user planted at that name."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(
            f"{printable(path)} is not a directory owned by this user; refusing to journal there"
        )


def _describe(error: BaseException) -> tuple[str, str]:
    message = printable(str(error))
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "…"
    return type(error).__name__, message


class Host:
    """The actor's body (made a Ray actor class by `actor_class`; testable without Ray)."""

    def __init__(self, index: int, spec: AgentSpec, slots: int, run_dir: str) -> None:
        _reap_own_children()
        self.index = index
        self.spec = spec
        self.slots = slots
        self.run_dir = run_dir
        self.records: dict[tuple[str, int], Record] = {}
        #: Finished attempts whose records were dropped to bound memory (their journal stays).
        self.forgotten: dict[tuple[str, int], str] = {}
        self.journals: dict[tuple[str, int], str] = {}
        #: Attempts run_task began in this process (a read may make a record before that).
        self.began: set[tuple[str, int]] = set()
        self.clients: dict[tuple[str, int], Any] = {}
        self.running = 0
        self.started = 0
        self.closed = False
        #: (began, ended) wall-clock seconds of every attempt run here, for admission checks.
        self.spans: list[tuple[float, float]] = []

    async def run_task(
        self, task_id: str, attempt: int, cwd: str, prompts: tuple[str, ...]
    ) -> dict[str, Any]:
        """Runs one attempt of a task; every outcome is a value (a dict: the driver makes the
        `TaskResult`)."""
        from .. import _async
        from ..journal import JsonlJournal

        key = (task_id, attempt)
        record = self._record(key)
        self.began.add(key)
        journal_path = os.path.join(self.run_dir, f"{task_id}.{attempt}.jsonl")
        out: dict[str, Any] = {"host": self.index, "journal": None, "ok": False}
        self.running += 1
        self.started += 1
        began = time.time()
        journal = None
        client = None
        try:
            if self.closed:
                raise RuntimeError("the fleet is closing")
            os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
            _check_own_directory(self.run_dir)
            if os.path.exists(journal_path):  # never append to another attempt's journal
                raise FileExistsError(f"journal {journal_path} already exists")
            journal = JsonlJournal(journal_path, observer=record)
            out["journal"] = journal_path
            options = dict(self.spec.client_options)
            client = _async.AsyncClient(
                self.spec.command, self.spec.args, env=self.spec.env, cwd=cwd,
                observer=journal, **options,
            )  # fmt: skip
            self.clients[key] = client
            await client.start()
            session = client.default_session
            assert session is not None
            responses: list[str] = []
            stops: list[str] = []
            for prompt in prompts:
                result = await session.prompt(prompt)
                responses.append(result.response)
                stops.append(result.stop_reason)
            out.update(ok=True, responses=tuple(responses), stop_reasons=tuple(stops))
        except Exception as error:
            out["error_type"], out["message"] = _describe(error)
        finally:
            self.clients.pop(key, None)
            if client is not None:
                try:
                    await client.aclose()
                except Exception:
                    client.close()
            if journal is not None:
                journal.close()
            record.finish()
            self._forget_old(key, journal_path)
            out["updates"] = record.total
            self.running -= 1
            self.spans.append((began, time.time()))
            del self.spans[:-10000]
        return out

    async def read(
        self, task_id: str, attempt: int, from_seq: int, finished: bool = False
    ) -> tuple[bytes, bytes, bool]:
        # The driver may ask before the attempt's call has begun here (another concurrency
        # group): the record is made by whichever comes first. An attempt the driver knows
        # has finished and this process never saw ran in the host's previous life (Ray
        # restarted it): what it recorded is in its journal only.
        key = (task_id, attempt)
        if key in self.forgotten:
            raise LookupError(
                f"task {task_id!r} attempt {attempt} finished long ago and its updates are no "
                f"longer in the host's memory: read its journal {self.forgotten[key]}"
            )
        if finished and key not in self.began:
            return b"", b"", True
        return await self._record((task_id, attempt)).read(from_seq)

    def _forget_old(self, done: tuple[str, int], journal_path: str) -> None:
        """Keeps the records of finished attempts within FINISHED_RETAINED bytes, dropping the
        oldest first (a host runs thousands of tasks; their journals hold everything)."""
        self.journals[done] = journal_path
        finished = [(k, r) for k, r in self.records.items() if r.done]
        total = sum(r.retained_bytes for _, r in finished)
        for key, record in finished:  # dicts keep insertion order: oldest first
            if total <= FINISHED_RETAINED:
                break
            total -= record.retained_bytes
            del self.records[key]
            self.forgotten[key] = self.journals.pop(key, "")

    def _record(self, key: tuple[str, int]) -> Record:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = Record(asyncio.get_running_loop())
        return record

    def stats(self) -> dict[str, Any]:
        pids = [c.pid for c in self.clients.values() if c.pid is not None]
        return {
            "host": self.index,
            "node": _node_id(),
            "pid": os.getpid(),
            "slots": self.slots,
            "running": self.running,
            "started": self.started,
            "agent_pids": pids,
            "spans": list(self.spans),
        }

    def cancel(self, task_id: str, attempt: int) -> bool:
        client = self.clients.get((task_id, attempt))
        if client is None:
            return False
        client.close()
        return True

    async def shutdown(self) -> None:
        """Closes every agent (the fleet's close): nothing keeps running on this host."""
        self.closed = True
        for client in list(self.clients.values()):
            client.close()


def _node_id() -> str:
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # outside Ray (the class used directly)
        return ""


def actor_class(slots: int, max_restarts: int) -> Any:
    """`Host` as a Ray actor class: async, no CPU held (it waits on agents), the ``acp_slots``
    resource for its agents, control calls in their own concurrency group so streams never
    starve them, and no task retries (prompts are not idempotent: the fleet retries)."""
    import ray

    remote: Any = ray.remote  # its overloads do not list concurrency_groups
    cls = remote(concurrency_groups={"control": 4, "stream": 1000})(_RayHost)
    return cls.options(
        num_cpus=0,
        resources={"acp_slots": slots},
        scheduling_strategy="SPREAD",
        max_restarts=max_restarts,
        max_task_retries=0,
        max_concurrency=slots + 8,
    )


def _control(method: Any) -> Any:
    import ray

    return ray.method(concurrency_group="control")(method)


def _stream(method: Any) -> Any:
    import ray

    return ray.method(concurrency_group="stream")(method)


class _RayHost(Host):
    @_stream
    async def read(
        self, task_id: str, attempt: int, from_seq: int, finished: bool = False
    ) -> tuple[bytes, bytes, bool]:
        return await Host.read(self, task_id, attempt, from_seq, finished)

    @_control
    async def stats(self) -> dict[str, Any]:
        return Host.stats(self)

    @_control
    async def cancel(self, task_id: str, attempt: int) -> bool:
        return Host.cancel(self, task_id, attempt)

    @_control
    async def shutdown(self) -> None:
        await Host.shutdown(self)

"""`Fleet`: the driver side. It starts the host actors, admits tasks (``max_concurrent``),
places each attempt on the least-loaded live host with a free slot, keeps every call of an
attempt on its host (sticky), retries per `Retry`, and serves `stream`."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import ray
from ray.exceptions import RayActorError

from .._agent_spec import AgentSpec
from .._text import printable
from ._host import POOL_OPTIONS, actor_class, pool_options
from ._types import AttemptError, Batch, Retry, Task, TaskResult

#: Driver-side failures that are not the host's (no live host left, the fleet closed).
NO_HOST = "NoHostAvailable"

log = logging.getLogger("acp_fast.fleet")


class _Attempt:
    __slots__ = ("done", "host", "number")

    def __init__(self, number: int, host: int) -> None:
        self.number = number
        self.host = host
        self.done = False


class _TaskState:
    def __init__(self) -> None:
        self.attempts: list[_Attempt] = []
        self.changed = asyncio.Event()
        self.finished = False

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class Fleet:
    """Agents across the nodes of a Ray cluster: ``hosts`` host actors (one per node where
    Ray can spread them), each running up to ``agents_per_host`` agents of ``agent``. See
    docs/guide/fleet.md.

    Args:
        agent: How every agent is started (`acp_fast.AgentSpec`).
        hosts: How many host actors.
        agents_per_host: Agents one host runs at once; each host actor asks Ray for that many
            ``acp_slots`` (start nodes with ``ray start --resources='{"acp_slots": K}'``; a
            local Ray that the fleet starts itself gets ``hosts * agents_per_host``).
        pool: Warm spares on each host: `acp_fast.AsyncPool` options (``min_idle``,
            ``max_idle``, ``max_age``, ``idle_ttl``, ``spawn_concurrency``, ``claim_timeout``,
            ``authenticate``, ``reuse``, ``start_timeout``), e.g. ``{"min_idle": 2}``. An
            attempt then claims a started agent and opens its session in the task's cwd (the
            agent's process runs in the host's directory); the attempt's journal is attached
            at the claim and starts with the agent's handshake. None (default): every attempt
            starts a fresh agent in the task's cwd.
        journal_dir: Where each host writes its journals: ``<journal_dir>/<run id>/<task
            id>.<attempt>.jsonl`` on that host's file system.
        max_restarts: How often Ray restarts a host actor whose process died.
        start_timeout: How long `start` waits for every host actor to be placed and answer.
    """

    def __init__(
        self,
        agent: AgentSpec,
        *,
        hosts: int = 1,
        agents_per_host: int = 8,
        pool: Mapping[str, Any] | None = None,
        journal_dir: str | os.PathLike[str],
        max_restarts: int = 3,
        start_timeout: float = 120.0,
    ) -> None:
        if not isinstance(agent, AgentSpec):
            raise TypeError(f"agent must be an acp_fast.AgentSpec, not {type(agent).__name__}")
        for name, value in (("hosts", hosts), ("agents_per_host", agents_per_host)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1 (got {value!r})")
        if pool is not None:
            pool = dict(pool_options(agent, agents_per_host, pool))  # checked here, not remotely
            pool = {k: v for k, v in pool.items() if k in POOL_OPTIONS}
        self.pool = pool
        self.agent = agent
        self.hosts = hosts
        self.agents_per_host = agents_per_host
        self.max_restarts = max_restarts
        self.start_timeout = start_timeout
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(4)
        self.run_dir = os.path.join(os.path.abspath(os.fspath(journal_dir)), self.run_id)
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._dead: set[int] = set()
        self._tasks: dict[str, _TaskState] = {}
        self._slot_freed: asyncio.Condition | None = None
        self._started_ray = False
        self._registered = asyncio.Event()  # set (and replaced) whenever run() adds tasks
        self._closed = False
        self.peak_running = 0
        self._running = 0

    # --- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._closed:
            raise RuntimeError("this Fleet is closed; make a new one")
        if self._actors:
            return
        if not ray.is_initialized():
            if os.environ.get("RAY_ADDRESS"):
                ray.init()  # the cluster named there, with the acp_slots its nodes offer
            else:
                # "local": a Ray of our own, even where a cluster started on this machine left
                # its address in Ray's temp directory (ray.init() would join that one, or
                # fail on a stale address; joining is what RAY_ADDRESS=auto asks for).
                ray.init(
                    address="local",
                    resources={"acp_slots": self.hosts * self.agents_per_host},
                    include_dashboard=False,
                )
            self._started_ray = True
        try:
            await self._start_hosts()
        except BaseException:
            # A failed (or cancelled) start leaves no host, nor a Ray of ours, behind: `async
            # with` calls no close() when entering fails.
            for actor in self._actors:
                ray.kill(actor, no_restart=True)
            self._actors = []
            if self._started_ray:
                self._started_ray = False
                ray.shutdown()
            raise

    async def _start_hosts(self) -> None:
        resources: Any = ray.cluster_resources()  # type: ignore[no-untyped-call]
        have = resources.get("acp_slots", 0)
        if have < self.hosts * self.agents_per_host:
            raise RuntimeError(
                f"the Ray cluster offers {have:g} acp_slots; {self.hosts} hosts of "
                f"{self.agents_per_host} agents need {self.hosts * self.agents_per_host}: start "
                "its nodes with ray start --resources='{\"acp_slots\": K}'"
            )
        cls = actor_class(self.agents_per_host, self.max_restarts)
        self._actors = [
            cls.remote(i, self.agent, self.agents_per_host, self.run_dir, self.pool)
            for i in range(self.hosts)
        ]
        self._load = [0] * self.hosts
        self._slot_freed = asyncio.Condition()
        try:  # every host placed and answering
            await asyncio.wait_for(
                asyncio.gather(*(a.stats.remote() for a in self._actors)), self.start_timeout
            )
        except (TimeoutError, RayActorError) as error:
            for actor in self._actors:
                ray.kill(actor, no_restart=True)
            self._actors = []
            raise RuntimeError(
                f"the {self.hosts} host actors did not all start within {self.start_timeout} s "
                f"({type(error).__name__}): each needs {self.agents_per_host} acp_slots on one "
                "node; see ray status for what the nodes offer"
            ) from error
        if self.pool is not None:
            # Each host's spares started before the first task (a spare that fails to start
            # is logged; the tasks get its error as their value, as without a pool).
            for index, failed in enumerate(
                await asyncio.gather(*(a.warm.remote(self.start_timeout) for a in self._actors))
            ):
                if failed:
                    log.warning("fleet host %d: its pool's spares did not start: %s", index, failed)

    async def close(self) -> None:
        """Closes every agent and ends every host actor; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._registered.set()
        if self._slot_freed is not None:
            async with self._slot_freed:  # attempts waiting for a slot end now, as values
                self._slot_freed.notify_all()
        actors = list(self._actors)  # kept: in-flight calls still name their host
        for index, actor in enumerate(actors):
            if index in self._dead:
                continue
            try:
                await asyncio.wait_for(actor.shutdown.remote(), 10)
            except (RayActorError, TimeoutError):
                pass
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if self._started_ray:
            ray.shutdown()

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- placement -----------------------------------------------------------------------

    def actor(self, host: int) -> Any:
        """The Ray actor handle of host `host` (for stats, or for killing it in a drill)."""
        return self._actors[host]

    async def _place(self, avoid: int | None) -> int:
        assert self._slot_freed is not None
        async with self._slot_freed:
            while True:
                live = [i for i in range(self.hosts) if i not in self._dead]
                if not live or self._closed:
                    raise LookupError("no live host left" if not self._closed else "closed")
                free = [i for i in live if self._load[i] < self.agents_per_host]
                preferred = [i for i in free if i != avoid] or free
                if preferred:
                    host = min(preferred, key=lambda i: self._load[i])
                    self._load[host] += 1
                    return host
                await self._slot_freed.wait()

    async def _free(self, host: int) -> None:
        assert self._slot_freed is not None
        async with self._slot_freed:
            self._load[host] -= 1
            self._slot_freed.notify_all()

    async def _mark_dead(self, host: int) -> None:
        """After a call failed with the actor's death: ask Ray whether the host comes back
        (a restart; its next calls wait for it) or is gone for good (then no attempt is placed
        on it again)."""
        if self._closed:
            return
        try:
            await asyncio.wait_for(self._actors[host].stats.remote(), 60)
            if self.pool is not None:  # a restarted host: its spares again, in the background
                self._actors[host].warm.remote(self.start_timeout)
            return
        except RayActorError:
            pass
        except TimeoutError:
            pass  # neither back nor declared dead within a minute: treat as gone
        assert self._slot_freed is not None
        async with self._slot_freed:
            self._dead.add(host)
            self._slot_freed.notify_all()

    # --- running -------------------------------------------------------------------------

    async def run(
        self,
        tasks: Iterable[Task],
        *,
        max_concurrent: int | None = None,
        retry: Retry | None = None,
    ) -> list[TaskResult]:
        """Runs every task (at most ``max_concurrent`` at once; default: every slot) and
        returns one `TaskResult` per task, in the order given; failures are values."""
        await self.start()
        tasks = list(tasks)
        ids = [t.id for t in tasks]
        if len(set(ids)) != len(ids):
            raise ValueError("task ids must be unique within a run")
        known = sorted(set(ids) & set(self._tasks))
        if known:
            raise ValueError(f"task ids already used in this fleet: {', '.join(known[:5])}")
        limit = max_concurrent or self.hosts * self.agents_per_host
        if limit < 1:
            raise ValueError(f"max_concurrent must be >= 1 (got {max_concurrent!r})")
        retry = retry or Retry()
        for t in tasks:
            self._tasks[t.id] = _TaskState()
        self._registered.set()
        self._registered = asyncio.Event()
        admission = asyncio.Semaphore(limit)

        async def one(task: Task) -> TaskResult:
            async with admission:
                self._running += 1
                self.peak_running = max(self.peak_running, self._running)
                try:
                    return await self._run_one(task, retry)
                finally:
                    self._running -= 1

        return list(await asyncio.gather(*(one(t) for t in tasks)))

    async def _run_one(self, task: Task, retry: Retry) -> TaskResult:
        state = self._tasks[task.id]
        failures: list[AttemptError] = []
        avoid: int | None = None
        try:
            for number in range(1, retry.attempts + 1):
                try:
                    host = await self._place(avoid)
                except LookupError as error:
                    failures.append(AttemptError(number, NO_HOST, str(error), -1, None))
                    break
                attempt = _Attempt(number, host)
                state.attempts.append(attempt)
                state.notify()
                actor = self._actors[host]
                try:
                    out = await actor.run_task.remote(task.id, number, task.cwd, task.prompts)
                except asyncio.CancelledError:
                    # Awaiting a Ray call and cancelling does not stop it: close the agent.
                    actor.cancel.remote(task.id, number)
                    raise
                except RayActorError as error:
                    await self._mark_dead(host)
                    journal = os.path.join(self.run_dir, f"{task.id}.{number}.jsonl")
                    out = {
                        "ok": False,
                        "host": host,
                        "journal": journal,
                        "error_type": type(error).__name__,
                        "message": printable(str(error))[:4096],
                    }
                finally:
                    attempt.done = True
                    state.notify()
                    await self._free(host)
                if out["ok"]:
                    return TaskResult(
                        id=task.id, ok=True, attempts=number, host=host,
                        journal=out["journal"], responses=out["responses"],
                        stop_reasons=out["stop_reasons"], updates=out["updates"],
                        failures=tuple(failures),
                    )  # fmt: skip
                failures.append(
                    AttemptError(number, out["error_type"], out["message"], host, out["journal"])
                )
                if out["error_type"] not in retry.on or number == retry.attempts:
                    break
                avoid = host
                await asyncio.sleep(retry.delay(number))
        finally:
            state.finished = True
            state.notify()
        last = failures[-1]
        return TaskResult(
            id=task.id,
            ok=False,
            attempts=len(failures),
            host=last.host if last.host >= 0 else None,
            journal=last.journal,
            error_type=last.error_type,
            message=last.message,
            failures=tuple(failures),
        )

    # --- streaming -----------------------------------------------------------------------

    async def stream(
        self, task_id: str, from_seq: int = 0, *, attempt: int | None = None
    ) -> AsyncIterator[Batch]:
        """The updates of a task as `Batch` es, live, from journal sequence ``from_seq`` of
        ``attempt`` (None: the current one, waiting for the task to start). When that attempt
        fails and the task is retried, the stream goes on with the next attempt from its first
        update (`Batch.attempt` says which). Ends when the task has finished."""
        state = self._tasks.get(task_id)
        while state is None:  # run() may not have registered it yet: wait for it to
            if self._closed:
                raise KeyError(f"no task {task_id!r} in this fleet (it was never run)")
            await self._registered.wait()
            state = self._tasks.get(task_id)
        while True:
            if attempt is None:
                while not state.attempts and not state.finished:
                    await state.changed.wait()
                if not state.attempts:
                    return
                attempt = state.attempts[-1].number
            current = state.attempts[attempt - 1]
            actor = self._actors[current.host]
            seq = from_seq
            while True:
                try:
                    data, seqs, ended = await actor.read.remote(task_id, attempt, seq, current.done)
                except RayActorError:
                    break  # the host died: the attempt ended there
                if seqs:
                    batch = Batch(task_id, attempt, data, seqs)
                    seq = batch.last_seq + 1
                    yield batch
                if ended or (not seqs and current.done):
                    # Nothing more: a read of a finished attempt that found nothing came from
                    # a host Ray restarted (the attempt ran in its previous life).
                    break
            # Next attempt, if the task goes on.
            while len(state.attempts) <= attempt and not state.finished:
                await state.changed.wait()
            if len(state.attempts) <= attempt:
                return
            attempt += 1
            from_seq = 0

    async def stats(self) -> list[dict[str, Any]]:
        """Each live host's counters (running agents, their pids, the host's pid)."""
        if self._closed:
            return []
        live = [(i, a) for i, a in enumerate(self._actors) if i not in self._dead]
        out = []
        for _, actor in live:
            try:
                out.append(await actor.stats.remote())
            except RayActorError:
                continue
        return out

"""The host actor: one per node, async, running up to ``agents_per_host`` agents, each task a
fresh `AsyncClient` journaled to a `JsonlJournal` on the host (fleet.md §3); with a pool, the
client is a warm spare of the host's `AsyncPool`, the task's journal attached at the claim.

Ray places it (SPREAD, the ``acp_slots`` resource) and carries its calls; this module only
knows agents, sessions and journals. The client's host-death guard kills every agent group
when this actor's process dies, SIGKILL included, so no agent outlives its host."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import dataclasses
import errno
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .._agent_spec import AgentSpec, ask_mode_to_set
from .._errors import AgentProtocolError, AgentTransportFailed
from .._text import printable
from ._death import AgentDied, agent_died
from ._record import Record
from ._types import MESSAGE_LIMIT

#: What a host keeps in memory of its finished attempts' updates, for late streams.
FINISHED_RETAINED = 256 * 1024 * 1024

#: The `AsyncPool` options a fleet's ``pool=`` may set. The rest is the fleet's: what a spare
#: is started with (the `AgentSpec`), ``max_total`` (the host's slots plus its idle spares, so
#: a claim never waits for room) and ``claim_observers`` (each task journals its own agent).
POOL_OPTIONS = frozenset(
    {"min_idle", "max_idle", "max_age", "idle_ttl", "spawn_concurrency", "claim_timeout",
     "authenticate", "reuse", "start_timeout"}
)  # fmt: skip

_T = TypeVar("_T")


def pool_options(spec: AgentSpec, slots: int, pool: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a host's `AsyncPool` (checked here, so a bad ``pool=`` fails
    where the fleet is made, not on a remote host)."""
    from ..pool._common import check_options

    if not isinstance(pool, Mapping):
        raise TypeError(f"pool must be a mapping of AsyncPool options (got {type(pool).__name__})")
    unknown = sorted(set(pool) - POOL_OPTIONS)
    if unknown:
        raise ValueError(
            f"pool may not set {', '.join(map(str, unknown))}: it takes "
            f"{', '.join(sorted(POOL_OPTIONS))} (the agent is the fleet's AgentSpec, and each "
            "host's max_total is its agents_per_host plus max_idle)"
        )
    settings = {"min_idle": 2, "max_idle": 4, **pool}
    max_idle = settings["max_idle"]
    if max_idle is None:
        max_idle = max(settings["min_idle"], 1) if isinstance(settings["min_idle"], int) else 1
    if isinstance(max_idle, bool) or not isinstance(max_idle, int):
        raise ValueError(f"max_idle must be an integer >= 0 (got {max_idle!r})")
    settings["max_total"] = slots + max_idle
    kwargs = {
        # environment(): evaluated here, on the host, where the agents start.
        "args": spec.args, "env": spec.environment(),
        "client_options": dict(spec.client_options),
        "claim_observers": True, **settings,
    }  # fmt: skip
    check_options(
        spec.command, kwargs["args"], kwargs["env"], None, kwargs["client_options"],
        settings["min_idle"], settings["max_idle"], settings["max_total"],
        settings.get("max_age", 600.0), settings.get("idle_ttl", 300.0),
        settings.get("spawn_concurrency", 2), settings.get("claim_timeout", 3.0),
        settings.get("authenticate"), settings.get("reuse", False),
        settings.get("start_timeout", 60.0), True,
    )  # fmt: skip
    return kwargs


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

    def __init__(
        self,
        index: int,
        spec: AgentSpec,
        slots: int,
        run_dir: str,
        pool: Mapping[str, Any] | None = None,
    ) -> None:
        _reap_own_children()
        self.index = index
        self.spec = spec
        self.slots = slots
        self.run_dir = run_dir
        #: Ray runs each concurrency group on a thread and loop of its own: run_task (default),
        #: read (stream) and stats, cancel, shutdown (control) share what follows, so each
        #: look-and-change of these dicts and sets is made under this lock (never across an
        #: await). A bare iteration raced an insert on another thread ("dictionary changed
        #: size during iteration" in stats), and get-then-set could make two records for one
        #: attempt, one of which no journal would ever fill.
        self._lock = threading.Lock()
        self.records: dict[tuple[str, int], Record] = {}
        #: Finished attempts whose records were dropped to bound memory (their journal stays).
        self.forgotten: dict[tuple[str, int], str] = {}
        self.journals: dict[tuple[str, int], str] = {}
        #: Attempts run_task began in this process (a read may make a record before that).
        self.began: set[tuple[str, int]] = set()
        #: Attempts begun and not yet over.
        self.live: set[tuple[str, int]] = set()
        self.clients: dict[tuple[str, int], Any] = {}
        self.running = 0
        self.started = 0
        self.closed = False
        #: (began, ended) wall-clock seconds of every attempt run here, for admission checks.
        self.spans: list[tuple[float, float]] = []
        #: Attempts cancelled before their agent was claimed (closed as soon as it is).
        self.cancelled: set[tuple[str, int]] = set()
        #: The `AsyncPool` options (`pool_options`), None without a pool; the pool is made on
        #: the loop of the calls that run tasks (Ray gives each concurrency group its own
        #: loop and thread: other groups reach the pool through `_on_pool_loop`).
        self.pool_kwargs = None if pool is None else pool_options(spec, slots, pool)
        self.pool: Any = None
        self.pool_loop: asyncio.AbstractEventLoop | None = None

    async def _pool(self) -> Any:
        if self.pool_kwargs is None:
            return None
        if self.pool is None:
            from ..pool import AsyncPool

            self.pool = AsyncPool(self.spec.command, **self.pool_kwargs)
            self.pool_loop = asyncio.get_running_loop()
            await self.pool.start()
        return self.pool

    async def warm(self, timeout: float) -> str | None:
        """Makes the pool and waits (at most `timeout` s) for its ``min_idle`` spares; a start
        that fails is returned as text (the tasks then get it as their error value)."""
        pool = await self._pool()
        if pool is None:
            return None
        try:
            await asyncio.wait_for(pool.start(wait=True), timeout)
        except Exception as error:
            return "{}: {}".format(*_describe(error))
        return None

    async def _on_pool_loop(self, call: Callable[[], _T], timeout: float) -> _T | None:
        """Runs `call` on the pool's loop (None when there is no pool, or it does not answer
        within `timeout`: its thread is gone or stuck)."""
        loop = self.pool_loop
        if loop is None or loop.is_closed():
            return None
        if loop is asyncio.get_running_loop():
            return call()
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(call())
            except BaseException as error:
                done.set_exception(error)

        try:
            loop.call_soon_threadsafe(run)
            return await asyncio.wait_for(asyncio.wrap_future(done), timeout)
        except (RuntimeError, TimeoutError):
            return None

    async def run_task(
        self, task_id: str, attempt: int, cwd: str, prompts: tuple[str, ...]
    ) -> dict[str, Any]:
        """Runs one attempt of a task; every outcome is a value (a dict: the driver makes the
        `TaskResult`)."""
        from .. import _async
        from ..journal import JsonlJournal

        key = (task_id, attempt)
        record = self._begin(key)
        journal_path = os.path.join(self.run_dir, f"{task_id}.{attempt}.jsonl")
        out: dict[str, Any] = {"host": self.index, "journal": None, "ok": False}
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
            pool = await self._pool()
            if pool is not None:
                # A warm spare (else a cold start after claim_timeout): the agent process runs
                # in the host's directory, the task's cwd is its session's (fleet.md §1). The
                # cwd is checked as a fresh agent's would be (session/new takes any path).
                if not os.path.isdir(cwd):
                    raise FileNotFoundError(
                        errno.ENOENT, "the task's cwd does not exist or is not a directory", cwd
                    )
                async with pool.session(cwd, observer=journal) as session:
                    try:
                        if self._claimed(key, session._client):
                            session._client.close()
                        modes = session.modes
                        ask = ask_mode_to_set(
                            self.spec.profile, modes.current, [m.id for m in modes.available]
                        )
                        if ask is not None:  # as from_spec does for a fresh client
                            await session.set_mode(ask)
                        await self._turns(session, prompts, out, session._client.pid)
                    finally:
                        # Before the block gives the client back to the pool (reuse=True):
                        # a cancel after this must not reach the next attempt's agent.
                        self._unclaimed(key)
            else:
                # The spec's environment and profile (each session asks the host).
                client = _async.AsyncClient.from_spec(self.spec, cwd=cwd, observer=journal)
                if self._claimed(key, client):
                    client.close()
                await client.start()
                session = client.default_session
                assert session is not None
                await self._turns(session, prompts, out, client.pid)
        except Exception as error:
            out["error_type"], out["message"] = _describe(error)
        finally:
            if client is not None:  # a pool's client was released by its session block
                try:
                    await client.aclose()
                except Exception:
                    client.close()
            if journal is not None:
                journal.close()
            record.finish()
            self._forget_old(key, journal_path)
            out["updates"] = record.total
            self._released(key, began)
        return out

    @staticmethod
    async def _turns(
        session: Any, prompts: tuple[str, ...], out: dict[str, Any], pid: int | None
    ) -> None:
        responses: list[str] = []
        stops: list[str] = []
        for prompt in prompts:
            try:
                result = await session.prompt(prompt)
            except (AgentProtocolError, AgentTransportFailed) as error:
                # Told apart while the client still holds the agent (a pool's release would
                # end a live one, which would then look dead).
                if await agent_died(error, pid):
                    raise AgentDied(str(error)) from error
                raise
            responses.append(result.response)
            stops.append(result.stop_reason)
        out.update(ok=True, responses=tuple(responses), stop_reasons=tuple(stops))

    async def read(
        self, task_id: str, attempt: int, from_seq: int, finished: bool = False
    ) -> tuple[bytes, bytes, bool]:
        # The driver may ask before the attempt's call has begun here (another concurrency
        # group): the record is made by whichever comes first. An attempt the driver knows
        # has finished and this process never saw ran in the host's previous life (Ray
        # restarted it): what it recorded is in its journal only.
        found = self._record_for_read((task_id, attempt), finished)
        if isinstance(found, str):
            raise LookupError(
                f"task {task_id!r} attempt {attempt} finished long ago and its updates are no "
                f"longer in the host's memory: read its journal {found}"
            )
        if found is None:
            return b"", b"", True
        return await found.read(from_seq)

    def _record_for_read(self, key: tuple[str, int], finished: bool) -> Record | str | None:
        """The attempt's record for a stream, made if need be; its journal's path when the
        record was dropped; None when the attempt ended in the host's previous life. One look
        under the lock: a record dropped between a check and a get would be made again, empty
        and never finished, and its stream would wait forever."""
        with self._lock:
            journal = self.forgotten.get(key)
            if journal is not None:
                return journal
            if finished and key not in self.began:
                return None
            return self._record_locked(key)

    def _forget_old(self, done: tuple[str, int], journal_path: str) -> None:
        """Keeps the records of finished attempts within FINISHED_RETAINED bytes, dropping the
        oldest first (a host runs thousands of tasks; their journals hold everything)."""
        with self._lock:
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
        """The attempt's record, made by whichever of run_task and read asks first."""
        with self._lock:
            return self._record_locked(key)

    def _record_locked(self, key: tuple[str, int]) -> Record:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = Record()
        return record

    def _begin(self, key: tuple[str, int]) -> Record:
        with self._lock:
            self.began.add(key)
            self.live.add(key)
            self.running += 1
            self.started += 1
            return self._record_locked(key)

    def _claimed(self, key: tuple[str, int], client: Any) -> bool:
        """Registers the attempt's client (for cancel, stats, shutdown); True when the attempt
        was cancelled before it had one (the caller closes it)."""
        with self._lock:
            self.clients[key] = client
            return key in self.cancelled or self.closed

    def _unclaimed(self, key: tuple[str, int]) -> None:
        with self._lock:
            self.clients.pop(key, None)

    def _released(self, key: tuple[str, int], began: float) -> None:
        with self._lock:
            self.clients.pop(key, None)
            self.cancelled.discard(key)
            self.live.discard(key)
            self.running -= 1
            self.spans.append((began, time.time()))
            del self.spans[:-10000]

    async def stats(self) -> dict[str, Any]:
        with self._lock:
            clients = list(self.clients.values())
            running, started, spans = self.running, self.started, list(self.spans)
        pids = [c.pid for c in clients if c.pid is not None]
        pool = await self._on_pool_loop(self._pool_stats, 5.0)
        return {
            "host": self.index,
            "node": _node_id(),
            "pid": os.getpid(),
            "slots": self.slots,
            "running": running,
            "started": started,
            "agent_pids": pids,
            "spans": spans,
            # The pool's agents that run no task (idle, starting), and its counters.
            "spare_pids": [] if pool is None else [p for p in pool[0] if p not in pids],
            "pool": None if pool is None else pool[1],
        }

    def _pool_stats(self) -> tuple[list[int], dict[str, int]]:
        """On the pool's loop."""
        owned = [c.pid for c in self.pool._state.owned if c.pid is not None]
        return owned, dataclasses.asdict(self.pool.stats())

    def cancel(self, task_id: str, attempt: int) -> bool:
        key = (task_id, attempt)
        with self._lock:
            client = self.clients.get(key)
            if client is None:
                if key not in self.live:  # not begun here, or over
                    return False
                # Not claimed yet: run_task closes it as it registers it (`_claimed`).
                self.cancelled.add(key)
                return False
            # Closed under the lock: run_task takes the client off `clients` under it before
            # a pool gets it back, so this close never reaches another attempt's agent.
            client.close()
        return True

    async def shutdown(self) -> None:
        """Closes every agent (the fleet's close): nothing keeps running on this host."""
        with self._lock:
            self.closed = True
            clients = list(self.clients.values())
        for client in clients:
            client.close()
        if self.pool is not None:
            await self._on_pool_loop(self.pool.close, 10.0)


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
        return await Host.stats(self)

    @_control
    async def cancel(self, task_id: str, attempt: int) -> bool:
        return Host.cancel(self, task_id, attempt)

    @_control
    async def shutdown(self) -> None:
        await Host.shutdown(self)

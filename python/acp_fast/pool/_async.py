"""`AsyncPool`: warm spares of `AsyncClient` for asyncio (fleet.md §1)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, cast

from .._async import AsyncClient, AsyncSession
from .._text import printable
from ._common import (
    Options,
    PoolKey,
    PoolStats,
    State,
    check_options,
    closes_sessions,
    died_at_call,
    log,
    timed_out,
)
from ._common import pid_exited as _pid_exited

#: How long `session()`'s exit waits for `session/close` before giving up on reuse (seconds).
CLOSE_WAIT = 5.0


def _alive(client: AsyncClient) -> bool:
    core = client._core
    if core is None or core.closed or core.stopped:
        return False
    if client.reader_status().terminal:
        return False
    return not _pid_exited(client.pid)


class AsyncPool:
    """Warm spares of one agent for asyncio: each spare is an `AsyncClient` that has completed
    ``initialize`` (and ``authenticate`` when set); `claim` hands one out in the time of a
    liveness check, `session` also opens a session on it. See docs/guide/pool.md.

    Every option fixed at spawn (``command``, ``args``, ``env``, ``cwd``) is the pool key;
    ``client_options`` are the other `AsyncClient` options, given to every spare. Made without a
    running loop; binds to the loop of its first `start`/`claim`/``async with``."""

    def __init__(
        self,
        command: str | os.PathLike[str],
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        client_options: Mapping[str, Any] | None = None,
        min_idle: int = 2,
        max_idle: int | None = 4,
        max_total: int = 16,
        max_age: float | None = 600.0,
        idle_ttl: float | None = 300.0,
        spawn_concurrency: int = 2,
        claim_timeout: float = 3.0,
        authenticate: str | None = None,
        reuse: bool = False,
        start_timeout: float | None = 60.0,
        claim_observers: bool = False,
        elicitation: bool = False,
    ) -> None:
        self._options: Options = check_options(
            command, args, env, cwd, client_options, min_idle, max_idle, max_total, max_age,
            idle_ttl, spawn_concurrency, claim_timeout, authenticate, reuse, start_timeout,
            claim_observers, elicitation,
        )  # fmt: skip
        self._state = State(self._options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Condition | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._keeper: asyncio.Task[None] | None = None

    # --- public --------------------------------------------------------------------------

    @property
    def key(self) -> PoolKey:
        return self._options.key

    def stats(self) -> PoolStats:
        return self._state.stats()

    async def start(self, *, wait: bool = False) -> None:
        """Begins filling the pool (``async with`` calls it). With ``wait`` it returns once
        ``min_idle`` spares are ready, and raises the start error when a start fails and
        nothing else is coming."""
        self._bind()
        self._refill()
        if not wait:
            return
        state = self._state
        assert self._changed is not None
        epoch = state.error_epoch
        async with self._changed:
            while len(state.idle) < self._options.min_idle:
                self._check_open()
                if state.error_epoch != epoch and state.last_error is not None:
                    raise state.last_error
                await self._changed.wait()

    async def claim(
        self, *, timeout: float | None = None, observer: object | None = None
    ) -> AsyncClient:
        """A started client of the pool's own (a spare, else a cold start after
        ``claim_timeout``). Give it back with `release` (or close it). At ``max_total`` the claim
        waits for capacity, at most ``timeout`` seconds (`TimeoutError`), forever with None.
        ``observer`` (a pool made with ``claim_observers=True``): this claim's own observer,
        attached to the client after its handshake was replayed into it. Its ``on_elicitation``
        is asked only on a pool made with ``elicitation=True`` (`ValueError` otherwise)."""
        self._state.check_observer(observer)
        client = await self._claim_counted(timeout)
        self._attach(client, observer)
        return client

    def _attach(self, client: AsyncClient, observer: object | None) -> None:
        """Attaches the claim's observer; if it raises (a journal that cannot write), the
        client is closed rather than left claimed by nobody, and the error raised."""
        try:
            self._state.attach(client, observer)
        except BaseException:
            self._state.claimed.discard(client)
            self._state.forget(client)
            client.close()
            self._refill()
            raise

    async def _claim_counted(self, timeout: float | None) -> AsyncClient:
        self._bind()
        state = self._state
        state.counters.claims += 1
        began = time.monotonic()
        client = await self._claim(began, timeout)
        from .. import telemetry

        telemetry.record_claim(time.monotonic() - began, self._options.client_options)
        return client

    def release(self, client: AsyncClient) -> None:
        """Gives back a claimed client: with ``reuse=True`` a healthy one whose sessions are all
        closed becomes a spare again; otherwise it is closed. A client this pool did not hand
        out (or already took back) raises `ValueError`, unless it is closed."""
        state = self._state
        if not state.claimed_here(client):
            return
        state.claimed.discard(client)
        healthy = (
            self._options.reuse
            and not state.closed
            and not client.sessions
            and _alive(client)
            and closes_sessions(client)
        )
        if healthy:
            state.detach(client)  # what it does next is held for the next claim
        keep = healthy and state.put_idle(client)
        if not keep:
            state.forget(client)
            client.close()
        self._changed_soon()
        self._refill()

    @contextlib.asynccontextmanager
    async def session(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        timeout: float | None = None,
        observer: object | None = None,
    ) -> AsyncIterator[AsyncSession]:
        """Claims a client and opens a session on it (``session/new`` with the task's ``cwd``
        and MCP servers); on exit the session is closed and the client released. ``observer``:
        as `claim`'s, attached once ``session/new`` succeeded (a spare found dead there leaves
        nothing in it)."""
        self._state.check_observer(observer)
        client, session = await self._claim_session(
            cwd, mcp_servers, tuple(additional_directories), timeout, observer
        )
        try:
            yield session
        except BaseException:
            client.close()  # the task failed: whatever state the agent is in, it is not reused
            raise
        finally:
            if (
                self._options.reuse
                and not self._state.closed
                and not client._live.closed
                and closes_sessions(client)
            ):
                try:
                    await asyncio.wait_for(session.close(), CLOSE_WAIT)
                except Exception as error:  # the client is then not reused
                    log.info(
                        "pool: session/close failed, not reusing the client: %s",
                        printable(str(error)),
                    )
                    client.close()
            self.release(client)

    async def _claim_session(
        self,
        cwd: str | os.PathLike[str] | None,
        mcp_servers: Iterable[Any] | None,
        directories: tuple[str, ...],
        timeout: float | None,
        observer: object | None = None,
    ) -> tuple[AsyncClient, AsyncSession]:
        """Claims and opens a session; a spare found dead at ``session/new`` is evicted and the
        next one tried (as `Pool.session`)."""
        state = self._state
        for attempt in range(self._options.max_total + 1):
            client = await self._claim_counted(timeout)
            try:
                session = await client.new_session(
                    cwd, mcp_servers=mcp_servers, additional_directories=directories
                )
            except BaseException as error:
                dead = died_at_call(client, error)
                if not dead or attempt == self._options.max_total:
                    with contextlib.suppress(Exception):  # the error raised is the call's
                        state.attach(client, observer)  # the task's record shows why it failed
                state.claimed.discard(client)
                state.forget(client)
                if dead:
                    state.counters.evicted += 1
                client.close()
                self._refill()
                if not dead or attempt == self._options.max_total:
                    raise
                log.info("pool: a claimed agent was dead at session/new; trying the next one")
                continue
            self._attach(client, observer)
            return client, session
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Closes every spare and every claimed client; idempotent."""
        state = self._state
        if state.closed and not state.owned:
            return
        clients = state.take_all()
        keeper, self._keeper = self._keeper, None
        for task in [*self._tasks, *([keeper] if keeper else [])]:
            task.cancel()
        for client in clients:
            client.close()
        self._changed_soon()

    async def __aenter__(self) -> AsyncPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<acp_fast.AsyncPool {self._options.key.command!r} {self.stats()}>"

    # --- inside --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state.closed:
            raise RuntimeError("the pool is closed")

    def _bind(self) -> None:
        self._check_open()
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._changed = asyncio.Condition()
            self._keeper = loop.create_task(self._keep())
        elif self._loop is not loop:
            raise RuntimeError("this AsyncPool belongs to another event loop")

    def _changed_soon(self) -> None:
        """Wakes every waiter (they re-check the state)."""
        changed, loop = self._changed, self._loop
        if changed is None or loop is None or loop.is_closed():
            return

        async def notify() -> None:
            async with changed:
                changed.notify_all()

        self._spawn(notify())

    def _spawn(self, coroutine: Any) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _refill(self) -> None:
        for _ in range(self._state.starts_due(time.monotonic())):
            self._spawn(self._start_one())

    async def _new_client(self) -> AsyncClient:
        o = self._options
        kwargs = o.client_kwargs()
        client = AsyncClient(o.key.command, **kwargs)
        self._state.adopt(client, kwargs)
        try:
            began = time.monotonic()
            await client.start(new_session=False, timeout=o.start_timeout)
            if o.authenticate is not None:
                left = None
                if o.start_timeout is not None:
                    left = max(0.0, began + o.start_timeout - time.monotonic())
                try:
                    await asyncio.wait_for(client.authenticate(o.authenticate), left)
                except TimeoutError as error:
                    assert o.start_timeout is not None
                    raise timed_out(client, o.authenticate, o.start_timeout) from error
        except BaseException:
            self._state.forget(client)
            client.close()
            raise
        if self._state.closed:  # close() ran meanwhile
            client.close()
            raise RuntimeError("the pool is closed")
        self._state.born[client] = time.monotonic()
        self._state.start_succeeded()
        return client

    async def _start_one(self) -> None:
        state = self._state
        try:
            client = await self._new_client()
        except asyncio.CancelledError:
            state.starting -= 1
            raise
        except Exception as error:
            state.starting -= 1
            if not state.closed:
                state.start_failed(error)
        else:
            state.starting -= 1
            if not state.put_idle(client):
                client.close()
        self._changed_soon()
        self._refill()

    async def _keep(self) -> None:
        """Housekeeping: evicts dead and expired spares, restarts refill after a backoff."""
        state = self._state
        while not state.closed:
            await asyncio.sleep(max(0.0, state.next_deadline() - time.monotonic()))
            for client in state.sweep(_alive):
                client.close()
            self._refill()

    async def _claim(self, began: float, timeout: float | None) -> AsyncClient:
        state = self._state
        o = self._options
        changed = self._changed
        assert changed is not None
        epoch = state.error_epoch
        patient_until = began + o.claim_timeout
        give_up = None if timeout is None else began + timeout
        waited = False
        while True:
            self._check_open()
            taken, evicted = state.take_idle(_alive)
            client = cast("AsyncClient | None", taken)
            for dead in evicted:
                dead.close()
            if client is not None:
                state.claimed.add(client)
                if waited:
                    state.counters.misses += 1
                else:
                    state.counters.hits += 1
                self._refill()
                return client
            now = time.monotonic()
            failed_since = state.error_epoch != epoch and state.last_error is not None
            nothing = state.nothing_coming()
            room = state.total() < o.max_total
            # Cold: claim_timeout passed, or a start failed and nothing else is coming (the
            # claim then raises the start error rather than waiting out claim_timeout).
            if room and (now >= patient_until or (nothing and state.failures > 0)):
                return await self._cold()
            if failed_since and nothing and not room:
                raise state.last_error  # type: ignore[misc]
            if give_up is not None and now >= give_up:
                raise TimeoutError(
                    f"no agent of the pool within {timeout} s: {state.stats()} "
                    f"(max_total={o.max_total})"
                )
            ends = [patient_until] if room else []
            if give_up is not None:
                ends.append(give_up)
            wait = None if not ends else max(0.0, min(ends) - now)
            waited = True
            state.waiting += 1
            try:
                self._refill()
                async with changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), wait)
            finally:
                state.waiting -= 1

    async def _cold(self) -> AsyncClient:
        state = self._state
        state.cold += 1
        try:
            client = await self._new_client()
        except Exception as error:
            if state.closed:  # close() stopped the start: not the agent's failure
                raise RuntimeError("the pool is closed") from error
            state.counters.failed += 1
            state.last_error = error
            raise
        finally:
            state.cold -= 1
        state.claimed.add(client)
        state.counters.misses += 1
        return client

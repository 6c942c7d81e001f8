"""`Pool`: warm spares of the blocking `Client` (fleet.md §1). Starts run on short-lived
threads of the pool's (at most ``spawn_concurrency`` at once) plus one housekeeping thread;
claims wait on a condition variable."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .._client import Client
from .._errors import AcpError
from .._session import Session
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


def _alive(client: Client) -> bool:
    """A spare is alive when its process has not exited and its output has not ended (a
    zero-timeout `drain()` reads what is pending: an ended output raises)."""
    core = client._core
    if core is None or core.closed or core.stopped or _pid_exited(client.pid):
        return False
    try:
        client.drain(0.0)
    except (AcpError, RuntimeError):
        return False
    return not client.reader_status().terminal


class Pool:
    """Warm spares of one agent: each spare is a `Client` that has completed ``initialize`` (and
    ``authenticate`` when set); `claim` hands one out in the time of a liveness check, `session`
    also opens a session on it. The same options and rules as `AsyncPool`, without ``await``.
    Thread-safe: any thread may claim, release and close."""

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
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._keeper: threading.Thread | None = None
        self._stop = threading.Event()

    # --- public --------------------------------------------------------------------------

    @property
    def key(self) -> PoolKey:
        return self._options.key

    def stats(self) -> PoolStats:
        with self._lock:
            return self._state.stats()

    def start(self, *, wait: bool = False) -> None:
        """Begins filling the pool (``with`` calls it). With ``wait`` it returns once
        ``min_idle`` spares are ready, and raises the start error when a start fails and
        nothing else is coming."""
        with self._lock:
            self._check_open()
            if self._keeper is None:
                self._keeper = threading.Thread(
                    target=_keep,
                    args=(weakref.ref(self), self._stop),
                    name="acp-fast-pool",
                    daemon=True,
                )
                self._keeper.start()
            self._refill()
            if not wait:
                return
            state = self._state
            epoch = state.error_epoch
            while len(state.idle) < self._options.min_idle:
                self._check_open()
                if state.error_epoch != epoch and state.last_error is not None:
                    raise state.last_error
                self._changed.wait()

    def claim(self, *, timeout: float | None = None, observer: object | None = None) -> Client:
        """A started client of the pool's own (a spare, else a cold start after
        ``claim_timeout``). Give it back with `release` (or close it). At ``max_total`` the claim
        waits for capacity, at most ``timeout`` seconds (`TimeoutError`), forever with None.
        ``observer`` (a pool made with ``claim_observers=True``): this claim's own observer,
        attached to the client after its handshake was replayed into it. Its ``on_elicitation``
        is asked only on a pool made with ``elicitation=True`` (`ValueError` otherwise)."""
        self._state.check_observer(observer)
        client = self._claim_counted(timeout)
        self._attach(client, observer)
        return client

    def _attach(self, client: Client, observer: object | None) -> None:
        """Attaches the claim's observer; if it raises (a journal that cannot write), the
        client is closed rather than left claimed by nobody, and the error raised."""
        try:
            with self._lock:
                self._state.attach(client, observer)
        except BaseException:
            with self._lock:
                self._state.claimed.discard(client)
                self._state.forget(client)
                self._refill()
            client.close()
            raise

    def _claim_counted(self, timeout: float | None) -> Client:
        self.start()
        began = time.monotonic()
        with self._lock:
            self._state.counters.claims += 1
        client = self._claim(began, timeout)
        from .. import telemetry

        telemetry.record_claim(time.monotonic() - began, self._options.client_options)
        return client

    def release(self, client: Client) -> None:
        """Gives back a claimed client: with ``reuse=True`` a healthy one whose sessions are all
        closed becomes a spare again; otherwise it is closed. A client this pool did not hand
        out (or already took back) raises `ValueError`, unless it is closed."""
        with self._lock:
            if not self._state.claimed_here(client):
                return
        healthy = (
            self._options.reuse
            and not client.sessions
            and _alive(client)
            and closes_sessions(client)
        )
        with self._lock:
            state = self._state
            state.claimed.discard(client)
            if healthy:
                state.detach(client)  # what it does next is held for the next claim
            keep = healthy and state.put_idle(client)
            if not keep:
                state.forget(client)
            self._changed.notify_all()
            self._refill()
        if not keep:
            client.close()

    @contextlib.contextmanager
    def session(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        timeout: float | None = None,
        observer: object | None = None,
    ) -> Iterator[Session]:
        """Claims a client and opens a session on it (``session/new`` with the task's ``cwd``
        and MCP servers); on exit the session is closed and the client released. ``observer``:
        as `claim`'s, attached once ``session/new`` succeeded (a spare found dead there leaves
        nothing in it)."""
        self._state.check_observer(observer)
        client, session = self._claim_session(
            cwd, mcp_servers, tuple(additional_directories), timeout, observer
        )
        try:
            yield session
        except BaseException:
            client.close()  # the task failed: whatever state the agent is in, it is not reused
            raise
        finally:
            if self._options.reuse and not client._live.closed and closes_sessions(client):
                try:
                    _bounded(session.close, client, CLOSE_WAIT)
                except Exception as error:  # the client is then not reused
                    log.info(
                        "pool: session/close failed, not reusing the client: %s",
                        printable(str(error)),
                    )
                    client.close()
            self.release(client)

    def _claim_session(
        self,
        cwd: str | os.PathLike[str] | None,
        mcp_servers: Iterable[Any] | None,
        directories: tuple[str, ...],
        timeout: float | None,
        observer: object | None = None,
    ) -> tuple[Client, Session]:
        """Claims and opens a session. A spare whose agent turns out dead at ``session/new``
        (its output ended between calls, which only a call can see) is evicted and the next one
        tried, at most ``max_total`` times; any other failure is raised."""
        for attempt in range(self._options.max_total + 1):
            client = self._claim_counted(timeout)
            try:
                session = client.new_session(
                    cwd, mcp_servers=mcp_servers, additional_directories=directories
                )
            except BaseException as error:
                dead = died_at_call(client, error)
                with self._lock:
                    if not dead or attempt == self._options.max_total:
                        with contextlib.suppress(Exception):  # the error raised is the call's
                            self._state.attach(client, observer)  # the record shows why
                    self._state.claimed.discard(client)
                    self._state.forget(client)
                    if dead:
                        self._state.counters.evicted += 1
                    self._refill()
                client.close()
                if not dead or attempt == self._options.max_total:
                    raise
                log.info("pool: a claimed agent was dead at session/new; trying the next one")
                continue
            self._attach(client, observer)
            return client, session
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Closes every spare and every claimed client; idempotent, any thread."""
        with self._lock:
            clients = self._state.take_all()
            self._changed.notify_all()
        self._stop.set()
        for client in clients:
            client.close()

    def __enter__(self) -> Pool:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        state = getattr(self, "_state", None)
        if state is not None and not state.closed:
            self._stop.set()
            for client in state.take_all():
                client.close()

    def __repr__(self) -> str:
        return f"<acp_fast.Pool {self._options.key.command!r} {self.stats()}>"

    # --- inside (the caller holds the lock where it says so) ------------------------------

    def _check_open(self) -> None:
        if self._state.closed:
            raise RuntimeError("the pool is closed")

    def _refill(self) -> None:
        """Lock held."""
        for _ in range(self._state.starts_due(time.monotonic())):
            threading.Thread(
                target=self._start_one, name="acp-fast-pool-start", daemon=True
            ).start()

    def _new_client(self) -> Client:
        o = self._options
        kwargs = o.client_kwargs()
        client = Client(o.key.command, **kwargs)
        with self._lock:
            closed = self._state.closed
            if not closed:
                self._state.adopt(client, kwargs)
        if closed:  # close() ran while the agent was spawned: it never saw this client
            client.close()
            raise RuntimeError("the pool is closed")
        try:
            began = time.monotonic()
            client.start(new_session=False, timeout=o.start_timeout)
            if o.authenticate is not None:
                _authenticate(client, o.authenticate, o.start_timeout, began)
        except BaseException:
            with self._lock:
                self._state.forget(client)
            client.close()
            raise
        with self._lock:
            if self._state.closed:  # close() ran meanwhile (and closed it)
                client.close()
                raise RuntimeError("the pool is closed")
            self._state.born[client] = time.monotonic()
            self._state.start_succeeded()
        return client

    def _start_one(self) -> None:
        try:
            client = self._new_client()
        except Exception as error:
            with self._lock:
                self._state.starting -= 1
                if not self._state.closed:
                    self._state.start_failed(error)
                self._changed.notify_all()
                self._refill()
            return
        with self._lock:
            self._state.starting -= 1
            kept = self._state.put_idle(client)
            self._changed.notify_all()
            self._refill()
        if not kept:
            client.close()

    def _claim(self, began: float, timeout: float | None) -> Client:
        state = self._state
        o = self._options
        patient_until = began + o.claim_timeout
        give_up = None if timeout is None else began + timeout
        waited = False
        with self._lock:
            epoch = state.error_epoch
        while True:
            client = self._take_one()
            with self._lock:
                self._check_open()
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
                cold = room and (now >= patient_until or (nothing and state.failures > 0))
                if not cold:
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
                    waited = True
                    state.waiting += 1
                    try:
                        self._refill()
                        self._changed.wait(None if not ends else max(0.0, min(ends) - now))
                    finally:
                        state.waiting -= 1
                    continue
                state.cold += 1
            return self._cold()

    def _take_one(self) -> Client | None:
        """The next live, unexpired spare, or None. Spares are taken out one at a time and
        checked without the lock (the check reads the spare's pipe), so concurrent claims
        each take a different spare and never find the idle list emptied by another."""
        state = self._state
        o = self._options
        while True:
            with self._lock:
                self._check_open()
                if not state.idle:
                    return None
                spare = state.idle.popleft()
            why = spare.expired(time.monotonic(), o.max_age, o.idle_ttl)
            if why is None and not _alive(spare.client):
                why = "dead (its process exited or its output ended)"
            if why is None:
                with self._lock:
                    if not state.closed:
                        chosen: Client = spare.client
                        return chosen
                spare.client.close()  # close() ran meanwhile (it was owned: closed already)
                self._check_open()
            log.info("pool: evicting a spare (pid %s): %s", spare.client.pid, why)
            with self._lock:
                state.counters.evicted += 1
                state.forget(spare.client)
            spare.client.close()

    def _cold(self) -> Client:
        state = self._state
        try:
            client = self._new_client()
        except Exception as error:
            with self._lock:
                state.cold -= 1
                closed = state.closed
                if not closed:
                    state.counters.failed += 1
                    state.last_error = error
            if closed:  # close() stopped the start: not the agent's failure
                raise RuntimeError("the pool is closed") from error
            raise
        with self._lock:
            state.cold -= 1
            state.claimed.add(client)
            state.counters.misses += 1
        return client


def _bounded(call: Any, client: Client, limit: float) -> None:
    """A blocking call of ``client`` given at most ``limit`` seconds: a timer closes the client
    then (the call fails)."""
    timer = threading.Timer(limit, client.close)
    timer.daemon = True
    timer.start()
    try:
        call()
    finally:
        timer.cancel()


def _authenticate(client: Client, method: str, limit: float | None, began: float) -> None:
    """``authenticate`` within what is left of ``start_timeout``: a blocking call cannot be
    interrupted, so a timer closes the client when the time is up."""
    if limit is None:
        client.authenticate(method)
        return
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        client.close()

    timer = threading.Timer(max(0.0, began + limit - time.monotonic()), expire)
    timer.daemon = True
    timer.start()
    try:
        client.authenticate(method)
    except AcpError as error:
        if fired.is_set():
            raise timed_out(client, method, limit) from error
        raise
    finally:
        timer.cancel()


def _keep(ref: weakref.ref[Pool], stop: threading.Event) -> None:
    """Housekeeping thread: evicts expired spares and those whose process exited (cheap checks,
    under the lock, so a claim never finds the idle list emptied by it), and restarts the refill
    after a backoff. Holds the pool only weakly, so an abandoned pool is collected (and closed)."""
    while True:
        pool = ref()
        if pool is None:
            return
        with pool._lock:
            wait = max(0.0, pool._state.next_deadline() - time.monotonic())
        del pool
        if stop.wait(wait):
            return
        pool = ref()
        if pool is None:
            return
        with pool._lock:
            if pool._state.closed:
                return
            dead = pool._state.sweep(lambda c: not _pid_exited(c.pid))
            pool._refill()
        for client in dead:
            client.close()
        del pool

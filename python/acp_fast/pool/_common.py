"""What `Pool` and `AsyncPool` share: the options and their checks, the spare record, the
statistics and the refill backoff (fleet.md §1). Nothing here waits or starts a process."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("acp_fast.pool")

#: Options fixed at spawn: they belong to the pool key, never to `client_options`.
_KEY_OPTIONS = frozenset({"command", "args", "env", "cwd"})
#: The refill's backoff after a failed start: first delay, factor, ceiling (seconds).
BACKOFF_FIRST = 0.1
BACKOFF_FACTOR = 2.0
BACKOFF_MAX = 30.0
#: How often the housekeeping looks at the idle spares when nothing expires sooner (seconds).
HOUSEKEEPING_EVERY = 1.0


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of a pool. ``idle``, ``claimed``, ``starting``: now; the rest: counts since
    the pool was made. ``started``: spares that completed their handshake (cold starts
    included); ``claims`` = ``hits`` + ``misses`` + claims that raised; ``hits``: claims served
    by a spare the pool started ahead; ``misses``: claims served by a cold start;
    ``evicted``: spares closed because they were dead or expired; ``failed``: starts that
    raised."""

    idle: int
    claimed: int
    starting: int
    started: int
    claims: int
    hits: int
    misses: int
    evicted: int
    failed: int


@dataclass(frozen=True)
class PoolKey:
    """What a spare is started with; a claim never gets an agent started differently."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] | None
    cwd: str | None


@dataclass
class Counters:
    started: int = 0
    claims: int = 0
    hits: int = 0
    misses: int = 0
    evicted: int = 0
    failed: int = 0


@dataclass
class Spare:
    """An idle, started client and when it was born and last put back."""

    client: Any
    born: float
    idle_since: float = field(default_factory=time.monotonic)

    def expired(self, now: float, max_age: float | None, idle_ttl: float | None) -> str | None:
        if max_age is not None and now - self.born >= max_age:
            return f"older than max_age={max_age} s"
        if idle_ttl is not None and now - self.idle_since >= idle_ttl:
            return f"idle longer than idle_ttl={idle_ttl} s"
        return None

    def deadline(self, max_age: float | None, idle_ttl: float | None) -> float:
        ends = [time.monotonic() + HOUSEKEEPING_EVERY]
        if max_age is not None:
            ends.append(self.born + max_age)
        if idle_ttl is not None:
            ends.append(self.idle_since + idle_ttl)
        return min(ends)


@dataclass(frozen=True)
class Options:
    """A pool's checked options."""

    key: PoolKey
    client_options: Mapping[str, Any]
    min_idle: int
    max_idle: int
    max_total: int
    max_age: float | None
    idle_ttl: float | None
    spawn_concurrency: int
    claim_timeout: float
    authenticate: str | None
    reuse: bool
    start_timeout: float | None
    claim_observers: bool = False
    elicitation: bool = False

    def client_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self.client_options)
        if self.claim_observers:  # the claim attaches the observer (pool/_relay.py)
            from ._relay import ElicitingRelay, Relay

            kwargs["observer"] = ElicitingRelay() if self.elicitation else Relay()
        kwargs["args"] = self.key.args
        kwargs["env"] = None if self.key.env is None else dict(self.key.env)
        kwargs["cwd"] = self.key.cwd
        return kwargs


def _positive(name: str, value: float | None, *, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds (got {value!r})")
    return float(value)


def _count(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low} (got {value!r})")
    return value


def check_options(
    command: str | os.PathLike[str],
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    client_options: Mapping[str, Any] | None,
    min_idle: int,
    max_idle: int | None,
    max_total: int,
    max_age: float | None,
    idle_ttl: float | None,
    spawn_concurrency: int,
    claim_timeout: float,
    authenticate: str | None,
    reuse: bool,
    start_timeout: float | None,
    claim_observers: bool = False,
    elicitation: bool = False,
) -> Options:
    if isinstance(args, str):
        raise TypeError("args must be a sequence of strings, not a string")
    options = dict(client_options or {})
    _check_elicitation(bool(claim_observers), bool(elicitation), options.get("observer"))
    fixed = sorted(_KEY_OPTIONS & options.keys())
    if fixed:
        raise ValueError(
            f"client_options may not set {', '.join(fixed)}: what a spare is started with is "
            "the pool key (pass it to the pool itself)"
        )
    min_idle = _count("min_idle", min_idle, 0)
    max_idle = max(min_idle, 1) if max_idle is None else _count("max_idle", max_idle, 0)
    max_total = _count("max_total", max_total, 1)
    if not min_idle <= max_idle <= max_total:
        raise ValueError(
            f"need min_idle <= max_idle <= max_total (got {min_idle}, {max_idle}, {max_total})"
        )
    timeout = _positive("claim_timeout", claim_timeout, allow_none=False)
    assert timeout is not None
    key = PoolKey(
        command=os.fspath(command),
        args=tuple(args),
        env=None if env is None else tuple(sorted((str(k), str(v)) for k, v in env.items())),
        cwd=None if cwd is None else os.path.abspath(os.fspath(cwd)),
    )
    return Options(
        key=key,
        client_options=options,
        min_idle=min_idle,
        max_idle=max_idle,
        max_total=max_total,
        max_age=_positive("max_age", max_age),
        idle_ttl=_positive("idle_ttl", idle_ttl),
        spawn_concurrency=_count("spawn_concurrency", spawn_concurrency, 1),
        claim_timeout=timeout,
        authenticate=authenticate,
        reuse=bool(reuse),
        start_timeout=_positive("start_timeout", start_timeout),
        claim_observers=bool(claim_observers),
        elicitation=bool(elicitation),
    )


def _check_elicitation(claim_observers: bool, elicitation: bool, observer: object) -> None:
    """Whether the spares advertise elicitation is fixed by their handshake, before any claim:
    refuses a pool whose observers' ``on_elicitation`` would never be asked."""
    if elicitation and not claim_observers:
        raise ValueError(
            "elicitation=True is for pools made with claim_observers=True; without it every "
            "spare has client_options' observer, and its on_elicitation (if any) already "
            "decides whether the spares advertise elicitation"
        )
    from ._relay import elicits

    if claim_observers and not elicitation and elicits(observer):
        raise ValueError(
            "client_options' observer has on_elicitation, but the spares' relays do not "
            "advertise elicitation unless the pool is made with elicitation=True"
        )


def backoff(failures: int) -> float:
    """Seconds to wait before the next start after ``failures`` failed starts in a row."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_FIRST * BACKOFF_FACTOR ** (failures - 1), BACKOFF_MAX)


def pid_exited(pid: int | None) -> bool:
    """True when our child ``pid`` has exited (zombie or reaped), without reaping it."""
    if pid is None:
        return True
    try:
        result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped (by the core)
    return result is not None


def timed_out(client: Any, method: str, limit: float) -> BaseException:
    from .._errors import ConnectError

    return ConnectError(
        f"authenticate({method!r}) did not finish within start_timeout={limit} s",
        agent_id=client.agent_id,
    )


def died_at_call(client: Any, error: BaseException) -> bool:
    """Whether a call failed because the agent was already dead: its output ended (an
    `AgentProtocolError` without an error code) and its process is gone."""
    from .._errors import AgentProtocolError

    if not isinstance(error, AgentProtocolError) or error.code is not None:
        return False
    if error.exit_code is not None or error.exit_signal is not None:
        return True  # the client had reaped it already
    deadline = time.monotonic() + 1.0
    while not pid_exited(client.pid):  # the exit follows the output's end closely
        if time.monotonic() >= deadline:
            return error.output_ended
        time.sleep(0.01)
    return True


def closes_sessions(client: Any) -> bool:
    """Whether the agent advertised ``session/close`` (reuse needs it)."""
    capabilities = client.initialize.agent_capabilities
    sessions = getattr(capabilities, "session_capabilities", None)
    marker = getattr(sessions, "close", None)
    from ..model import OMITTED

    return marker is not None and marker is not OMITTED


def log_failure(error: BaseException, failures: int, delay: float) -> None:
    # The message may carry the agent's stderr tail: its control bytes are shown, not sent.
    from .._text import printable

    log.warning(
        "a pool spare failed to start (%d in a row; next try in %.1f s): %s: %s",
        failures,
        delay,
        type(error).__name__,
        printable(str(error)),
    )


class State:
    """The bookkeeping both pools share; the caller holds its lock (or runs on its loop)."""

    def __init__(self, options: Options) -> None:
        from collections import deque

        self.options = options
        self.idle: deque[Spare] = deque()
        self.claimed: set[Any] = set()
        #: Every client the pool made and has not closed: what `close()` closes.
        self.owned: set[Any] = set()
        #: When each owned client completed its handshake (max_age counts from it).
        self.born: dict[Any, float] = {}
        #: Each owned client's `Relay` (``claim_observers=True``), by client.
        self.relays: dict[Any, Any] = {}
        self.starting = 0  # background starts in flight
        self.cold = 0  # claimers' own starts in flight
        self.waiting = 0  # claims waiting for a spare
        self.counters = Counters()
        self.failures = 0  # failed starts in a row
        self.backoff_until = 0.0
        self.last_error: BaseException | None = None
        #: Bumped at each failed start: a waiter compares it to see a failure since it began.
        self.error_epoch = 0
        self.closed = False

    def prune(self) -> None:
        """Forgets claimed clients their holder closed without giving them back."""
        gone = [c for c in self.claimed if c._core is None or c._core.closed]
        for client in gone:
            self.claimed.discard(client)
            self.forget(client)

    def forget(self, client: Any) -> None:
        self.owned.discard(client)
        self.born.pop(client, None)
        self.relays.pop(client, None)

    def adopt(self, client: Any, kwargs: Mapping[str, Any]) -> None:
        """Owns a client just made from `kwargs` (and its relay, if it has one)."""
        self.owned.add(client)
        if self.options.claim_observers:
            self.relays[client] = kwargs["observer"]

    def check_observer(self, observer: object | None) -> None:
        """Before a claim: whether its observer can be attached (`ValueError` if not)."""
        if observer is None:
            return
        if not self.options.claim_observers:
            raise ValueError(
                "this pool's spares share client_options' observer: make the pool with "
                "claim_observers=True to attach an observer per claim"
            )
        from ._relay import check_target, elicits

        if not self.options.elicitation and elicits(observer):
            raise ValueError(
                "this claim's observer has on_elicitation, but the pool's agents were started "
                "without advertising elicitation (it is fixed at their handshake, before any "
                "claim): make the pool with elicitation=True"
            )
        check_target(observer, self.options.client_options)

    def attach(self, client: Any, observer: object | None) -> None:
        """Attaches the claim's observer (else client_options' one) to a claimed client."""
        relay = self.relays.get(client)
        if relay is None:
            return
        from ._relay import attach_journal_epoch

        if observer is None:
            observer = self.options.client_options.get("observer")
        attach_journal_epoch(observer, self.options.client_options)
        relay.attach(observer)

    def detach(self, client: Any) -> None:
        relay = self.relays.get(client)
        if relay is not None:
            relay.detach()

    def claimed_here(self, client: Any) -> bool:
        """Whether ``client`` is claimed from this pool now; False for a closed client (nothing
        to give back); `ValueError` for an open client the pool does not hold as claimed."""
        if client in self.claimed:
            return True
        core = getattr(client, "_core", None)
        if self.closed or core is None or core.closed:
            return False
        raise ValueError(
            "this client is not claimed from this pool (another pool's, made directly, or "
            "released already)"
        )

    def total(self) -> int:
        self.prune()
        return len(self.idle) + len(self.claimed) + self.starting + self.cold

    def stats(self) -> PoolStats:
        self.prune()
        c = self.counters
        return PoolStats(
            idle=len(self.idle),
            claimed=len(self.claimed),
            starting=self.starting + self.cold,
            started=c.started,
            claims=c.claims,
            hits=c.hits,
            misses=c.misses,
            evicted=c.evicted,
            failed=c.failed,
        )

    def starts_due(self, now: float) -> int:
        """How many background starts to launch now (0 while backing off)."""
        if self.closed or now < self.backoff_until:
            return 0
        o = self.options
        launch = 0
        while True:
            supply = len(self.idle) + self.starting + launch
            if supply >= o.min_idle + self.waiting:
                break
            if self.total() + launch >= o.max_total:
                break
            if self.starting + launch >= o.spawn_concurrency:
                break
            launch += 1
        self.starting += launch
        return launch

    def nothing_coming(self) -> bool:
        """No spare is idle or being started: a claim now has nothing to wait for."""
        return not self.idle and self.starting == 0

    def take_idle(self, alive: Any) -> tuple[Any | None, list[Any]]:
        """The next live, unexpired idle spare (newest put back first) and the spares evicted on
        the way (the caller closes them outside its lock)."""
        o = self.options
        evicted: list[Any] = []
        now = time.monotonic()
        while self.idle:
            spare = self.idle.popleft()
            why = spare.expired(now, o.max_age, o.idle_ttl)
            if why is None and not alive(spare.client):
                why = "dead (its process exited or its output ended)"
            if why is None:
                return spare.client, evicted
            log.info("pool: evicting a spare (pid %s): %s", spare.client.pid, why)
            self.counters.evicted += 1
            self.forget(spare.client)
            evicted.append(spare.client)
        return None, evicted

    def sweep(self, alive: Any) -> list[Any]:
        """Evicts every dead or expired idle spare; returns them for closing."""
        o = self.options
        now = time.monotonic()
        kept: list[Spare] = []
        evicted: list[Any] = []
        for spare in self.idle:
            why = spare.expired(now, o.max_age, o.idle_ttl)
            if why is None and not alive(spare.client):
                why = "dead (its process exited or its output ended)"
            if why is None:
                kept.append(spare)
            else:
                log.info("pool: evicting a spare (pid %s): %s", spare.client.pid, why)
                self.counters.evicted += 1
                self.forget(spare.client)
                evicted.append(spare.client)
        self.idle.clear()
        self.idle.extend(kept)
        return evicted

    def next_deadline(self) -> float:
        o = self.options
        ends = [s.deadline(o.max_age, o.idle_ttl) for s in self.idle]
        ends.append(time.monotonic() + HOUSEKEEPING_EVERY)
        if self.backoff_until > time.monotonic():
            ends.append(self.backoff_until)
        return min(ends)

    def start_failed(self, error: BaseException) -> None:
        self.failures += 1
        self.counters.failed += 1
        delay = backoff(self.failures)
        self.backoff_until = time.monotonic() + delay
        self.last_error = error
        self.error_epoch += 1
        log_failure(error, self.failures, delay)

    def start_succeeded(self) -> None:
        self.failures = 0
        self.backoff_until = 0.0
        self.counters.started += 1

    def put_idle(self, client: Any) -> bool:
        """Keeps a started or returned client as a spare; False when the pool has enough (the
        caller closes it)."""
        if self.closed or len(self.idle) >= self.options.max_idle + self.waiting:
            self.forget(client)
            return False
        self.idle.appendleft(Spare(client, self.born.setdefault(client, time.monotonic())))
        return True

    def take_all(self) -> list[Any]:
        """Marks the pool closed and hands back every client it owns, for closing."""
        self.closed = True
        clients = list(self.owned)
        self.idle.clear()
        self.claimed.clear()
        self.owned.clear()
        self.born.clear()
        self.relays.clear()
        return clients

"""`AsyncSession` and its `Updates` iterator: an `AsyncClient`'s session handle, whose calls are
the client's plans run on the loop, and the coalesced batches of its updates (async.md §6)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, Literal, Protocol, TypeVar

from . import _calls
from ._calls import ClientLike, Plan
from ._core import Update
from ._session import _SessionBase
from ._types import TurnResult

_T = TypeVar("_T")


class _LoopClient(ClientLike[Any], Protocol):
    """What a session and its iterators use of their `AsyncClient`."""

    async def _run(self, plan: Plan[_T], *, bind: bool = True) -> _T: ...
    def _subscribe(self, updates: Updates) -> None: ...
    def _unsubscribe(self, updates: Updates) -> None: ...
    def _maybe_resume(self) -> None: ...
    def _end_subscriptions(self, session_id: str | None, error: BaseException | None) -> None: ...


class AsyncSession(_SessionBase):
    """One ACP session of an `AsyncClient`; made by its calls, never directly."""

    _kind = "AsyncSession"
    _client: _LoopClient

    async def prompt(
        self,
        content: str | Iterable[Any],
        *,
        timeout: float | None = None,
        interrupt: Literal["raise", "cancel"] | None = None,
    ) -> TurnResult:
        """One turn; arguments and result as `Session.prompt`. Cancelling the awaiting task
        cancels the turn (``session/cancel``), waits up to ``cancel_grace`` for it to end,
        then raises `asyncio.CancelledError`. With ``interrupt="cancel"`` and the loop on the
        main thread, the first Ctrl-C cancels the turn and the call returns its result."""
        plan = _calls.turn(self, content, timeout, gated=True, interrupt=interrupt)
        return await self._client._run(plan)

    async def set_mode(self, mode_id: str) -> None:
        """Switches the session's mode (``session/set_mode``) to one of `modes`."""
        await self._client._run(_calls.set_mode(self, mode_id))

    async def set_config_option(self, config_id: str, value: str | bool) -> tuple[Any, ...]:
        """Sets a config option; returns the session's config options afterwards."""
        return await self._client._run(_calls.set_config_option(self, config_id, value))

    async def set_model(self, model_id: str) -> None:
        """Through the ``"model"`` config option, else the legacy ``session/set_model``."""
        await self._client._run(_calls.set_model(self, model_id))

    async def set_title(self, title: str) -> str:
        """Sets the session's title (``session/set_title``, unstable): as `Session.set_title`."""
        return await self._client._run(_calls.set_title(self, title))

    async def status(self) -> str:
        """The agent's status of the session (``session/status``, unstable): as
        `Session.status`."""
        return await self._client._run(_calls.session_status(self))

    async def steer(self, content: str | Iterable[Any]) -> str:
        """Sends ``content`` into this session's running turn (``_session/steering``,
        unstable): await it while ``prompt()`` runs in another task. Returns the agent's
        outcome, as `Session.steer`."""
        return await self._client._run(_calls.steer(self, content))

    async def close(self) -> None:
        """Closes the session (``session/close`` when the agent advertises it; locally either
        way). Idempotent."""
        await self._client._run(_calls.close_session(self), bind=False)

    def _mark_closed(self) -> None:
        super()._mark_closed()
        self._client._end_subscriptions(self.session_id, None)

    def updates(
        self,
        *,
        max_latency: float = 0.016,
        max_items: int = 256,
        max_buffered_bytes: int = 8 << 20,
    ) -> Updates:
        """Every update routed to this session from now on, in coalesced batches (see the
        design's async.md §6). Leave the ``async for`` (or ``await it.aclose()``) when done:
        an iterator nobody reads pauses the client once its queue fills."""
        for name, value in (
            ("max_latency", max_latency),
            ("max_items", max_items),
            ("max_buffered_bytes", max_buffered_bytes),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0 (got {value!r})")
        return Updates(
            self._client, self.session_id, max_latency, int(max_items), int(max_buffered_bytes)
        )

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class Updates:
    """An async iterator of a session's updates in batches (`AsyncSession.updates`)."""

    def __init__(
        self,
        client: _LoopClient,
        session_id: str,
        max_latency: float,
        max_items: int,
        max_bytes: int,
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._max_latency = max_latency
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._queue: deque[Update] = deque()
        self._bytes = 0
        self._opened_at = 0.0  # loop time of the first update of the open batch
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        client._subscribe(self)

    # Called by the client on the loop's thread.

    def _push(self, update: Update) -> bool:
        """Queues an update; whether the queue is now full (the client pauses reading)."""
        queue = self._queue
        if not queue:
            self._opened_at = time.monotonic()
        queue.append(update)
        self._bytes += len(update.envelope)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return len(queue) >= 4 * self._max_items or self._bytes >= self._max_bytes

    def _half_empty(self) -> bool:
        return len(self._queue) <= 2 * self._max_items and self._bytes <= self._max_bytes // 2

    def _end(self, error: BaseException | None) -> None:
        self._ended = True
        self._error = error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # The iterator.

    def __aiter__(self) -> Updates:
        return self

    async def _wait(self, timeout: float | None) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            if timeout is None:
                await waiter
            else:
                await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            self._waiter = None

    async def __anext__(self) -> tuple[Update, ...]:
        queue = self._queue
        while not queue:
            if self._ended:
                self._close()
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            await self._wait(None)
        # The batch opened with its first update: hand it over when it is full or old enough.
        while len(queue) < self._max_items and not self._ended:
            remaining = self._opened_at + self._max_latency - time.monotonic()
            if remaining <= 0:
                break
            await self._wait(remaining)
        count = min(len(queue), self._max_items)
        batch = tuple(queue.popleft() for _ in range(count))
        self._bytes -= sum(len(u.envelope) for u in batch)
        if queue:
            self._opened_at = 0.0  # a consumer that is behind gets the rest at once
        self._client._maybe_resume()
        return batch

    def _close(self) -> None:
        if self._client is not None:
            self._client._unsubscribe(self)

    async def aclose(self) -> None:
        """Stops the subscription (its queue is dropped)."""
        self._end(None)
        self._queue.clear()
        self._bytes = 0
        self._close()

    def __del__(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client._unsubscribe(self)

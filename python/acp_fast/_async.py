"""`AsyncClient`: the client driven by an asyncio event loop (its sessions and their update
iterators are `_async_session`'s, re-exported here).

The same core, `Connection` and callbacks as `Client`; instead of a blocking loop, the agent's
stdout, a waker and the agent's exit (a pidfd) are watched with ``loop.add_reader`` and each
readiness callback runs one bounded step of the core (``aio_pump``), which handles complete lines
(observer callbacks included) and reports finished calls, awaitable permission answers and what
the loop must arrange next (a write watch, another step, a timer). No thread is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

from . import _calls, _login
from ._async_session import AsyncSession as AsyncSession
from ._async_session import Updates as Updates
from ._calls import CoreCall, Plan
from ._client import _ClientBase
from ._convert import observer_answer
from ._core import CLIENT_CLOSED, Report, Update
from ._elicitation import answer_of
from ._errors import AgentProtocolError
from ._types import PromptResult, ReaderStatus

# Events handled per step before yielding to the loop's other callbacks: large enough that the
# per-step cost (one Python call, one report) vanishes against the per-update cost, small
# enough that 64 agents in one loop take turns every few milliseconds.
_BUDGET = 2048

_T = TypeVar("_T")


class AsyncClient(_ClientBase[AsyncSession]):
    """`Client` for asyncio: the same options (see ``__init__``), semantics and errors; every
    call that talks to the agent is a coroutine.

    ```python
    import asyncio
    import acp_fast as acp

    async def main() -> None:
        async with acp.AsyncClient(*acp.demo_agent_command()) as client:
            await client.start()
            print(await client.prompt("What does this repo do?"))

    asyncio.run(main())
    ```

    ``async with`` (or ``await aclose()``) stops the agent; `close()` and `request_cancel()`
    are plain methods, callable from any thread, and `Session.cancel` likewise. The client
    binds to the running loop at its first awaited call and starts no thread of its own.
    """

    _asynchronous = True
    _session_kind = "AsyncSession"

    def _setup(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._asks: dict[int, asyncio.Future[Any]] = {}
        self._subscriptions: dict[str, list[Updates]] = {}
        self._fds: tuple[int, int, int, int] = (-1, -1, -1, -1)
        self._reading = self._writing = self._paused = self._step_soon = False
        # The agent is not taking its stdin: its output is not read until it does.
        self._backlogged = False
        self._timer: asyncio.TimerHandle | None = None
        self._guard: asyncio.Future[None] | None = None
        self._stop_error: BaseException | None = None
        # The agent's stderr pipe (stderr="tail"), drained by a loop callback: no thread.
        self._stderr_fd = -1

    def _make_session(
        self, session_id: str, cwd: str, directories: tuple[str, ...]
    ) -> AsyncSession:
        return AsyncSession(self, session_id, cwd, directories)

    # --- the loop ------------------------------------------------------------------------

    def _bind(self) -> asyncio.AbstractEventLoop:
        """The running loop, which the client is bound to from its first call on."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return loop
        if self._loop is not None:
            raise RuntimeError(
                "this AsyncClient belongs to another event loop (or thread); "
                "use it from the loop that made its first call"
            )
        core = self._live
        if core.closed:
            raise RuntimeError(CLIENT_CLOSED)
        self._fds = core.aio_attach()
        stdout, _stdin, waker, exit_fd = self._fds
        self._loop = loop
        loop.add_reader(stdout, self._on_readable)
        self._reading = True
        loop.add_reader(waker, self._on_wake)
        if exit_fd >= 0:
            loop.add_reader(exit_fd, self._on_exit)
        self._stderr_fd = core.aio_stderr_fd()
        if self._stderr_fd >= 0:
            loop.add_reader(self._stderr_fd, self._on_stderr)
        # The loop's shutdown cancels every task: this one closes the client then.
        self._guard = asyncio.ensure_future(_guard(weakref.ref(self)))
        return loop

    def _on_readable(self) -> None:
        self._apply(self._live.aio_pump(_BUDGET))

    def _on_wake(self) -> None:
        # While paused only the cancels, stops and timers are handled (budget 0).
        self._apply(self._live.aio_pump(0 if self._paused else _BUDGET, woken=True))

    def _on_exit(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.remove_reader(self._fds[3])
        self._apply(self._live.aio_pump(_BUDGET, exited=True))

    def _on_stderr(self) -> None:
        if self._live.aio_stderr() and self._stderr_fd >= 0 and self._loop is not None:
            self._loop.remove_reader(self._stderr_fd)  # it ended; close() closes the fd
            self._stderr_fd = -1

    def _on_writable(self) -> None:
        self._apply(self._live.aio_write())

    def _on_timer(self) -> None:
        self._timer = None
        self._apply(self._live.aio_pump(0 if self._paused else _BUDGET))

    def _step(self) -> None:
        self._step_soon = False
        if not self._paused:
            self._apply(self._live.aio_pump(_BUDGET))

    def _schedule_step(self) -> None:
        loop = self._loop
        if loop is not None and not self._step_soon and not loop.is_closed():
            self._step_soon = True
            loop.call_soon(self._step)

    def _apply(self, report: Report) -> None:
        """Completes what the core finished and arranges what it asks of the loop."""
        futures = self._futures
        for call_id, ok, value in report.done:
            future = futures.pop(call_id, None)
            if future is None or future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        for token, awaitable in report.asks:
            task = asyncio.ensure_future(awaitable)
            self._asks[token] = task
            task.add_done_callback(lambda t, token=token: self._asked(token, t))
        for token in report.cancelled:
            pending = self._asks.get(token)
            if pending is not None:
                pending.cancel()
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if report.ended and self._live.closed:
            # close() from a callback inside a step could not release the pipes then.
            self._detach()
            self._live.close()
            return
        stdout, stdin, _waker, _exit = self._fds
        if report.write:
            if not self._writing and stdin >= 0:
                loop.add_writer(stdin, self._on_writable)
                self._writing = True
        elif self._writing:
            loop.remove_writer(stdin)
            self._writing = False
        if report.stopped and self._stop_error is None:
            stop_error = AgentProtocolError(
                "the client stopped (a callback raised or the observer lacks one; see the "
                "error the pending call raised); only close() is accepted"
            )
            # What stopped it, as every other "the client stopped" error has (async.md §3).
            stop_error.__cause__ = self._live.stop_cause
            self._stop_error = stop_error
            self._end_subscriptions(None, stop_error)
        if report.ended or report.paused:
            if self._reading:
                loop.remove_reader(stdout)
                self._reading = False
            self._paused = report.paused and not report.ended
        if report.backlog and not report.ended:
            if self._reading:
                loop.remove_reader(stdout)
                self._reading = False
            self._backlogged = True
        elif self._backlogged:
            self._backlogged = False
            if not report.ended:
                self._resume_reading()
        if report.more and not report.paused:
            self._schedule_step()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if report.timeout is not None:
            self._timer = loop.call_later(report.timeout, self._on_timer)

    def _asked(self, token: int, task: asyncio.Future[Any]) -> None:
        """An awaited `on_permission` or `on_elicitation` finished: decide its request."""
        self._asks.pop(token, None)
        if self._core is None or self._core.closed:
            return
        reply: tuple[str, str, str, str] | None = None
        error: BaseException | None = None
        if not task.cancelled():
            error = task.exception()
            if error is None:
                try:
                    reply = answer_of(task.result(), observer_answer)
                except TypeError as wrong:
                    error = wrong
        self._apply(self._live.aio_decide(token, reply, error))

    # --- subscriptions -------------------------------------------------------------------

    def _subscribe(self, updates: Updates) -> None:
        if self._stop_error is not None:
            updates._end(self._stop_error)
            return
        session = self._sessions.get(updates._session_id)
        if session is None or session.closed or self._live.closed:
            updates._end(None)
            return
        self._subscriptions.setdefault(updates._session_id, []).append(updates)
        self._live.aio_set_fold(self._route)

    def _unsubscribe(self, updates: Updates) -> None:
        listed = self._subscriptions.get(updates._session_id)
        if listed is not None and updates in listed:
            listed.remove(updates)
            if not listed:
                del self._subscriptions[updates._session_id]
        core = self._core
        if not self._subscriptions and self._session_state == "off" and core is not None:
            core.aio_set_fold(None)  # back to no per-update Python work beyond on_update
        self._maybe_resume()

    def _end_subscriptions(self, session_id: str | None, error: BaseException | None) -> None:
        for sid, listed in list(self._subscriptions.items()):
            if session_id is None or sid == session_id:
                for updates in list(listed):
                    updates._end(error)

    def _route(self, update: Update, mode_ids: list[str]) -> bool:
        """After `on_update`, for an update routed to an open session: the fold, then every
        `updates()` queue of that session. True when a queue is full (pause reading)."""
        if self._session_state != "off":
            self._fold(update, mode_ids)
        full = False
        for updates in self._subscriptions.get(update.session_id, ()):
            full = updates._push(update) or full
        return full

    def _maybe_resume(self) -> None:
        if not self._paused:
            return
        for listed in self._subscriptions.values():
            for updates in listed:
                if not updates._half_empty():
                    return
        self._paused = False
        self._resume_reading()

    def _resume_reading(self) -> None:
        """Watches stdout again (unless an `updates()` queue is full or the agent's stdin is
        backed up: what clears the last of those resumes)."""
        loop = self._loop
        if self._paused or self._backlogged or self._reading:
            return
        if loop is not None and not loop.is_closed() and not self._live.closed:
            loop.add_reader(self._fds[0], self._on_readable)
            self._reading = True
            self._schedule_step()  # lines may be buffered in the core already

    # --- calls ---------------------------------------------------------------------------

    async def _call(self, call_id: int, *, turn_session: str | None = None) -> Any:
        """Waits for a started call. A cancelled task gives the call up (`$/cancel_request`),
        or, for a turn, cancels the turn and waits up to the cancel grace for its end."""
        if call_id < 0:
            return None  # finished at once
        loop = self._bind()
        future: asyncio.Future[Any] = loop.create_future()
        self._futures[call_id] = future
        self._apply(self._live.aio_write())  # a write is tried at once
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():
                raise
            if turn_session is None:
                self._futures.pop(call_id, None)
                self._apply(self._live.aio_abandon(call_id))
                raise
            self._live.cancel(turn_session)  # one session/cancel; pending permissions cancelled
            self._schedule_step()
            try:
                await asyncio.wait_for(asyncio.shield(future), self._cancel_grace)
            except BaseException:  # the grace passed, a second cancellation, or the turn failed
                if not future.done():
                    self._futures.pop(call_id, None)
                    self._apply(self._live.aio_abandon(call_id))
            raise

    async def _run(self, plan: Plan[_T], *, bind: bool = True) -> _T:
        """Runs a plan to its end on the loop (`AsyncClient`'s runner): each core call is begun
        and awaited (`_perform`). The client binds to the running loop first, so that a call
        from another loop says so before anything else; with ``bind`` False only when the
        plan makes a core call (closing a session of a closed client is allowed)."""
        if bind:
            self._bind()
        try:
            call = plan.send(None)
            while True:
                try:
                    value = await self._perform(call)
                except BaseException as error:  # the plan decides (CancelledError included)
                    call = plan.throw(error)
                else:
                    call = plan.send(value)
        except StopIteration as stop:
            result: _T = stop.value
            return result

    async def _perform(self, call: CoreCall) -> Any:
        """The one place the asyncio client makes a plan's core call: begun on the core, then
        awaited (`_call`)."""
        self._bind()
        begun = getattr(self._live, call.name)(*call.args).begin()
        return await self._call(begun, turn_session=call.turn)

    async def start(self, *, new_session: bool = True, timeout: float | None = None) -> None:
        """Sends `initialize`, then `session/new` in `cwd` (the default session). Handshake
        failures raise `ConnectError`, as `Client.start`."""
        await self._run(_calls.start(self, new_session, timeout))

    async def new_session(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> AsyncSession:
        """Opens a session (`session/new`); the first one opened becomes the default. The
        arguments are `Client.new_session`'s."""
        return await self._run(
            _calls.new_session(
                self, cwd, mcp_servers, additional_directories, system_prompt, system_prompt_mode
            )
        )

    async def load_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> AsyncSession:
        """Loads a session (`session/load`): replayed updates are delivered before it returns."""
        return await self._run(
            _calls.load_session(
                self,
                session_id,
                cwd,
                mcp_servers,
                additional_directories,
                False,
                system_prompt,
                system_prompt_mode,
            )
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
        replay_from: Literal["start"] | None = None,
    ) -> AsyncSession:
        """Resumes a session (``session/resume``). Arguments as `load_session`, and:

        Args:
            replay_from: None (default): the agent replays nothing. "start" (ACP v2, the
                agent's ``session.resume`` capability): the agent replays the session from its
                start, and every replayed update is numbered, delivered and routed to it
                before this returns, as `load_session` does in v1. In v1 it raises
                `CapabilityError` (use `load_session`).
        """
        return await self._run(
            _calls.load_session(
                self,
                session_id,
                cwd,
                mcp_servers,
                additional_directories,
                True,
                system_prompt,
                system_prompt_mode,
                replay_from,
            )
        )

    async def fork_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Iterable[Any] | None = None,
        additional_directories: Iterable[str] = (),
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> AsyncSession:
        """Forks a session (``session/fork``, unstable): as `Client.fork_session`."""
        return await self._run(
            _calls.fork_session(
                self,
                session_id,
                cwd,
                mcp_servers,
                additional_directories,
                system_prompt,
                system_prompt_mode,
            )
        )

    async def list_sessions(self, cwd: str | os.PathLike[str] | None = None) -> tuple[Any, ...]:
        """Every session the agent lists (all pages, in its order)."""
        return await self._run(_calls.list_sessions(self, cwd))

    async def delete_session(self, session_id: str) -> None:
        """`session/delete`; an open handle for it is then closed locally."""
        await self._run(_calls.delete_session(self, session_id))

    async def authenticate(self, method_id: str) -> None:
        """``authenticate`` with one of ``initialize.auth_methods``."""
        await self._run(_calls.authenticate(self, method_id))

    async def terminal_login(self, method_id: str, *, timeout: float | None = None) -> int:
        """`Client.terminal_login`: the login runs on this process's terminal in a worker
        thread, so the event loop goes on; its exit status. Cancelling the awaiting task stops
        the login's process group."""
        login = self._terminal_login(method_id)
        stop = threading.Event()
        running = asyncio.ensure_future(
            asyncio.to_thread(_login.run_login, login, timeout=timeout, stop=stop)
        )
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            # The task was cancelled: the login's group is stopped before this returns.
            stop.set()
            with contextlib.suppress(Exception):  # LoginStopped, or how the login ended
                await running
            raise

    async def logout(self) -> None:
        """``logout`` (needs the agent's ``auth.logout`` capability)."""
        await self._run(_calls.logout(self))

    async def prompt(self, text: str, *, timeout: float | None = None) -> str:
        """Sends one text prompt to the default session and returns the reply text."""
        return await self._run(_calls.prompt(self, text, timeout))

    async def prompt_detailed(self, text: str, *, timeout: float | None = None) -> PromptResult:
        """As `Client.prompt_detailed`."""
        return await self._run(_calls.prompt_detailed(self, text, timeout))

    async def prompt_content(
        self, blocks: Iterable[Any], *, timeout: float | None = None
    ) -> PromptResult:
        """As `Client.prompt_content`."""
        return await self._run(_calls.prompt_content(self, blocks, timeout))

    # --- shutdown ------------------------------------------------------------------------

    def close(self, *, grace: float = 0.0) -> None:
        """Stops the agent's group and reaps it (nothing to await); every pending call raises
        `AgentProtocolError` and every `updates()` iterator ends. Idempotent; any thread."""
        core = self._core
        if core is None:
            return
        loop = self._loop
        here = loop is None or loop.is_closed() or _loop_thread(loop)
        if here:
            self._detach()
        core.close(grace)
        if here:
            self._fail_pending()
        elif loop is not None:
            try:
                loop.call_soon_threadsafe(self._closed_on_loop)
            except RuntimeError:
                pass  # the loop closed meanwhile

    def _closed_on_loop(self) -> None:
        self._detach()
        self._live.close()  # releases the fds if the other thread could not (a step ran)
        self._fail_pending()

    def _detach(self) -> None:
        """Stops watching the client's fds (before the core closes them)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        stdout, stdin, waker, exit_fd = self._fds
        if self._reading:
            loop.remove_reader(stdout)
            self._reading = False
        if self._writing:
            loop.remove_writer(stdin)
            self._writing = False
        loop.remove_reader(waker)
        if exit_fd >= 0:
            loop.remove_reader(exit_fd)
        if self._stderr_fd >= 0:
            loop.remove_reader(self._stderr_fd)
            self._stderr_fd = -1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        guard = self._guard
        self._guard = None
        if guard is not None and not guard.done():
            guard.cancel()

    def _fail_pending(self) -> None:
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(
                    AgentProtocolError(
                        "close() stopped the agent while waiting for the agent's answer"
                    )
                )
        for task in list(self._asks.values()):
            task.cancel()
        self._end_subscriptions(None, None)

    async def aclose(self, *, grace: float = 0.0) -> None:
        """`close`, awaitable: stops the agent's group and reaps it; every pending call
        raises `AgentProtocolError` and every `updates()` iterator ends. With ``grace`` > 0
        the agent's stdin is closed first and it has that long to exit by itself; the wait
        runs off the event loop (in its default executor), so other clients go on meanwhile.
        Idempotent."""
        core = self._core
        if core is None:
            return
        if grace > 0 and not core.closed:
            running = asyncio.get_running_loop()
            if self._loop is not None and self._loop is not running:
                # Bound to another loop: close() hands the fds over to that loop itself.
                await running.run_in_executor(None, lambda: self.close(grace=grace))
                return
            self._detach()  # the fds close under the wait: stop watching them first
            await running.run_in_executor(None, core.close, grace)
        self.close()
        await asyncio.sleep(0)  # the awaiting tasks see their errors before this returns

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- state ---------------------------------------------------------------------------

    def reader_status(self) -> ReaderStatus:
        """As `Client.reader_status`; the phase is "paused" while a full `updates()` queue
        holds the reader back."""
        status = super().reader_status()
        if self._paused and not status.terminal:
            return dataclasses.replace(status, phase="paused")
        return status


def _loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread runs `loop` (or nothing runs it)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return not loop.is_running()


async def _guard(client: Callable[[], AsyncClient | None]) -> None:
    """Waits forever; cancelled by the loop's shutdown (or by `close()`), it closes the client."""
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        live = client()
        if live is not None:
            live.close()

"""`SyncOverAsync`: an `AsyncClient` whose coroutines run to completion on a private event loop,
so the suites written for `Client` (the seed port, the fault suite) run against the asyncio
client unchanged: the same outcomes and the same messages."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

import acp_fast as acp


class SyncSession:
    """A blocking view of an `AsyncSession`."""

    def __init__(self, owner: SyncOverAsync, session: acp.AsyncSession) -> None:
        self._owner = owner
        self._session = session

    def prompt(self, content: Any, *, timeout: float | None = None) -> acp.TurnResult:
        return self._owner._run(self._session.prompt(content, timeout=timeout))

    def set_mode(self, mode_id: str) -> None:
        self._owner._run(self._session.set_mode(mode_id))

    def set_model(self, model_id: str) -> None:
        self._owner._run(self._session.set_model(model_id))

    def set_config_option(self, config_id: str, value: str | bool) -> tuple[Any, ...]:
        return self._owner._run(self._session.set_config_option(config_id, value))

    def close(self) -> None:
        self._owner._run(self._session.close())

    def cancel(self) -> None:
        self._session.cancel()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SyncOverAsync:
    """`Client`'s blocking surface over an `AsyncClient` (each call runs the loop)."""

    def __init__(self, command: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._client = acp.AsyncClient(command, **options)
        except BaseException:
            self._loop.close()
            raise
        self._views: dict[int, SyncSession] = {}
        # close() may come from two threads at once (a test stops the agent from another
        # thread, then cleans up): the loop is closed by one of them, never by both.
        self._closing = threading.Lock()

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        if self._loop.is_closed():
            coroutine.close()
            raise RuntimeError("the client is closed")
        return self._loop.run_until_complete(coroutine)

    def _view(self, session: acp.AsyncSession | None) -> SyncSession | None:
        if session is None:
            return None
        view = self._views.get(id(session))
        if view is None:
            view = self._views[id(session)] = SyncSession(self, session)
        return view

    # calls
    def start(self, *, new_session: bool = True, timeout: float | None = None) -> None:
        self._run(self._client.start(new_session=new_session, timeout=timeout))

    def prompt(self, text: str, *, timeout: float | None = None) -> str:
        return self._run(self._client.prompt(text, timeout=timeout))

    def prompt_detailed(self, text: str, *, timeout: float | None = None) -> acp.PromptResult:
        return self._run(self._client.prompt_detailed(text, timeout=timeout))

    def prompt_content(self, blocks: Any, *, timeout: float | None = None) -> acp.PromptResult:
        return self._run(self._client.prompt_content(blocks, timeout=timeout))

    def new_session(self, *args: Any, **kwargs: Any) -> SyncSession | None:
        return self._view(self._run(self._client.new_session(*args, **kwargs)))

    def load_session(self, *args: Any, **kwargs: Any) -> SyncSession | None:
        return self._view(self._run(self._client.load_session(*args, **kwargs)))

    def resume_session(self, *args: Any, **kwargs: Any) -> SyncSession | None:
        return self._view(self._run(self._client.resume_session(*args, **kwargs)))

    def list_sessions(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._client.list_sessions(*args, **kwargs))

    def delete_session(self, session_id: str) -> None:
        self._run(self._client.delete_session(session_id))

    def authenticate(self, method_id: str) -> None:
        self._run(self._client.authenticate(method_id))

    def logout(self) -> None:
        self._run(self._client.logout())

    def drain(self, timeout: float = 0.0) -> int:
        """The loop runs for `timeout` seconds (the asyncio client always reads)."""
        before = self._client.next_update_sequence
        self._run(asyncio.sleep(timeout))
        return self._client.next_update_sequence - before

    @property
    def permission_policy(self) -> acp.PermissionPolicy:
        return self._client.permission_policy

    @permission_policy.setter
    def permission_policy(self, policy: acp.PermissionPolicy) -> None:
        self._client.permission_policy = policy

    # sessions
    @property
    def default_session(self) -> SyncSession | None:
        return self._view(self._client.default_session)

    @property
    def sessions(self) -> tuple[SyncSession | None, ...]:
        return tuple(self._view(s) for s in self._client.sessions)

    def session(self, session_id: str) -> SyncSession | None:
        return self._view(self._client.session(session_id))

    # shutdown
    def close(self, *, grace: float = 0.0) -> None:
        self._client.close(grace=grace)
        with self._closing:
            if not self._loop.is_running() and not self._loop.is_closed():
                # Let the callbacks close() scheduled run, then release the loop's descriptors.
                self._loop.run_until_complete(asyncio.sleep(0))
                self._loop.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def __enter__(self) -> SyncOverAsync:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._client)

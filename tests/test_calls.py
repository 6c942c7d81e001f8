"""The calls' plans (`acp_fast._calls`) and the blocking runner, against a stub core: what a plan
yields is made in place, the core's error comes back into the plan at its yield (its handlers
and `finally` run), and every core call a plan names exists on the core for both runners."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest
from acp_fast import _calls, _core
from acp_fast._errors import AgentProtocolError
from acp_fast._session import Session


class _Core:
    closed = False

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail = fail

    def session_info(self, session_id: str) -> None:
        return None  # what the session shows: nothing here

    def __getattr__(self, name: str) -> Any:
        core = self

        class Prepared:  # as the core's: the call is made by run() (blocking) or begin()
            def __init__(self, args: tuple[Any, ...]) -> None:
                self.args = args

            def run(self) -> Any:
                core.calls.append((name, self.args))
                if core.fail is not None:
                    raise core.fail
                return None

        return lambda *args: Prepared(args)


class _Client:
    def __init__(self, core: _Core) -> None:
        self._core = self._live = core
        self.forgotten: list[str] = []
        self._session_state = "off"
        self._states: dict[str, Any] = {}

    def _forget(self, session: Any) -> None:
        self.forgotten.append(session.session_id)


def test_the_blocking_runner_makes_what_the_plan_yields() -> None:
    core = _Core()
    session = Session(_Client(core), "s1", "/", ())  # type: ignore[arg-type]
    session.set_mode("code")
    session.close()
    assert core.calls == [("set_mode", ("s1", "code")), ("close_session", ("s1",))]
    assert session.closed
    session.close()  # idempotent: the plan returns before any core call
    assert len(core.calls) == 2


@pytest.mark.parametrize("error", [AgentProtocolError("gone"), KeyboardInterrupt()])
def test_a_core_error_is_raised_in_the_plan_at_its_yield(error: BaseException) -> None:
    """`close()`'s plan closes the handle in a `finally`: it runs when the core raises, and the
    error propagates unchanged (Ctrl-C included)."""
    client = _Client(_Core(fail=error))
    session = Session(client, "s1", "/", ())  # type: ignore[arg-type]
    with pytest.raises(type(error)) as raised:
        session.close()
    assert raised.value is error
    assert session.closed and client.forgotten == ["s1"]


def _named_calls() -> set[str]:
    """The core calls the plans name (`CoreCall("name", ...)` in `_calls`)."""
    names = set()
    for node in ast.walk(ast.parse(inspect.getsource(_calls))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CoreCall":
            first = node.args[0]
            assert isinstance(first, ast.Constant), ast.unparse(node)
            names.add(first.value)
    return names


def test_every_core_call_a_plan_names_exists_for_both_runners() -> None:
    """Both runners call ``core.<name>(...)``, which prepares the call (`_core.Prepared`): the
    blocking one runs it, the asyncio one begins it."""
    names = _named_calls()
    assert {"start", "prompt", "new_session", "load_session", "close_session"} <= names
    for name in names:
        assert callable(getattr(_core.CoreClient, name)), name
    assert callable(_core.Prepared.run) and callable(_core.Prepared.begin)

"""`Client.from_spec` / `AsyncClient.from_spec`: a spec's command, environment and options,
and its profile's ask mode applied to every session the client opens; `Session.asks_permission`
says whether the agent's requests reach the host."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import acp_fast
import pytest
from acp_fast.registry import AgentProfile

# The demo agent starts each session in mode "ask" and offers "code": for these tests "code" is
# where it asks the host and "ask" where it decides by itself.
ASKS_IN_CODE = AgentProfile(
    "demo", ask_mode="code", ask_modes=frozenset({"code"}), autonomous_modes=frozenset({"ask"})
)
ENV_SCRIPT = "import os, sys; sys.stderr.write(os.environ.get('ACP_T_VAR', '-') + '\\n')"


def demo_spec(profile: AgentProfile | None, **kw: object) -> acp_fast.AgentSpec:
    command, args = acp_fast.demo_agent_command()
    return acp_fast.AgentSpec(command, args, profile=profile, **kw)  # type: ignore[arg-type]


def test_every_session_of_a_client_from_a_spec_is_switched_to_the_ask_mode(
    tmp_path: Path,
) -> None:
    with acp_fast.Client.from_spec(demo_spec(ASKS_IN_CODE), cwd=tmp_path) as client:
        client.start(timeout=30)
        first = client.default_session
        assert first is not None and first.modes.current == "code"
        assert first.asks_permission is True
        second = client.new_session()
        assert second.modes.current == "code" and second.asks_permission is True
        second.set_mode("ask")
        assert second.asks_permission is False  # the agent decides by itself now


def test_without_a_profile_nothing_is_switched_and_nothing_is_claimed(tmp_path: Path) -> None:
    with acp_fast.Client.from_spec(demo_spec(None), cwd=tmp_path) as client:
        client.start(timeout=30)
        session = client.default_session
        assert session is not None and session.modes.current == "ask"
        assert session.asks_permission is None
    command, args = acp_fast.demo_agent_command()
    with acp_fast.Client(command, args, cwd=tmp_path) as plain:
        plain.start(timeout=30)
        assert plain.default_session is not None
        assert plain.default_session.asks_permission is None
    unknown_mode = AgentProfile("demo", ask_mode="nope", ask_modes=frozenset({"nope"}))
    with acp_fast.Client.from_spec(demo_spec(unknown_mode), cwd=tmp_path) as client:
        client.start(timeout=30)  # a mode the agent does not offer is never forced on it
        assert client.default_session is not None
        assert client.default_session.modes.current == "ask"
        assert client.default_session.asks_permission is None


def test_the_async_client_applies_the_profile_too(tmp_path: Path) -> None:
    async def main() -> tuple[str, bool | None, str]:
        async with acp_fast.AsyncClient.from_spec(demo_spec(ASKS_IN_CODE), cwd=tmp_path) as c:
            await c.start(timeout=30)
            assert c.default_session is not None
            other = await c.new_session()
            return c.default_session.modes.current, other.asks_permission, other.modes.current

    assert asyncio.run(main()) == ("code", True, "code")


def test_the_spec_s_environment_and_options_reach_the_agent(tmp_path: Path) -> None:
    spec = acp_fast.AgentSpec(
        sys.executable,
        ["-c", ENV_SCRIPT],
        env={"PATH": "/usr/bin:/bin"},
        add_env={"ACP_T_VAR": "from-profile"},
        client_options={"stderr": "tail"},
    )
    for env, expected in ((None, "from-profile"), ({"ACP_T_VAR": "base"}, "from-profile")):
        options = {} if env is None else {"env": env}
        with acp_fast.Client.from_spec(spec, cwd=tmp_path, **options) as client:
            with pytest.raises(acp_fast.ConnectError):
                client.start(timeout=30)  # the script is no agent: it only prints the variable
            assert client.stderr_tail().strip() == expected

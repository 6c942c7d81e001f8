"""A ``timeout`` of the wrong type is a TypeError that names the option (first-use.md §1: wrong
types name the option and the expected type); True is not one second."""

from __future__ import annotations

import asyncio

import acp_fast as acp
import pytest


@pytest.mark.parametrize("timeout", ["1", True, [1]])
def test_start_and_prompt_refuse_a_timeout_of_the_wrong_type(timeout: object) -> None:
    with acp.Client(*acp.demo_agent_command()) as client:
        with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None"):
            client.start(timeout=timeout)  # type: ignore[arg-type]
        client.start()
        with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None"):
            client.prompt("hi", timeout=timeout)  # type: ignore[arg-type]
        assert client.prompt("hi", timeout=30) == "Hello! You said: hi."  # nothing was sent


def test_async_start_and_prompt_refuse_a_timeout_of_the_wrong_type() -> None:
    async def main() -> None:
        async with acp.AsyncClient(*acp.demo_agent_command()) as client:
            with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None"):
                await client.start(timeout="1")  # type: ignore[arg-type]
            await client.start()
            with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None"):
                await client.prompt("hi", timeout=True)
            assert await client.prompt("hi", timeout=30.0) == "Hello! You said: hi."

    asyncio.run(main())


def test_a_bad_value_is_still_a_value_error() -> None:
    with acp.Client(*acp.demo_agent_command()) as client:
        with pytest.raises(ValueError, match="positive number of seconds"):
            client.start(timeout=-1)

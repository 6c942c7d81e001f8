"""`protocol=` and what goes with it, checked where the client is made (no agent needed)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import _calls

CLIENTS = [acp.Client, acp.AsyncClient]
FILES_OFF = {"read_text_file": False, "write_text_file": False, "terminal": False}


@pytest.mark.parametrize("cls", CLIENTS)
@pytest.mark.parametrize("value", ["v3", "V2", "", "1", "2"])
def test_an_unknown_protocol_is_a_value_error_naming_the_values(cls: Any, value: str) -> None:
    with pytest.raises(ValueError, match=r'protocol must be "v1", "v2" or "auto"'):
        cls(*acp.demo_agent_command(), protocol=value)


@pytest.mark.parametrize("cls", CLIENTS)
@pytest.mark.parametrize("value", [2, None, b"v2", 1.0])
def test_a_protocol_of_another_type_is_a_type_error(cls: Any, value: object) -> None:
    with pytest.raises(TypeError, match="protocol must be a str"):
        cls(*acp.demo_agent_command(), protocol=value)


@pytest.mark.parametrize("cls", CLIENTS)
def test_v2_with_files_or_terminals_to_serve_is_refused_naming_both_options(cls: Any) -> None:
    for served in ("read_text_file", "write_text_file", "terminal"):
        config = acp.ClientCapabilityConfig(**{**FILES_OFF, served: True})
        with pytest.raises(ValueError) as raised:
            cls(*acp.demo_agent_command(), protocol="v2", capabilities=config)
        message = str(raised.value)
        assert 'protocol="v2"' in message and served in message
        assert "ClientCapabilityConfig(" in message and 'protocol="auto"' in message


@pytest.mark.parametrize("cls", CLIENTS)
def test_v2_with_only_v2_capabilities_is_accepted(cls: Any) -> None:
    config = acp.ClientCapabilityConfig(**FILES_OFF, auth_terminal=True)
    client = cls(*acp.demo_agent_command(), protocol="v2", capabilities=config)
    try:
        assert client.protocol == "v2"
        assert client.serves_host is False
    finally:
        client.close()


@pytest.mark.parametrize("cls", CLIENTS)
@pytest.mark.parametrize("protocol", ["v1", "auto"])
def test_v1_and_auto_accept_files_and_terminals(cls: Any, protocol: str) -> None:
    client = cls(
        *acp.demo_agent_command(), protocol=protocol, capabilities=acp.ClientCapabilityConfig()
    )
    try:
        assert client.protocol == protocol
    finally:
        client.close()


@pytest.mark.parametrize("cls", CLIENTS)
def test_the_default_is_v1_and_reaches_the_core(cls: Any, monkeypatch: Any) -> None:
    seen: list[str] = []
    real = acp._core.CoreClient

    def spy(options: Any) -> Any:
        seen.append(options.protocol)
        return real(options)

    monkeypatch.setattr(acp._core, "CoreClient", spy)
    for kwargs in ({}, {"protocol": "auto"}, {"protocol": "v2"}):
        cls(*acp.demo_agent_command(), **kwargs).close()
    assert seen == ["v1", "auto", "v2"]


@pytest.mark.parametrize("cls", CLIENTS)
def test_help_documents_protocol(cls: Any) -> None:
    doc = cls.__init__.__doc__ or ""
    assert "protocol:" in doc and '"auto"' in doc
    assert "replay_from" in (cls.resume_session.__doc__ or "")


@pytest.mark.parametrize("value", ["begin", "", 0, True])
def test_replay_from_takes_none_or_start(value: object) -> None:
    with pytest.raises(ValueError, match='replay_from must be None or "start"'):
        _calls.check_replay_from(value)
    assert _calls.check_replay_from(None) is False
    assert _calls.check_replay_from("start") is True


def test_a_wrong_replay_from_is_refused_before_anything_is_sent() -> None:
    with acp.Client(*acp.demo_agent_command()) as client:
        client.start()
        sent = client.next_update_sequence
        with pytest.raises(ValueError, match="replay_from"):
            client.resume_session("x", replay_from="end")  # type: ignore[arg-type]
        assert client.next_update_sequence == sent

    async def main() -> None:
        async with acp.AsyncClient(*acp.demo_agent_command()) as client:
            await client.start()
            with pytest.raises(ValueError, match="replay_from"):
                await client.resume_session("x", replay_from="end")  # type: ignore[arg-type]

    asyncio.run(main())


def test_the_pool_forwards_protocol_to_its_clients() -> None:
    with acp.Pool(*acp.demo_agent_command(), client_options={"protocol": "auto"}) as pool:
        with pool.claim() as client:
            assert client.protocol == "auto"
    with pytest.raises(ValueError, match="protocol must be"):
        with acp.Pool(*acp.demo_agent_command(), client_options={"protocol": "v9"}) as pool:
            pool.claim()


def test_an_agent_spec_carries_protocol_in_client_options() -> None:
    command, args = acp.demo_agent_command()
    spec = acp.AgentSpec(command, args, client_options={"protocol": "auto"})
    with acp.Client.from_spec(spec) as client:
        assert client.protocol == "auto"
    with acp.Client.from_spec(spec, protocol="v1") as client:  # the call's option wins
        assert client.protocol == "v1"


def test_protocol_version_is_none_before_start() -> None:
    with acp.Client(*acp.demo_agent_command(), protocol="auto") as client:
        assert client.protocol_version is None
        assert client.serves_host is False


def test_the_host_side_note_names_the_agent_printably(caplog: Any) -> None:
    class Fake:
        protocol = "auto"
        agent_id = "evil\x1b[2Jagent"
        _capabilities = acp.ClientCapabilityConfig()

        class _live:
            protocol_version = 2

    with caplog.at_level(logging.WARNING, logger="acp_fast"):
        _calls._note_host_side(Fake())  # type: ignore[arg-type]
    (record,) = caplog.records
    message = record.getMessage()
    assert "ACP v2" in message and "read_text_file" in message and "\x1b" not in message
    caplog.clear()
    Fake.protocol = "v1"
    _calls._note_host_side(Fake())  # type: ignore[arg-type]
    assert not caplog.records


def test_the_async_pool_forwards_protocol_and_the_agreed_version() -> None:
    async def main() -> tuple[str, int | None]:
        command, args = acp.demo_agent_command()
        async with acp.AsyncPool(
            command, args, client_options={"protocol": "auto"}, min_idle=1
        ) as pool:
            client = await pool.claim(timeout=20)
            try:
                return client.protocol, client.protocol_version
            finally:
                client.close()

    assert asyncio.run(main()) == ("auto", 2)  # the demo agent answers an offer of 2

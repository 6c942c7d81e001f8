"""A real conversation recorded by a real client into a journal, then played back through
`acp-fast replay` to a second client: the same updates (envelopes byte for byte), the same
permission records, the same stop reasons; in ACP v1 and v2 (the `protocol` fixture: a v2
recording is played to a client with ``protocol="auto"``, which gets the recorded 2)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import journal
from conftest import client_class, protocol_option

from .kit import KINDS, journal_path, make

LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=10_000,
    response_segment_count=10_000,
)
DEMO_AGENT = (sys.executable, "-m", "acp_fast.demo_agent")
POLICY = acp.PermissionPolicy(allowed_tool_kinds=["edit"])


def replay_agent(path: Path, log: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "acp_fast", "replay", str(path), "--log", str(log))


@dataclass
class Seen:
    updates: list[acp.Update] = field(default_factory=list)
    permissions: list[acp.PermissionRequest] = field(default_factory=list)

    def on_update(self, update: acp.Update) -> None:
        self.updates.append(update)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.permissions.append(request)


def converse(
    command: tuple[str, ...],
    observer: Any,
    prompts: list[str],
    cwd: Path,
    driver: str = "blocking",
    **options: Any,
) -> tuple[list[acp.PromptResult], str]:
    """Run the prompts (`driver`: "blocking" `Client`, "async" `AsyncClient`); the results and
    the agent's stderr tail (read after close(), when the core has drained all of it)."""
    with client_class(driver)(
        command[0],
        args=command[1:],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=5,
        cwd=cwd,
        permission_policy=POLICY,
        observer=observer,
        stderr="tail",
        **options,
    ) as client:
        client.start()
        results = [client.prompt_detailed(prompt) for prompt in prompts]
    return results, client.stderr_tail()


@pytest.mark.parametrize("kind", KINDS)
def test_a_recorded_conversation_replays_identically(
    tmp_path: Path, kind: str, client_driver: str, protocol: str
) -> None:
    path = journal_path(tmp_path, kind)
    original = Seen()
    with make(kind, path, "every", observer=original) as recording:
        results, _ = converse(
            DEMO_AGENT,
            recording,
            ["please write hello.txt ✓"],
            tmp_path,
            client_driver,
            **protocol_option(protocol),
        )
    assert results[0].response.endswith("I wrote hello.txt.")
    assert len(original.permissions) == 1 and original.permissions[0].option_id == "allow"

    records = list(journal.read(path))
    updates = [r for r in records if r.kind == "update"]
    assert [r.envelope for r in updates] == [u.envelope for u in original.updates]
    assert [(r.transport_epoch, r.update_sequence) for r in updates] == [
        (5, n) for n in range(1, len(updates) + 1)
    ]
    assert [r.permission() for r in records if r.kind == "permission"] == original.permissions

    # Played back, and recorded again into the other kind.
    other = journal_path(tmp_path, "sqlite" if kind == "jsonl" else "jsonl", "again")
    replayed = Seen()
    log = tmp_path / "client.log"
    with make("sqlite" if kind == "jsonl" else "jsonl", other, observer=replayed) as again:
        results_again, stderr = converse(
            replay_agent(path, log),
            again,
            ["please write hello.txt ✓"],
            tmp_path,
            client_driver,
            **replay_option(protocol),
        )
    assert results_again == results
    assert [u.envelope for u in replayed.updates] == [u.envelope for u in original.updates]
    assert replayed.updates == original.updates  # every field: kind, text, numbering, epoch
    assert replayed.permissions == original.permissions
    assert [r.envelope for r in journal.read(other) if r.kind == "update"] == [
        r.envelope for r in updates
    ]
    again_permissions = [r.permission() for r in journal.read(other) if r.kind == "permission"]
    assert again_permissions == original.permissions
    # The client's own lines went to the agent: the permission answer among them.
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert [m.get("method") for m in sent] == ["initialize", "session/new", "session/prompt", None]
    assert sent[3] == {
        "jsonrpc": "2.0",
        "id": "perm-1",
        "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
    }
    assert "replay: gave up" not in stderr


def test_the_replay_agent_says_where_the_client_differs(tmp_path: Path, client_driver: str) -> None:
    """A journal holding the client's lines (the wire tap), played to a client that sends a
    different cwd and prompt: each difference is named on stderr, and the play goes on."""
    path = tmp_path / "j.jsonl"
    init = (
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
        '"clientCapabilities":{},"clientInfo":{"name":"acp-fast","title":"acp-fast",'
        f'"version":"{acp.__version__}"}}}}}}'
    )
    chunk = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"r-1","update":'
        '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"recorded"}}}}'
    )
    with journal.JsonlJournal(path) as j:
        j.on_sent(init)
        j.on_received('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}')
        j.on_sent(
            '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/recorded",'
            '"mcpServers":[]}}'
        )
        j.on_received('{"jsonrpc":"2.0","id":1,"result":{"sessionId":"r-1"}}')
        j.on_sent(
            '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"r-1",'
            '"prompt":[{"type":"text","text":"recorded prompt"}]}}'
        )
        j.on_update(
            acp.Update(
                kind="agent_message_chunk",
                session_update="agent_message_chunk",
                transport_epoch=1,
                update_sequence=1,
                session_id="r-1",
                envelope=chunk,
                text="recorded",
            )
        )
        j.on_received('{"jsonrpc":"2.0","id":2,"result":{"stopReason":"max_tokens"}}')
    seen = Seen()
    results, stderr = converse(
        replay_agent(path, tmp_path / "log"), seen, ["live prompt"], tmp_path, client_driver
    )
    assert results == [acp.PromptResult("recorded", "max_tokens", None)]
    assert [u.envelope for u in seen.updates] == [chunk]
    lines = stderr.splitlines()
    assert (
        "replay: client message 2 (record 3) differs at params.cwd: "
        f'recorded "/recorded", received "{tmp_path}"'
    ) in lines
    assert (
        "replay: client message 3 (record 5) differs at params.prompt[0].text: recorded "
        '"recorded prompt", received "live prompt"'
    ) in lines
    assert not any("client message 1 " in line for line in lines)


def replay_option(protocol: str) -> dict[str, str]:
    """How the replaying client asks: "auto" for a v2 recording (it offers 2 and gets it)."""
    return {} if protocol == "v1" else {"protocol": "auto"}


def test_wire_lines_recorded_end_to_end(tmp_path: Path, client_driver: str, protocol: str) -> None:
    """With the core's `on_sent`/`on_received` tap: the journal holds the client's every line
    and the agent's answers, in order with the updates; a two-turn conversation replays turn
    by turn with the recorded stop reasons and no difference in the client's messages."""
    for kind in KINDS:
        path = journal_path(tmp_path, kind, f"wire-{kind}")
        prompts = ["please write hello.txt", "just say hi"]
        with make(kind, path, transport_epoch=5) as recording:
            results, _ = converse(
                DEMO_AGENT, recording, prompts, tmp_path, client_driver, **protocol_option(protocol)
            )
        records = list(journal.read(path))
        sent = [json.loads(r.envelope) for r in records if r.kind == "sent"]
        received = [json.loads(r.envelope) for r in records if r.kind == "received"]
        assert [m.get("method") for m in sent] == [
            "initialize",
            "session/new",
            "session/prompt",
            None,
            "session/prompt",
        ]
        assert [m["id"] for m in received] == [0, 1, 2, 3]
        kinds = [r.kind.value for r in records]
        permission = kinds.index("permission")
        assert kinds[permission + 1] == "sent"  # the answer right after its decision
        if protocol == "v1":
            assert [m["result"].get("stopReason") for m in received[2:]] == ["end_turn"] * 2
            assert kinds[-1] == "received"  # the second prompt's answer ends the journal
        else:  # the answers acknowledge; each turn ends with its idle update
            assert [set(m["result"]) for m in received[2:]] == [{"messageId"}] * 2
            idles = [
                json.loads(r.envelope)["params"]["update"].get("stopReason")
                for r in records
                if r.kind == "update" and '"state":"idle"' in r.envelope
            ]
            assert idles == ["end_turn"] * 2
            assert records[-1].kind == "update"  # the second turn's idle ends the journal
        assert {r.transport_epoch for r in records} == {5}

        seen = Seen()
        again, stderr = converse(
            replay_agent(path, tmp_path / f"log-{kind}"),
            seen,
            prompts,
            tmp_path,
            client_driver,
            **protocol_option(protocol),  # the same offer: no difference to name
        )
        assert again == results  # per turn: reply, stop reason
        assert "differs" not in stderr and "not recorded" not in stderr


def test_runs_of_a_journal_without_wire_lines_split_by_epoch(tmp_path: Path) -> None:
    from acp_fast import replay_agent

    from .kit import update

    path = tmp_path / "j.jsonl"
    with journal.JsonlJournal(path) as j:
        j.on_update(update(1, "one", epoch=1))
        j.on_update(update(2, "two", epoch=1))
        j.on_update(update(1, "three", epoch=2, session="s-2"))
    texts = {
        epoch: [
            json.loads(e.raw)["params"]["update"]["content"]["text"]
            for e in replay_agent.load(str(path), epoch).entries
            if e.raw is not None
        ]
        for epoch in (1, 2)
    }
    assert texts == {1: ["one", "two"], 2: ["three"]}
    made = replay_agent.load(str(path)).entries  # the last run, with a made-up handshake
    assert [e.message.get("method") for e in made if e.synthetic and e.direction == "->"] == [
        "initialize",
        "session/new",
        "session/prompt",
    ]
    assert made[3].message["result"] == {"sessionId": "s-2"}


def test_a_v2_journal_without_wire_lines_gets_a_v2_handshake(tmp_path: Path) -> None:
    from acp_fast import _replay_v2, replay_agent

    from .kit import update

    # A chunk with a message id: only v2's have one.
    text = {"type": "text", "text": "hi"}
    body = {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": text}
    envelope = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s-1", "update": body},
        }
    )
    path = tmp_path / "j.jsonl"
    with journal.JsonlJournal(path) as j:
        j.on_update(update(1, "hi", envelope=envelope))
    made = replay_agent.load(str(path)).entries
    assert _replay_v2.recorded_version(made) == 2
    answers = [e.message.get("result") for e in made if e.direction == "<-" and "id" in e.message]
    assert answers[0]["protocolVersion"] == 2
    assert answers[2] == {"messageId": "replay-1"}
    states = [
        e.message["params"]["update"].get("state")
        for e in made
        if e.direction == "<-" and "method" in e.message
    ]
    assert states == ["running", None, "idle"], "the recorded update between running and idle"

"""Notices and compaction (protocol-now.md §2): opt-in capabilities, typed update kinds, never
part of the reply, kept in `TurnResult.notices` / `.compactions`, folded, journaled; and the
attacks (a 10 MB notice, control bytes, a summary chunk flood)."""

from __future__ import annotations

import json
from pathlib import Path

import acp_fast as acp
import pytest
from acp_fast import journal, model

from .conftest import LIMITS, chunk, update


def notice(title: str, severity: str = "warning", **extra: object) -> str:
    body = {"sessionUpdate": "notice", "severity": severity, "title": title, **extra}
    return update(json.dumps(body))


def compaction(compaction_id: str, status: str, **extra: object) -> str:
    body = {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": status,
        **extra,
    }
    return update(json.dumps(body))


def summary_chunk(compaction_id: str, text: str) -> str:
    body = {
        "sessionUpdate": "compaction_summary_chunk",
        "compactionId": compaction_id,
        "content": {"type": "text", "text": text},
    }
    return update(json.dumps(body))


def client_capabilities(run: object) -> dict[str, object]:
    (init,) = run.sent("initialize")  # type: ignore[attr-defined]
    return init["params"]["clientCapabilities"]  # type: ignore[no-any-return]


def test_not_advertised_unless_asked(agent) -> None:  # type: ignore[no-untyped-def]
    assert client_capabilities(agent()) == {}
    caps = client_capabilities(agent(capabilities=None))
    assert "session" not in caps
    plain = client_capabilities(agent(capabilities=acp.ClientCapabilityConfig()))
    assert "session" not in plain and plain["terminal"] is True


@pytest.mark.parametrize(
    ("notices", "compaction_on", "expected"),
    [
        (True, False, {"notices": {}}),
        (False, True, {"compaction": {}}),
        (True, True, {"notices": {}, "compaction": {}}),
    ],
)
def test_advertised_when_asked(agent, notices: bool, compaction_on: bool, expected) -> None:  # type: ignore[no-untyped-def]
    config = acp.ClientCapabilityConfig(notices=notices, compaction=compaction_on)
    caps = client_capabilities(agent(capabilities=config))
    assert caps["session"] == expected
    assert caps["fs"] == {"readTextFile": True, "writeTextFile": True}


def test_the_options_are_bools() -> None:
    with pytest.raises(TypeError, match="notices must be a bool"):
        acp.ClientCapabilityConfig(notices=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="compaction must be a bool"):
        acp.ClientCapabilityConfig(compaction="yes")  # type: ignore[arg-type]


def test_update_kinds_are_typed() -> None:
    assert acp.UpdateKind("notice") is acp.UpdateKind.NOTICE
    assert acp.UpdateKind("compaction_update") is acp.UpdateKind.COMPACTION_UPDATE
    assert acp.UpdateKind("compaction_summary_chunk") is acp.UpdateKind.COMPACTION_SUMMARY_CHUNK
    assert model.Notice(severity="info", title="x").update_kind is acp.UpdateKind.NOTICE
    chunk_ = model.CompactionSummaryChunk(compaction_id="c", content=model.TextContent(text="t"))
    assert chunk_.update_kind is acp.UpdateKind.COMPACTION_SUMMARY_CHUNK


def test_a_notice_never_joins_the_reply(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[
            chunk("Hello "),
            notice("Billing: you are near your limit", description="Upgrade"),
            chunk("world"),
            notice("second", severity="info"),
        ],
        capabilities=acp.ClientCapabilityConfig(notices=True),
    )
    result = run.client.default_session.prompt("go")
    assert result.response == "Hello world"
    assert [n.title for n in result.notices] == ["Billing: you are near your limit", "second"]
    first = result.notices[0]
    assert isinstance(first, model.Notice)
    assert first.severity is model.NoticeSeverity.WARNING and first.description == "Upgrade"
    kinds = [u.kind for u in run.observer.updates]
    assert kinds == [
        acp.UpdateKind.AGENT_MESSAGE_CHUNK,
        acp.UpdateKind.NOTICE,
        acp.UpdateKind.AGENT_MESSAGE_CHUNK,
        acp.UpdateKind.NOTICE,
    ]
    assert run.observer.updates[1].text == "Billing: you are near your limit"
    decoded = run.observer.updates[1].decode()
    assert isinstance(decoded, model.Notice)


def test_compactions_fold_to_their_final_state(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[
            compaction("c1", "in_progress"),
            summary_chunk("c1", "The user asked "),
            summary_chunk("c1", "for a fix."),
            summary_chunk("c2", "only chunks"),
            compaction("c1", "completed", error=None),
            compaction("c3", "failed", error="too long", summary=[{"type": "text", "text": "x"}]),
            compaction("c3", "failed", summary=[]),
            chunk("done"),
        ],
        session_state="lenient",
        capabilities=acp.ClientCapabilityConfig(compaction=True),
    )
    session = run.client.default_session
    result = session.prompt("go")
    assert result.response == "done"
    c1, c2, c3 = result.compactions
    assert all(isinstance(c, model.CompactionUpdate) for c in result.compactions)
    assert (c1.compaction_id, c1.status) == ("c1", model.CompactionStatus.COMPLETED)
    assert [b.text for b in c1.summary] == ["The user asked ", "for a fix."]
    assert c2.status == model.CompactionStatus.IN_PROGRESS
    assert [b.text for b in c2.summary] == ["only chunks"]
    assert c3.error == "too long" and c3.summary is model.OMITTED  # summary: [] clears
    # The fold (Session.state) keeps the same.
    state = session.state
    assert [c.compaction_id for c in state.compactions] == ["c1", "c2", "c3"]
    assert [b.text for b in state.compactions[0].summary] == ["The user asked ", "for a fix."]
    assert state.compactions[0].status == "completed"
    assert state.compactions[2].summary is model.OMITTED
    kinds = {u.kind for u in run.observer.updates}
    assert acp.UpdateKind.UNKNOWN not in kinds


def test_the_fold_of_a_branch_keeps_its_own_compactions() -> None:
    base = model.session_update_fold()
    one = base.apply(
        model.CompactionSummaryChunk(compaction_id="a", content=model.TextContent(text="1"))
    )
    left = one.apply(
        model.CompactionSummaryChunk(compaction_id="a", content=model.TextContent(text="L"))
    )
    right = one.apply(
        model.CompactionSummaryChunk(compaction_id="b", content=model.TextContent(text="R"))
    )
    assert [b.text for b in left.compactions[0].summary] == ["1", "L"]
    assert [b.text for b in one.compactions[0].summary] == ["1"]
    assert [c.compaction_id for c in right.compactions] == ["a", "b"]
    assert len(left.compactions) == 1


def test_notices_and_compactions_are_journaled(agent, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [notice("heads up"), summary_chunk("c", "s"), compaction("c", "completed")]
    path = tmp_path / "j.jsonl"
    observer = journal.JsonlJournal(path)
    run = agent(
        turn=lines,
        observer=observer,
        capabilities=acp.ClientCapabilityConfig(notices=True, compaction=True),
    )
    run.client.default_session.prompt("go")
    run.client.close()
    observer.close()
    records = list(journal.read(path))
    envelopes = [r.envelope for r in records]
    for line in lines:
        assert line in envelopes  # byte for byte
    kinds = [model.decode_update(r.envelope).update_kind for r in records if r.envelope in lines]
    assert all(r.kind is journal.RecordKind.UPDATE for r in records if r.envelope in lines)
    assert kinds == [
        acp.UpdateKind.NOTICE,
        acp.UpdateKind.COMPACTION_SUMMARY_CHUNK,
        acp.UpdateKind.COMPACTION_UPDATE,
    ]


def test_a_prompt_result_is_untouched_by_them(agent) -> None:  # type: ignore[no-untyped-def]
    # The wave-1 calls return a PromptResult: the record is not decoded for them.
    run = agent(
        turn=[notice("n"), chunk("r")], capabilities=acp.ClientCapabilityConfig(notices=True)
    )
    assert run.client.prompt("go") == "r"


# --- attacks ----------------------------------------------------------------------------------


def test_a_10_mb_notice_with_control_bytes(agent) -> None:  # type: ignore[no-untyped-def]
    title = "\x1b[2J\x07" + "A" * (10 * 1024 * 1024) + "\x00end"
    run = agent(
        turn=[notice(title), chunk("ok")],
        capabilities=acp.ClientCapabilityConfig(notices=True),
    )
    result = run.client.default_session.prompt("go")
    assert result.response == "ok"
    (only,) = result.notices
    assert only.title == title  # kept exactly; printing it is the caller's (acp_fast._text)
    assert acp._text.printable(only.title[:8]) != only.title[:8]


def test_a_notice_past_update_bytes_stops_as_any_update_does(agent) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    run = agent(
        turn=[notice("B" * 4096)],
        transfer_limits=dataclasses.replace(LIMITS, update_bytes=1024),
        capabilities=acp.ClientCapabilityConfig(notices=True),
    )
    with pytest.raises(acp.UpdateCapacityExceeded):
        run.client.default_session.prompt("go")


def test_a_notice_flood_keeps_the_first_256(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[notice(f"n{i}") for i in range(600)],
        capabilities=acp.ClientCapabilityConfig(notices=True),
    )
    result = run.client.default_session.prompt("go")
    assert [n.title for n in result.notices] == [f"n{i}" for i in range(256)]
    assert len(run.observer.updates) == 600  # every one still reaches the observer


def test_a_summary_chunk_flood_stays_within_response_bytes(agent) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    piece = "x" * 1000
    run = agent(
        turn=[summary_chunk("c", piece) for _ in range(300)],
        transfer_limits=dataclasses.replace(LIMITS, response_bytes=64 * 1024),
        capabilities=acp.ClientCapabilityConfig(compaction=True),
    )
    result = run.client.default_session.prompt("go")
    (only,) = result.compactions
    kept = len(only.summary)
    assert 0 < kept < 300
    assert kept * 1000 <= 64 * 1024
    assert len(run.observer.updates) == 300


def test_a_compaction_id_flood_keeps_the_first_256(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[compaction(f"c{i}", "completed") for i in range(400)],
        capabilities=acp.ClientCapabilityConfig(compaction=True),
    )
    result = run.client.default_session.prompt("go")
    assert [c.compaction_id for c in result.compactions] == [f"c{i}" for i in range(256)]


@pytest.mark.parametrize(
    "body",
    [
        '{"sessionUpdate":"notice"}',
        '{"sessionUpdate":"notice","severity":7,"title":["x"]}',
        '{"sessionUpdate":"compaction_update"}',
        '{"sessionUpdate":"compaction_update","compactionId":5,"status":"completed"}',
        '{"sessionUpdate":"compaction_update","compactionId":"c","status":null,"summary":"s"}',
        '{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":"not a block"}',
        '{"sessionUpdate":"compaction_summary_chunk","compactionId":"c"}',
    ],
)
def test_malformed_ones_are_read_leniently(agent, body: str) -> None:  # type: ignore[no-untyped-def]
    run = agent(
        turn=[update(body), chunk("ok")],
        capabilities=acp.ClientCapabilityConfig(notices=True, compaction=True),
    )
    result = run.client.default_session.prompt("go")
    assert result.response == "ok"
    for item in result.compactions:
        assert isinstance(item, model.CompactionUpdate)

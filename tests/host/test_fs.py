"""`fs/read_text_file` and `fs/write_text_file` served for a scripted agent (design/host.md
§1, §2, §4): the advertisement bytes, every check and its error bytes, the attacks, and the
activity records."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_TRANSFER_LIMITS

from .conftest import MakeClient, Recorder, run

FS = acp.ClientCapabilityConfig(terminal=False)


def read(path: str | Path, **extra: Any) -> dict[str, Any]:
    return {"request": {"method": "fs/read_text_file", "params": {"path": str(path), **extra}}}


def write(path: str | Path, content: str, **extra: Any) -> dict[str, Any]:
    params = {"path": str(path), "content": content, **extra}
    return {"request": {"method": "fs/write_text_file", "params": params}}


def compact(answer: dict[str, Any]) -> str:
    return json.dumps(answer, separators=(",", ":"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The session's cwd is tmp_path; `outside/` and `w-secrets/` sit next to it."""
    (tmp_path / "a.txt").write_text("1\n2\n3\n4\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir(exist_ok=True)
    (outside / "o.txt").write_text("SECRET")
    return tmp_path


def test_no_config_advertises_nothing_and_answers_method_not_found(
    make_host_client: MakeClient, root: Path
) -> None:
    client, rec = make_host_client()
    answers = run(client, [read(root / "a.txt"), write(root / "b.txt", "x")])
    assert '"clientCapabilities":{}' in rec.received()[0]
    assert [compact(a) for a in answers] == [
        '{"jsonrpc":"2.0","id":"h1","error":{"code":-32601,"message":"method not found"}}',
        '{"jsonrpc":"2.0","id":"h2","error":{"code":-32601,"message":"method not found"}}',
    ]
    assert not (root / "b.txt").exists()
    assert rec.activity == [
        acp.ClientActivity(
            acp.ClientMethod.FS_READ_TEXT_FILE,
            allowed=False,
            path=str(root / "a.txt"),
            reason="capability not advertised: fs.readTextFile",
            session_id="s1",
            error_code=-32601,
        ),
        acp.ClientActivity(
            acp.ClientMethod.FS_WRITE_TEXT_FILE,
            allowed=False,
            path=str(root / "b.txt"),
            reason="capability not advertised: fs.writeTextFile",
            session_id="s1",
            error_code=-32601,
        ),
    ]


def test_the_advertisement_bytes(make_host_client: MakeClient) -> None:
    _, rec = make_host_client(capabilities=acp.ClientCapabilityConfig())
    assert rec.received()[0] == (
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
        '"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},'
        '"clientInfo":{"name":"acp-test","title":"acp-test","version":"1.0.0"}}}'
    )
    _, rec = make_host_client(capabilities=acp.ClientCapabilityConfig(write_text_file=False))
    assert '"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true' in rec.received()[0]


def test_a_withdrawn_method_is_not_served(make_host_client: MakeClient, root: Path) -> None:
    config = acp.ClientCapabilityConfig(write_text_file=False, terminal=False)
    client, rec = make_host_client(capabilities=config)
    answers = run(client, [write(root / "b.txt", "x"), read(root / "a.txt")])
    assert answers[0]["error"] == {"code": -32601, "message": "method not found"}
    assert answers[1]["result"] == {"content": "1\n2\n3\n4\n"}
    assert not (root / "b.txt").exists()
    assert [a.allowed for a in rec.activity] == [False, True]


def test_reads_select_lines(make_host_client: MakeClient, root: Path) -> None:
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\nc")
    client, rec = make_host_client(capabilities=FS)
    answers = run(
        client,
        [
            read(root / "a.txt", line=2, limit=2),
            read(root / "a.txt", line=0),
            read(root / "a.txt", line=None, limit=None),
            read(root / "a.txt", line=9),
            read(root / "a.txt", limit=0),
            read(root / "crlf.txt", line=2),
        ],
    )
    assert [a["result"]["content"] for a in answers] == [
        "2\n3\n",
        "1\n2\n3\n4\n",
        "1\n2\n3\n4\n",
        "",
        "",
        "b\r\nc",
    ]
    assert compact(answers[0]) == '{"jsonrpc":"2.0","id":"h1","result":{"content":"2\\n3\\n"}}'
    assert all(a.allowed and a.error_code is None for a in rec.activity)


def test_error_answers_and_their_activity(make_host_client: MakeClient, root: Path) -> None:
    (root / "a.bin").write_bytes(b"\xff\xfe\n")
    client, rec = make_host_client(capabilities=FS)
    answers = run(
        client,
        [
            read("/etc/hostname"),
            read(root / "a.txt", line=-1),
            read(root / "none.txt"),
            read(root / "a.bin"),
            read("a.txt"),
            read(root / "a.txt", sessionId="nope"),
            {"request": {"method": "fs/read_text_file", "params": {"path": 3}}},
        ],
    )
    assert [compact(a) for a in answers[:4]] == [
        '{"jsonrpc":"2.0","id":"h1","error":{"code":-32602,'
        '"message":"path outside the allowed roots","data":{"path":"/etc/hostname"}}}',
        '{"jsonrpc":"2.0","id":"h2","error":{"code":-32602,"message":"invalid params",'
        '"data":{"field":"$.line","reason":"expected an integer in 0..4294967295"}}}',
        '{"jsonrpc":"2.0","id":"h3","error":{"code":-32002,"message":"Resource not found",'
        f'"data":{{"path":"{root}/none.txt"}}}}}}',
        '{"jsonrpc":"2.0","id":"h4","error":{"code":-32603,"message":"not UTF-8 text",'
        f'"data":{{"path":"{root}/a.bin"}}}}}}',
    ]
    assert answers[4]["error"] == {
        "code": -32602,
        "message": "path is not absolute",
        "data": {"path": "a.txt"},
    }
    assert answers[5]["error"] == {
        "code": -32602,
        "message": "unknown session",
        "data": {"sessionId": "nope"},
    }
    assert answers[6]["error"]["data"] == {"field": "$.path", "reason": "expected a string"}
    assert [(a.allowed, a.error_code, a.reason) for a in rec.activity] == [
        (False, -32602, "path outside the allowed roots"),
        (False, -32602, "invalid params: $.line: expected an integer in 0..4294967295"),
        (True, -32002, None),
        (True, -32603, None),
        (False, -32602, "path is not absolute"),
        (False, -32602, "unknown session"),
        (False, -32602, "invalid params: $.path: expected a string"),
    ]
    assert rec.activity[5].session_id == "nope"


def test_the_attacks_are_refused_and_nothing_outside_changes(
    make_host_client: MakeClient, root: Path
) -> None:
    outside = root.parent / f"{root.name}-outside"
    sibling = root.parent / f"{root.name}-secrets"  # shares the root's prefix
    sibling.mkdir()
    (sibling / "s.txt").write_text("SECRET")
    (root / "link").symlink_to(outside / "o.txt")
    (root / "dir").symlink_to(outside)
    client, rec = make_host_client(capabilities=FS)
    attacks = [
        read(f"{root}/../{outside.name}/o.txt"),
        read(outside / "o.txt"),
        read(root / "link"),
        write(root / "link", "pwned"),
        read(root / "dir" / "o.txt"),
        write(root / "dir" / "new.txt", "pwned"),
        write(root / "dir" / "deep" / "new.txt", "pwned"),
        read(sibling / "s.txt"),
        write(sibling / "s.txt", "pwned"),
        write(f"{root}/../{outside.name}/new.txt", "pwned"),
    ]
    answers = run(client, attacks)
    assert [a["error"]["code"] for a in answers] == [-32602] * len(attacks)
    assert [a["error"]["data"]["path"] for a in answers] == [
        step["request"]["params"]["path"] for step in attacks
    ]
    assert (outside / "o.txt").read_text() == "SECRET"
    assert (sibling / "s.txt").read_text() == "SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["o.txt"]
    assert all(not a.allowed for a in rec.activity)


def test_writes_replace_create_parents_and_are_recorded(
    make_host_client: MakeClient, root: Path
) -> None:
    (root / "a.txt").chmod(0o640)
    client, rec = make_host_client(capabilities=FS)
    answers = run(
        client,
        [
            write(root / "a.txt", "new\n"),
            write(root / "x" / "y" / "z.txt", "deep"),
            read(root / "a.txt"),
        ],
    )
    assert compact(answers[0]) == '{"jsonrpc":"2.0","id":"h1","result":{}}'
    assert answers[2]["result"]["content"] == "new\n"
    assert (root / "x" / "y" / "z.txt").read_text() == "deep"
    assert (root / "a.txt").stat().st_mode & 0o777 == 0o640
    assert not [p for p in root.iterdir() if ".acp-" in p.name]
    assert rec.activity[0] == acp.ClientActivity(
        acp.ClientMethod.FS_WRITE_TEXT_FILE, True, path=str(root / "a.txt"), session_id="s1"
    )


def test_additional_directories_and_read_missing_as_empty(
    make_host_client: MakeClient, root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    extra = tmp_path_factory.mktemp("extra")
    (extra / "e.txt").write_text("extra")
    config = acp.ClientCapabilityConfig(
        additional_directories=(str(extra),), read_missing_as_empty=True, terminal=False
    )
    client, _ = make_host_client(capabilities=config)
    answers = run(client, [read(extra / "e.txt"), read(root / "none.txt"), read("/none/x")])
    assert answers[0]["result"] == {"content": "extra"}
    assert answers[1]["result"] == {"content": ""}
    assert answers[2]["error"]["code"] == -32602  # missing but outside: still refused


def test_allow_any_path_lifts_confinement_only(make_host_client: MakeClient, root: Path) -> None:
    outside = root.parent / f"{root.name}-outside"
    client, _ = make_host_client(capabilities=acp.ClientCapabilityConfig(allow_any_path=True))
    answers = run(client, [read(outside / "o.txt"), read("o.txt")])
    assert answers[0]["result"] == {"content": "SECRET"}
    assert answers[1]["error"]["message"] == "path is not absolute"


def test_a_huge_file_is_bounded_by_request_bytes(make_host_client: MakeClient, root: Path) -> None:
    with open(root / "huge", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB, sparse
    limits = dataclasses.replace(TEST_TRANSFER_LIMITS, request_bytes=64 * 1024)
    client, rec = make_host_client(capabilities=FS, transfer_limits=limits)
    answers = run(client, [read(root / "huge"), read(root / "a.txt")])
    error = answers[0]["error"]
    assert error["code"] == -32603
    assert "transfer_limits.request_bytes (65536" in error["message"]
    assert answers[1]["result"]["content"] == "1\n2\n3\n4\n"
    assert (rec.activity[0].allowed, rec.activity[0].error_code) == (True, -32603)


def test_an_answer_that_escapes_past_request_bytes_is_an_error(
    make_host_client: MakeClient, root: Path
) -> None:
    # 30,000 control bytes become 180,000 bytes of JSON escapes: over the limit once encoded.
    (root / "ctl.txt").write_text("\x01" * 30_000)
    limits = dataclasses.replace(TEST_TRANSFER_LIMITS, request_bytes=64 * 1024)
    client, _ = make_host_client(capabilities=FS, transfer_limits=limits)
    answers = run(client, [read(root / "ctl.txt")])
    assert answers[0]["error"]["code"] == -32603
    assert "transfer_limits.request_bytes (65536)" in answers[0]["error"]["message"]


def test_an_on_activity_exception_stops_the_client_after_the_write(
    make_host_client: MakeClient, root: Path
) -> None:
    class Failing(Recorder):
        def on_activity(self, activity: Any) -> None:
            raise KeyError("journal full")

    client, rec = make_host_client(Failing(), capabilities=FS)
    with pytest.raises(KeyError):
        run(client, [write(root / "done.txt", "kept")])
    assert (root / "done.txt").read_text() == "kept"  # the operation stays done
    assert not any('"id":"h1"' in line for line in rec.received())  # no answer written
    with pytest.raises(acp.AgentProtocolError, match="on_activity"):
        run(client, [read(root / "a.txt")])


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="absolute"):
        acp.ClientCapabilityConfig(additional_directories=("rel",))
    with pytest.raises(ValueError):
        acp.ClientCapabilityConfig(terminal_output_bytes=0)
    with pytest.raises(TypeError):
        acp.ClientCapabilityConfig(terminal=1)  # type: ignore[arg-type]
    config = acp.ClientCapabilityConfig(additional_directories=(os.path.join("/tmp", "."),))
    assert config.additional_directories == (os.path.realpath("/tmp"),)


def test_a_sessions_own_additional_directories_are_roots(
    make_host_client: MakeClient, root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    extra = tmp_path_factory.mktemp("mine")
    (extra / "m.txt").write_text("mine")
    client, _ = make_host_client(capabilities=FS)
    other = client.new_session(additional_directories=[str(extra)])
    assert run(other, [read(extra / "m.txt")])[0]["result"] == {"content": "mine"}
    # The default session was opened without it.
    assert run(client, [read(extra / "m.txt")])[0]["error"]["code"] == -32602

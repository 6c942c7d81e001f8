"""`acp-fast run` with --fs, --terminal, --add-dir, --allow and --deny (design/host.md §6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp_fast import PermissionRule
from acp_fast._host import parse_rule

from .conftest import run_cli as run_host_cli


def run_cli(tmp_path: Path, steps: list[dict[str, Any]], *flags: str) -> tuple[Any, str, str]:
    proc = run_host_cli(tmp_path, steps, *flags)
    assert proc.returncode == 0, proc.stderr
    log = tmp_path / "agent.log"
    return json.loads(proc.stdout), proc.stderr, log.read_text().splitlines()[0]


def write(path: Path) -> dict[str, Any]:
    params = {"path": str(path), "content": "hello\n"}
    return {"request": {"method": "fs/write_text_file", "params": params}}


def test_the_default_run_serves_nothing(tmp_path: Path) -> None:
    answers, stderr, initialize = run_cli(tmp_path, [write(tmp_path / "hello.txt")])
    # Nothing of the host side is advertised; the CLI asks for notices and compactions,
    # which it shows.
    advertised = json.loads(initialize)["params"]["clientCapabilities"]
    assert advertised == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "session": {"notices": {}, "compaction": {}},
    }
    assert answers[0]["error"]["code"] == -32601
    assert not (tmp_path / "hello.txt").exists()
    assert "refused: capability not advertised: fs.writeTextFile" in stderr


def test_fs_serves_files_inside_cwd_and_shows_each_activity(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-x"
    answers, stderr, initialize = run_cli(
        tmp_path, [write(tmp_path / "hello.txt"), write(outside / "no.txt")], "--fs"
    )
    assert '"fs":{"readTextFile":true,"writeTextFile":true},"terminal":false' in initialize
    assert answers[0]["result"] == {}
    assert (tmp_path / "hello.txt").read_text() == "hello\n"
    assert f"fs/write_text_file {tmp_path}/hello.txt: allowed" in stderr.splitlines()
    assert (
        f"fs/write_text_file {outside}/no.txt: refused: path outside the allowed roots"
        in stderr.splitlines()
    )
    assert not outside.exists()


def test_terminal_and_add_dir(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    extra = tmp_path_factory.mktemp("extra")
    create = {"command": "sh", "args": ["-c", "pwd"], "cwd": str(extra)}
    steps = [
        {"request": {"method": "terminal/create", "params": create}},
        {"request": {"method": "terminal/wait_for_exit", "params": {"terminalId": "term-1"}}},
        {"request": {"method": "terminal/output", "params": {"terminalId": "term-1"}}},
    ]
    answers, stderr, _ = run_cli(tmp_path, steps, "--terminal", "--add-dir", str(extra))
    assert answers[2]["result"]["output"] == f"{extra}\n"
    assert f"terminal/create sh -c pwd (in {extra}): allowed" in stderr


def test_allow_and_deny_rules(tmp_path: Path) -> None:
    options = [
        {"optionId": "y", "name": "Yes", "kind": "allow_once"},
        {"optionId": "n", "name": "No", "kind": "reject_once"},
    ]

    def ask(title: str, kind: str) -> dict[str, Any]:
        tool = {"toolCallId": title, "title": title, "kind": kind}
        params = {"toolCall": tool, "options": options}
        return {"request": {"method": "session/request_permission", "params": params}}

    answers, _, _ = run_cli(
        tmp_path,
        [ask("git push", "execute"), ask("git status", "execute"), ask("ls", "read")],
        "--allow",
        "execute",
        "--deny",
        "execute:/push$/",
    )
    assert [a["result"]["outcome"].get("optionId") for a in answers] == ["n", "y", "n"]


def test_rule_syntax() -> None:
    assert parse_rule("edit") == PermissionRule(kind="edit")
    assert parse_rule("execute:git ") == PermissionRule(kind="execute", title="git ")
    assert parse_rule(":Read") == PermissionRule(title="Read")
    pattern = parse_rule(":/^rm /").title
    assert not isinstance(pattern, str) and pattern is not None and pattern.pattern == "^rm "
    with pytest.raises(ValueError):
        parse_rule(":")

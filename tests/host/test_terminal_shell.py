"""`ClientCapabilityConfig(terminal_shell=...)`: a `terminal/create` without `args` (a whole
shell line, as claude-code-acp sends) runs as `[shell, "-c", command]` when the host opted in,
still in its own process group under the same limits and kill rules; without it such a line
fails with a message naming the option."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest

from .conftest import MakeClient, run, run_cli
from .test_terminals import alive, eventually, term

SHELL = acp.ClientCapabilityConfig(
    read_text_file=False, write_text_file=False, terminal_shell="/bin/sh"
)
NO_SHELL = acp.ClientCapabilityConfig(read_text_file=False, write_text_file=False)


def line(command: str, **extra: Any) -> dict[str, Any]:
    """A create with the whole line in `command` and no `args`."""
    return {"request": {"method": "terminal/create", "params": {"command": command, **extra}}}


def test_a_shell_line_runs_through_the_shell(make_host_client: MakeClient, tmp_path: Path) -> None:
    client, rec = make_host_client(capabilities=SHELL)
    answers = run(
        client,
        [
            line('echo hello world > out.txt && cat out.txt; echo "$PWD" | wc -c; exit 4'),
            term("wait_for_exit"),
            term("output"),
        ],
    )
    assert answers[0]["result"] == {"terminalId": "term-1"}
    assert answers[1]["result"] == {"exitCode": 4, "signal": None}
    width = len(str(tmp_path)) + 1
    assert answers[2]["result"]["output"] == f"hello world\n{width}\n"
    assert (tmp_path / "out.txt").read_text() == "hello world\n"
    created = rec.activity[0]
    # The record keeps the line as the agent sent it (one word): what the policy judged.
    assert (created.allowed, created.error_code, created.command) == (
        True,
        None,
        shlex.join(['echo hello world > out.txt && cat out.txt; echo "$PWD" | wc -c; exit 4']),
    )


def test_a_command_with_args_still_runs_without_a_shell(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(capabilities=SHELL)
    params = {"command": "printf", "args": ["%s|", "a b; echo no", "$HOME"]}
    answers = run(
        client,
        [
            {"request": {"method": "terminal/create", "params": params}},
            term("wait_for_exit"),
            term("output"),
        ],
    )
    assert answers[2]["result"]["output"] == "a b; echo no|$HOME|"


def test_a_shell_line_keeps_the_limits_and_the_kill_rules(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    pidfile = tmp_path / "grandchild"
    script = (
        f"echo $$ > {tmp_path / 'shell'}; trap '' TERM; "
        f"sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 1000' & wait"
    )
    client, _ = make_host_client(capabilities=SHELL)
    answers = run(
        client,
        [
            line("printf 'abcdef'", outputByteLimit=3),
            term("wait_for_exit"),
            term("output"),
            line(script),
        ],
    )
    assert answers[2]["result"]["output"] == "def"
    assert answers[2]["result"]["truncated"] is True
    eventually(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"))
    grandchild = int(pidfile.read_text())
    shell_pid = int((tmp_path / "shell").read_text())
    assert os.getpgid(shell_pid) == shell_pid  # the shell leads its own group
    answers = run(client, [term("kill", "term-2"), term("wait_for_exit", "term-2")])
    assert answers[1]["result"] == {"exitCode": None, "signal": "SIGKILL"}
    eventually(lambda: not alive(grandchild))


def test_without_the_option_a_shell_line_names_it(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    client, rec = make_host_client(capabilities=NO_SHELL)
    answers = run(
        client,
        [line("echo hello world > out.txt"), line("pwd"), term("wait_for_exit"), term("output")],
    )
    error = answers[0]["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("No such file or directory")
    assert "terminal_shell" in error["message"] and "--terminal-shell" in error["message"]
    assert not (tmp_path / "out.txt").exists()
    assert (rec.activity[0].allowed, rec.activity[0].error_code) == (True, -32603)
    # A one-word command still runs as a program (the first create failed: this is term-1).
    assert answers[1]["result"] == {"terminalId": "term-1"}
    assert answers[3]["result"]["output"] == f"{tmp_path}\n"


def test_a_missing_program_without_shell_syntax_gets_no_hint(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(capabilities=NO_SHELL)
    answers = run(client, [line("no-such-program-here")])
    assert answers[0]["error"]["message"] == "No such file or directory"


def test_the_option_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="absolute"):
        acp.ClientCapabilityConfig(terminal_shell="sh")
    with pytest.raises(ValueError, match="not an executable file"):
        acp.ClientCapabilityConfig(terminal_shell=str(tmp_path / "no-shell"))
    with pytest.raises(ValueError, match="not an executable file"):
        acp.ClientCapabilityConfig(terminal_shell=str(tmp_path))
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(ValueError, match="not an executable file"):
        acp.ClientCapabilityConfig(terminal_shell=str(plain))
    with pytest.raises(TypeError):
        acp.ClientCapabilityConfig(terminal_shell=b"/bin/sh")  # type: ignore[arg-type]
    assert acp.ClientCapabilityConfig().terminal_shell is None


def test_cli_terminal_shell(tmp_path: Path) -> None:
    steps = [line("echo hello world"), term("wait_for_exit"), term("output")]
    done = run_cli(tmp_path, steps, "--terminal", "--terminal-shell", "/bin/sh")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[2]["result"]["output"] == "hello world\n"
    refused = run_cli(tmp_path, steps, "--terminal", "--terminal-shell", "sh")
    assert refused.returncode == 2
    assert "--terminal-shell: terminal_shell must be an absolute path" in refused.stderr
    alone = run_cli(tmp_path, steps, "--terminal-shell", "/bin/sh")
    assert alone.returncode == 2 and "--terminal-shell needs --terminal" in alone.stderr

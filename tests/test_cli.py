"""The `acp-fast` command line, run as `python -m acp_fast` against the demo agent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import acp_fast

# Where the package under test lives (the source tree, or site-packages when CI tests the wheel).
PYTHON_DIR = Path(acp_fast.__file__).resolve().parents[1]
TIMEOUT = 60


def _env() -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(PYTHON_DIR) + (os.pathsep + old if old else "")
    env.pop("ACP_DEMO_DELAY", None)
    return env


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_fast", *args],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_plain_prompt_streams_the_reply(tmp_path: Path) -> None:
    proc = run_cli("run", "--cwd", str(tmp_path), "hello there")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello! You said: hello there.\n"
    assert "Traceback" not in proc.stderr


def test_thought_and_plan_on_stderr(tmp_path: Path) -> None:
    proc = run_cli("run", "hello there", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "thought: Thinking about: hello there" in lines
    assert "plan: - Read the prompt" in lines
    assert "plan: - Reply to the user" in lines
    assert lines.index("thought: Thinking about: hello there") < lines.index(
        "plan: - Read the prompt"
    )
    assert "stop reason" not in proc.stderr


def test_allow_kind_grants_the_write(tmp_path: Path) -> None:
    proc = run_cli("run", "--cwd", str(tmp_path), "--allow-kind", "edit", "create hello.txt")
    assert proc.returncode == 0, proc.stderr
    assert "I wrote hello.txt." in proc.stdout
    assert proc.stdout.endswith("\n")
    lines = proc.stderr.splitlines()
    assert "plan: - Write hello.txt" in lines
    assert "tool: Write hello.txt [pending]" in lines
    assert "permission: Write hello.txt -> selected allow" in lines
    assert "tool: Write hello.txt [completed]" in lines
    # The demo agent only pretends to write.
    assert list(tmp_path.iterdir()) == []


def test_allow_title_prefix_grants_the_write(tmp_path: Path) -> None:
    proc = run_cli(
        "run", "--cwd", str(tmp_path), "--allow-title-prefix", "Write ", "create hello.txt"
    )
    assert proc.returncode == 0, proc.stderr
    assert "I wrote hello.txt." in proc.stdout
    assert "permission: Write hello.txt -> selected allow" in proc.stderr.splitlines()


def test_default_policy_rejects(tmp_path: Path) -> None:
    proc = run_cli("run", "--cwd", str(tmp_path), "create hello.txt")
    assert proc.returncode == 0, proc.stderr
    assert "I did not write hello.txt: permission was rejected." in proc.stdout
    assert "I wrote" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert "permission: Write hello.txt -> selected reject" in lines
    assert "tool: Write hello.txt [failed]" in lines


def test_agent_given_as_a_command_line(tmp_path: Path) -> None:
    agent = f"{sys.executable} -m acp_fast.demo_agent --flood-count 3 --flood-bytes 4"
    proc = run_cli("run", "--agent", agent, "--cwd", str(tmp_path), "go")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "abcdabcdabcd\n"


def test_missing_agent_is_one_error_line(tmp_path: Path) -> None:
    proc = run_cli("run", "--agent", "/does/not/exist", "--cwd", str(tmp_path), "hi")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("acp-fast: error:")
    assert "/does/not/exist" in lines[0]


def test_agent_that_breaks_the_protocol_is_one_error_line(tmp_path: Path) -> None:
    proc = run_cli("run", "--agent", "/bin/sh -c 'echo not-json; cat >/dev/null'", "hi")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("acp-fast: error:")


def test_usage_errors_exit_2() -> None:
    assert run_cli().returncode == 2
    assert run_cli("run").returncode == 2
    assert run_cli("run", "--agent", "", "hi").returncode == 2
    assert run_cli("frobnicate").returncode == 2


def test_bench_quick_prints_the_table() -> None:
    from acp_fast.cli import BENCH_SIZES

    proc = run_cli("bench", "--quick")
    assert proc.returncode == 0, proc.stderr
    # stderr is not a terminal here: no progress bar, nothing else either.
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 + len(BENCH_SIZES), proc.stdout
    assert lines[0].split() == [
        "text/update",
        "line",
        "bytes",
        "updates",
        "seconds",
        "updates/s",
        "MB/s",
    ]
    assert len({len(line) for line in lines}) == 1  # right-aligned columns
    for line, size in zip(lines[1:], BENCH_SIZES, strict=True):
        number, unit, line_bytes, updates, seconds, rate, megabytes = line.split()
        assert f"{number} {unit}" == size.label
        assert size.text_bytes < int(line_bytes.replace(",", "")) < size.text_bytes + 400
        assert int(updates.replace(",", "")) == size.quick_per_prompt
        assert float(seconds) > 0
        assert float(rate.replace(",", "")) > 0
        assert float(megabytes.replace(",", "")) > 0
    assert [size.label for size in BENCH_SIZES] == ["64 B", "1 KiB", "64 KiB", "1 MiB"]


def test_bench_async_adds_the_asyncio_columns() -> None:
    from acp_fast.cli import BENCH_SIZES

    proc = run_cli("bench", "--quick", "--async")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("async updates/s  async/blocking")
    for line in lines[1:]:
        *_, async_rate, ratio = line.split()
        assert float(async_rate.replace(",", "")) > 0
        assert ratio.endswith("x") and float(ratio[:-1]) > 0
    assert len(lines) == 1 + len(BENCH_SIZES)


def test_bench_rejects_bad_seconds() -> None:
    proc = run_cli("bench", "--seconds", "0")
    assert proc.returncode == 2
    assert "--seconds" in proc.stderr

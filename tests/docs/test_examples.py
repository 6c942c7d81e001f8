"""Every example of README.md, docs/guide/*.md and docs/recipes/*.md runs as written.

Each ```python block runs in a fresh interpreter, in an empty temporary directory, against the
demo agent (the examples use ``acp.demo_agent_command()``); each ```sh / ```console block of
``acp-fast`` commands runs in bash there, with this environment's ``acp-fast`` first on PATH.
A block marked ``<!-- not run: REASON -->`` is not run; the marked ones are counted and listed
at the end of the session (see conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import Block, blocks_of, doc_files, examples

TIMEOUT = 120  # seconds; a generous bound that proves "no hang" on a busy 2-core machine
BIN = os.path.dirname(sys.executable)

BLOCKS = examples()
RUNNABLE = [block for block in BLOCKS if block.not_run is None]
NOT_RUN = [block for block in BLOCKS if block.not_run is not None]


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        argv, capture_output=True, text=True, timeout=TIMEOUT, env=_env(), **kwargs
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)  # the installed package, as a reader has it
    return env


# --- the examples ---------------------------------------------------------------------------


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.where for block in RUNNABLE])
def test_example_runs(block: Block, tmp_path: Path) -> None:
    if block.kind == "python":
        script = tmp_path / "example.py"
        script.write_text(block.text, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        argv = ["bash", "-c", block.script()]
    work = tmp_path / "work"
    work.mkdir()
    try:
        done = _run(argv, cwd=work, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as late:
        pytest.fail(f"{block.where} did not finish within {TIMEOUT} s:\n{late.stdout}{late.stderr}")
    assert done.returncode == 0, (
        f"{block.where} ({block.kind}) exited with status {done.returncode}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )


def test_not_run_examples_are_few_and_explained() -> None:
    """Only examples that need what a fresh machine lacks are left out, each saying what."""
    for block in NOT_RUN:
        assert block.not_run, f"{block.where}: `<!-- not run: -->` without a reason"
        assert block.not_run.startswith("needs "), f"{block.where}: say what it needs"
    assert len(NOT_RUN) <= 6, [block.where for block in NOT_RUN]


def test_examples_are_collected() -> None:
    """The collector finds the tour: a parser that found nothing would pass every test."""
    readme = [block for block in BLOCKS if block.path.name == "README.md" and not block.not_run]
    assert sum(block.kind == "python" for block in readme) >= 7
    assert sum(block.kind == "cli" for block in readme) >= 3
    for path in doc_files():
        for block in blocks_of(path):
            if block.lang in ("py", "python3", "pycon"):
                pytest.fail(f"{block.where}: write ```python so the example is run")


def test_collector_reads_markers_and_console_blocks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- not run: needs gemini -->\n\n```python\nprint(1)\n```\n\n"
        "- item\n\n  ```console\n  $ acp-fast run hi\n  Hello\n  $ acp-fast journal show x\n"
        "  ```\n\n```sh\npip install acp-fast\n```\n",
        encoding="utf-8",
    )
    first, second, third = blocks_of(page)
    assert (first.kind, first.not_run, first.text) == ("python", "needs gemini", "print(1)\n")
    assert second.kind == "cli" and second.not_run is None
    assert second.commands() == ["acp-fast run hi", "acp-fast journal show x"]
    assert third.kind is None  # not an acp-fast example: shown, not run

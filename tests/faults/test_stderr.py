"""The agent's stderr: `stderr="discard"` (default), `"inherit"` or `"tail"` (drained by the core
into a ring buffer of `stderr_tail_bytes`, read with `stderr_tail()`). 100 MiB on stderr never
blocks the agent nor grows the host."""

from __future__ import annotations

import time

import acp_fast as acp
import pytest
from conftest import agent, chunk_line, emit, stop_line, wait_for

from .kit import Watch, rss_bytes, thread_count

MIB = 1 << 20
# Shell code writing 100 MiB of 'x' to stderr, then a marker line.
FLOOD = "head -c 104857600 /dev/zero | tr '\\0' x >&2; echo '<end of flood>' >&2"


@pytest.mark.parametrize("mode", ["discard", "tail"])
def test_100_mib_on_stderr(watch: Watch, mode: str) -> None:
    """The agent writes 100 MiB to stderr before each answer: nothing blocks, the host's memory
    stays flat, and the tail holds exactly the last `stderr_tail_bytes` bytes."""
    script = agent(None, FLOOD + "; " + emit(chunk_line("after the flood"), stop_line(2)))
    client = watch.client(FLOOD + "\n" + script, stderr=mode)
    rss_before = rss_bytes()
    started = time.monotonic()
    client.start()
    assert client.prompt("hello") == "after the flood"
    elapsed = time.monotonic() - started
    assert elapsed < 10.0, f"200 MiB of stderr took {elapsed:.1f} s"
    assert rss_bytes() - rss_before < 20 * MIB
    if mode == "tail":
        expected = "x" * (65536 - len("<end of flood>\n")) + "<end of flood>\n"
        assert wait_for(lambda: client.stderr_tail() == expected, 2.0)
    else:
        assert client.stderr_tail() == ""
    watch.assert_updates(["after the flood"])
    watch.assert_clean()


def test_tail_keeps_the_last_bytes(watch: Watch) -> None:
    client = watch.client(
        "printf 'first line\\nsecond line\\n' >&2\n" + agent(None, emit(stop_line(2))),
        stderr="tail",
        stderr_tail_bytes=8,
    )
    client.start()
    assert wait_for(lambda: client.stderr_tail() == "nd line\n")
    watch.assert_clean()


def test_tail_of_invalid_utf8_is_replaced(watch: Watch) -> None:
    client = watch.client(
        "printf 'bad \\377\\376 bytes\\n' >&2\n" + agent(None, emit(stop_line(2))),
        stderr="tail",
    )
    client.start()
    assert wait_for(lambda: client.stderr_tail() != "")
    assert client.stderr_tail() == "bad \ufffd\ufffd bytes\n"
    watch.assert_clean()


def test_tail_is_empty_unless_tail_mode(watch: Watch) -> None:
    for mode in ("discard", "inherit"):
        client = watch.client(agent(None, emit(stop_line(2))), stderr=mode)
        client.start()
        assert client.stderr_tail() == ""
    watch.assert_clean()


def test_inherit_shares_the_hosts_stderr(capfd: pytest.CaptureFixture[str], watch: Watch) -> None:
    marker = "ACP-FAST-INHERITED-STDERR"
    client = watch.client(
        agent(None, f"echo {marker} >&2; " + emit(stop_line(2))), stderr="inherit"
    )
    client.start()
    client.prompt("hello")
    watch.assert_clean()
    assert marker in capfd.readouterr().err


def test_discard_is_the_default(capfd: pytest.CaptureFixture[str], watch: Watch) -> None:
    marker = "ACP-FAST-DISCARDED-STDERR"
    client = watch.client(agent(None, f"echo {marker} >&2; " + emit(stop_line(2))))
    client.start()
    client.prompt("hello")
    watch.assert_clean()
    captured = capfd.readouterr()
    assert marker not in captured.err + captured.out


@pytest.mark.parametrize("mode", ["", "Tail", "pipe", "discard "])
def test_invalid_stderr_mode_is_a_value_error(watch: Watch, mode: str) -> None:
    with pytest.raises(ValueError, match="stderr"):
        watch.client("exit 0", stderr=mode)
    assert watch.clients == []
    watch.assert_clean()


@pytest.mark.parametrize("mode", [None, 1, b"tail"])
def test_stderr_mode_of_another_type_is_refused(watch: Watch, mode: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        watch.client("exit 0", stderr=mode)
    assert watch.clients == []
    watch.assert_clean()


@pytest.mark.parametrize("size", [0, -1])
def test_invalid_tail_size_is_invalid_limits(watch: Watch, size: int) -> None:
    with pytest.raises(acp.InvalidLimits):
        watch.client("exit 0", stderr="tail", stderr_tail_bytes=size)
    watch.assert_clean()


def test_tail_threads_end_with_their_agents(watch: Watch) -> None:
    """Each tail-mode client drains stderr on a thread of its own; it ends with the agent."""
    threads = thread_count()
    for _ in range(20):
        client = watch.client(agent(None, emit(stop_line(2))), stderr="tail")
        client.start()
        client.close()
    # At most as many threads as before: a thread of an earlier test may end meanwhile (the
    # count is the whole process's), which must not read as a leak of ours.
    assert wait_for(lambda: thread_count() <= threads, 2.0), (
        f"{thread_count() - threads} drain threads outlived their clients"
    )
    watch.assert_clean()

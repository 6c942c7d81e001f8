"""The host issue's attacks on files and terminals, through the real clients: a root swapped
for a symlink while requests run, a root given through a symlink, a read of a huge sparse
file under a turn timeout (both drivers, and the event loop kept running), writes to
read-only files and FIFOs, a flood of terminals, hand-written requests with duplicate keys and
lone surrogates, and the descriptors left after `close()`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, TEST_TRANSFER_LIMITS

from .conftest import AGENT, MakeClient, Recorder, run

FS = acp.ClientCapabilityConfig(terminal=False)
ALL = acp.ClientCapabilityConfig()


def read(path: str | Path, **extra: Any) -> dict[str, Any]:
    return {"method": "fs/read_text_file", "params": {"path": str(path), **extra}}


def write(path: str | Path, content: str) -> dict[str, Any]:
    return {"method": "fs/write_text_file", "params": {"path": str(path), "content": content}}


SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
base, stop = sys.argv[1], sys.argv[2]
outer, inner = os.open(base, os.O_RDONLY), os.open(base + "/w", os.O_RDONLY)
swaps = 0
while not os.path.exists(stop):
    for _ in range(50):
        swaps += libc.renameat2(outer, b"w", outer, b"evil", 2) == 0
        swaps += libc.renameat2(inner, b"extra", inner, b"evilextra", 2) == 0
print(swaps)
"""


@pytest.mark.parametrize("client_driver", ["blocking"])
def test_swapping_a_root_for_a_symlink_never_reaches_outside(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    """The cwd root and an additional root nested in it are exchanged with symlinks to an
    outside directory (renameat2 RENAME_EXCHANGE, thousands of times) while the agent reads
    and writes through them: nothing outside is read or created."""
    w, outside = tmp_path / "w", tmp_path / "outside"
    (w / "extra").mkdir(parents=True)
    (outside / "extra").mkdir(parents=True)
    for d in (w, w / "extra"):
        (d / "f.txt").write_text("inside")
    for d in (outside, outside / "extra"):
        (d / "f.txt").write_text("SECRET")
    os.symlink(outside, tmp_path / "evil")
    os.symlink(outside / "extra", w / "evilextra")
    config = acp.ClientCapabilityConfig(terminal=False, additional_directories=(str(w / "extra"),))
    client, _ = make_host_client(capabilities=config, cwd=str(w))
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(tmp_path), str(stop)], stdout=subprocess.PIPE
    )
    try:
        requests = [
            read(w / "f.txt"),
            read(w / "extra" / "f.txt"),
            write(w / "n.txt", "x"),
            write(w / "extra" / "n.txt", "x"),
        ]
        (answer,) = run(client, [{"repeat": 400, "requests": requests}])
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=30)
    assert int(out) >= 1000, "the race ran"
    tally: dict[str, int] = answer["tally"]
    assert "SECRET" not in tally, tally
    assert sum(tally.values()) == 1600
    for d in (outside, outside / "extra"):
        assert not (d / "n.txt").exists(), "created outside"
        assert (d / "f.txt").read_text() == "SECRET"


def test_a_root_given_through_a_symlink_answers_in_both_forms(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "f.txt").write_text("extra")
    link = tmp_path / "linkextra"
    os.symlink(tmp_path / "extra", link)
    config = acp.ClientCapabilityConfig(terminal=False, additional_directories=(str(link),))
    assert config.additional_directories == (str(tmp_path / "extra"),)
    (tmp_path / "cwd").mkdir()
    client, _ = make_host_client(capabilities=config, cwd=str(tmp_path / "cwd"))
    answers = run(
        client,
        [
            {"request": read(link / "f.txt")},
            {"request": read(tmp_path / "extra" / "f.txt")},
            {"request": write(link / "new.txt", "via link")},
        ],
    )
    assert [a.get("result") for a in answers] == [{"content": "extra"}, {"content": "extra"}, {}]
    assert (tmp_path / "extra" / "new.txt").read_text() == "via link"


@pytest.fixture
def sparse(tmp_path: Path) -> Path:
    """A 40 GiB sparse file: one line of zero bytes (scanning it all takes tens of seconds)."""
    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(40 << 30)
    return path


def test_a_huge_read_is_bounded_and_the_turn_timeout_fires(
    make_host_client: MakeClient, tmp_path: Path, sparse: Path
) -> None:
    client, _ = make_host_client(capabilities=FS, cancel_grace=5.0)
    session = client.default_session
    assert session is not None
    steps = [{"request": read(sparse, line=2)}, {"wait_cancel": True}]
    began = time.monotonic()
    with pytest.raises(acp.TurnTimeout) as raised:
        session.prompt(json.dumps(steps), timeout=0.5)
    assert time.monotonic() - began < 10  # the scan ends at the deadline, not after 40 GiB
    result = raised.value.result
    assert result is not None
    (answer,) = json.loads(result.response)
    message = answer["error"]["message"]
    assert "timeout passed" in message or "bound for one read" in message, message


def test_a_huge_read_without_a_timeout_ends_at_the_scan_bound(
    make_host_client: MakeClient, sparse: Path
) -> None:
    client, _ = make_host_client(capabilities=FS)
    began = time.monotonic()
    (answer,) = run(client, [{"request": read(sparse, line=2)}])
    assert time.monotonic() - began < 30
    error = answer["error"]
    assert error["code"] == -32603
    assert "bound for one read" in error["message"], error
    assert error["data"] == {"path": str(sparse)}


def test_a_long_read_goes_on_off_the_driver_while_other_requests_are_served(
    make_host_client: MakeClient, tmp_path: Path, sparse: Path
) -> None:
    """A read that has examined a few MiB moves to a thread of its own: a later request is
    answered before it (the agent collects answers in arrival order)."""
    (tmp_path / "a.txt").write_text("small")
    client, rec = make_host_client(capabilities=FS)
    steps = [
        {"send": read(sparse, line=2)},
        {"send": read(tmp_path / "a.txt")},
        {"collect": 2},
    ]
    first, second = run(client, steps)
    assert first["id"] == "h2" and first["result"] == {"content": "small"}
    assert second["id"] == "h1" and "bound for one read" in second["error"]["message"]
    assert [a.path for a in rec.activity] == [str(tmp_path / "a.txt"), str(sparse)]


def reader_threads() -> list[str]:
    names = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
    return [n for n in names if n == "acp-fast read"]


@pytest.mark.parametrize("client_driver", ["blocking"])
def test_close_ends_a_long_read_at_once(make_host_client: MakeClient, sparse: Path) -> None:
    client, _ = make_host_client(capabilities=FS)
    session = client.default_session
    assert session is not None
    failed: list[BaseException] = []

    def turn() -> None:
        try:
            session.prompt(json.dumps([{"request": read(sparse, line=2)}]))
        except acp.AcpError as error:
            failed.append(error)

    thread = threading.Thread(target=turn)
    thread.start()
    deadline = time.monotonic() + 10
    while not reader_threads() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert reader_threads(), "the read moved to its thread"
    client.close()
    # Stopped and joined by close(), not left scanning the 40 GiB (tens of seconds): the kernel
    # may list a joined thread in /proc a moment after the join returns, hence a short wait.
    deadline = time.monotonic() + 2
    while reader_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader_threads() == []
    thread.join(10)
    assert failed and "close()" in str(failed[0])


def test_the_event_loop_runs_on_while_a_huge_read_is_served(tmp_path: Path, sparse: Path) -> None:
    async def main() -> tuple[float, int]:
        client = acp.AsyncClient(
            sys.executable,
            args=["-I", str(AGENT), str(tmp_path / "agent.log")],
            cwd=str(tmp_path),
            capabilities=FS,
            observer=Recorder(),
            transfer_limits=TEST_TRANSFER_LIMITS,
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transport_epoch=3,
            client_info=TEST_CLIENT_INFO,
        )
        async with client:
            await client.start()
            session = client.default_session
            assert session is not None
            ticks: list[float] = []

            async def ticker() -> None:
                while True:
                    ticks.append(time.monotonic())
                    await asyncio.sleep(0.01)

            task = asyncio.create_task(ticker())
            steps = [{"request": read(sparse, line=2)}, {"wait_cancel": True}]
            with pytest.raises(acp.TurnTimeout):
                await session.prompt(json.dumps(steps), timeout=0.5)
            task.cancel()
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        return max(gaps), len(ticks)

    longest, count = asyncio.run(main())
    assert count > 10
    # A 40 GiB scan used to stall the loop for its whole length (10 s and more here).
    assert longest < 2, f"the loop stalled {longest:.1f} s"


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="root writing a 0444 file is the case; as a user the kernel refuses it anyway",
)
def test_writes_to_read_only_files_fifos_and_hard_links_are_refused(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    ro, fifo, linked = tmp_path / "ro.txt", tmp_path / "fifo", tmp_path / "linked.txt"
    ro.write_text("keep")
    ro.chmod(0o444)
    os.mkfifo(fifo)
    linked.write_text("keep")
    os.link(linked, tmp_path / "other-name")
    client, _ = make_host_client(capabilities=FS)
    answers = run(client, [{"request": write(p, "new")} for p in (ro, fifo, linked)])
    messages = [a["error"]["message"] for a in answers]
    assert "read-only (mode 0444)" in messages[0]
    assert "not a regular file" in messages[1]
    assert "2 hard links" in messages[2]
    assert ro.read_text() == "keep" and ro.stat().st_mode & 0o777 == 0o444
    assert fifo.is_fifo()
    assert linked.read_text() == "keep"


def test_terminals_are_capped_per_session(make_host_client: MakeClient) -> None:
    config = acp.ClientCapabilityConfig(read_text_file=False, write_text_file=False)
    assert config.max_terminals == 32
    with pytest.raises(ValueError, match="max_terminals"):
        acp.ClientCapabilityConfig(max_terminals=0)
    client, _ = make_host_client(capabilities=config)
    fds = len(os.listdir("/proc/self/fd"))
    create = {"method": "terminal/create", "params": {"command": "sleep", "args": ["100"]}}
    (answer,) = run(client, [{"repeat": 300, "requests": [create]}])
    tally = answer["tally"]
    refused = [k for k in tally if "too many terminals" in k]
    assert len(refused) == 1 and tally[refused[0]] == 268, tally
    assert "max_terminals is 32" in refused[0] and "terminal/release" in refused[0]
    assert len(os.listdir("/proc/self/fd")) - fds < 32 * 3  # bounded by the cap
    release = {"method": "terminal/release", "params": {"terminalId": "term-1"}}
    answers = run(client, [{"request": release}, {"request": create}])
    assert answers[0]["result"] == {}
    assert answers[1]["result"] == {"terminalId": "term-33"}  # the released slot was reused


def test_duplicate_keys_and_lone_surrogates_are_named(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    client, rec = make_host_client(capabilities=FS)
    a = json.dumps(str(tmp_path / "a.txt"))

    def raw(request_id: str, params: str) -> dict[str, Any]:
        line = (
            f'{{"jsonrpc":"2.0","id":"{request_id}","method":"fs/read_text_file",'
            f'"params":{{"sessionId":"s1",{params}}}}}'
        )
        return {"raw": line, "id": request_id}

    answers = run(
        client,
        [
            raw("d", f'"path":{a},"path":"/etc/shadow"'),
            raw("u", f'"path":"{tmp_path}/\\ud800.txt"'),
        ],
    )
    assert answers[0]["error"]["data"] == {
        "field": "$.path",
        "reason": "given more than once (an ambiguous request is refused)",
    }
    assert answers[1]["error"]["data"]["field"] == "$.path"
    assert answers[1]["error"]["data"]["reason"].startswith("not valid Unicode")
    assert [r.session_id for r in rec.activity] == ["s1", "s1"]


def test_close_releases_descriptors_without_garbage_collection(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    gc.collect()
    gc.disable()
    try:
        fds = set(os.listdir("/proc/self/fd"))
        for _ in range(4):
            client, _ = make_host_client(capabilities=ALL)
            create = {"method": "terminal/create", "params": {"command": "sleep", "args": ["9"]}}
            run(client, [{"request": read(tmp_path / "a.txt")}, {"request": create}])
            client.close()
            assert set(os.listdir("/proc/self/fd")) <= fds
    finally:
        gc.enable()


@pytest.mark.parametrize("client_driver", ["blocking"])
def test_sessions_in_one_directory_hold_one_descriptor(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    """Roots are held open per directory, not per session: 60 sessions in one cwd (with one
    additional directory each) cost two descriptors, and closing them releases those."""
    (tmp_path / "extra").mkdir()
    client, _ = make_host_client(capabilities=FS, cwd=str(tmp_path))
    before = len(os.listdir("/proc/self/fd"))
    sessions = [
        client.new_session(tmp_path, additional_directories=[str(tmp_path / "extra")])
        for _ in range(60)
    ]
    assert len(os.listdir("/proc/self/fd")) - before <= 2
    (answer,) = run(sessions[-1], [{"request": read(tmp_path / "agent0.log", limit=0)}])
    assert answer["result"] == {"content": ""}
    for session in sessions:
        session.close()
    assert len(os.listdir("/proc/self/fd")) <= before

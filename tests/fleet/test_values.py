"""The fleet's values and the host's coalescing, without a cluster."""

from __future__ import annotations

import asyncio
import pickle
import sys
import threading
import time
from array import array
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")
from acp_fast.fleet import Batch, Retry, Task, _record
from acp_fast.fleet._record import Record


@pytest.mark.parametrize(
    "bad",
    ["../x", "a/b", ".hidden", "-rf", "", "x" * 129, "t\n1", "t\x1b[2J", "ü", 17, None],
)
def test_hostile_task_ids_are_refused(bad: object) -> None:
    # A task id names journal files on the hosts: nothing that leaves the run's directory,
    # hides, starts like an option or carries control bytes.
    with pytest.raises(ValueError, match="task id"):
        Task(bad, "/tmp", ["hi"])  # type: ignore[arg-type]


def test_task_checks_prompts() -> None:
    with pytest.raises(TypeError):
        Task("t", "/tmp", "one string")
    with pytest.raises(ValueError):
        Task("t", "/tmp", [])
    assert Task("t-1.a_b", "/tmp", ["a", "b"]).prompts == ("a", "b")


def test_retry_checks_and_backs_off() -> None:
    with pytest.raises(ValueError):
        Retry(attempts=0)
    with pytest.raises(TypeError):
        Retry(on="ActorDiedError")  # type: ignore[arg-type]
    retry = Retry(attempts=5, backoff=2.0)
    assert [retry.delay(n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert Retry(attempts=9, backoff=10.0).delay(8) == 60.0
    # By default a retry follows the death of a host or of an agent, not an agent's error.
    assert {"ActorDiedError", "AgentDied", "AgentTransportFailed"} <= set(Retry().on)
    assert "AgentProtocolError" not in Retry().on


def test_agent_spec_is_checked_and_pickles() -> None:
    command, args = acp.demo_agent_command()
    spec = acp.AgentSpec(command, args, env={"A": "1"}, client_options={"cancel_grace": 1.0})
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and back.args == tuple(args)
    assert dict(back.client_options) == {"cancel_grace": 1.0}
    with pytest.raises(ValueError, match="observer"):
        acp.AgentSpec(command, client_options={"observer": object()})
    with pytest.raises(TypeError):
        acp.AgentSpec(command, args="-m acp_fast.demo_agent")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        acp.AgentSpec(command, env={"A=B": "1"})
    with pytest.raises(ValueError):
        acp.AgentSpec("")
    assert acp.AgentSpec(sys.executable).env is None


def test_batch_envelopes() -> None:
    seqs = array("Q", [4, 5, 6]).tobytes()
    batch = Batch("t", 1, b'{"a":1}\n{"b":2}\n{"c":3}\n', seqs)
    assert (batch.first_seq, batch.last_seq, len(batch)) == (4, 6, 3)
    assert list(batch.envelopes()) == [(4, b'{"a":1}'), (5, b'{"b":2}'), (6, b'{"c":3}')]


class _Update:
    def __init__(self, seq: int, size: int) -> None:
        self.update_sequence = seq
        self.envelope = "x" * size


def test_record_batches_at_16k_and_caps_at_1mib() -> None:
    async def main() -> None:
        record = Record()
        for seq in range(1, 3001):
            record.on_update(_Update(seq, 999))  # type: ignore[arg-type]
        # Everything is there already: one read takes up to 1 MiB, not just 16 KiB.
        data, seqs, ended = await record.read(1)
        count = len(seqs) // 8
        assert not ended and len(data) >= _record.LARGEST and count < 3000
        assert array("Q", seqs).tolist() == list(range(1, count + 1))
        record.finish()
        got = array("Q", seqs).tolist()
        reads = 1
        while not ended:
            data, seqs, ended = await record.read(got[-1] + 1)
            assert len(data) <= _record.LARGEST + 1000
            got += array("Q", seqs).tolist()
            reads += 1
        assert got == list(range(1, 3001)) and reads == 3  # 3 MB in 1 MiB batches
        # A resume past the end returns the end at once.
        assert await record.read(3001) == (b"", b"", True)

    asyncio.run(main())


def test_record_waits_for_updates_and_for_the_quiet_gap() -> None:
    async def main() -> None:
        record = Record()
        reader = asyncio.ensure_future(record.read(1))
        await asyncio.sleep(0.01)
        assert not reader.done()  # nothing recorded yet: the read waits
        for seq in (1, 2, 3):
            record.on_update(_Update(seq, 10))  # type: ignore[arg-type]
        data, seqs, ended = await asyncio.wait_for(reader, 5)
        assert array("Q", seqs).tolist() == [1, 2, 3] and not ended
        assert data == b"x" * 10 + b"\n" + b"x" * 10 + b"\n" + b"x" * 10 + b"\n"

    asyncio.run(main())


def test_record_never_blocks_the_writer_and_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    # No consumer at all: recording goes on (bounded memory); what was trimmed is refused
    # with a pointer to the journal rather than silently skipped.
    monkeypatch.setattr(_record, "RETAINED", 64 * 1024)

    async def main() -> None:
        record = Record()
        for seq in range(1, 1001):
            record.on_update(_Update(seq, 1000))  # type: ignore[arg-type]
        assert record.total == 1000 and record.retained_bytes <= 64 * 1024
        with pytest.raises(LookupError, match="journal"):
            await record.read(1)
        record.finish()
        _, seqs, _ = await record.read(1000)
        assert array("Q", seqs).tolist() == [1000]

    asyncio.run(main())


def test_a_restarted_host_ends_streams_of_attempts_it_never_saw(tmp_path: object) -> None:
    # After Ray restarted a host, a stream of an attempt its previous life ran must end, not
    # wait forever for updates that will never come.
    from acp_fast.fleet._host import Host

    async def main() -> None:
        host = Host(0, acp.AgentSpec(sys.executable), 2, str(tmp_path))
        assert await asyncio.wait_for(host.read("t", 1, 0, True), 5) == (b"", b"", True)
        # Even when an earlier read (sent before the driver knew the attempt was over) made
        # an empty record for it in the new process.
        early = asyncio.ensure_future(host.read("u", 1, 0, False))
        await asyncio.sleep(0.01)
        assert await asyncio.wait_for(host.read("u", 1, 0, True), 5) == (b"", b"", True)
        early.cancel()

    asyncio.run(main())


def test_a_host_forgets_old_finished_attempts_and_says_where_they_are(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of tasks on one host: the finished ones' updates must not pile up in memory;
    # a late stream of a forgotten attempt is told to read its journal, never given nothing.
    from acp_fast.fleet import _host

    monkeypatch.setattr(_host, "FINISHED_RETAINED", 10_000)

    async def main() -> None:
        host = _host.Host(0, acp.AgentSpec(sys.executable), 2, str(tmp_path))
        for i in range(5):
            key = (f"t{i}", 1)
            record = host._record(key)
            host.began.add(key)
            for seq in range(1, 11):
                record.on_update(_Update(seq, 999))  # type: ignore[arg-type]
            record.finish()
            host._forget_old(key, f"/j/t{i}.1.jsonl")
        assert sorted(host.records) == [("t4", 1)]
        with pytest.raises(LookupError, match=r"/j/t0\.1\.jsonl"):
            await host.read("t0", 1, 0, True)
        _, seqs, ended = await host.read("t4", 1, 0, True)
        assert ended and array("Q", seqs).tolist() == list(range(1, 11))

    asyncio.run(main())


def test_a_planted_run_directory_is_refused(tmp_path: Path) -> None:
    # Someone made the run's directory a symlink to elsewhere: the host journals nothing
    # through it, and the attempt ends as a value saying why.
    from acp_fast.fleet._host import Host

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_dir = tmp_path / "run"
    run_dir.symlink_to(elsewhere)

    async def main() -> dict[str, object]:
        host = Host(0, acp.AgentSpec(sys.executable, ["-c", "pass"]), 2, str(run_dir))
        return await host.run_task("t", 1, str(tmp_path), ("hi",))

    out = asyncio.run(main())
    assert out["ok"] is False and out["error_type"] == "PermissionError"
    assert list(elsewhere.iterdir()) == []


def _writer_thread(record_box: list[Record], go: threading.Event, count: int) -> threading.Thread:
    """The client's loop of a host (Ray's default concurrency group): makes the record first,
    as run_task does (unless the reader made it), then writes `count` updates once `go` is
    set."""

    def run() -> None:
        async def write() -> None:
            if not record_box:
                record_box.append(Record())
            go.wait()
            for seq in range(1, count + 1):
                record_box[0].on_update(_Update(seq, 100))  # type: ignore[arg-type]
            record_box[0].finish()

        asyncio.run(write())

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_read_on_another_loop_is_woken_by_the_writer() -> None:
    # Ray runs the client (writer) and the streams (reader) on two threads with a loop each.
    # A record made on the writer's loop must still wake the reader at once: before, the
    # writer set the reader's asyncio.Event from its own thread, which does not wake that
    # loop, and the read returned nothing after POLL (5 s).
    async def main() -> None:
        box: list[Record] = []
        go = threading.Event()
        writer = _writer_thread(box, go, 1)
        while not box:
            await asyncio.sleep(0.001)
        reader = asyncio.ensure_future(box[0].read(1))
        await asyncio.sleep(0.05)  # the read is waiting
        go.set()
        began = time.monotonic()
        data, seqs, _ = await asyncio.wait_for(reader, 10.0)
        assert time.monotonic() - began < 2.5  # woken by the write, not by POLL's 5 s
        assert array("Q", seqs).tolist() == [1] and data == b"x" * 100 + b"\n"
        writer.join()

    asyncio.run(main())


@pytest.mark.parametrize("maker", ["writer", "reader"])
def test_a_flood_wakes_the_reader_per_read_not_per_update(
    maker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each cross-thread wake is a write to the reader loop's self-pipe; one per update was 90%
    # of a host's per-update Python time (py-spy). Now: at most one per wait of a read, and
    # no read sits out POLL for lack of a wake, whichever side made the record.
    async def main() -> None:
        loop = asyncio.get_running_loop()
        wakes = 0
        original = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
        box: list[Record] = [Record()] if maker == "reader" else []
        go = threading.Event()
        writer = _writer_thread(box, go, 20000)
        while not box:
            await asyncio.sleep(0.001)
        got: list[int] = []
        reads = empty = 0
        ended = False
        go.set()
        while not ended:
            _, seqs, ended = await box[0].read(got[-1] + 1 if got else 1)
            got += array("Q", seqs).tolist()
            reads += 1
            empty += not seqs and not ended
        writer.join()
        assert got == list(range(1, 20001))
        assert empty == 0, "a read waited out POLL: the writer's wake was lost"
        assert wakes * 100 <= len(got), (wakes, reads)  # was one per update

    asyncio.run(main())


class _Numbered:
    """An update whose envelope names its own sequence."""

    def __init__(self, seq: int) -> None:
        self.update_sequence = seq
        self.envelope = f"{seq:>12}" + "x" * 200


def test_a_flood_trimmed_while_read_from_another_thread_keeps_lines_and_sequences_paired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The writer (the client's thread) appends and trims the record while a stream reads it
    # on another thread: every batch's lines must carry the sequences given with them, and an
    # update trimmed before it was read must be refused (LookupError), never skipped.
    monkeypatch.setattr(_record, "RETAINED", 32 * 1024)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    count = 60000

    async def main() -> None:
        record = Record()
        go = threading.Event()

        def write() -> None:
            go.wait()
            for seq in range(1, count + 1):
                record.on_update(_Numbered(seq))  # type: ignore[arg-type]
            record.finish()

        writer = threading.Thread(target=write)
        writer.start()
        go.set()
        following = 1
        ended = False
        refused = 0
        while not ended:
            try:
                data, seqs, ended = await record.read(following)
            except LookupError:
                refused += 1
                following = record.dropped_through + 1  # the rest: in the journal
                continue
            numbers = array("Q", seqs).tolist()
            lines = data.split(b"\n")[:-1]
            assert [int(line[:12]) for line in lines] == numbers
            if numbers:
                assert numbers[0] == following, (numbers[0], following)  # nothing skipped
                assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
                following = numbers[-1] + 1
        writer.join()
        assert following == count + 1

    try:
        asyncio.run(main())
    finally:
        sys.setswitchinterval(previous)


def test_a_record_trimmed_to_nothing_refuses_what_it_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One update larger than what a record keeps: trimmed at once, the record is empty; a
    # read of it is refused with the journal's pointer, not answered with nothing.
    monkeypatch.setattr(_record, "RETAINED", 1024)

    async def main() -> None:
        record = Record()
        record.on_update(_Update(1, 4096))  # type: ignore[arg-type]
        assert record.lines == [] and record.dropped == 1
        with pytest.raises(LookupError, match="through sequence 1"):
            await record.read(1)
        record.on_update(_Update(2, 10))  # type: ignore[arg-type]
        record.finish()
        _, seqs, ended = await record.read(2)
        assert array("Q", seqs).tolist() == [2] and ended

    asyncio.run(main())


class _FakeClient:
    def __init__(self, pid: int) -> None:
        self._pid = pid
        self.closed = False

    @property
    def pid(self) -> int:  # Python code, as AsyncClient's: a thread switch may come here
        return self._pid

    def close(self) -> None:
        self.closed = True


def test_a_host_shared_by_three_threads_keeps_its_books(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray runs run_task, read and stats/cancel on three threads (a loop each). A CI run saw
    # stats fail with "dictionary changed size during iteration" while tasks came and went;
    # a read racing run_task for a new attempt could make a second record that no journal
    # fills; a cancel of a finished attempt was kept forever. Here each thread hammers its
    # part, with the interpreter switching threads as often as it can.
    from acp_fast.fleet import _host

    monkeypatch.setattr(_host, "FINISHED_RETAINED", 0)  # forget as soon as they finish
    host = _host.Host(0, acp.AgentSpec(sys.executable), 2, str(tmp_path))
    window, stats_calls = 16, 1000  # attempts running at once; stats calls to make
    errors: list[BaseException] = []
    seen: dict[tuple[str, int], list[Record]] = {}
    progress = [0]  # attempts begun
    enough = threading.Event()

    def guarded(body: Any) -> threading.Thread:
        def run() -> None:
            try:
                body()
            except BaseException as error:
                errors.append(error)
            finally:
                enough.set()

        return threading.Thread(target=run)

    @guarded
    def tasks() -> None:  # Ray's default group: what run_task does to the shared state
        i = 0
        while not enough.is_set() or i < window:
            key = (f"t{i}", 1)
            seen.setdefault(key, []).append(host._begin(key))
            client = _FakeClient(i + 1)
            if host._claimed(key, client):
                client.close()
            progress[0] = i = i + 1
            if i > window:  # the oldest running attempt ends
                old = (f"t{i - 1 - window}", 1)
                host._record(old).finish()
                host._released(old, time.time())
                host._forget_old(old, "/j/old.jsonl")
        for j in range(i - window, i):
            host._released((f"t{j}", 1), time.time())

    @guarded
    def streams() -> None:  # the stream group: reads of attempts about to begin
        while not enough.is_set():
            key = (f"t{progress[0] + 1}", 1)
            # As read() looks: a record, or (this thread was slow and the attempt is long
            # over) where its journal is; never a second, empty record.
            found = host._record_for_read(key, False)
            if isinstance(found, Record):
                seen.setdefault(key, []).append(found)
            else:
                assert found == "/j/old.jsonl", found

    @guarded
    def control() -> None:  # the control group: stats and cancels while tasks come and go
        async def main() -> None:
            for _ in range(stats_calls):
                stats = await host.stats()
                assert 0 <= stats["running"] <= window + 1
                assert all(pid > 0 for pid in stats["agent_pids"])
                # A running attempt, one about to begin, one long over.
                for back in (3, -1, window + 5):
                    host.cancel(f"t{progress[0] - back}", 1)

        asyncio.run(main())

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in (tasks, streams, control):
            thread.start()
        for thread in (tasks, streams, control):
            thread.join(60)
    finally:
        sys.setswitchinterval(previous)
    assert not any(thread.is_alive() for thread in (tasks, streams, control))
    assert errors == []
    # One record per attempt, whichever thread made it first.
    assert all(len({id(r) for r in records}) == 1 for records in seen.values())
    assert host.clients == {} and host.running == 0
    assert host.cancelled == set() and host.live == set()
    assert host.started == progress[0]
    assert len(host.spans) == min(host.started, 10_000)  # spans keeps the last 10,000

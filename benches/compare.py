"""Side by side: acp-fast, the official ACP Python SDK and a plain orjson loop.

Run from the repository root in the dev venv (it needs the `bench` extra:
`agent-client-protocol==0.12.1` and `orjson`):

    python benches/compare.py            # full run, writes benches/results.md (~2 minutes)
    python benches/compare.py --quick    # smoke run with small sizes, prints only (~40 s)

The markdown report goes to stdout, progress (every round's numbers) to stderr.

Every runner drives the SAME fake agent, `benches/flood_agent.py` (pre-built lines written in
1 MiB batches; its own speed into /dev/null and into a pipe is measured and reported), and the
runners are interleaved in each round (acp-fast, SDK, loop, acp-fast, SDK, loop, ...); the
table shows the median of the rounds. The runners:

- acp-fast: `acp_fast.Client` with an observer whose `on_update` counts updates and sums
  `len(update.text)`; permission requests granted by the policy (`allowed_tool_kinds`); the
  reply is also assembled by the client (`response_bytes` large enough to keep all of it,
  except in (b2), which keeps 1 MiB).
- SDK: `acp.spawn_agent_process` (agent-client-protocol) with stderr to /dev/null and a 16 MiB
  reader limit; a `Client` whose `session_update` counts and sums the text length and whose
  `request_permission` answers `allow`.
- loop: `subprocess.Popen` pipes, `readline()` + `orjson.loads` + a no-op callback per update,
  permission requests answered with an `orjson.dumps` line.

The cases: (a) 100,000 updates of 32 B of text, (b) 2,000 updates of 64 KiB, (c) 2,000
permission round trips (each prompt timed from sending it to its answer, every update
delivered); (d) start-up (spawn + initialize + session/new); (e) close of an agent that ignores
SIGTERM and has a grandchild, (e2) the same agent also ignoring stdin EOF: time until both are
dead or zombies (the grandchild is found in /proc/<agent>/task/<agent>/children); (f) acp-fast's
peak RSS (VmHWM) while one prompt streams 1 GiB and 4 GiB with response_bytes = 1 MiB, each in
a fresh interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import acp_fast

BENCHES = Path(__file__).resolve().parent
ROOT = BENCHES.parent
AGENT = str(BENCHES / "flood_agent.py")
PYTHON = sys.executable
RESULTS = BENCHES / "results.md"
RUNNERS = ("acp-fast", "SDK", "loop")
#: The heading of compare_v2.py's section of RESULTS, which this script's report keeps.
V2_SECTION = "## ACP v2 beside v1"

MIB = 1 << 20
GIB = 1 << 30
BIG_TEXT = 64 * 1024  # case (b) and the memory case: 64 KiB of text an update
CLOSE_CAP = 5.0  # seconds: case (e) gives up waiting for the agent and grandchild to die
SDK_TRANSPORT: dict[str, Any] = {"limit": 16 * MIB, "stderr": subprocess.DEVNULL}
LOOP_BUFSIZE = 1 << 18  # the loop's pipe buffer: 256 KiB read best in a trial (8 KiB .. 1 MiB)

FAST_LIMITS = acp_fast.TransferLimits(
    request_bytes=MIB,
    response_bytes=512 * MIB,  # keeps the whole reply of every throughput case
    update_bytes=MIB,
    update_count=1 << 40,
    response_segment_count=1 << 30,
)
#: Case (b2) and the memory case: 1 MiB of reply kept, as a host with default-sized limits.
CAPPED_LIMITS = acp_fast.TransferLimits(
    request_bytes=MIB,
    response_bytes=MIB,
    update_bytes=MIB,
    update_count=1 << 40,
    response_segment_count=1 << 30,
)
FAST_POLICY = acp_fast.PermissionPolicy(allowed_tool_kinds=["execute"])


@dataclass(frozen=True)
class Sizes:
    rounds: int
    updates: int  # (a)
    big_updates: int  # (b)
    permissions: int  # (c)
    cancels: int  # (g): turns cancelled per runner and round
    rss_streams: tuple[int, int]  # (f)
    close_grace: float  # (e): how long to keep looking after close() returned


FULL = Sizes(
    rounds=5,
    updates=100_000,
    big_updates=2_000,
    permissions=2_000,
    cancels=200,
    rss_streams=(GIB, 4 * GIB),
    close_grace=1.0,
)
QUICK = Sizes(
    rounds=3,
    updates=10_000,
    big_updates=200,
    permissions=200,
    cancels=30,
    rss_streams=(64 * MIB, 256 * MIB),
    close_grace=0.5,
)


@dataclass(frozen=True)
class Stream:
    """One timed prompt: seconds, updates seen, text characters seen, permissions answered."""

    seconds: float
    updates: int
    chars: int
    permissions: int


@dataclass(frozen=True)
class Closed:
    """One close: when close() returned (None: still blocked at CLOSE_CAP), and when nothing
    was left (None: something still lived when we stopped looking)."""

    returned_ms: float | None
    gone_ms: float | None
    left_alive: tuple[str, ...]


class BenchError(RuntimeError):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise BenchError(what)


# --- /proc helpers ------------------------------------------------------------------------


def proc_state(pid: int) -> str | None:
    """The process state letter (R, S, Z, ...) or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return chr(data[data.rindex(b")") + 2])


def is_gone(pid: int) -> bool:
    return proc_state(pid) in (None, "Z", "X")


def children_of(pid: int, timeout: float = 5.0) -> list[int]:
    """The children of `pid`, waiting until it has at least one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as listing:
                found = [int(word) for word in listing.read().split()]
        except FileNotFoundError:
            found = []
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.001)


def kill_leftovers(pids: dict[str, int]) -> list[str]:
    """SIGKILL what is still running of the processes this run started; their names."""
    alive = [name for name, pid in pids.items() if not is_gone(pid)]
    for name in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[name], signal.SIGKILL)
    return alive


def settle(pids: dict[str, int], started: float, returned: float, grace: float) -> Closed:
    """Poll until every pid is dead or a zombie; give up CLOSE_CAP s after the start of close()
    or `grace` s after it returned, whichever comes first. Kills whatever is left."""
    deadline = min(started + CLOSE_CAP, returned + grace)
    while True:
        alive = [name for name, pid in pids.items() if not is_gone(pid)]
        now = time.perf_counter()
        if not alive:
            gone: float | None = (now - started) * 1000
            break
        if now >= deadline:
            gone = None
            break
        time.sleep(0.0005)
    kill_leftovers(pids)
    return Closed((returned - started) * 1000, gone, tuple(alive))


# --- runner 1: acp-fast -------------------------------------------------------------------


class FastCounter:
    __slots__ = ("chars", "permissions", "updates")

    def __init__(self) -> None:
        self.updates = 0
        self.chars = 0
        self.permissions = 0

    def on_update(self, update: acp_fast.Update) -> None:
        self.updates += 1
        self.chars += len(update.text)

    def on_permission_commit(self, request: acp_fast.PermissionRequest) -> None:
        self.permissions += 1


def fast_client(
    agent_args: list[str],
    observer: object | None = None,
    limits: acp_fast.TransferLimits = FAST_LIMITS,
) -> acp_fast.Client:
    return acp_fast.Client(
        PYTHON,
        args=[AGENT, *agent_args],
        reader_limits=acp_fast.DEFAULT_READER_LIMITS,
        transfer_limits=limits,
        transport_epoch=1,
        permission_policy=FAST_POLICY,
        observer=observer,
    )


def fast_stream(agent_args: list[str]) -> Stream:
    counter = FastCounter()
    with fast_client(agent_args, counter) as client:
        client.start()
        started = time.perf_counter()
        result = client.prompt_detailed("go")
        seconds = time.perf_counter() - started
    check(result.stop_reason == "end_turn", f"acp-fast: stop reason {result.stop_reason}")
    check(result.overflow is None, "acp-fast: the reply overflowed")
    check(len(result.response) == counter.chars, "acp-fast: reply and updates differ")
    return Stream(seconds, counter.updates, counter.chars, counter.permissions)


def fast_capped_stream(agent_args: list[str]) -> Stream:
    """acp-fast keeping only 1 MiB of the reply: past it one session/cancel is sent (the flood
    agent ignores it) and every update still reaches the observer."""
    counter = FastCounter()
    with fast_client(agent_args, counter, CAPPED_LIMITS) as client:
        client.start()
        started = time.perf_counter()
        result = client.prompt_detailed("go")
        seconds = time.perf_counter() - started
    check(result.stop_reason == "end_turn", f"acp-fast: stop reason {result.stop_reason}")
    check(len(result.response.encode()) <= MIB, "acp-fast: the capped reply is too long")
    return Stream(seconds, counter.updates, counter.chars, counter.permissions)


def fast_startup() -> float:
    started = time.perf_counter()
    client = fast_client([])
    client.start()
    seconds = time.perf_counter() - started
    client.close()
    return seconds


def fast_close(agent_args: list[str], grace: float) -> Closed:
    client = fast_client(agent_args)
    client.start()
    pid = client.pid
    check(pid is not None, "acp-fast: no pid")
    assert pid is not None
    kids = children_of(pid)
    check(len(kids) == 1, f"acp-fast: expected one grandchild, found {kids}")
    started = time.perf_counter()
    client.close()
    returned = time.perf_counter()
    return settle({"agent": pid, "grandchild": kids[0]}, started, returned, grace)


def fast_cancels(turns: int) -> list[float]:
    """Seconds from `Session.cancel()` (called when the turn's first update arrives) to the
    turn's return, for `turns` turns of one client."""
    marks: list[float] = []

    class Canceller:
        session: acp_fast.Session | None = None

        def on_update(self, update: acp_fast.Update) -> None:
            assert self.session is not None
            marks.append(time.perf_counter())
            self.session.cancel()

    observer = Canceller()
    latencies = []
    with fast_client(["--wait-cancel"], observer) as client:
        client.start()
        observer.session = client.default_session
        assert observer.session is not None
        for _ in range(turns):
            result = observer.session.prompt("go")
            latencies.append(time.perf_counter() - marks[-1])
            check(result.stop_reason == "cancelled", f"acp-fast: {result.stop_reason}")
    return latencies


# --- runner 2: the official SDK -----------------------------------------------------------


class SdkCounter:
    """The SDK's `Client` side: counts updates and text, grants every permission."""

    def __init__(self) -> None:
        self.updates = 0
        self.chars = 0
        self.permissions = 0

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        self.permissions += 1
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow")
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1
        self.chars += len(update.content.text)


async def _sdk_open(
    stack: contextlib.AsyncExitStack, client: SdkCounter, agent_args: list[str]
) -> tuple[Any, Any, str]:
    import acp

    conn, process = await stack.enter_async_context(
        acp.spawn_agent_process(client, PYTHON, AGENT, *agent_args, transport_kwargs=SDK_TRANSPORT)
    )
    await conn.initialize(protocol_version=1)
    session = await conn.new_session(cwd=os.getcwd())
    return conn, process, session.session_id


async def _sdk_stream(agent_args: list[str]) -> Stream:
    import acp

    client = SdkCounter()
    async with contextlib.AsyncExitStack() as stack:
        conn, _, session_id = await _sdk_open(stack, client, agent_args)
        started = time.perf_counter()
        response = await conn.prompt(session_id=session_id, prompt=[acp.text_block("go")])
        seconds = time.perf_counter() - started
    check(response.stop_reason == "end_turn", f"SDK: stop reason {response.stop_reason}")
    return Stream(seconds, client.updates, client.chars, client.permissions)


async def _sdk_startup() -> float:
    async with contextlib.AsyncExitStack() as stack:
        started = time.perf_counter()
        await _sdk_open(stack, SdkCounter(), [])
        return time.perf_counter() - started


async def _sdk_close(agent_args: list[str], grace: float) -> Closed:
    stack = contextlib.AsyncExitStack()
    async with stack:
        _, process, _ = await _sdk_open(stack, SdkCounter(), agent_args)
        kids = children_of(process.pid)
        check(len(kids) == 1, f"SDK: expected one grandchild, found {kids}")
        pids = {"agent": process.pid, "grandchild": kids[0]}
        started = time.perf_counter()
        # Leaving spawn_agent_process: the SDK's own shutdown. Its final `process.wait()` only
        # returns once the agent's stdout pipe is closed, so a grandchild holding it blocks it.
        closing = asyncio.ensure_future(stack.aclose())
        done, _ = await asyncio.wait({closing}, timeout=CLOSE_CAP)
        if done:
            await closing
            closed = settle(pids, started, time.perf_counter(), grace)
            await asyncio.sleep(0.05)  # let the transport see the pipe close (quiet teardown)
            return closed
        blocked = Closed(None, None, tuple(kill_leftovers(pids)))
        await closing  # killing the grandchild closed the pipe: the shutdown can finish
    return blocked


class SdkCanceller(SdkCounter):
    """Cancels the turn when its first update arrives (`conn` is set once connected)."""

    def __init__(self) -> None:
        super().__init__()
        self.conn: Any = None
        self.marks: list[float] = []
        self.tasks: set[asyncio.Future[Any]] = set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.marks.append(time.perf_counter())
        task = asyncio.ensure_future(self.conn.cancel(session_id=session_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


async def _sdk_cancels(turns: int) -> list[float]:
    import acp

    latencies = []
    client = SdkCanceller()
    async with contextlib.AsyncExitStack() as stack:
        conn, _, session_id = await _sdk_open(stack, client, ["--wait-cancel"])
        client.conn = conn
        for _ in range(turns):
            response = await asyncio.wait_for(
                conn.prompt(session_id=session_id, prompt=[acp.text_block("go")]), 10
            )
            latencies.append(time.perf_counter() - client.marks[-1])
            check(response.stop_reason == "cancelled", f"SDK: {response.stop_reason}")
    return latencies


def sdk_cancels(turns: int) -> list[float]:
    return asyncio.run(_sdk_cancels(turns))


def sdk_stream(agent_args: list[str]) -> Stream:
    return asyncio.run(_sdk_stream(agent_args))


def sdk_startup() -> float:
    return asyncio.run(_sdk_startup())


def sdk_close(agent_args: list[str], grace: float) -> Closed:
    return asyncio.run(_sdk_close(agent_args, grace))


# --- runner 3: a plain orjson loop --------------------------------------------------------


def _noop(update: Any) -> None:
    pass


class LoopAgent:
    """What a careful Python programmer writes without a library."""

    def __init__(self, agent_args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, AGENT, *agent_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=LOOP_BUFSIZE,
        )
        self.next_id = 0
        self.updates = 0
        self.permissions = 0

    def request(
        self, method: str, params: dict[str, Any], on_update: Callable[[Any], None] = _noop
    ) -> Any:
        import orjson

        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        request_id = self.next_id
        self.next_id += 1
        write = proc.stdin.write
        flush = proc.stdin.flush
        readline = proc.stdout.readline
        loads = orjson.loads
        dumps = orjson.dumps
        write(
            dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + b"\n"
        )
        flush()
        updates = 0
        try:
            while True:
                line = readline()
                if not line:
                    raise BenchError(f"loop: the agent's output ended during {method}")
                message = loads(line)
                kind = message.get("method")
                if kind == "session/update":
                    updates += 1
                    on_update(message["params"]["update"])
                elif kind == "session/request_permission":
                    self.permissions += 1
                    answer = {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
                    }
                    write(dumps(answer) + b"\n")
                    flush()
                elif message.get("id") == request_id:
                    if "error" in message:
                        raise BenchError(f"loop: {method} failed: {message['error']}")
                    return message["result"]
        finally:
            self.updates += updates

    def start(self) -> str:
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session = self.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        return str(session["sessionId"])

    def close(self) -> None:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def loop_cancels(turns: int) -> list[float]:
    """The loop writes session/cancel from its update callback, then reads on to the answer."""
    import orjson

    agent = LoopAgent(["--wait-cancel"])
    latencies = []
    try:
        session_id = agent.start()
        proc = agent.proc
        assert proc.stdin is not None
        stdin = proc.stdin
        marks: list[float] = []
        cancel = orjson.dumps(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        )

        def on_update(update: Any) -> None:
            marks.append(time.perf_counter())
            stdin.write(cancel + b"\n")
            stdin.flush()

        for _ in range(turns):
            result = agent.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
                on_update,
            )
            latencies.append(time.perf_counter() - marks[-1])
            check(result["stopReason"] == "cancelled", f"loop: {result['stopReason']}")
    finally:
        agent.close()
    return latencies


def loop_stream(agent_args: list[str]) -> Stream:
    agent = LoopAgent(agent_args)
    try:
        session_id = agent.start()
        started = time.perf_counter()
        result = agent.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
        )
        seconds = time.perf_counter() - started
    finally:
        agent.close()
    check(result.get("stopReason") == "end_turn", f"loop: {result}")
    return Stream(seconds, agent.updates, -1, agent.permissions)


def loop_startup() -> float:
    started = time.perf_counter()
    agent = LoopAgent([])
    agent.start()
    seconds = time.perf_counter() - started
    agent.close()
    return seconds


def loop_close(agent_args: list[str], grace: float) -> Closed:
    agent = LoopAgent(agent_args)
    agent.start()
    pid = agent.proc.pid
    kids = children_of(pid)
    check(len(kids) == 1, f"loop: expected one grandchild, found {kids}")
    started = time.perf_counter()
    agent.close()
    returned = time.perf_counter()
    return settle({"agent": pid, "grandchild": kids[0]}, started, returned, grace)


STREAMERS: dict[str, Callable[[list[str]], Stream]] = {
    "acp-fast": fast_stream,
    "SDK": sdk_stream,
    "loop": loop_stream,
}
STARTERS: dict[str, Callable[[], float]] = {
    "acp-fast": fast_startup,
    "SDK": sdk_startup,
    "loop": loop_startup,
}
CLOSERS: dict[str, Callable[[list[str], float], Closed]] = {
    "acp-fast": fast_close,
    "SDK": sdk_close,
    "loop": loop_close,
}


# --- (f) peak RSS, in a fresh interpreter -------------------------------------------------


def vm_hwm_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def rss_child(stream_bytes: int) -> int:
    """Stream `stream_bytes` of text through one prompt; print the peak RSS as JSON."""
    counter = FastCounter()
    agent_args = ["--stream-bytes", str(stream_bytes), "--text-bytes", str(BIG_TEXT)]
    with fast_client(agent_args, counter, CAPPED_LIMITS) as client:
        client.start()
        before = vm_hwm_kib()
        started = time.perf_counter()
        result = client.prompt_detailed("go")
        seconds = time.perf_counter() - started
    report = {
        "before_kib": before,
        "vm_hwm_kib": vm_hwm_kib(),
        # Not the measure: after fork + exec Linux reports the parent's peak here when larger.
        "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "seconds": seconds,
        "updates": counter.updates,
        "chars": counter.chars,
        "kept": len(result.response),
        "overflow": None if result.overflow is None else result.overflow.kind.value,
    }
    print(json.dumps(report))
    return 0


def measure_rss(stream_bytes: int) -> dict[str, Any]:
    out = subprocess.run(
        [PYTHON, __file__, "--rss-child", str(stream_bytes)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BenchError(f"the RSS child failed: {out.stderr.strip()}")
    report: dict[str, Any] = json.loads(out.stdout)
    check(report["chars"] == stream_bytes // BIG_TEXT * BIG_TEXT, f"RSS child: {report}")
    return report


# --- the machine and the agent ------------------------------------------------------------


def machine_line() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0))
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"Machine: {cores} cores ({usable} usable), {model}, Linux {platform.release()}; "
        f"Python {platform.python_version()}; acp-fast {acp_fast.__version__} "
        f"(git {rev or '?'}); agent-client-protocol {_version('agent-client-protocol')}; "
        f"orjson {_version('orjson')}; load average at start {load}."
    )


def _version(package: str) -> str:
    """A package's version, for the header of benches that run without it (journal_bench)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _agent_speed(command: list[str] | str, shell: bool = False, runs: int = 3) -> str:
    """The flood agent's own report (`... lines/s, ... MB/s ...`), the median of `runs`."""
    reports = []
    for _ in range(runs):
        out = subprocess.run(
            command, shell=shell, capture_output=True, text=True, check=False
        ).stderr.strip()
        check(bool(out), f"the flood agent did not report its speed: {command}")
        report = out.splitlines()[-1]
        rate = float(report.split(": ", 1)[1].split(" lines/s")[0].replace(",", ""))
        reports.append((rate, report))
    reports.sort()
    return reports[len(reports) // 2][1]


def agent_speeds(sizes: Sizes) -> list[str]:
    """The flood agent alone, writing the (a) and (b) floods to /dev/null and into a pipe."""
    lines = []
    for count, text in ((sizes.updates * 10, 32), (sizes.big_updates * 5, BIG_TEXT)):
        flood = [PYTHON, AGENT, "--updates", str(count), "--text-bytes", str(text)]
        lines.append(_agent_speed([*flood, "--devnull"]))
        for pipe_size in (64 * 1024, MIB):  # 64 KiB: the SDK's and the loop's; 1 MiB: ours
            piped = " ".join(flood) + f" --raw --pipe-size {pipe_size} | cat > /dev/null"
            lines.append(_agent_speed(piped, shell=True).replace(" pipe", " pipe read by cat"))
    return lines


# --- formatting ---------------------------------------------------------------------------


def fmt_size(size: int) -> str:
    return f"{size / GIB:g} GiB" if size >= GIB else f"{size / MIB:g} MiB"


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def fmt_ratio(value: float) -> str:
    return f"{value:.0f}x" if value >= 10 else f"{value:.2f}x"


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Row:
    label: str
    cells: dict[str, str]
    ratios: tuple[str, str]


def rate_row(label: str, values: dict[str, float]) -> Row:
    fast = values["acp-fast"]
    return Row(
        label,
        {name: fmt_rate(value) for name, value in values.items()},
        (fmt_ratio(fast / values["SDK"]), fmt_ratio(fast / values["loop"])),
    )


# --- the cases ----------------------------------------------------------------------------


def run_streams(
    label: str,
    agent_args: list[str],
    rounds: int,
    expect: Callable[[str, Stream], None],
    value: Callable[[Stream], float],
    unit: str,
    streamers: dict[str, Callable[[list[str]], Stream]] = STREAMERS,
) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in streamers}
    for number in range(1, rounds + 1):
        shown = []
        for name, stream in streamers.items():
            sample = stream(agent_args)
            expect(name, sample)
            samples[name].append(value(sample))
            shown.append(f"{name} {fmt_rate(samples[name][-1])}")
        progress(f"{label} round {number}/{rounds}: " + ", ".join(shown) + f" {unit}")
    return {name: statistics.median(found) for name, found in samples.items()}


def case_updates(sizes: Sizes) -> Row:
    count = sizes.updates

    def expect(name: str, sample: Stream) -> None:
        check(sample.updates == count, f"(a) {name}: {sample.updates} of {count} updates")
        check(sample.chars in (-1, count * 32), f"(a) {name}: {sample.chars} characters")

    medians = run_streams(
        "(a)",
        ["--updates", str(count), "--text-bytes", "32"],
        sizes.rounds,
        expect,
        lambda sample: sample.updates / sample.seconds,
        "updates/s",
    )
    return rate_row(f"(a) {count:,} updates of 32 B text: updates/s", medians)


def case_big(sizes: Sizes) -> list[Row]:
    count = sizes.big_updates

    def expect(name: str, sample: Stream) -> None:
        check(sample.updates == count, f"(b) {name}: {sample.updates} of {count} updates")
        check(sample.chars in (-1, count * BIG_TEXT), f"(b) {name}: {sample.chars} characters")

    capped = "acp-fast, 1 MiB reply"
    streamers = {
        "acp-fast": fast_stream,
        capped: fast_capped_stream,
        "SDK": sdk_stream,
        "loop": loop_stream,
    }
    medians = run_streams(
        "(b)",
        ["--updates", str(count), "--text-bytes", str(BIG_TEXT)],
        sizes.rounds,
        expect,
        lambda sample: count * BIG_TEXT / sample.seconds / 1e6,
        "MB/s",
        streamers,
    )
    kept = rate_row(
        f"(b) {count:,} updates of 64 KiB text: MB/s of text (acp-fast keeps the whole "
        f"{fmt_size(count * BIG_TEXT)} reply)",
        {name: medians[name] for name in RUNNERS},
    )
    cut = rate_row(
        "(b2) the same, acp-fast with response_bytes = 1 MiB (keeps 1 MiB of the reply, "
        "still delivers every update)",
        {**{name: medians[name] for name in RUNNERS}, "acp-fast": medians[capped]},
    )
    return [kept, cut]


def case_permissions(sizes: Sizes) -> Row:
    count = sizes.permissions

    def expect(name: str, sample: Stream) -> None:
        check(sample.permissions == count, f"(c) {name}: {sample.permissions} of {count}")

    medians = run_streams(
        "(c)",
        ["--permissions", str(count)],
        sizes.rounds,
        expect,
        lambda sample: sample.permissions / sample.seconds,
        "round trips/s",
    )
    return rate_row(f"(c) {count:,} permission round trips: round trips/s", medians)


def case_cancel(sizes: Sizes) -> list[Row]:
    """(g) cancel latency: median and p99 over every turn of every round."""
    runners = {"acp-fast": fast_cancels, "SDK": sdk_cancels, "loop": loop_cancels}
    samples: dict[str, list[float]] = {name: [] for name in RUNNERS}
    for number in range(1, sizes.rounds + 1):
        for name in RUNNERS:
            progress(f"(g) round {number}/{sizes.rounds}: {name}")
            samples[name].extend(runners[name](sizes.cancels))

    def quantile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    rows = []
    for label, q in (("median", 0.5), ("p99", 0.99)):
        values = {name: quantile(samples[name], q) * 1e6 for name in RUNNERS}
        fast = values["acp-fast"]
        rows.append(
            Row(
                f"(g) session/cancel latency, {label} of {len(samples['acp-fast']):,} turns: "
                "µs from cancel() to the turn's return",
                {name: f"{value:,.0f}" for name, value in values.items()},
                (fmt_ratio(values["SDK"] / fast), fmt_ratio(values["loop"] / fast)),
            )
        )
    return rows


def case_startup(sizes: Sizes) -> Row:
    samples: dict[str, list[float]] = {name: [] for name in RUNNERS}
    for number in range(1, sizes.rounds + 1):
        for name in RUNNERS:
            samples[name].append(STARTERS[name]() * 1000)
        shown = ", ".join(f"{name} {samples[name][-1]:.1f}" for name in RUNNERS)
        progress(f"(d) round {number}/{sizes.rounds}: {shown} ms")
    medians = {name: statistics.median(found) for name, found in samples.items()}
    fast = medians["acp-fast"]
    return Row(
        "(d) start-up (spawn + initialize + session/new): ms",
        {name: f"{value:.1f}" for name, value in medians.items()},
        (fmt_ratio(medians["SDK"] / fast), fmt_ratio(medians["loop"] / fast)),
    )


def _close_cell(samples: list[Closed]) -> tuple[str, float, bool]:
    """The cell text, the median time (close's return; CLOSE_CAP when it blocked), and
    whether anything was ever left alive."""
    leaks = [sample for sample in samples if sample.gone_ms is None]
    if not leaks:
        median = statistics.median(sample.gone_ms or 0.0 for sample in samples)
        return f"{median:.1f}", median, False
    left = " and ".join(sorted({name for sample in leaks for name in sample.left_alive}))
    cap_ms = CLOSE_CAP * 1000
    blocked = sum(sample.returned_ms is None for sample in samples)
    returned = statistics.median(
        cap_ms if sample.returned_ms is None else sample.returned_ms for sample in samples
    )
    if blocked == len(samples):
        text = f"> {cap_ms:,.0f}: close still blocked, {left} alive"
    else:
        text = f"close returns in {returned:,.0f}, {left} left alive"
        if blocked:
            text += f" ({blocked}/{len(samples)} blocked > {cap_ms:,.0f})"
        elif len(leaks) < len(samples):
            text += f" ({len(leaks)}/{len(samples)} rounds)"
    return text, returned, True


def case_close(sizes: Sizes, agent_args: list[str], label: str) -> Row:
    samples: dict[str, list[Closed]] = {name: [] for name in RUNNERS}
    for number in range(1, sizes.rounds + 1):
        shown = []
        for name in RUNNERS:
            sample = CLOSERS[name](agent_args, sizes.close_grace)
            samples[name].append(sample)
            gone = (
                "left " + "+".join(sample.left_alive)
                if sample.gone_ms is None
                else (f"gone {sample.gone_ms:.1f}")
            )
            back = "blocked" if sample.returned_ms is None else f"{sample.returned_ms:.1f}"
            shown.append(f"{name} close {back} {gone}")
        progress(f"{label[:4]} round {number}/{sizes.rounds}: " + ", ".join(shown) + " ms")
    cells = {name: _close_cell(found) for name, found in samples.items()}
    _, fast_ms, fast_leak = cells["acp-fast"]
    ratios = []
    for other in ("SDK", "loop"):
        _, other_ms, other_leak = cells[other]
        ratio = fmt_ratio(other_ms / fast_ms)
        if other_leak and not fast_leak:
            ratio = "≥ " + ratio + ", leaks"
        ratios.append(ratio)
    return Row(
        label,
        {name: cell[0] for name, cell in cells.items()},
        (ratios[0], ratios[1]),
    )


def case_rss(sizes: Sizes) -> tuple[list[Row], str]:
    reports = []
    for stream in sizes.rss_streams:
        report = measure_rss(stream)
        reports.append(report)
        progress(
            f"(f) {fmt_size(stream)}: VmHWM {report['vm_hwm_kib'] / 1024:.1f} MiB "
            f"(before the prompt {report['before_kib'] / 1024:.1f} MiB), "
            f"{stream / report['seconds'] / 1e6:,.0f} MB/s"
        )
    rows = []
    peaks = [report["vm_hwm_kib"] / 1024 for report in reports]
    for stream, report, peak in zip(sizes.rss_streams, reports, peaks, strict=True):
        rows.append(
            Row(
                f"(f) peak RSS of the host, one prompt streaming {fmt_size(stream)} of text "
                "(response_bytes 1 MiB): MiB",
                {
                    "acp-fast": f"{peak:.1f} ({report['before_kib'] / 1024:.1f} before the prompt)",
                    "SDK": "—",
                    "loop": "—",
                },
                ("—", "—"),
            )
        )
    target = (acp_fast.DEFAULT_READER_LIMITS.message_bytes + MIB) / MIB + 40
    verdict = "met" if max(peaks) <= target else "NOT met"
    small, large = (fmt_size(stream) for stream in sizes.rss_streams)
    note = (
        f"Peak RSS is the host interpreter's VmHWM (a fresh interpreter per length; ru_maxrss "
        f"is not used: after fork + exec Linux reports the parent's peak there). {small}: "
        f"{peaks[0]:.1f} MiB, {large}: {peaks[1]:.1f} MiB, difference "
        f"{abs(peaks[1] - peaks[0]):.1f} MiB; target ≤ reader limit 2 MiB + response limit "
        f"1 MiB + 40 MiB = {target:.0f} MiB: {verdict}. Streamed at "
        + " and ".join(
            f"{stream / report['seconds'] / 1e6:,.0f} MB/s"
            for stream, report in zip(sizes.rss_streams, reports, strict=True)
        )
        + "."
    )
    return rows, note


def render(rows: list[Row], sdk_version: str) -> str:
    head = (
        f"| case | acp-fast | SDK {sdk_version} | orjson loop | acp-fast vs SDK "
        "| acp-fast vs loop |"
    )
    lines = [head, "|---|--:|--:|--:|--:|--:|"]
    for row in rows:
        cells = " | ".join(row.cells[name] for name in RUNNERS)
        lines.append(f"| {row.label} | {cells} | {row.ratios[0]} | {row.ratios[1]} |")
    return "\n".join(lines)


def warm_up() -> None:
    for name in RUNNERS:
        STREAMERS[name](["--updates", "1000"])
        STARTERS[name]()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="acp-fast vs the official ACP SDK vs a plain orjson loop, side by side."
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 rounds, no file")
    parser.add_argument("--rss-child", type=int, metavar="BYTES", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child is not None:
        return rss_child(args.rss_child)

    import acp  # noqa: F401 - fail early when the SDK is missing
    import orjson  # noqa: F401

    sizes = QUICK if args.quick else FULL
    command = "python benches/compare.py" + (" --quick" if args.quick else "")
    began = time.perf_counter()
    machine = machine_line()
    progress(machine)
    speeds = agent_speeds(sizes)
    for line in speeds:
        progress(line)
    warm_up()
    rows = [case_updates(sizes), *case_big(sizes), case_permissions(sizes), case_startup(sizes)]
    rows.extend(case_cancel(sizes))
    rows.append(
        case_close(
            sizes,
            ["--ignore-term", "--grandchild"],
            "(e) close() of an agent that ignores SIGTERM, with a grandchild: ms until both "
            "are gone",
        )
    )
    rows.append(
        case_close(
            sizes,
            ["--ignore-term", "--ignore-eof", "--grandchild"],
            "(e2) the same, the agent also ignoring stdin EOF (wedged): ms until both are gone",
        )
    )
    rss_rows, rss_note = case_rss(sizes)
    rows.extend(rss_rows)
    sdk_version = metadata.version("agent-client-protocol")
    table = render(rows, sdk_version)
    notes = [
        f"Medians of {sizes.rounds} interleaved rounds (acp-fast, SDK, loop, acp-fast, ...). "
        "Ratios: > 1 means acp-fast is better (rates: acp-fast / other; times: other / "
        "acp-fast).",
        "Throughput cases time one prompt, from sending it to its answer with every update "
        "delivered. acp-fast also assembles the reply (all of it, except in (b2)); the loop's "
        "callback does nothing (it does not even read the text); the SDK's and acp-fast's "
        "observers sum the text length. acp-fast asks for a 1 MiB pipe on the agent's stdout "
        "(F_SETPIPE_SZ); the SDK and the loop read the default 64 KiB pipe (the loop through "
        f"a {LOOP_BUFSIZE // 1024} KiB buffer, its best here).",
        "Close: the agent (SIGTERM ignored; in (e) it exits when stdin ends, in (e2) it does "
        "not) has started `sleep 1000`, which inherits the agent's stdout pipe and its ignored "
        "SIGTERM, as a wrapper's child does. acp-fast: `close()`; SDK: leaving "
        "`spawn_agent_process` (stdin EOF, wait 2 s, SIGTERM, wait 2 s, SIGKILL, all to the "
        "agent alone, then `process.wait()`, which in asyncio also waits for the stdout pipe "
        "to close); loop: stdin closed, `terminate()`, `wait(timeout=2)`, `kill()`, `wait()`. "
        "'close returns in N, grandchild left alive' gives the median time close took to return "
        f"and means the grandchild still ran {sizes.close_grace:g} s later; "
        f"'> {CLOSE_CAP * 1000:,.0f}: close still blocked' means close had not returned after "
        f"{CLOSE_CAP:g} s. The benchmark then killed what was left.",
        rss_note,
        "Flood agent alone (median of 3): " + "; ".join(speeds) + ".",
        machine,
    ]
    report = table + "\n\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    print(report)
    elapsed = time.perf_counter() - began
    progress(f"total time {elapsed:.0f} s")
    if args.quick:
        progress("(--quick: benches/results.md not written)")
    else:
        today = datetime.date.today().isoformat()
        # compare_v2.py's section (v1 beside v2) stays, after this report.
        kept = RESULTS.read_text().partition(V2_SECTION) if RESULTS.exists() else ("", "", "")
        tail = "\n" + kept[1] + kept[2] if kept[1] else ""
        RESULTS.write_text(
            f"# acp-fast benchmark results\n\n{today}, `{command}` ({elapsed:.0f} s):\n\n"
            + report
            + tail
        )
        progress(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The host side, measured (design/host.md; issue 10's benchmarks):

- `fs/read_text_file` round trips/s and MB/s for a 4 KiB and a 1 MiB file: the same agent
  (`benches/fs_agent.py`, each request sent after the previous answer) answered by acp-fast's
  core and by the official Python SDK's `read_text_file` handler (agent-client-protocol, which
  reads the file in Python with `open().read()`), interleaved, median of the rounds;
- a terminal printing 1 GiB through a 64 KiB limit: elapsed time, MB/s and the host's peak RSS
  (VmHWM of a fresh interpreter that runs only that);
- permission round trips decided by wave 1's `allowed_tool_kinds` vs by rules (a kind rule, a
  `str` title rule, a `re.Pattern` title rule evaluated under the GIL), interleaved.

    python benches/host_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import acp_fast

BENCHES = Path(__file__).resolve().parent
AGENT = str(BENCHES / "fs_agent.py")
MIB = 1 << 20
LIMITS = acp_fast.TransferLimits(
    request_bytes=4 * MIB,
    response_bytes=MIB,
    update_bytes=MIB,
    update_count=1 << 30,
    response_segment_count=1 << 20,
)


class Quiet:
    def on_update(self, update: Any) -> None:
        pass

    def on_permission_commit(self, request: Any) -> None:
        pass


POLICIES = {
    "wave 1 allowed_tool_kinds": acp_fast.PermissionPolicy(allowed_tool_kinds=["edit"]),
    "allow rule (kind)": acp_fast.PermissionPolicy(allow=[acp_fast.PermissionRule(kind="edit")]),
    "allow rule (str title)": acp_fast.PermissionPolicy(
        allow=[acp_fast.PermissionRule(title="write src/")]
    ),
    "allow rule (re.Pattern)": acp_fast.PermissionPolicy(
        allow=[acp_fast.PermissionRule(title=re.compile(r"^Write src/"))]
    ),
}


def permissions(policy: acp_fast.PermissionPolicy, count: int) -> float:
    client = acp_fast.Client(
        sys.executable,
        args=[AGENT],
        reader_limits=acp_fast.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=1,
        observer=Quiet(),
        permission_policy=policy,
    )
    with client:
        client.start()
        started = time.perf_counter()
        client.prompt(f"{count} permission")
        seconds = time.perf_counter() - started
    return seconds


def fast_reads(path: str, count: int) -> float:
    client = acp_fast.Client(
        sys.executable,
        args=[AGENT],
        reader_limits=acp_fast.ReaderLimits(message_bytes=4 * MIB),
        transfer_limits=LIMITS,
        transport_epoch=1,
        cwd=os.path.dirname(path),
        observer=Quiet(),
        capabilities=acp_fast.ClientCapabilityConfig(terminal=False),
    )
    with client:
        client.start()
        started = time.perf_counter()
        result = client.prompt_detailed(f"{count} {path}")
        seconds = time.perf_counter() - started
    assert result.stop_reason == "end_turn"
    return seconds


class SdkFiles:
    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        from acp.schema import ReadTextFileResponse

        with open(path, encoding="utf-8") as f:
            return ReadTextFileResponse(content=f.read())

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass


async def _sdk_reads(path: str, count: int) -> float:
    import acp
    from acp.schema import ClientCapabilities, FileSystemCapabilities

    async with contextlib.AsyncExitStack() as stack:
        conn, _ = await stack.enter_async_context(
            acp.spawn_agent_process(
                SdkFiles(), sys.executable, AGENT, transport_kwargs={"limit": 16 * MIB}
            )
        )
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True))
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        session = await conn.new_session(cwd=os.path.dirname(path))
        started = time.perf_counter()
        response = await conn.prompt(
            session_id=session.session_id, prompt=[acp.text_block(f"{count} {path}")]
        )
        seconds = time.perf_counter() - started
    assert response.stop_reason == "end_turn"
    return seconds


def sdk_reads(path: str, count: int) -> float:
    return asyncio.run(_sdk_reads(path, count))


TERMINAL_CHILD = """
import sys, time, acp_fast
sys.path.insert(0, {benches!r})
from host_bench import LIMITS, AGENT, Quiet
client = acp_fast.Client(sys.executable, args=[AGENT], reader_limits=acp_fast.DEFAULT_READER_LIMITS,
    transfer_limits=LIMITS, transport_epoch=1, observer=Quiet(),
    capabilities=acp_fast.ClientCapabilityConfig(read_text_file=False, write_text_file=False))
with client:
    client.start()
    started = time.perf_counter()
    client.prompt("1 terminal {size} {limit}")
    seconds = time.perf_counter() - started
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(seconds, hwm)
"""


def terminal_flood(size: int, limit: int) -> tuple[float, int]:
    code = TERMINAL_CHILD.format(benches=str(BENCHES), size=size, limit=limit)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for label, size, count in (("4 KiB", 4096, 2000), ("1 MiB", MIB, 200)):
            path = os.path.join(directory, f"f{size}.txt")
            with open(path, "w") as f:
                f.write(("x" * 63 + "\n") * (size // 64))
            times: dict[str, list[float]] = {"acp-fast": [], "SDK": []}
            for _ in range(args.rounds):
                times["acp-fast"].append(fast_reads(path, count))
                times["SDK"].append(sdk_reads(path, count))
            for runner, samples in times.items():
                median = statistics.median(samples)
                rows.append(
                    f"| {label} | {runner} | {count / median:,.0f} | "
                    f"{count * size / MIB / median:,.1f} |"
                )
                print(runner, label, [round(s, 3) for s in samples], file=sys.stderr)
    print("| file | host | round trips/s | MB/s |")
    print("|---|---|---:|---:|")
    print("\n".join(rows))
    count = 2000
    samples: dict[str, list[float]] = {name: [] for name in POLICIES}
    for _ in range(args.rounds):
        for name, policy in POLICIES.items():
            samples[name].append(permissions(policy, count))
    print()
    print("| permission decided by | round trips/s |")
    print("|---|---:|")
    for name, times in samples.items():
        print(f"| {name} | {count / statistics.median(times):,.0f} |")
    seconds, hwm = terminal_flood(1 << 30, 64 * 1024)
    print()
    print("| terminal output | seconds | MB/s | host peak RSS |")
    print("|---|---:|---:|---:|")
    rate = 1024 / seconds
    print(f"| 1 GiB through a 64 KiB limit | {seconds:.2f} | {rate:,.0f} | {hwm / 1024:.1f} MiB |")


if __name__ == "__main__":
    main()

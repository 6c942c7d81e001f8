"""A host for the pool's host-death test, run as ``python pool_host.py KIND``: a pool of the
demo agent with warm spares and a claimed client with an open session (KIND "sync": `Pool`;
"async": `AsyncPool`), and a second pool whose spares are still in their handshake (a fake agent
that takes 60 s to initialize). It prints one line of JSON (the agents' pids) once every agent
has started, then waits to be killed."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import acp_fast as acp

LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=1024,
    response_segment_count=1024,
)
SLOW = str(Path(__file__).with_name("slow_agent.py"))


class Quiet:
    def on_update(self, update: object) -> None:
        pass


OPTIONS = {
    "reader_limits": acp.DEFAULT_READER_LIMITS,
    "transfer_limits": LIMITS,
    "transport_epoch": 1,
    "observer": Quiet(),
}


def pids_of(pool: acp.Pool | acp.AsyncPool) -> list[int]:
    return [c.pid for c in pool._state.owned if c.pid is not None]


def report(pids: list[int]) -> None:
    print(json.dumps({"pids": pids}), flush=True)


def wait_until(predicate: object) -> None:
    while not predicate():  # type: ignore[operator]
        time.sleep(0.01)


def blocking() -> None:
    warm = acp.Pool(sys.executable, args=("-m", "acp_fast.demo_agent"), client_options=OPTIONS,
                    min_idle=3, max_idle=3)  # fmt: skip
    warm.start(wait=True)
    held = warm.claim()
    held.new_session()
    cold = acp.Pool(sys.executable, args=(SLOW, "--init-delay", "60"), client_options=OPTIONS,
                    min_idle=2, max_idle=2)  # fmt: skip
    cold.start()
    wait_until(lambda: len(pids_of(warm)) == 4 and len(pids_of(cold)) == 2)
    report(pids_of(warm) + pids_of(cold))
    time.sleep(1000)


async def asynchronous() -> None:
    warm = acp.AsyncPool(sys.executable, args=("-m", "acp_fast.demo_agent"),
                         client_options=OPTIONS, min_idle=3, max_idle=3)  # fmt: skip
    await warm.start(wait=True)
    held = await warm.claim()
    await held.new_session()
    cold = acp.AsyncPool(sys.executable, args=(SLOW, "--init-delay", "60"),
                         client_options=OPTIONS, min_idle=2, max_idle=2)  # fmt: skip
    await cold.start()
    while not (len(pids_of(warm)) == 4 and len(pids_of(cold)) == 2):
        await asyncio.sleep(0.01)
    report(pids_of(warm) + pids_of(cold))
    await asyncio.sleep(1000)


if sys.argv[1] == "sync":
    blocking()
else:
    asyncio.run(asynchronous())

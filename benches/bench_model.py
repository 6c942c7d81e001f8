"""Side by side: from a received line to a typed update, and the fold's growth.

    python benches/bench_model.py            # ~1 minute, prints a markdown report
    python benches/bench_model.py --quick    # smoke run

Per family of `session/update` lines, the runners are interleaved in every round and the table
shows the median ns per line over the rounds:

- `fast strict` / `fast lenient`: `acp_fast.model.decode_update(line, strict=...)` (msgspec
  Structs straight from the bytes; the reference walker only on failure);
- `py walker`: the alternative measured and not chosen, a plain-Python decoder generated from
  the schema (`orjson.loads` + the same field-table walker that reports errors);
- `sdk`: `orjson.loads(line)` + `acp.schema.SessionNotification.model_validate(obj["params"])`
  (agent-client-protocol 0.12.1, pydantic).

Then the fold: N chunks into one message, N distinct message ids, N `tool_call_update`s of one
call, N tool calls, for N = 10k, 100k, 1M (the ratio column is t(N) / t(N/10) / 10).
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from acp import schema as sdk
from acp_fast import model as m
from acp_fast.model import _codec

ROOT = Path(__file__).resolve().parent.parent


def line(update: dict[str, Any]) -> bytes:
    msg = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "sess-1", "update": update},
    }
    return json.dumps(msg, separators=(",", ":")).encode()


def families() -> dict[str, list[bytes]]:
    text32 = "x" * 20
    chunk = line(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text32}}
    )
    diff = line(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_1",
            "title": "Edit a.py",
            "kind": "edit",
            "status": "pending",
            "content": [
                {
                    "type": "diff",
                    "path": "/w/a.py",
                    "oldText": "a = 1\n" * 20,
                    "newText": "a = 2\n" * 20,
                }
            ],
            "locations": [{"path": "/w/a.py", "line": 1}],
            "rawInput": {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"},
        }
    )
    term = line(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": "t1"}],
        }
    )
    plan = line(
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": f"step {i}", "priority": "medium", "status": "pending"}
                for i in range(10)
            ],
        }
    )
    cmds = line(
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": f"cmd{i}", "description": f"does thing {i}", "input": {"hint": "args"}}
                for i in range(20)
            ],
        }
    )
    usage = line(
        {
            "sessionUpdate": "usage_update",
            "used": 12345,
            "size": 200000,
            "cost": {"amount": 0.42, "currency": "USD"},
        }
    )
    config = line(
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "type": "select",
                    "id": f"opt{i}",
                    "name": f"Option {i}",
                    "category": "model",
                    "currentValue": "a",
                    "options": [{"value": v, "name": v.upper()} for v in "abcd"],
                }
                for i in range(3)
            ],
        }
    )
    real = []
    for path in sorted(glob.glob(str(ROOT / "tests" / "interop" / "data" / "*.jsonl"))):
        for raw in Path(path).read_text().splitlines():
            rec = json.loads(raw)
            msg = rec.get("msg")
            if isinstance(msg, dict) and msg.get("method") == "session/update":
                b = json.dumps(msg, separators=(",", ":")).encode()
                try:  # every runner must accept the line: keep the strictly valid ones
                    m.decode_update(b, strict=True)
                except m.ProtocolDecodeError:
                    continue
                real.append(b)
    return {
        "text chunk (32 B)": [chunk],
        "tool_call with a diff": [diff],
        "tool_call_update, terminal": [term],
        "plan, 10 entries": [plan],
        "available_commands, 20": [cmds],
        "usage_update": [usage],
        "config_option_update, 3 selects": [config],
        "transcripts' updates": real,
    }


def runners() -> dict[str, Callable[[bytes], Any]]:
    walker_spec = ("c", m.SessionNotification)

    def walker(b: bytes) -> Any:
        return _codec.decode_value(walker_spec, orjson.loads(b)["params"], "$", True).update

    return {
        "fast strict": lambda b: m.decode_update(b, strict=True),
        "fast lenient": lambda b: m.decode_update(b, strict=False),
        "py walker": walker,
        "sdk": lambda b: sdk.SessionNotification.model_validate(orjson.loads(b)["params"]),
    }


def time_per_line(fn: Callable[[bytes], Any], lines: list[bytes], repeat: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(repeat):
        for b in lines:
            fn(b)
    return (time.perf_counter_ns() - t0) / (repeat * len(lines))


def decode_table(rounds: int, budget: int) -> str:
    fams, runs = families(), runners()
    out = [
        "| family | " + " | ".join(f"{r} ns" for r in runs) + " | sdk / fast strict | "
        "sdk / fast lenient |",
        "|---" * (len(runs) + 3) + "|",
    ]
    for name, lines in fams.items():
        for fn in runs.values():  # warm up, and check every runner accepts the lines
            for b in lines:
                fn(b)
        repeat = max(1, budget // len(lines))
        samples: dict[str, list[float]] = {r: [] for r in runs}
        for _ in range(rounds):
            for r, fn in runs.items():  # interleaved
                samples[r].append(time_per_line(fn, lines, repeat))
        med = {r: statistics.median(v) for r, v in samples.items()}
        cells = " | ".join(f"{med[r]:,.0f}" for r in runs)
        strict, lenient = med["sdk"] / med["fast strict"], med["sdk"] / med["fast lenient"]
        out.append(f"| {name} ({len(lines)} lines) | {cells} | {strict:.2f} | {lenient:.2f} |")
    return "\n".join(out)


def fold_case(kind: str, n: int) -> float:
    block = m.TextContent(text="abc")
    if kind == "chunks into one message":
        ups: list[Any] = [m.AgentMessageChunk(content=block, message_id="m")] * n
    elif kind == "distinct message ids":
        ups = [m.AgentMessageChunk(content=block, message_id=f"m{i}") for i in range(n)]
    elif kind == "tool_call_updates of one call":
        ups = [m.ToolCall(tool_call_id="c", title="t")]
        ups += [m.ToolCallUpdate(tool_call_id="c", status=m.ToolCallStatus.IN_PROGRESS)] * n
    else:
        ups = [m.ToolCall(tool_call_id=f"c{i}", title="t") for i in range(n)]
    state = m.session_update_fold()
    t0 = time.perf_counter()
    for u in ups:
        state = m.apply(state, u)
    return time.perf_counter() - t0


def fold_table(sizes: list[int]) -> str:
    kinds = [
        "chunks into one message",
        "distinct message ids",
        "tool_call_updates of one call",
        "tool calls",
    ]
    out = [
        "| fold of N | " + " | ".join(f"N={n:,} s" for n in sizes) + " | growth per 10x |",
        "|---" * (len(sizes) + 2) + "|",
    ]
    for k in kinds:
        ts = [min(fold_case(k, n) for _ in range(3)) for n in sizes]  # min: a busy machine
        growth = " / ".join(f"{ts[i] / ts[i - 1] / 10:.2f}" for i in range(1, len(ts)))
        out.append(f"| {k} | " + " | ".join(f"{t:.3f}" for t in ts) + f" | {growth} |")
    return "\n".join(out)


def live_lenient(n: int) -> str:
    """What ``session_state="lenient"`` adds per update of case (a): decode + apply of a 32 B
    chunk (the client's own delivery cost is not included)."""
    chunk = families()["text chunk (32 B)"][0]
    lines = [chunk] * n
    best = float("inf")
    for _ in range(3):
        state = m.session_update_fold()
        t0 = time.perf_counter()
        for b in lines:
            state = m.apply(state, m.decode_update(b, strict=False), strict=False)
        best = min(best, time.perf_counter() - t0)
    return (
        f"decode + fold of {n:,} chunk lines (lenient): {best:.3f} s, "
        f"{n / best:,.0f} updates/s, {best / n * 1e9:,.0f} ns per update"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds, budget = (3, 500) if args.quick else (9, 3000)
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000]
    import msgspec
    import pydantic

    print(
        f"msgspec {msgspec.__version__}, orjson {orjson.__version__}, "
        f"pydantic {pydantic.VERSION}; medians of {rounds} interleaved rounds\n"
    )
    print(decode_table(rounds, budget))
    print()
    print(fold_table(sizes))
    print()
    print(live_lenient(sizes[1]))


if __name__ == "__main__":
    main()

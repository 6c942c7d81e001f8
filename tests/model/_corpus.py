"""Real-agent messages of the interop transcripts, paired with the method they answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FOLDERS = [HERE.parent / "interop" / "data", HERE.parents[2] / "shared" / "interop-transcripts"]


def transcript_files() -> list[Path]:
    return sorted(p for d in FOLDERS if d.is_dir() for p in d.glob("*.jsonl"))


def messages() -> Iterator[tuple[str, int, dict[str, Any], str | None]]:
    """(file name, line number, message, request method for a response or None)."""
    for path in transcript_files():
        pending: dict[tuple[Any, str], str] = {}
        for n, line in enumerate(path.read_text().splitlines(), 1):
            rec = json.loads(line)
            msg, direction = rec.get("msg"), rec.get("dir")
            if direction not in ("->", "<-") or not isinstance(msg, dict):
                continue  # stderr lines and the recorder's own end-of-run records
            method = None
            if "method" in msg and "id" in msg:
                pending[(json.dumps(msg["id"]), direction)] = msg["method"]
            elif "method" not in msg:
                other = "->" if direction == "<-" else "<-"
                method = pending.get((json.dumps(msg.get("id")), other))
            yield f"{path.parent.name}/{path.name}", n, msg, method

"""Registries, archives and a loopback HTTP server for the registry tests."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


def env() -> dict[str, str]:
    """The environment of a CLI run: this checkout's package first, no registry default."""
    result = dict(os.environ)
    old = result.get("PYTHONPATH")
    result["PYTHONPATH"] = str(PYTHON_DIR) + (os.pathsep + old if old else "")
    result.pop("ACP_DEMO_DELAY", None)
    result.pop("ACP_FAST_REGISTRY", None)
    return result


#: A program that is the bundled demo agent, started by this interpreter.
DEMO_SCRIPT = f'#!/bin/sh\nexec {sys.executable} -m acp_fast.demo_agent "$@"\n'


def tar_gz(members: dict[str, bytes | str], *, links: dict[str, str] | None = None) -> bytes:
    """A .tar.gz of regular files (`members`, executable) and symlinks (`links`)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        for name, data in members.items():
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mode = 0o755
            tf.addfile(info, io.BytesIO(raw))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return buffer.getvalue()


def zip_bytes(members: dict[str, bytes | str], *, links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16
            zf.writestr(info, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)
    return buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(agent_id: str, distribution: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": agent_id,
        "name": extra.pop("name", agent_id.title()),
        "version": extra.pop("version", "1.0.0"),
        "description": extra.pop("description", "an agent"),
        "distribution": distribution,
        **extra,
    }


def write_registry(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"version": "1.0.0", "agents": list(entries)}))
    return path


class Server:
    """Files served on 127.0.0.1, with a count of the requests for each path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.hits: dict[str, int] = {}
        self.url = ""


@contextmanager
def serve() -> Iterator[Server]:
    server = Server()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server.hits[self.path] = server.hits.get(self.path, 0) + 1
            body = server.files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)

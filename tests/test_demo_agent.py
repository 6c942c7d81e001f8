"""The demo agent, driven directly over pipes (no acp_fast.Client involved)."""

from __future__ import annotations

import functools
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import acp_fast
import pytest

# Where the package under test lives (the source tree, or site-packages when CI tests the wheel).
PYTHON_DIR = Path(acp_fast.__file__).resolve().parents[1]
AGENT_FILE = PYTHON_DIR / "acp_fast" / "demo_agent.py"
TIMEOUT = 10.0

PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(PYTHON_DIR) + (os.pathsep + old if old else "")
    env.update(extra)
    return env


@functools.cache
def _agent_command() -> tuple[str, ...]:
    """`-m acp_fast.demo_agent` when the package imports, else the file by path."""
    probe = subprocess.run(
        [sys.executable, "-c", "import acp_fast"],
        env=_env(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    if probe.returncode == 0:
        return (sys.executable, "-m", "acp_fast.demo_agent")
    return (sys.executable, str(AGENT_FILE))


class Agent:
    """A demo agent process with deadline-bounded line reads."""

    def __init__(self, args: Sequence[str] = (), **env: str) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [*_agent_command(), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=_env(**env),
            bufsize=0,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = bytearray()
        self._eof = False

    # --- writing ---

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, request_id: Any, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    # --- reading ---

    def _diagnostics(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def read_line(self, timeout: float = TIMEOUT) -> bytes | None:
        """One line (without its newline), or None at end of output; fails after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                return line
            if self._eof:
                assert not self._buffer, f"partial line at end of output: {self._buffer!r}"
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no line from the agent in {timeout}s; stderr: {self._diagnostics()}")
            if not self._selector.select(remaining):
                continue
            try:
                chunk = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    def read(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        line = self.read_line(timeout)
        assert line is not None, f"agent output ended; stderr: {self._diagnostics()}"
        # Every line is minified JSON.
        message = json.loads(line)
        assert line.decode() == json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        assert isinstance(message, dict)
        return message

    def read_until_response(
        self, request_id: Any, timeout: float = TIMEOUT
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Messages before the response to `request_id`, and that response."""
        deadline = time.monotonic() + timeout
        before: list[dict[str, Any]] = []
        while True:
            message = self.read(max(0.01, deadline - time.monotonic()))
            if message.get("id") == request_id and "method" not in message:
                return before, message
            before.append(message)

    def wait(self, timeout: float = TIMEOUT) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=TIMEOUT)
        finally:
            self._selector.close()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            self.stderr.close()


@pytest.fixture
def spawn() -> Iterator[Any]:
    agents: list[Agent] = []

    def start(*args: str, **env: str) -> Agent:
        agent = Agent(args, **env)
        agents.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            agent.kill()


def _open_session(agent: Agent, cwd: Path) -> str:
    agent.request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    agent.read()
    agent.request(1, "session/new", {"cwd": str(cwd), "mcpServers": []})
    session_id = agent.read()["result"]["sessionId"]
    assert isinstance(session_id, str)
    return session_id


def _prompt(agent: Agent, request_id: int, session_id: str, text: str) -> None:
    agent.request(
        request_id,
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    )


def _updates(messages: list[dict[str, Any]], session_id: str) -> list[dict[str, Any]]:
    updates = []
    for message in messages:
        assert message["method"] == "session/update", message
        assert "id" not in message
        assert message["params"]["sessionId"] == session_id
        updates.append(message["params"]["update"])
    return updates


def _chunks(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]


def test_initialize_session_new_and_prompt(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    init = agent.read()
    assert init["jsonrpc"] == "2.0" and init["id"] == 0
    result = init["result"]
    version = result["agentInfo"].pop("version")
    assert isinstance(version, str) and version
    assert result == {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": False,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        },
        "authMethods": [],
        "agentInfo": {"name": "acp-fast-demo", "title": "acp-fast demo agent"},
    }

    agent.request(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
    new = agent.read()
    assert new["id"] == 1
    session_id = new["result"]["sessionId"]
    assert session_id == "demo-1"
    assert new["result"]["modes"] == {
        "currentModeId": "ask",
        "availableModes": [
            {"id": "ask", "name": "Ask", "description": "Asks before changing files"},
            {"id": "code", "name": "Code", "description": "Writes files without asking"},
        ],
    }

    agent.request(
        2,
        "session/prompt",
        {
            "sessionId": session_id,
            "prompt": [
                {"type": "text", "text": "hello  there"},
                {"type": "resource_link", "uri": "file:///x", "name": "x"},
                {"type": "text", "text": "\nworld"},
            ],
        },
    )
    before, response = agent.read_until_response(2)
    assert response["result"] == {"stopReason": "end_turn"}
    updates = _updates(before, session_id)
    assert updates[0] == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "Thinking about: hello there world"},
    }
    assert updates[1] == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the prompt", "priority": "medium", "status": "pending"},
            {"content": "Reply to the user", "priority": "medium", "status": "pending"},
        ],
    }
    assert all(u["sessionUpdate"] == "agent_message_chunk" for u in updates[2:])
    assert _chunks(updates) == ["Hello! ", "You ", "said: ", "hello ", "there ", "world."]

    # A second session gets a fresh id; a second prompt works the same way.
    agent.request(3, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert agent.read()["result"]["sessionId"] == "demo-2"
    _prompt(agent, 4, "demo-2", "hi")
    before, response = agent.read_until_response(4)
    assert response["result"] == {"stopReason": "end_turn"}
    assert "".join(_chunks(_updates(before, "demo-2"))) == "Hello! You said: hi."


def _file_turn(
    agent: Agent, tmp_path: Path, answer: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Run a `hello.txt` prompt up to the permission request, answer it, and finish."""
    session_id = _open_session(agent, tmp_path)
    _prompt(agent, 2, session_id, "please create hello.txt.")
    head: list[dict[str, Any]] = []
    while True:
        message = agent.read()
        if message.get("method") == "session/request_permission":
            permission = message
            break
        head.append(message)
    head_updates = _updates(head, session_id)
    assert [u["sessionUpdate"] for u in head_updates] == [
        "agent_thought_chunk",
        "plan",
        "tool_call",
    ]
    assert head_updates[1]["entries"] == [
        {"content": "Read the prompt", "priority": "medium", "status": "pending"},
        {"content": "Write hello.txt", "priority": "medium", "status": "pending"},
        {"content": "Reply to the user", "priority": "medium", "status": "pending"},
    ]
    assert head_updates[2] == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-1",
        "title": "Write hello.txt",
        "kind": "edit",
        "status": "pending",
        "locations": [{"path": str(tmp_path / "hello.txt")}],
    }
    assert permission == {
        "jsonrpc": "2.0",
        "id": "perm-1",
        "method": "session/request_permission",
        "params": {
            "sessionId": session_id,
            "toolCall": {
                "toolCallId": "call-1",
                "title": "Write hello.txt",
                "kind": "edit",
                "status": "pending",
            },
            "options": PERMISSION_OPTIONS,
        },
    }
    if answer is not None:
        agent.send({"jsonrpc": "2.0", "id": "perm-1", **answer})
    before, response = agent.read_until_response(2)
    return head_updates, _updates(before, session_id), response


def test_file_prompt_allowed(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    _, tail, response = _file_turn(
        agent, tmp_path, {"result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}
    )
    assert response["result"] == {"stopReason": "end_turn"}
    assert tail[0] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "completed",
    }
    assert "".join(_chunks(tail)) == (
        "Hello! You said: please create hello.txt. I wrote hello.txt."
    )
    assert _chunks(tail)[-3:] == ["I ", "wrote ", "hello.txt."]
    # It only pretends.
    assert list(tmp_path.iterdir()) == []


def test_file_prompt_rejected(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    _, tail, response = _file_turn(
        agent, tmp_path, {"result": {"outcome": {"outcome": "selected", "optionId": "reject"}}}
    )
    assert response["result"] == {"stopReason": "end_turn"}
    assert tail[0]["sessionUpdate"] == "tool_call_update"
    assert tail[0]["status"] == "failed"
    assert "".join(_chunks(tail)).endswith(" I did not write hello.txt: permission was rejected.")
    assert list(tmp_path.iterdir()) == []


def test_file_prompt_permission_cancelled_and_error(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    _, tail, _ = _file_turn(agent, tmp_path, {"result": {"outcome": {"outcome": "cancelled"}}})
    assert tail[0]["status"] == "failed"
    assert "".join(_chunks(tail)).endswith("permission was cancelled.")

    agent = spawn()
    _, tail, _ = _file_turn(agent, tmp_path, {"error": {"code": -32000, "message": "no"}})
    assert tail[0]["status"] == "failed"
    assert "".join(_chunks(tail)).endswith(": the permission request failed.")


def test_word_file_uses_default_name_and_counters_advance(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    session_id = _open_session(agent, tmp_path)
    for turn, request_id in ((1, 2), (2, 3)):
        _prompt(agent, request_id, session_id, "Make a FILE please")
        while True:
            message = agent.read()
            if message.get("method") == "session/request_permission":
                break
            update = message["params"]["update"]
            if update["sessionUpdate"] == "tool_call":
                assert update["toolCallId"] == f"call-{turn}"
                assert update["title"] == "Write notes.txt"
                assert update["locations"] == [{"path": str(tmp_path / "notes.txt")}]
        assert message["id"] == f"perm-{turn}"
        agent.send(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
            }
        )
        before, response = agent.read_until_response(request_id)
        assert response["result"] == {"stopReason": "end_turn"}
        assert "".join(_chunks(_updates(before, session_id))).endswith("I wrote notes.txt.")


def test_allow_always_and_code_mode_skip_the_question(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    session_id = _open_session(agent, tmp_path)
    _prompt(agent, 2, session_id, "edit a.py")
    while (message := agent.read()).get("method") != "session/request_permission":
        pass
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow-always"}},
        }
    )
    agent.read_until_response(2)
    _prompt(agent, 3, session_id, "edit b.py")
    before, response = agent.read_until_response(3)
    updates = _updates(before, session_id)
    assert [u["sessionUpdate"] for u in updates[:4]] == [
        "agent_thought_chunk",
        "plan",
        "tool_call",
        "tool_call_update",
    ]
    assert updates[3]["status"] == "completed"
    assert "".join(_chunks(updates)).endswith("I wrote b.py.")

    agent.request(4, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
    other = agent.read()["result"]["sessionId"]
    agent.request(5, "session/set_mode", {"sessionId": other, "modeId": "code"})
    before, response = agent.read_until_response(5)
    assert response["result"] == {}
    assert _updates(before, other) == [
        {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
    ]
    _prompt(agent, 6, other, "edit c.py")
    before, response = agent.read_until_response(6)
    assert all("method" in m and m["method"] == "session/update" for m in before)
    assert "".join(_chunks(_updates(before, other))).endswith("I wrote c.py.")


def test_cancel_mid_stream(spawn: Any, tmp_path: Path) -> None:
    agent = spawn(ACP_DEMO_DELAY="0.3")
    session_id = _open_session(agent, tmp_path)
    words = " ".join(f"w{i}" for i in range(40))
    _prompt(agent, 2, session_id, words)
    chunks = 0
    while chunks == 0:
        update = agent.read()["params"]["update"]
        chunks += update["sessionUpdate"] == "agent_message_chunk"
    started = time.monotonic()
    agent.notify("session/cancel", {"sessionId": session_id})
    before, response = agent.read_until_response(2, timeout=5)
    assert time.monotonic() - started < 2.0
    assert response["result"] == {"stopReason": "cancelled"}
    chunks += len(_chunks(_updates(before, session_id)))
    assert chunks < 10

    # The session still works afterwards, and a cancel for another session is ignored.
    agent.notify("session/cancel", {"sessionId": "nope"})
    _prompt(agent, 3, session_id, "ok")
    before, response = agent.read_until_response(3)
    assert response["result"] == {"stopReason": "end_turn"}
    assert "".join(_chunks(_updates(before, session_id))) == "Hello! You said: ok."


def test_cancel_while_waiting_for_permission(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    session_id = _open_session(agent, tmp_path)
    _prompt(agent, 2, session_id, "write x.md")
    while agent.read().get("method") != "session/request_permission":
        pass
    agent.notify("session/cancel", {"sessionId": session_id})
    before, response = agent.read_until_response(2)
    assert response["result"] == {"stopReason": "cancelled"}
    assert _updates(before, session_id) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "failed"}
    ]


def test_errors_unknown_methods_and_bad_input(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.request(7, "no/such_method", {})
    assert agent.read() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "method not found"},
    }
    agent.request("abc", "fs/read_text_file", {"path": "/x"})
    reply = agent.read()
    assert reply["id"] == "abc" and reply["error"]["code"] == -32601
    # Unknown notifications and stray responses are ignored: the next answer is for id 8.
    agent.notify("no/such_notification", {})
    agent.send({"jsonrpc": "2.0", "id": 99, "result": {}})
    agent.send_raw(b"this is not json\n")
    assert agent.read() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "parse error"},
    }
    agent.request(8, "session/prompt", {"sessionId": "demo-404", "prompt": []})
    reply = agent.read()
    assert reply["id"] == 8 and reply["error"]["code"] == -32602
    session_id = _open_session(agent, tmp_path)
    assert session_id == "demo-1"


@pytest.mark.parametrize(("count", "size"), [(1000, 100), (3, 0), (5, 300_000), (0, 10)])
def test_flood_mode(spawn: Any, tmp_path: Path, count: int, size: int) -> None:
    agent = spawn("--flood-count", str(count), "--flood-bytes", str(size))
    session_id = _open_session(agent, tmp_path)
    for request_id in (2, 3):
        _prompt(agent, request_id, session_id, "go")
        before, response = agent.read_until_response(request_id)
        assert response["result"] == {"stopReason": "end_turn"}
        chunks = _chunks(_updates(before, session_id))
        assert len(chunks) == len(before) == count
        assert all(len(chunk.encode()) == size and chunk.isascii() for chunk in chunks)


def test_eof_exits_cleanly(spawn: Any) -> None:
    agent = spawn()
    agent.close_stdin()
    assert agent.wait() == 0
    assert agent.read_line() is None


def test_eof_mid_turn_finishes_the_turn_then_exits(spawn: Any, tmp_path: Path) -> None:
    agent = spawn(ACP_DEMO_DELAY="0.01")
    session_id = _open_session(agent, tmp_path)
    _prompt(agent, 2, session_id, "one two three")
    agent.close_stdin()
    before, response = agent.read_until_response(2)
    assert response["result"] == {"stopReason": "end_turn"}
    assert "".join(_chunks(_updates(before, session_id))) == "Hello! You said: one two three."
    assert agent.read_line() is None
    assert agent.wait() == 0


def test_bad_delay_is_a_usage_error() -> None:
    proc = subprocess.run(
        [*_agent_command()],
        env=_env(ACP_DEMO_DELAY="soon"),
        input=b"",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 2
    assert b"ACP_DEMO_DELAY" in proc.stderr
    assert proc.stdout == b""


def test_reply_rule_punctuation(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    session_id = _open_session(agent, tmp_path)
    for request_id, text, reply in (
        (2, "Really?", "Hello! You said: Really?"),
        (3, "", "Hello! You said: ."),
        (4, "  a\tb  ", "Hello! You said: a b."),
    ):
        _prompt(agent, request_id, session_id, text)
        before, _ = agent.read_until_response(request_id)
        assert "".join(_chunks(_updates(before, session_id))) == reply


# --- host mode: the client serves files and terminals ----------------------------------------


def _host_client(tmp_path: Path, observer: Any, **config: Any) -> Any:
    import acp_fast as acp

    return acp.Client(
        sys.executable,
        args=["-m", "acp_fast.demo_agent"],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=acp.TransferLimits(1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20),
        transport_epoch=1,
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        permission_policy=acp.PermissionPolicy(
            allow=[acp.PermissionRule(kind="edit"), acp.PermissionRule(kind="execute")]
        ),
        observer=observer,
        capabilities=acp.ClientCapabilityConfig(**config),
    )


class _Seen:
    def __init__(self) -> None:
        self.activity: list[Any] = []
        self.updates: list[Any] = []

    def on_update(self, update: Any) -> None:
        self.updates.append(update)

    def on_permission_commit(self, request: Any) -> None:
        pass

    def on_activity(self, activity: Any) -> None:
        self.activity.append(activity)


def test_host_mode_writes_through_the_client_and_runs_a_check(tmp_path: Path) -> None:
    seen = _Seen()
    with _host_client(tmp_path, seen) as client:
        client.start()
        reply = client.prompt("please write hello.txt")
    assert (tmp_path / "hello.txt").read_text() == (
        "Hello from the acp-fast demo agent. You said: please write hello.txt\n"
    )
    assert reply == (
        "Hello! You said: please write hello.txt. I wrote hello.txt. "
        "wc -c hello.txt printed: 69 hello.txt."
    )
    assert [a.method.value for a in seen.activity] == [
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    assert seen.activity[0].error_code is not None  # a new file: the read failed, as expected
    assert all(a.allowed for a in seen.activity)
    assert seen.activity[2].command == "wc -c hello.txt"
    titles = [u.text for u in seen.updates if u.kind == "tool_call"]
    assert titles == ["Write hello.txt", "Run wc -c hello.txt"]


def test_host_mode_without_read_or_terminal_and_a_failed_write(tmp_path: Path) -> None:
    seen = _Seen()
    with _host_client(tmp_path, seen, read_text_file=False, terminal=False) as client:
        client.start()
        assert client.prompt("write a.txt") == "Hello! You said: write a.txt. I wrote a.txt."
        (tmp_path / "b.txt").mkdir()
        reply = client.prompt("write b.txt")
    assert reply.startswith("Hello! You said: write b.txt. I could not write b.txt: ")
    assert [a.method.value for a in seen.activity] == ["fs/write_text_file"] * 2
    assert (tmp_path / "a.txt").exists() and (tmp_path / "b.txt").is_dir()


def test_host_mode_shell_keyword_sends_a_shell_line(tmp_path: Path) -> None:
    seen = _Seen()
    with _host_client(tmp_path, seen) as client:
        client.start()
        reply = client.prompt("write c.txt in a shell")
    assert "I could not run wc: " in reply and "without a shell" in reply
    with _host_client(tmp_path, seen, terminal_shell="/bin/sh") as client:
        client.start()
        reply = client.prompt("write c.txt in a shell")
    assert reply.endswith("wc -c c.txt printed: 69 c.txt.")

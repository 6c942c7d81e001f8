"""Shared helpers for the acp-fast test suite.

Fake agents are small `/bin/sh` scripts in the seed's style (a `while IFS= read -r line` loop that
answers by `case` pattern and ends on stdin EOF). Tests that need to see what the client wrote log
every received line into a file (`printf '%s\\n' "$line" >> LOG`) or wrap a seed script unchanged
with `tee` (see `logged`).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import procinfo
import pytest

# Hosts started by the tests inherit the suite's signal dispositions. Under `nohup` SIGHUP is
# ignored, and a host rightly leaves an ignored SIGHUP ignored; the tests that send SIGHUP
# expect its default, so the suite restores it.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

TEST_TRANSFER_LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=1024,
    response_segment_count=1024,
)
TEST_CLIENT_INFO = acp.ClientInfo(name="acp-test", title="acp-test", version="1.0.0")

# The answers most fake agents give to `initialize` and `session/new` (the seed's).
INIT_RESULT = (
    '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},'
    '"authMethods":[]}}'
)
NEW_RESULT = '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}'


def limits(**changes: int) -> acp.TransferLimits:
    """The test transfer limits with some fields changed."""
    return dataclasses.replace(TEST_TRANSFER_LIMITS, **changes)


def update_line(update: str, session_id: str = "acp-test") -> str:
    """A `session/update` notification line carrying the given raw `update` JSON object."""
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
        + session_id
        + '","update":'
        + update
        + "}}"
    )


def chunk_line(text: str, kind: str = "agent_message_chunk") -> str:
    """A text chunk update line; `text` must already be JSON-escaped."""
    return update_line(
        '{"sessionUpdate":"' + kind + '","content":{"type":"text","text":"' + text + '"}}'
    )


def stop_line(request_id: int, stop_reason: str = "end_turn") -> str:
    return f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"stopReason":"{stop_reason}"}}}}'


def sq(text: str) -> str:
    """Quote text for /bin/sh (single quotes)."""
    return shlex.quote(text)


# The `setsid` utility (util-linux) is not on macOS: the same in Python (setsid(2), then exec).
SETSID = (
    "setsid"
    if shutil.which("setsid")
    else sq(sys.executable)
    + " -c "
    + sq("import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])")
)


def emit(*lines: str) -> str:
    """Shell commands that print each line followed by a newline."""
    return "; ".join(f"printf '%s\\n' {sq(line)}" for line in lines)


def agent(log: Path | None, prompt_action: str, *extra_cases: str) -> str:
    """A seed-style agent: answers initialize and session/new, runs `prompt_action` for each
    session/prompt, and the extra `pattern) action ;;` cases. With `log`, every received line
    is appended to that file first."""
    log_cmd = f"  printf '%s\\n' \"$line\" >> {sq(str(log))}\n" if log is not None else ""
    cases = "".join(f"    {case}\n" for case in extra_cases)
    return (
        "while IFS= read -r line; do\n"
        + log_cmd
        + '  case "$line" in\n'
        + f'    *\'"method":"initialize"\'*) {emit(INIT_RESULT)} ;;\n'
        + f'    *\'"method":"session/new"\'*) {emit(NEW_RESULT)} ;;\n'
        + f'    *\'"method":"session/prompt"\'*) {prompt_action} ;;\n'
        + cases
        + "  esac\n"
        + "done\n"
    )


# Shell code that sets $id to the JSON-RPC id of the request in $line (a number).
GET_ID = "id=${line#*'\"id\":'}; id=${id%%,*}"


def with_id(template: str) -> str:
    """Shell code printing `template` (raw JSON) with `@ID@` replaced by the shell's `$id`."""
    head, tail = template.split("@ID@")
    return f"printf '%s\\n' {sq(head)}\"$id\"{sq(tail)}"


def logged(script: str, log: Path) -> str:
    """Run `script` unchanged, with everything the client writes also appended to `log`."""
    return f"tee -a {sq(str(log))} | /bin/sh -c {sq(script)}"


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def wait_for(predicate: Callable[[], bool], timeout: float = 2.0, interval: float = 0.01) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(interval)


def wait_for_lines(
    path: Path, predicate: Callable[[list[str]], bool], timeout: float = 2.0
) -> list[str]:
    """Poll the log until `predicate(lines)` holds (or time runs out); returns the lines."""
    wait_for(lambda: predicate(read_lines(path)), timeout)
    return read_lines(path)


# The v2 (preview) answer to `initialize` of the shell agents: `session: {}`, the baseline.
V2_INIT_RESULT = (
    '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"acp-test",'
    '"version":"1.0.0"},"capabilities":{"session":{}}}}'
)


class ShWire:
    """The lines of the shell agents above in one ACP version, so one test runs in both: in
    v2 `agent` answers `initialize` with 2 and starts each prompt with the acknowledgement
    (``{"messageId":"u1"}``) and `running`; `chunk` carries the message id ``m1``; `end` is the
    `idle` update with the stop reason instead of the prompt's answer."""

    MESSAGE_ID = "m1"

    def __init__(self, protocol: str = "v1") -> None:
        self.protocol = protocol
        self.v2 = protocol == "v2"
        #: What the reply's message id counts against ``response_bytes`` (v2: once a message).
        self.id_bytes = len(self.MESSAGE_ID) if self.v2 else 0

    def chunk(self, text: str, kind: str = "agent_message_chunk") -> str:
        """A text chunk update line; `text` must already be JSON-escaped."""
        if not self.v2:
            return chunk_line(text, kind)
        return update_line(
            '{"sessionUpdate":"' + kind + '","messageId":"' + self.MESSAGE_ID + '",'
            '"content":{"type":"text","text":"' + text + '"}}'
        )

    def end(self, request_id: int, stop_reason: str = "end_turn") -> str:
        """The line that ends the turn of prompt `request_id`."""
        if not self.v2:
            return stop_line(request_id, stop_reason)
        return update_line(
            '{"sessionUpdate":"state_update","state":"idle","stopReason":"' + stop_reason + '"}'
        )

    def agent(self, log: Path | None, prompt_action: str, *extra_cases: str) -> str:
        """`agent(log, prompt_action, *extra_cases)` speaking this version."""
        if not self.v2:
            return agent(log, prompt_action, *extra_cases)
        ack = with_id('{"jsonrpc":"2.0","id":@ID@,"result":{"messageId":"u1"}}')
        running = emit(update_line('{"sessionUpdate":"state_update","state":"running"}'))
        script = agent(log, f"{GET_ID}; {ack}; {running}; {prompt_action}", *extra_cases)
        return script.replace(emit(INIT_RESULT), emit(V2_INIT_RESULT), 1)


# --- processes ---------------------------------------------------------------------------------


def process_state(pid: int) -> str | None:
    """The state letter of `pid` (as ps shows it), or None when the process is gone."""
    return procinfo.process_state(pid)


def is_dead(pid: int) -> bool:
    """Gone, or a zombie (exited, not yet reaped)."""
    state = process_state(pid)
    return state is None or state in ("Z", "X", "x")


def wait_dead(pid: int, timeout: float = 2.0) -> bool:
    return wait_for(lambda: is_dead(pid), timeout)


def child_pids(pid: int) -> list[int]:
    """Live processes whose parent is `pid`."""
    return procinfo.children(pid)


def kill_if_alive(pid: int | None) -> None:
    """Cleanup for processes a test started, in case the client under test left them."""
    if pid is None or is_dead(pid):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --- observer ----------------------------------------------------------------------------------


#: What ACP v2 adds to every turn beside the v1 updates it mirrors: its lifecycle (`running`,
#: `requires_action`, `idle`) and the echo of the user's message.
V2_LIFECYCLE = frozenset({"state_update", "user_message"})


def content_of(updates: list[Any]) -> list[Any]:
    """`updates` without v2's turn lifecycle: in both versions, the turn's content."""
    return [u for u in updates if u.session_update not in V2_LIFECYCLE]


class Journal:
    """The seed's TestJournal: records every update and every committed permission request."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permissions: list[acp.PermissionRequest] = []

    def on_update(self, update: Any) -> None:
        self.updates.append(update)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.permissions.append(request)

    @property
    def kinds(self) -> list[acp.UpdateKind]:
        return [update.kind for update in self.updates]

    @property
    def texts(self) -> list[str]:
        return [update.text for update in self.updates]

    @property
    def sequences(self) -> list[int]:
        return [update.update_sequence for update in self.updates]

    @property
    def content(self) -> list[Any]:
        """The updates but v2's lifecycle ones: the same list in v1 and v2."""
        return content_of(self.updates)


class UpdateCounter:
    """The seed's UpdateCounter: an observer with only `on_update`, counting."""

    def __init__(self) -> None:
        self.count = 0

    def on_update(self, update: Any) -> None:
        self.count += 1


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _guard_started() -> None:
    """The first agent of a process starts its guard (the process that kills every agent if
    the host dies), which keeps one pipe open for the life of the process: start it before any
    test counts descriptors."""
    acp.Client(
        "true",
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=TEST_TRANSFER_LIMITS,
        transport_epoch=1,
    ).close()


class AlarmTimeout(Exception):
    """Raised in the main thread by the per-test alarm."""


@pytest.fixture(autouse=True)
def _time_guard() -> Iterator[None]:
    """Bound every test: SIGALRM after 30 s raises in the main thread (the client checks for
    signals while it waits); a faulthandler watchdog ends the run after 90 s should a call
    never return to Python at all."""

    def on_alarm(signum: int, frame: object) -> None:
        raise AlarmTimeout("test exceeded 30 s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(30)
    faulthandler.dump_traceback_later(90, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def journal() -> Journal:
    return Journal()


PROTOCOLS = ("v1", "v2")


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    """The ACP version a test's client asks for and its scripted agent speaks: every test of
    behaviour both versions share runs once per version (issue 25)."""
    return str(request.param)


def v1_only(why: str) -> pytest.MarkDecorator:
    """Runs a test of the `protocol` fixture with v1 alone; `why` says what v2 lacks."""
    assert why
    return pytest.mark.parametrize("protocol", ["v1"])


def protocol_option(protocol: str) -> dict[str, str]:
    """The client's keyword for `protocol`: none for v1 (the default), so v1 runs exactly as
    before the option existed."""
    return {} if protocol == "v1" else {"protocol": protocol}


ClientFactory = Callable[..., Any]


@pytest.fixture
def client_driver() -> str:
    """Which client `make_client` makes: "blocking" (`Client`) here; the seed port and the
    fault suite override it with both, "async" being `AsyncClient` behind `SyncOverAsync`."""
    return "blocking"


def client_class(driver: str) -> Any:
    if driver == "async":
        from aio_sync import SyncOverAsync

        return SyncOverAsync
    return acp.Client


@pytest.fixture
def client_protocol() -> str:
    """The ACP version `make_client` asks for: v1; a test both versions share parametrizes it
    (`both_protocols`) and writes its shell agent with the `wire` fixture."""
    return "v1"


#: Runs a `make_client` test in both versions (its agent written with `wire`).
both_protocols = pytest.mark.parametrize("client_protocol", PROTOCOLS)


@pytest.fixture
def wire(client_protocol: str) -> ShWire:
    """The shell agents' lines in `make_client`'s version."""
    return ShWire(client_protocol)


@pytest.fixture
def make_client(
    journal: Journal, client_driver: str, client_protocol: str
) -> Iterator[ClientFactory]:
    """`make_client(script, **overrides)`: an `acp.Client` running `/bin/sh -c script` with the
    seed's test options (default reader limits, 1 MiB / 1024 transfer limits, epoch 1, client
    info acp-test, the `journal` fixture as observer). `command=` replaces /bin/sh; any other
    keyword replaces that constructor argument. Every client is closed at teardown."""
    clients: list[Any] = []

    def factory(script: str | None = None, *, command: str = "/bin/sh", **overrides: Any) -> Any:
        options: dict[str, Any] = {
            "args": ["-c", script] if script is not None else [],
            "reader_limits": acp.DEFAULT_READER_LIMITS,
            "transfer_limits": TEST_TRANSFER_LIMITS,
            "transport_epoch": 1,
            "client_info": TEST_CLIENT_INFO,
            "observer": journal,
            **protocol_option(client_protocol),
        }
        options.update(overrides)
        client = client_class(client_driver)(command, **options)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        pid = client.pid
        client.close()
        kill_if_alive(pid)

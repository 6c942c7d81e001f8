"""The first five minutes (first-use.md §1): a client that works with one argument, clear
errors for mistakes, and the contract gaps of issue 21 on the blocking client."""

from __future__ import annotations

import dataclasses
import json
import pydoc
import re
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import model
from conftest import (
    GET_ID,
    INIT_RESULT,
    Journal,
    agent,
    chunk_line,
    emit,
    read_lines,
    sq,
    stop_line,
    wait_dead,
    wait_for_lines,
    with_id,
)

PERMISSION_OPTIONS = (
    '[{"optionId":"yes","name":"Allow","kind":"allow_once"},'
    '{"optionId":"no","name":"Reject","kind":"reject_once"}]'
)


def permission_line(kind: str = "edit", title: str = "write notes.txt", rid: str = '"p1"') -> str:
    tool_call = f'{{"toolCallId":"tc1","title":"{title}","kind":"{kind}","status":"pending"}}'
    return (
        f'{{"jsonrpc":"2.0","id":{rid},"method":"session/request_permission","params":'
        f'{{"sessionId":"acp-test","toolCall":{tool_call},"options":{PERMISSION_OPTIONS}}}}}'
    )


def answers(log: Path, count: int = 1) -> list[Any]:
    """The outcomes the client sent for permission requests, in order (waiting up to 30 s
    for `count` of them: the agent logs an answer when it reads it)."""

    def found(lines: list[str]) -> list[Any]:
        outcomes = []
        for line in lines:
            message = json.loads(line)
            if "result" in message and "outcome" in message["result"]:
                outcomes.append(message["result"]["outcome"])
        return outcomes

    return found(wait_for_lines(log, lambda lines: len(found(lines)) >= count, timeout=30.0))


def sh_client(script: str, **options: Any) -> acp.Client:
    """A client on `/bin/sh -c script` with nothing but the defaults and `options`."""
    return acp.Client("/bin/sh", ["-c", script], **options)


@pytest.fixture
def clients() -> Any:
    made: list[acp.Client] = []
    yield made
    for client in made:
        client.close()


# --- one argument --------------------------------------------------------------------------------


def test_demo_agent_command_is_this_interpreter_running_the_demo_agent() -> None:
    assert acp.demo_agent_command() == (sys.executable, ["-m", "acp_fast.demo_agent"])


def test_a_client_works_with_one_argument_and_args_by_position() -> None:
    with acp.Client(*acp.demo_agent_command()) as client:
        client.start()
        assert client.prompt("hello") == "Hello! You said: hello."
    command, args = acp.demo_agent_command()
    with acp.Client(command, args) as client:
        client.start()
        result = client.default_session.prompt("hi")  # type: ignore[union-attr]
        assert result.stop_reason == "end_turn"
        assert result.response == "Hello! You said: hi."


def test_default_limits() -> None:
    mib = 1024 * 1024
    assert acp.DEFAULT_TRANSFER_LIMITS == acp.TransferLimits(
        request_bytes=mib,
        response_bytes=64 * mib,
        update_bytes=8 * mib,
        update_count=2**63 - 1,
        response_segment_count=1_000_000,
    )
    # Every field defaults to it, so one cap can change alone.
    assert acp.TransferLimits() == acp.DEFAULT_TRANSFER_LIMITS
    assert acp.TransferLimits(response_bytes=5).update_bytes == 8 * mib
    assert acp.ReaderLimits() == acp.DEFAULT_READER_LIMITS
    assert "DEFAULT_TRANSFER_LIMITS" in acp.__all__
    assert "demo_agent_command" in acp.__all__


def test_updates_are_stamped_with_epoch_1_by_default(clients: list[acp.Client]) -> None:
    journal = Journal()
    client = sh_client(agent(None, emit(chunk_line("a"), stop_line(2))), observer=journal)
    clients.append(client)
    client.start()
    client.prompt("x")
    assert [u.transport_epoch for u in journal.updates] == [1]


def test_a_journal_observer_gets_the_next_epoch(tmp_path: Path) -> None:
    from acp_fast import journal as journal_module

    path = tmp_path / "run.jsonl"
    script = agent(None, emit(chunk_line("a"), stop_line(2)))
    epochs = []
    for _ in range(2):  # two runs appending to one file
        with journal_module.open_journal(path, "never") as journal:
            with sh_client(script, observer=journal) as client:
                client.start()
                client.prompt("x")
            assert journal.transport_epoch == len(epochs) + 1
            epochs.append(journal.transport_epoch)
    # Two clients on one open journal: the second starts after the first one's epoch.
    with journal_module.open_journal(path, "never") as journal:
        for _ in range(2):
            with sh_client(script, observer=journal) as client:
                client.start()
                client.prompt("x")
            epochs.append(journal.transport_epoch)
    assert epochs == [1, 2, 3, 4]
    records = [r for r in journal_module.read(path) if r.kind == journal_module.RecordKind.UPDATE]
    assert [r.transport_epoch for r in records] == [1, 2, 3, 4]
    # An explicit epoch wins (and leaves the journal as the caller set it up).
    with journal_module.open_journal(path, "never") as journal:
        with sh_client(script, observer=journal, transport_epoch=40) as client:
            client.start()
            client.prompt("x")
        assert journal.transport_epoch is None
    records = [r for r in journal_module.read(path) if r.kind == journal_module.RecordKind.UPDATE]
    assert records[-1].transport_epoch == 40


# --- observers -----------------------------------------------------------------------------------


def test_no_observer_replies_and_policy_decisions_work(
    clients: list[acp.Client], tmp_path: Path
) -> None:
    log = tmp_path / "log"
    turn = emit(chunk_line("a"), permission_line(), chunk_line("b"))
    end = with_id('{"jsonrpc":"2.0","id":@ID@,"result":{"stopReason":"end_turn"}}')
    script = agent(log, f"{GET_ID}; {turn}; {end}")
    client = sh_client(
        script, permission_policy=acp.PermissionPolicy(allow=[acp.PermissionRule(kind="edit")])
    )
    clients.append(client)
    client.start()
    result = client.default_session.prompt("x")  # type: ignore[union-attr]
    assert (result.response, result.stop_reason) == ("ab", "end_turn")
    assert answers(log) == [{"outcome": "selected", "optionId": "yes"}]
    assert client.prompt("again") == "ab"  # the client is alive


def test_an_observer_may_implement_any_subset(clients: list[acp.Client], tmp_path: Path) -> None:
    log = tmp_path / "log"
    script = agent(log, emit(chunk_line("a"), permission_line(), stop_line(2)))

    class OnlyAsks:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionOutcome:
            self.asked.append(request.title)
            return acp.PermissionOutcome(acp.PermissionDecision.ALLOW)

    class OnlyCommits:
        def __init__(self) -> None:
            self.committed: list[str] = []

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            self.committed.append(request.decision)

    asks, commits = OnlyAsks(), OnlyCommits()
    for observer in (asks, commits):
        client = sh_client(script, observer=observer)
        clients.append(client)
        client.start()
        assert client.prompt("x") == "a"
    assert asks.asked == ["write notes.txt"]
    assert commits.committed == ["deny"]  # the default policy, recorded
    assert answers(log, 2) == [
        {"outcome": "selected", "optionId": "yes"},
        {"outcome": "selected", "optionId": "no"},
    ]


def test_the_preview_decodes_like_the_committed_request(
    clients: list[acp.Client], tmp_path: Path
) -> None:
    """model.md §4: `PermissionRequest.decode()` works on the preview given to
    `on_permission` (its `envelope` is "" until the decision), as on the committed record."""
    script = agent(None, emit(permission_line(title="edit a.py"), stop_line(2)))
    decoded: dict[str, Any] = {}

    class Decodes:
        def on_permission(self, request: acp.PermissionRequest) -> None:
            assert request.envelope == ""
            decoded["preview"] = request.decode()

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            decoded["committed"] = request.decode()

    client = sh_client(script, observer=Decodes())
    clients.append(client)
    client.start()
    client.prompt("x")
    preview, committed = decoded["preview"], decoded["committed"]
    assert isinstance(preview, model.RequestPermissionRequest)
    assert preview == committed
    assert preview.tool_call.title == "edit a.py"
    with pytest.raises(ValueError, match="no request line"):
        client_request_stub().decode()


def client_request_stub() -> acp.PermissionRequest:
    """A record made by hand: no line to decode."""
    return acp.PermissionRequest("s", "t", "title", "edit", "pending", "pending", "", "", (), "", 1)


@pytest.mark.parametrize("line", [chunk_line("a"), permission_line()], ids=["update", "permission"])
def test_durable_keeps_the_audit_rule(clients: list[acp.Client], line: str) -> None:
    client = sh_client(agent(None, emit(line, stop_line(2))), durable=True)
    clients.append(client)
    client.start()
    with pytest.raises(acp.MissingDurableObserver):
        client.prompt("x")


def test_the_lifetime_update_cap_says_what_to_do(clients: list[acp.Client]) -> None:
    script = agent(None, emit(chunk_line("a"), chunk_line("b"), stop_line(2)))
    client = sh_client(script, transfer_limits=acp.TransferLimits(update_count=1))
    clients.append(client)
    client.start()
    with pytest.raises(acp.UpdateCountCapacityExceeded) as caught:
        client.prompt("x")
    assert "raise transfer_limits.update_count or open a new client" in str(caught.value)


# --- wrong types and values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"transfer_limits": {"request_bytes": 1}}, r"transfer_limits must be a TransferLimits"),
        ({"reader_limits": 4096}, r"reader_limits must be a ReaderLimits"),
        ({"permission_policy": []}, r"permission_policy must be a PermissionPolicy"),
        ({"client_info": ("a", "b")}, r"client_info must be a ClientInfo"),
        ({"capabilities": {"terminal": True}}, r"capabilities must be a ClientCapabilityConfig"),
        ({"durable": "yes"}, r"durable must be a bool"),
        ({"mcp_servers": [{"name": "x"}]}, r"mcp_servers must hold"),
        ({"cancel_grace": "5"}, r"cancel_grace must be a number"),
    ],
)
def test_wrong_types_are_named_before_anything_starts(
    tmp_path: Path, options: dict[str, Any], pattern: str
) -> None:
    marker = tmp_path / "started"
    with pytest.raises(TypeError, match=pattern):
        sh_client(f": > {sq(str(marker))}", **options)
    time.sleep(0.2)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: acp.TransferLimits(1.5), r"TransferLimits.request_bytes must be an int .*float"),
        (lambda: acp.TransferLimits("1"), r"TransferLimits.request_bytes must be an int .*str"),
        (lambda: acp.TransferLimits(update_count=True), r"update_count must be an int .*bool"),
        (lambda: acp.ReaderLimits(1.0), r"ReaderLimits.message_bytes must be an int"),
        (lambda: acp.ClientInfo(name=1), r"ClientInfo.name must be a str"),
    ],
)
def test_limit_types(make: Any, pattern: str) -> None:
    with pytest.raises(TypeError, match=pattern):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: acp.TransferLimits(-1),
        lambda: acp.TransferLimits(update_count=0),
        lambda: acp.TransferLimits(response_segment_count=2**64),
        lambda: acp.ReaderLimits(0),
    ],
)
def test_limits_out_of_range_raise_at_construction(make: Any) -> None:
    with pytest.raises(acp.InvalidLimits) as caught:
        make()
    assert isinstance(caught.value, ValueError)


def test_a_dict_as_a_prompt_is_a_type_error(clients: list[acp.Client], tmp_path: Path) -> None:
    log = tmp_path / "log"
    client = sh_client(agent(log, emit(stop_line(2))))
    clients.append(client)
    client.start()
    session = client.default_session
    assert session is not None
    with pytest.raises(TypeError, match="the prompt must be a str"):
        client.prompt({"text": "hi"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the prompt must be a str or a sequence of content"):
        session.prompt({"text": "hi"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a content block"):
        session.prompt([{"text": "hi"}])
    assert not any("session/prompt" in line for line in read_lines(log))
    # str items are text blocks.
    assert session.prompt(["one", acp.Text("two")]).stop_reason == "end_turn"
    prompt = json.loads(next(x for x in read_lines(log) if "session/prompt" in x))
    assert prompt["params"]["prompt"] == [
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two"},
    ]


def test_assigning_a_wrong_policy_is_a_type_error(clients: list[acp.Client]) -> None:
    client = sh_client(agent(None, emit(stop_line(2))))
    clients.append(client)
    for wrong in (42, [acp.PermissionRule()], None):
        with pytest.raises(TypeError, match="permission_policy must be a PermissionPolicy"):
            client.permission_policy = wrong  # type: ignore[assignment]
    assert client.permission_policy == acp.PermissionPolicy()


def test_permission_rule_kinds_are_checked() -> None:
    assert acp.PermissionRule(kind="Edit").kind == "edit"
    assert acp.PermissionRule(kind="SWITCH_MODE").kind == "switch_mode"
    for wrong in ("wrte", "edits", "", "bogus"):
        with pytest.raises(ValueError, match="not an ACP tool kind") as caught:
            acp.PermissionRule(kind=wrong)
        for kind in acp.TOOL_KINDS:
            assert kind in str(caught.value)
    with pytest.raises(ValueError, match="not an ACP tool kind"):
        acp.PermissionPolicy(allowed_tool_kinds=["bogus"])
    assert acp.PermissionPolicy(allowed_tool_kinds=["Read"]).allowed_tool_kinds == ("read",)
    assert set(acp.TOOL_KINDS) == {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }


def test_a_capitalised_deny_rule_denies(clients: list[acp.Client], tmp_path: Path) -> None:
    """The finding: `PermissionRule(kind="Edit")` matched nothing, so the write went ahead."""
    log = tmp_path / "log"
    client = sh_client(
        agent(log, emit(permission_line(kind="edit"), stop_line(2))),
        permission_policy=acp.PermissionPolicy(
            deny=[acp.PermissionRule(kind="Edit")], default=acp.PermissionDecision.ALLOW
        ),
    )
    clients.append(client)
    client.start()
    client.prompt("x")
    assert answers(log) == [{"outcome": "selected", "optionId": "no"}]


def test_rules_decide_before_anyone_is_asked(clients: list[acp.Client], tmp_path: Path) -> None:
    """host.md §5: a request an allow or deny rule decides never reaches `on_permission`."""
    log = tmp_path / "log"
    lines = [
        permission_line(kind="edit", title="write a", rid='"p1"'),
        permission_line(kind="delete", title="rm b", rid='"p2"'),
        permission_line(kind="execute", title="ls", rid='"p3"'),
    ]
    asked: list[str] = []

    def on_permission(request: acp.PermissionRequest) -> acp.PermissionOutcome:
        asked.append(request.title)
        return acp.PermissionOutcome(acp.PermissionDecision.ALLOW)

    client = sh_client(
        agent(log, emit(*lines, stop_line(2))),
        observer=acp.Observer(on_permission=on_permission),
        permission_policy=acp.PermissionPolicy(
            allow=[acp.PermissionRule(kind="edit")], deny=[acp.PermissionRule(kind="delete")]
        ),
    )
    clients.append(client)
    client.start()
    client.prompt("x")
    assert asked == ["ls"]
    assert answers(log, 3) == [
        {"outcome": "selected", "optionId": "yes"},
        {"outcome": "selected", "optionId": "no"},
        {"outcome": "selected", "optionId": "yes"},
    ]


# --- usage errors --------------------------------------------------------------------------------


def test_calls_before_start_and_after_close_are_runtime_errors(tmp_path: Path) -> None:
    log = tmp_path / "log"
    client = sh_client(agent(log, emit(chunk_line("a"), stop_line(2))))
    before = [
        lambda: client.prompt("x"),
        lambda: client.new_session(),
        lambda: client.list_sessions(),
        lambda: client.load_session("s"),
        lambda: client.authenticate("m"),
    ]
    for call in before:
        with pytest.raises(RuntimeError, match=r"not started: call start\(\) first") as caught:
            call()
        assert not isinstance(caught.value, acp.AgentProtocolError)
    assert read_lines(log) == []
    client.start()
    session = client.default_session
    assert session is not None
    client.close()
    after = [
        lambda: client.prompt("x"),
        lambda: client.start(),
        lambda: client.new_session(),
        lambda: session.prompt("x"),
        lambda: session.set_mode("m"),
        lambda: client.drain(),
    ]
    for call in after:
        with pytest.raises(RuntimeError, match="the client is closed"):
            call()
    client.close()  # still idempotent
    session.cancel()  # never raises


def test_session_attributes_are_read_only(clients: list[acp.Client]) -> None:
    client = sh_client(agent(None, emit(stop_line(2))))
    clients.append(client)
    client.start()
    session = client.default_session
    assert session is not None
    for name in (
        "session_id",
        "cwd",
        "additional_directories",
        "closed",
        "modes",
        "models",
        "config_options",
        "available_commands",
        "state",
    ):
        with pytest.raises(AttributeError):
            setattr(session, name, "x")
    assert session.session_id == "acp-test"
    assert client.session("acp-test") is session


# --- start() failures ----------------------------------------------------------------------------

EXITS = "echo 'error: GEMINI_API_KEY is not set' >&2; echo 'see --help' >&2; exit 3"


@pytest.mark.parametrize("stderr", [None, "tail", "discard", "inherit"])
@pytest.mark.parametrize("when", ["before-reading", "after-reading"])
def test_an_agent_exiting_in_start_is_a_connect_error(stderr: str | None, when: str) -> None:
    script = EXITS if when == "before-reading" else f"read -r line; {EXITS}"
    options = {} if stderr is None else {"stderr": stderr}
    with sh_client(script, **options) as client:
        if when == "before-reading":
            assert wait_dead(client.pid or 0, timeout=5.0)  # initialize then hits a closed pipe
        with pytest.raises(acp.ConnectError) as caught:
            client.start()
        message = str(caught.value)
        assert "exited with status 3" in message
        if stderr in (None, "tail"):  # the default keeps the tail
            assert "GEMINI_API_KEY is not set" in message
            assert "see --help" in message
        assert caught.value.agent_id == "sh"
        with pytest.raises(acp.AgentProtocolError):
            client.new_session()  # stopped: only close() is accepted


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_missing_cwd_is_named(tmp_path: Path, kind: str) -> None:
    cwd = tmp_path / "nope"
    if kind == "file":
        cwd.write_text("")
    with pytest.raises(FileNotFoundError, match="cwd does not exist") as caught:
        acp.Client(*acp.demo_agent_command(), cwd=cwd)
    assert caught.value.filename == str(cwd)
    assert sys.executable not in str(caught.value)
    with pytest.raises(FileNotFoundError) as missing:
        acp.Client(str(tmp_path / "no-such-agent"), cwd=tmp_path)
    assert "no-such-agent" in str(missing.value)  # a missing program is still named as such


# --- clientInfo ----------------------------------------------------------------------------------


def test_client_info_names_acp_fast_and_its_version(
    clients: list[acp.Client], tmp_path: Path
) -> None:
    def initialize(**options: Any) -> Any:
        log = tmp_path / f"log{len(clients)}"
        client = sh_client(agent(log, emit(stop_line(2))), **options)
        clients.append(client)
        client.start()
        return json.loads(read_lines(log)[0])["params"]["clientInfo"]

    assert initialize() == {"name": "acp-fast", "title": "acp-fast", "version": acp.__version__}
    mine = acp.ClientInfo(name="my-ide", title="My IDE", version="2.1")
    assert initialize(client_info=mine) == {"name": "my-ide", "title": "My IDE", "version": "2.1"}


# --- typed MCP servers ---------------------------------------------------------------------------

MCP_INIT = INIT_RESULT.replace(
    '"agentCapabilities":{}', '"agentCapabilities":{"mcpCapabilities":{"http":true,"sse":true}}'
)


def test_typed_http_and_sse_mcp_servers(clients: list[acp.Client], tmp_path: Path) -> None:
    log = tmp_path / "log"
    script = (
        "while IFS= read -r line; do\n"
        f"  printf '%s\\n' \"$line\" >> {sq(str(log))}\n"
        '  case "$line" in\n'
        f'    *\'"method":"initialize"\'*) {emit(MCP_INIT)} ;;\n'
        f'    *\'"method":"session/new"\'*) {GET_ID}; '
        + 'printf \'{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s%s"}}\\n\' "$id" "$id"'
        + " ;;\n  esac\ndone\n"
    )
    client = sh_client(script, cwd=tmp_path)
    clients.append(client)
    client.start()
    header = model.McpHttpHeader(name="Authorization", value="Bearer x")
    servers = [
        model.McpServerHttp(name="h", url="http://127.0.0.1:9/mcp", headers=(header,)),
        model.McpServerSse(name="s", url="http://127.0.0.1:9/sse", headers=()),
        model.McpServerStdio(
            name="io",
            command="/bin/mcp",
            args=("-v",),
            env=(model.McpEnvVariable(name="K", value="V"),),
        ),
        acp.McpServer("plain", "/bin/true"),
    ]
    client.new_session(mcp_servers=servers)
    sent = json.loads(read_lines(log)[-1])["params"]["mcpServers"]
    assert sent == [
        {
            "type": "http",
            "name": "h",
            "url": "http://127.0.0.1:9/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer x"}],
        },
        {"type": "sse", "name": "s", "url": "http://127.0.0.1:9/sse", "headers": []},
        {"name": "io", "command": "/bin/mcp", "args": ["-v"], "env": [{"name": "K", "value": "V"}]},
        {"name": "plain", "command": "/bin/true", "args": [], "env": []},
    ]
    # The wire shape is the schema's: each decodes as the typed server it came from.
    kinds = (model.McpServerHttp, model.McpServerSse, model.McpServerStdio)
    decoded = [kind.from_json(item) for kind, item in zip(kinds, sent, strict=False)]
    assert decoded == servers[:3]
    with pytest.raises(TypeError, match="mcp_servers must hold"):
        client.new_session(mcp_servers=[42])


# --- documentation -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Client", "AsyncClient"])
def test_help_documents_every_constructor_parameter(name: str) -> None:
    import inspect

    cls = getattr(acp, name)
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    parameters = [p for p in inspect.signature(cls).parameters if p != "self"]
    assert len(parameters) >= 19
    for parameter in parameters:
        assert re.search(rf"^[\s|]+{parameter}: \S", text, re.MULTILINE), parameter


def test_every_public_name_has_a_docstring() -> None:
    import inspect

    for name in acp.__all__:
        value = getattr(acp, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            doc = inspect.getdoc(value) or ""
            # A dataclass without a docstring gets its signature as __doc__.
            assert doc and not doc.startswith(f"{name}("), name


def test_dataclass_replace_keeps_validation() -> None:
    with pytest.raises(acp.InvalidLimits):
        dataclasses.replace(acp.DEFAULT_TRANSFER_LIMITS, request_bytes=0)


# --- attacks -------------------------------------------------------------------------------------


def test_a_stderr_flood_before_exiting_stays_bounded_in_the_error() -> None:
    """10 MiB on stderr, then exit during start(): the ConnectError carries the last
    ``stderr_tail_bytes`` only."""
    script = "head -c 10485760 /dev/zero | tr '\\0' 'x' >&2; echo 'the last line' >&2; exit 7"
    with sh_client(script) as client:
        with pytest.raises(acp.ConnectError) as caught:
            client.start()
    message = str(caught.value)
    assert "the last line" in message
    assert "exited with status 7" in message
    assert len(message) < 64 * 1024 + 1024


def test_a_journal_at_the_last_epoch_is_refused_clearly(tmp_path: Path) -> None:
    from acp_fast import journal as journal_module

    with journal_module.open_journal(tmp_path / "j.jsonl", "never") as journal:
        journal.transport_epoch = 2**64 - 1
        with pytest.raises(acp.InvalidLimits, match="no later epoch exists"):
            sh_client("exit 0", observer=journal)
        # An explicit epoch is still accepted.
        sh_client("exit 0", observer=journal, transport_epoch=1).close()

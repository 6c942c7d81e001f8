"""Every line the client writes in ACP v2 is what the vendored schema/v2 says: each request's and
notification's params, and its answers to the agent's requests (through the `on_sent` tap)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest

from .conftest import FULL_CAPABILITIES, MakeClient, init_result

SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "v2" / "schema.json").read_text())
# What a client sends, by method: the schema's definitions the agent's side handles.
PARAMS = {
    value["x-method"]: name
    for name, value in SCHEMA["$defs"].items()
    if value.get("x-side") == "agent" and name.endswith(("Request", "Notification"))
}
ANSWERS = {"session/request_permission": "RequestPermissionResponse"}


class Tap:
    """Keeps every line the client writes; allows every permission."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def on_update(self, update: acp.Update) -> None:
        pass

    def on_sent(self, line: str) -> None:
        self.sent.append(json.loads(line))

    def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
        return acp.PermissionReply("selected", "yes", "allow_once")


@pytest.mark.parametrize("protocol", ["v2"])
def test_every_line_the_client_writes_is_valid_v2(make_session_client: MakeClient) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validators: dict[str, Any] = {}

    def check(value: Any, name: str) -> None:
        if name not in validators:
            root = {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{name}"}
            validators[name] = jsonschema.Draft202012Validator(root)
        validators[name].validate(value)

    tap = Tap()
    methods = [{"id": "agent-login", "name": "Login"}]
    config = {
        "initialize": init_result(FULL_CAPABILITIES, authMethods=methods),
        "known": ["old"],
        "pages": [[{"sessionId": "a", "cwd": "/w"}]],
        "replay": [],
    }
    client, _ = make_session_client(config, observer=tap)
    client.start(new_session=False)
    client.authenticate("agent-login")
    session = client.new_session(additional_directories=["/x"])
    session.prompt("stream 1")
    session.prompt("permission")
    threading.Timer(0.2, session.cancel).start()
    session.prompt("hang")
    client.list_sessions("/w")
    client.resume_session("old", replay_from="start")
    client.delete_session("old")
    session.close()
    client.logout()

    asked = {"perm-1": "session/request_permission"}
    methods_sent = []
    for message in tap.sent:
        assert message["jsonrpc"] == "2.0"
        method = message.get("method")
        if method is None:  # an answer to the agent's request
            check(message["result"], ANSWERS[asked[message["id"]]])
            continue
        methods_sent.append(method)
        check(message.get("params", {}), PARAMS[method])
    assert methods_sent == [
        "initialize",
        "auth/login",
        "session/new",
        "session/prompt",
        "session/prompt",
        "session/prompt",
        "session/cancel",
        "session/list",
        "session/resume",
        "session/delete",
        "session/close",
        "auth/logout",
    ]

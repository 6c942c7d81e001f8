"""The recorder behind `acp_fast.telemetry`, imported only when telemetry is on: what one
client records (`ClientTelemetry`), the observer wrapper and the turn's span (`TurnScope`); the
API's tracer and instruments are `_otel`'s."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import _core
from ._otel import (
    _Api,
    _bounded,
    _bounded_text,
    _capture_content,
    _json,
    _log,
    _parts,
    _safe,
    _text,
    load,
)
from ._settings import _MAX_OPEN_TOOLS, MAX_PERMISSION_EVENTS, Record

_T = TypeVar("_T")


def for_client() -> ClientTelemetry | None:
    api = load()
    return None if api is None else ClientTelemetry(api)


@dataclass(eq=False)
class _Turn:
    span: Any
    context: Any
    began: float
    #: The client's update sequence when the turn began (the core's count, read per turn).
    sequence: int = 0
    updates: int = 0
    permissions: int = 0
    first: float | None = None
    tools: dict[str, tuple[Any, float]] = field(default_factory=dict)


class ClientTelemetry:
    """What one client records. Callbacks run on the client's driving thread (or loop)."""

    def __init__(self, api: _Api) -> None:
        self._api = api
        self._turns: dict[str, _Turn] = {}
        #: Turns still waiting for their first update: while it is 0, an update that is not a
        #: tool call costs the observer one test and nothing else.
        self._awaiting_first = [0]
        self._spawned = time.perf_counter()
        self._names: tuple[str, str] | None = None
        self._attributes: dict[str, Any] = {}
        #: Whether tool calls are seen as they happen (a plain `on_update` of the caller's).
        self.live_tools = False

    # --- the observer ----------------------------------------------------------------------

    def observe(self, observer: Any) -> Any:
        """An observer that records and then calls ``observer``'s callbacks (any it lacks are
        left out, except the three this needs)."""
        return _Observed(self, observer)

    def _seen(self, update: Any) -> None:
        """An update that is a tool call's, or arrived while a turn awaits its first."""
        try:
            turn = self._turns.get(update.session_id)
            if turn is None:
                return
            if turn.first is None:
                turn.first = time.perf_counter()
                self._awaiting_first[0] -= 1
            if update.tool_call_id is not None:
                self._tool_update(turn, update)
        except Exception:  # telemetry must never stop the client
            _log.exception("acp-fast telemetry: recording an update failed")

    def _tool_update(self, turn: _Turn, update: Any) -> None:
        try:
            body = update.json()
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        call_id = update.tool_call_id
        status = body.get("status")
        opened = turn.tools.get(call_id)
        if opened is None and update.session_update == "tool_call":
            if len(turn.tools) >= _MAX_OPEN_TOOLS:
                return  # bounded: a flood of unfinished calls gets no more spans
            title = _text(body.get("title"), "")
            kind = _text(body.get("kind"), "other")
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": _bounded(title or kind),
                "gen_ai.tool.call.id": _bounded(call_id),
                # Run by the agent, not the client (the conventions' "extension").
                "gen_ai.tool.type": "extension",
                "acp.tool.kind": _bounded(kind),
                **self._attributes,
            }
            if _capture_content() and "rawInput" in body:
                attributes["gen_ai.tool.call.arguments"] = _json(body["rawInput"])
            span = self._api.tracer.start_span(
                f"execute_tool {_bounded(title or kind)}",
                context=turn.context,
                kind=self._api.trace.SpanKind.INTERNAL,
                attributes=attributes,
            )
            opened = (span, time.perf_counter())
            turn.tools[call_id] = opened
        if opened is None or status not in ("completed", "failed"):
            return
        span, began = opened
        del turn.tools[call_id]
        if _capture_content() and "rawOutput" in body:
            span.set_attribute("gen_ai.tool.call.result", _json(body["rawOutput"]))
        self._end_tool(span, began, status)

    def _end_tool(self, span: Any, began: float, status: str) -> None:
        trace = self._api.trace
        attributes = {"gen_ai.operation.name": "execute_tool", **self._attributes}
        span.set_attribute("acp.tool.status", status)
        if status == "failed":
            span.set_attribute("error.type", "tool_failed")
            span.set_status(trace.Status(trace.StatusCode.ERROR, "the tool call failed"))
            attributes["error.type"] = "tool_failed"
        span.end()
        self._api.tool_duration.record(time.perf_counter() - began, attributes)

    def _permission(self, turn: _Turn, request: Any) -> None:
        # The option id and the tool kind are the agent's strings, as long as it likes: bounded
        # as every other attribute is.
        turn.span.add_event(
            "acp.permission",
            {
                "acp.permission.tier": request.reason,
                "acp.permission.decision": request.decision,
                "acp.permission.outcome": request.outcome,
                "acp.permission.option": _bounded_text(request.option_id),
                "acp.permission.option_kind": _bounded_text(request.option_kind),
                "gen_ai.tool.call.id": _bounded(request.tool_call_id),
                "acp.tool.kind": _bounded_text(request.tool_kind),
            },
        )

    def _activity(self, activity: Any) -> None:
        """A host request the client served: a span of its own under the turn (the core reports
        it once answered, so the span marks the answer; its duration is not measured)."""
        turn = self._turns.get(activity.session_id)
        method = str(
            activity.method.value if hasattr(activity.method, "value") else activity.method
        )
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": method,
            "gen_ai.tool.type": "function",
            "acp.activity.allowed": activity.allowed,
            **self._attributes,
        }
        if activity.path is not None:
            attributes["acp.activity.path"] = _bounded(activity.path)
        if activity.terminal_id is not None:
            attributes["acp.activity.terminal_id"] = _bounded(activity.terminal_id)
        if activity.command is not None and _capture_content():
            attributes["gen_ai.tool.call.arguments"] = _bounded(activity.command)
        error = None
        if not activity.allowed:
            error = "refused"
            attributes["acp.activity.reason"] = _bounded(activity.reason or "")
        elif activity.error_code is not None:
            error = str(activity.error_code)
        trace = self._api.trace
        span = self._api.tracer.start_span(
            f"execute_tool {method}",
            context=None if turn is None else turn.context,
            kind=trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        span.end()

    # --- the client's hooks ------------------------------------------------------------------

    def started_safe(self, client: Any, error: BaseException | None = None) -> None:
        try:
            self.started(client, error)
        except Exception:
            _log.exception("acp-fast telemetry: recording a start failed")

    def started(self, client: Any, error: BaseException | None = None) -> None:
        """After ``start()``: the agent's start duration, and its names for the spans."""
        attributes: dict[str, Any] = {}
        if error is not None:
            attributes["error.type"] = type(error).__name__
        else:
            self._agent_names(client)
            attributes.update(self._attributes)
        self._api.start_duration.record(time.perf_counter() - self._spawned, attributes)

    def _agent_names(self, client: Any) -> tuple[str, str]:
        if self._names is None:
            info = client.initialize.agent_info
            name = version = ""
            if isinstance(info, dict):
                name = _text(info.get("name"), "")
                version = _text(info.get("version"), "")
            name = _bounded(name or client.agent_id)
            self._names = (name, _bounded(version))
            self._attributes = {"gen_ai.provider.name": f"acp.{name}", "gen_ai.agent.name": name}
            if version:
                self._attributes["gen_ai.agent.version"] = version
        return self._names

    def begin_turn(self, client: Any, session_id: str, content: Any) -> _Turn:
        name, _ = self._agent_names(client)
        api = self._api
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": _bounded(session_id),
            **self._attributes,
        }
        if _capture_content():
            attributes["gen_ai.input.messages"] = _json(
                [{"role": "user", "parts": _parts(content)}]
            )
        span = api.tracer.start_span(
            f"invoke_agent {name}", kind=api.trace.SpanKind.CLIENT, attributes=attributes
        )
        turn = _Turn(span, api.trace.set_span_in_context(span), time.perf_counter())
        turn.sequence = client.next_update_sequence
        self._awaiting_first[0] += 1
        self._turns[session_id] = turn
        return turn

    def meta(self, turn: _Turn) -> dict[str, str]:
        """``traceparent``/``tracestate`` of the turn's span, for ``params._meta``."""
        carrier: dict[str, str] = {}
        self._api.propagate.inject(carrier, context=turn.context)
        return carrier

    def end_turn(
        self,
        client: Any,
        session_id: str,
        turn: _Turn,
        result: Any = None,
        error: BaseException | None = None,
    ) -> None:
        if self._turns.get(session_id) is turn:
            del self._turns[session_id]
        if turn.first is None:
            self._awaiting_first[0] -= 1
        try:
            # Every update the client received during the turn (the core counts them): the
            # turn's own when its session is the only one busy.
            turn.updates = client.next_update_sequence - turn.sequence
        except Exception:
            turn.updates = 0
        try:
            self._end_turn(turn, result, error)
        except Exception:  # telemetry must never fail the call
            _log.exception("acp-fast telemetry: ending a turn's span failed")

    def _turn_tools(self, turn: _Turn, calls: Iterable[Any]) -> None:
        """The turn's tool calls as spans when they were not seen live: their final state, at
        the end of the turn (``acp.tool.timed`` False: no duration was measured)."""
        trace = self._api.trace
        for call in list(calls)[:_MAX_OPEN_TOOLS]:
            title = call.title if isinstance(call.title, str) else ""
            kind = call.kind if isinstance(getattr(call, "kind", None), str) else "other"
            status = call.status if isinstance(getattr(call, "status", None), str) else ""
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": _bounded(title or kind),
                "gen_ai.tool.call.id": _bounded(call.tool_call_id),
                "gen_ai.tool.type": "extension",
                "acp.tool.kind": _bounded(kind),
                "acp.tool.status": _bounded(status),
                "acp.tool.timed": False,
                **self._attributes,
            }
            span = self._api.tracer.start_span(
                f"execute_tool {_bounded(title or kind)}",
                context=turn.context,
                kind=trace.SpanKind.INTERNAL,
                attributes=attributes,
            )
            if status == "failed":
                span.set_attribute("error.type", "tool_failed")
                span.set_status(trace.Status(trace.StatusCode.ERROR, "the tool call failed"))
            span.end()

    def _end_turn(self, turn: _Turn, result: Any, error: BaseException | None) -> None:
        api = self._api
        span = turn.span
        now = time.perf_counter()
        metric = {"gen_ai.operation.name": "invoke_agent", **self._attributes}
        for tool, began in turn.tools.values():  # calls the agent never finished
            self._end_tool(tool, began, "unfinished")
        if error is not None:
            result = getattr(error, "result", None)  # a late TurnTimeout carries the turn
            kind = type(error).__name__
            span.set_attribute("error.type", kind)
            span.set_status(api.trace.Status(api.trace.StatusCode.ERROR, _bounded(str(error))))
            metric["error.type"] = kind
        if result is not None and not self.live_tools:
            self._turn_tools(turn, getattr(result, "tool_calls", ()))
        if result is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [_bounded(result.stop_reason)])
            usage = getattr(result, "usage", None)
            if usage is not None:
                span.set_attribute("acp.usage.used", int(usage.used))
                span.set_attribute("acp.usage.size", int(usage.size))
                cost = getattr(usage, "cost", None)
                if cost is not None and hasattr(cost, "amount"):
                    span.set_attribute("acp.usage.cost.amount", float(cost.amount))
                    span.set_attribute("acp.usage.cost.currency", _bounded(str(cost.currency)))
            reply = result.response
            if _capture_content():
                span.set_attribute(
                    "gen_ai.output.messages",
                    _json(
                        [
                            {
                                "role": "assistant",
                                "parts": [{"type": "text", "content": reply}],
                                "finish_reason": result.stop_reason,
                            }
                        ]
                    ),
                )
            # isascii() is O(1) in CPython: a large ASCII reply is not copied to be measured.
            size = len(reply) if reply.isascii() else len(reply.encode("utf-8", "surrogatepass"))
            api.turn_bytes.record(size, metric)
        span.set_attribute("acp.turn.updates", turn.updates)
        if turn.permissions:
            span.set_attribute("acp.permission.count", turn.permissions)
        span.end()
        api.invoke_duration.record(now - turn.began, metric)
        api.turn_updates.record(turn.updates, metric)
        if turn.first is not None:
            api.first_update.record(turn.first - turn.began, metric)


def _journal_hook(on_update: Any) -> bool:
    """Whether ``on_update`` is a journal writer's own ``update`` (the core records into the
    journal directly then: wrapping it would lose that path)."""
    owner = getattr(on_update, "__self__", None)
    return getattr(on_update, "__name__", "") == "update" and isinstance(
        owner, _core.JournalWriter | _core.SqliteWriter
    )


class _Observed:
    """The client's observer as the core sees it: telemetry first, then the caller's. A
    callback the caller did not give is not added (the durable-observer rule still fails a
    client without ``on_update``/``on_permission_commit``), except ``on_activity``; a journal's
    ``on_update`` is left as it is. Without a live ``on_update`` the turn's tool calls become
    spans when the turn ends, from its `TurnResult`."""

    def __init__(self, telemetry: ClientTelemetry, observer: Any) -> None:
        has = observer is not None
        for name in ("on_permission", "on_elicitation", "on_sent", "on_received"):
            value = getattr(observer, name, None) if has else None
            if value is not None:
                setattr(self, name, value)
        record_permission = telemetry._permission
        turns_get = telemetry._turns.get
        record_activity = _safe(telemetry._activity)
        user_update = getattr(observer, "on_update", None) if has else None
        user_commit = getattr(observer, "on_permission_commit", None) if has else None
        user_activity = getattr(observer, "on_activity", None) if has else None

        if user_update is not None and _journal_hook(user_update):
            self.on_update = user_update
        elif user_update is not None:
            telemetry.live_tools = True
            # The one per-update cost: a call and two tests; the rest only for tool calls and
            # a turn's first update.
            awaiting = telemetry._awaiting_first
            seen = telemetry._seen

            def on_update(update: Any) -> None:
                user_update(update)
                if awaiting[0] or update.tool_call_id is not None:
                    seen(update)

            self.on_update = on_update

        if user_commit is not None:

            def on_permission_commit(request: Any) -> None:
                turn = turns_get(request.session_id)
                if turn is not None:
                    turn.permissions += 1
                    if turn.permissions <= MAX_PERMISSION_EVENTS:
                        try:
                            record_permission(turn, request)
                        except Exception:  # telemetry must never stop the client
                            _log.exception("acp-fast telemetry: recording a permission failed")
                user_commit(request)

            self.on_permission_commit = on_permission_commit

        def on_activity(activity: Any) -> None:
            record_activity(activity)
            if user_activity is not None:
                user_activity(activity)

        self.on_activity = on_activity


# --- the client's wiring: one line each where the client calls them ----------------------------


class TurnScope:
    """``with turn(...) as record: return record(result)``: the turn's span around a prompt."""

    __slots__ = ("_client", "_content", "_record", "_result", "_session_id", "_token", "_turn")

    def __init__(self, record: ClientTelemetry, client: Any, session_id: str, content: Any):
        self._record = record
        self._client = client
        self._session_id = session_id
        self._content = content
        self._result: Any = None
        self._turn: _Turn | None = None
        self._token: Any = None

    def __enter__(self) -> Record:
        try:
            self._turn = self._record.begin_turn(self._client, self._session_id, self._content)
            # Current while the turn runs: spans the observer makes on this thread (or task)
            # nest under it.
            self._token = self._record._api.context.attach(self._turn.context)
        except Exception:
            _log.exception("acp-fast telemetry: starting a turn's span failed")
        return self._done

    def meta(self) -> list[tuple[str, str]]:
        """The turn's ``traceparent``/``tracestate`` for ``params._meta`` of its
        ``session/prompt`` (none when the turn's span could not be made)."""
        if self._turn is None:
            return []
        try:
            return [(str(key), str(value)) for key, value in self._record.meta(self._turn).items()]
        except Exception:
            _log.exception("acp-fast telemetry: injecting the trace context failed")
            return []

    def _done(self, result: _T) -> _T:
        self._result = result
        return result

    def __exit__(self, kind: Any, error: BaseException | None, trace: Any) -> None:
        if self._token is not None:
            try:
                self._record._api.context.detach(self._token)
            except Exception:
                _log.exception("acp-fast telemetry: leaving a turn's context failed")
        if self._turn is not None:
            self._record.end_turn(self._client, self._session_id, self._turn, self._result, error)

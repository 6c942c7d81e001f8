"""Per-claim observers (``claim_observers=True``): each spare is started with a `Relay` as its
observer, so that a claim can attach the task's own observer (its journal) to an agent that was
started before the task existed.

A client takes its observer's callbacks once, when it is made; the relay is that observer for
the spare's whole life and forwards to whatever is attached now. Until a claim attaches one, it
holds what the agent and client exchanged (the handshake: a few lines) and replays it into the
attached observer first, so a task's journal reads as if the agent had been started for it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import AcpError
from .._text import printable

#: What a spare may exchange before it is claimed (the handshake is a few KiB). An agent that
#: sends more while nobody has claimed it is broken or hostile: the relay raises, which stops
#: the client, and the pool evicts it as dead (nothing is dropped silently).
HELD_BYTES = 1024 * 1024
HELD_CALLS = 1024

_CALLBACKS = (
    "on_update",
    "on_permission_commit",
    "on_activity",
    "on_sent",
    "on_received",
)


class SpareOverflow(AcpError):
    """A spare's agent sent more than the relay holds before any claim: the client is
    stopped, the pool evicts it, and a claim that got it raises this."""


def _ignore(_: object) -> None:
    return None


def _size(name: str, value: object) -> int:
    if name in ("on_sent", "on_received"):
        return len(value)  # type: ignore[arg-type]
    if name == "on_update":
        return len(getattr(value, "envelope", "")) + 64
    return 256


class Relay:
    """The observer of one spare: forwards each callback to the observer attached by the
    claim, holding (bounded) what comes before it. Thread-safe: the client calls it from its
    reader thread while the claimer attaches."""

    __slots__ = (
        "_held",
        "_held_bytes",
        "_lock",
        "_on_activity",
        "_on_elicitation",
        "_on_permission",
        "_on_permission_commit",
        "_on_received",
        "_on_sent",
        "_on_update",
    )
    _on_update: Callable[[Any], None]
    _on_permission_commit: Callable[[Any], None]
    _on_activity: Callable[[Any], None]
    _on_sent: Callable[[str], None]
    _on_received: Callable[[str], None]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[tuple[str, Any]] | None = []
        self._held_bytes = 0
        self._on_permission: Callable[[Any], Any] = _ignore
        self._on_elicitation: Callable[[Any], Any] = _ignore
        self._hold_all()

    # The client's callbacks: one attribute read and one call on top of the target's.
    def on_update(self, update: Any) -> None:
        self._on_update(update)

    def on_permission(self, request: Any) -> Any:
        # Abstains (None: the permission policy answers) until something that answers is
        # attached; no session exists before a claim, so an early request is an agent's error.
        return self._on_permission(request)

    def on_permission_commit(self, request: Any) -> None:
        self._on_permission_commit(request)

    def on_activity(self, activity: Any) -> None:
        self._on_activity(activity)

    def on_sent(self, line: str) -> None:
        self._on_sent(line)

    def on_received(self, line: str) -> None:
        self._on_received(line)

    # The pool's side.
    def attach(self, target: object | None) -> None:
        """Replays what was held into `target` (None: drops it), then forwards to it."""
        with self._lock:
            held, self._held = self._held or [], None
            self._held_bytes = 0
            try:
                for name, value in held:
                    method = getattr(target, name, None)
                    if method is not None:
                        method(value)
            finally:  # forwarding even when the target raised (the claim then fails)
                for name in _CALLBACKS:
                    setattr(self, "_" + name, getattr(target, name, None) or _ignore)
                self._on_permission = getattr(target, "on_permission", None) or _ignore
                self._on_elicitation = getattr(target, "on_elicitation", None) or _ignore

    def detach(self) -> None:
        """Holds again (a reused client between two claims)."""
        with self._lock:
            self._held = []
            self._held_bytes = 0
            self._on_permission = _ignore
            self._on_elicitation = _ignore
            self._hold_all()

    def _hold_all(self) -> None:
        for name in _CALLBACKS:
            setattr(self, "_" + name, self._holder(name))

    def _holder(self, name: str) -> Callable[[Any], None]:
        def hold(value: Any) -> None:
            with self._lock:
                held = self._held
                if held is not None:
                    size = _size(name, value)
                    if len(held) >= HELD_CALLS or self._held_bytes + size > HELD_BYTES:
                        raise SpareOverflow(
                            "the agent sent more than "
                            f"{HELD_CALLS} messages or {HELD_BYTES} bytes before any task "
                            "claimed it; the pool stops it"
                        )
                    held.append((name, value))
                    self._held_bytes += size
                    return
                forward = getattr(self, "_" + name)
            forward(value)  # attached meanwhile: after the replay, so still in order

        return hold


def elicits(observer: object) -> bool:
    """Whether a client would ask `observer`'s ``on_elicitation`` (one set to None is none)."""
    return getattr(observer, "on_elicitation", None) is not None


class ElicitingRelay(Relay):
    """A relay whose client advertises elicitation (a pool made with ``elicitation=True``): the
    client reads ``on_elicitation`` once, when it is made, so only this class has one. Each
    elicitation goes to the attached observer's ``on_elicitation``; with none attached (no
    claim yet: no session exists, so the agent is wrong to ask) or none on it, it is declined."""

    __slots__ = ()

    def on_elicitation(self, request: Any) -> Any:
        return self._on_elicitation(request)


def check_target(observer: object | None, client_options: Mapping[str, Any]) -> None:
    """Refuses, before anything is claimed, an observer the spare cannot feed: a journal that
    already holds the spare's transport epoch (its records would collide on (epoch,
    sequence)), or one lacking a durable client's recording callbacks."""
    from .._options import _journal_epoch

    epoch = spare_epoch(client_options)
    next_free = _journal_epoch(observer)
    if next_free is not None and next_free > epoch:
        raise ValueError(
            f"the journal {printable(str(getattr(observer, 'path', '')))} already holds "
            f"transport epoch {next_free - 1}, and the pool's agents stamp their updates with "
            f"epoch {epoch}: attach a new journal, or give the pool "
            f"client_options={{'transport_epoch': {next_free}}} or above"
        )
    if client_options.get("durable"):
        lacking = [
            name for name in ("on_update", "on_permission_commit") if not hasattr(observer, name)
        ]
        if lacking:
            raise ValueError(
                f"the pool's clients are durable and this claim's observer has no "
                f"{' or '.join(lacking)}: attach one that records them (a journal)"
            )


def spare_epoch(client_options: Mapping[str, Any]) -> int:
    """The transport epoch every spare stamps: the pool's ``transport_epoch``, else 1 (the
    relay is not a journal, so the client does not derive one)."""
    epoch = client_options.get("transport_epoch")
    return 1 if epoch is None else int(epoch)


def attach_journal_epoch(observer: object | None, client_options: Mapping[str, Any]) -> None:
    """As a client does with its journal: the journal stamps its other records (sent lines,
    decisions) with the spare's epoch, unless the caller set one."""
    from .._options import _journal_epoch

    if _journal_epoch(observer) is not None and getattr(observer, "transport_epoch", 0) is None:
        observer.transport_epoch = spare_epoch(client_options)  # type: ignore[union-attr]

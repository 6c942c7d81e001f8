"""The exceptions of acp-fast. The Rust core raises these very classes."""

from __future__ import annotations

from typing import Any


class AcpError(Exception):
    """Base class of every error acp-fast raises on purpose."""


class InvalidLimits(AcpError, ValueError):
    """A limit or the transport epoch is zero, negative or of the wrong type."""


class CapacityOverflow(AcpError):
    """The reader's buffer (``message_bytes + 1`` bytes) could not be allocated."""


class AgentTransportFailed(AcpError):
    """The pipes to the agent could not be set up or written.

    ``exit_code`` or ``exit_signal`` is set when the agent had ended by then (the usual cause:
    it died, say for want of an API key); the message says the same, with the tail of its
    stderr when that is kept.
    """

    #: The agent's exit code, if it had exited when the error was raised.
    exit_code: int | None = None
    #: The signal that had killed the agent, if one had.
    exit_signal: int | None = None


class AgentProtocolError(AcpError):
    """The agent broke the conversation: invalid JSON, an unexpected message, an error answer,
    or the end of its output before the awaited response.

    ``code``, ``message`` and ``data`` are set when the agent answered with a JSON-RPC error.
    ``output_ended`` is true when its output ended before the awaited response (it exited, was
    killed, or closed its stdout); ``exit_code`` or ``exit_signal`` then says how it ended, when
    the agent had been reaped (the client waits 100 ms for that): both ``None`` with
    ``output_ended`` means a live agent closed its stdout, or died too slowly to tell.
    """

    #: The agent's exit code, if its output ended and it had exited.
    exit_code: int | None = None
    #: The signal that had killed the agent, if its output ended and one had.
    exit_signal: int | None = None

    def __init__(
        self,
        description: str,
        *,
        code: int | None = None,
        message: str | None = None,
        data: Any = None,
        output_ended: bool = False,
    ) -> None:
        super().__init__(description)
        self.code = code
        self.message = message
        self.data = data
        self.output_ended = output_ended


class MissingDurableObserver(AcpError):
    """An update or permission request arrived and the observer has no callback for it."""


class RequestCapacityExceeded(AcpError):
    """A message to the agent is larger than ``transfer_limits.request_bytes``; nothing was sent."""


class UpdateCapacityExceeded(AcpError):
    """An update line is larger than ``transfer_limits.update_bytes``."""


class UpdateCountCapacityExceeded(AcpError):
    """The client has delivered ``transfer_limits.update_count`` updates over its life."""


class ReaderMessageCapacityExceeded(AcpError):
    """The agent sent a line longer than ``reader_limits.message_bytes``; reading has stopped."""


class CapabilityError(AcpError):
    """A call the agent did not advertise; nothing was written.

    ``capability`` names it as the schema does (``loadSession``,
    ``sessionCapabilities.resume``, ``promptCapabilities.image``, ``session/set_mode`` …);
    ``agent_id`` is the client's ``agent_id``.
    """

    def __init__(self, message: str, *, capability: str = "", agent_id: str = "") -> None:
        super().__init__(message)
        self.capability = capability
        self.agent_id = agent_id


class ConnectError(AgentProtocolError):
    """`start()` could not connect: an error answer to ``initialize``, another protocol version,
    the agent's output ending during the handshake (``__cause__`` holds the detail), ``session/new``
    answered -32000 (authentication required), or the ``start()`` timeout. When the agent
    ended, ``output_ended``, ``exit_code`` and ``exit_signal`` are the detail's."""

    def __init__(
        self,
        description: str,
        *,
        agent_id: str = "",
        code: int | None = None,
        message: str | None = None,
        data: Any = None,
        output_ended: bool = False,
    ) -> None:
        super().__init__(
            description, code=code, message=message, data=data, output_ended=output_ended
        )
        self.agent_id = agent_id


class TurnTimeout(AcpError, TimeoutError):
    """A turn passed its ``timeout``: its ``session/cancel`` was sent. ``result`` is the turn's
    `TurnResult` when the agent answered within ``cancel_grace``, else None (the call's id is
    then abandoned and a late answer is dropped)."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        timeout: float,
        cancel_grace: float,
        result: Any = None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.timeout = timeout
        self.cancel_grace = cancel_grace
        self.result = result


__all__ = [
    "AcpError",
    "AgentProtocolError",
    "AgentTransportFailed",
    "CapabilityError",
    "CapacityOverflow",
    "ConnectError",
    "InvalidLimits",
    "MissingDurableObserver",
    "ReaderMessageCapacityExceeded",
    "RequestCapacityExceeded",
    "TurnTimeout",
    "UpdateCapacityExceeded",
    "UpdateCountCapacityExceeded",
]

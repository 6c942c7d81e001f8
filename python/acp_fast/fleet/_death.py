"""An agent that died during an attempt, told apart from one that broke the protocol while
alive: the first ends the attempt as ``AgentDied`` (which `Retry` may name, fleet.md §3), the
second keeps its own error type (retrying a misbehaving agent would only repeat it).

The client raises the same `AgentProtocolError` for "the agent's output ended" as for a line
it should not have sent, and `AgentTransportFailed` when a prompt cannot be written to it; the
exception carries no flag for either (the core's ``output_ended`` stays in Rust). What tells
them apart here:

- what the core wrote: an output that ended (its description's fixed opening) or pipes that
  failed, and the agent's exit status, which the core adds once it has reaped the agent;
- failing that (the core waits 100 ms for the status), the agent's process itself, watched for
  ``GRACE`` seconds: gone or a zombie is a death; still running is a live agent that closed
  its stdout, a protocol violation.

Only the first line of the message is read: the core writes it; the agent's stderr tail,
which the agent could fill with anything, comes after it."""

from __future__ import annotations

import asyncio
import os
import time

from .._errors import AgentProtocolError, AgentTransportFailed, ConnectError

#: The ``error_type`` of an attempt whose agent died.
AGENT_DIED = "AgentDied"

#: How long an agent whose output ended is watched for its process to end (seconds).
GRACE = 1.0

#: The opening of the core's description when the agent's output ended before an answer.
_OUTPUT_ENDED = "the agent's output ended"

#: What the core adds once it has the agent's exit status (acp-client's ``why_ended``).
_EXIT_NOTES = (
    "; the agent exited with status ",
    "; the agent was killed by signal ",
    "; the agent ended (",
)


class AgentDied(Exception):
    """The agent's process ended (it exited, or was killed) while the attempt ran. The
    message is the client's error's text, exit status and stderr tail included."""


async def agent_died(error: BaseException, pid: int | None) -> bool:
    """Whether `error`, raised by a prompt of the agent whose process id is `pid`, means that
    the agent died (rather than that it broke the protocol while alive)."""
    if isinstance(error, ConnectError):
        return False  # the handshake failed: its own type, which Retry names as such
    head = str(error).split("\n", 1)[0]
    if isinstance(error, AgentProtocolError):
        if error.code is not None or not head.startswith(_OUTPUT_ENDED):
            return False  # an error answer, or a line it should not have sent: it is alive
    elif not isinstance(error, AgentTransportFailed):
        return False
    if any(note in head for note in _EXIT_NOTES):
        return True
    return await _ends_within(pid, GRACE)


async def _ends_within(pid: int | None, grace: float) -> bool:
    if pid is None:
        return False
    deadline = time.monotonic() + grace
    while True:
        if _ended(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)


def _ended(pid: int) -> bool:
    """The agent's process has ended: gone (the core reaped it) or a zombie. The pid is the
    host's own child's, still unreaped or reaped within the last second: not reused yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            line = stat.read()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): a zombie then counts as running
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    # "pid (comm) S ...": comm may hold anything, the state follows its last ')'.
    return line[line.rfind(b")") + 2 : line.rfind(b")") + 3] in (b"Z", b"X")

"""An agent that died during an attempt, told apart from one that broke the protocol while
alive: the first ends the attempt as ``AgentDied`` (which `Retry` may name, fleet.md §3), the
second keeps its own error type (retrying a misbehaving agent would only repeat it).

The client raises the same `AgentProtocolError` for "the agent's output ended" as for a line
it should not have sent (its ``output_ended`` tells them apart), and `AgentTransportFailed`
when a prompt cannot be written to it. What makes either a death:

- the agent's exit status, which the client gives (``exit_code`` or ``exit_signal``) once it
  has reaped the agent;
- failing that (the client waits 100 ms for the status), the agent's process itself, watched
  for ``GRACE`` seconds: gone or a zombie is a death; still running is a live agent that
  closed its stdout, a protocol violation.

Nothing of the error's text is read: its stderr tail is the agent's to fill with anything."""

from __future__ import annotations

import asyncio
import os
import time

from .._errors import AgentProtocolError, AgentTransportFailed, ConnectError

#: The ``error_type`` of an attempt whose agent died.
AGENT_DIED = "AgentDied"

#: How long an agent whose output ended is watched for its process to end (seconds).
GRACE = 1.0


class AgentDied(Exception):
    """The agent's process ended (it exited, or was killed) while the attempt ran. The
    message is the client's error's text, exit status and stderr tail included."""


async def agent_died(error: BaseException, pid: int | None) -> bool:
    """Whether `error`, raised by a prompt of the agent whose process id is `pid`, means that
    the agent died (rather than that it broke the protocol while alive)."""
    if isinstance(error, ConnectError):
        return False  # the handshake failed: its own type, which Retry names as such
    if isinstance(error, AgentProtocolError):
        if error.code is not None or not error.output_ended:
            return False  # an error answer, or a line it should not have sent: it is alive
    elif not isinstance(error, AgentTransportFailed):
        return False
    if error.exit_code is not None or error.exit_signal is not None:
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

"""The library names the CLI uses that another branch adds (first-use.md §1), with stand-ins
while they are missing. Once `acp_fast.DEFAULT_TRANSFER_LIMITS` and
`acp_fast.demo_agent_command` exist everywhere, this module can go: use those directly."""

from __future__ import annotations

import sys

import acp_fast

_MIB = 1024 * 1024


def transfer_limits() -> acp_fast.TransferLimits:
    """`acp_fast.DEFAULT_TRANSFER_LIMITS`, else the same values (first-use.md §1)."""
    found = getattr(acp_fast, "DEFAULT_TRANSFER_LIMITS", None)
    if isinstance(found, acp_fast.TransferLimits):
        return found
    return acp_fast.TransferLimits(
        request_bytes=_MIB,
        response_bytes=64 * _MIB,
        update_bytes=8 * _MIB,
        update_count=2**63 - 1,
        response_segment_count=1_000_000,
    )


def demo_agent_command() -> list[str]:
    """`acp_fast.demo_agent_command()` as one list, else the bundled demo agent run by this
    interpreter."""
    found = getattr(acp_fast, "demo_agent_command", None)
    if callable(found):
        command, args = found()
        return [command, *args]
    return [sys.executable, "-m", "acp_fast.demo_agent"]

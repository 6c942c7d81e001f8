"""Shared by the pool tests: the agents and the client options every pool gets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import acp_fast as acp
from conftest import TEST_TRANSFER_LIMITS, Journal

SLOW_AGENT = str(Path(__file__).with_name("slow_agent.py"))
DEMO = ("-m", "acp_fast.demo_agent")


def options(**more: Any) -> dict[str, Any]:
    return {
        "reader_limits": acp.DEFAULT_READER_LIMITS,
        "transfer_limits": TEST_TRANSFER_LIMITS,
        "transport_epoch": 1,
        "observer": Journal(),
        **more,
    }


def demo_pool(**settings: Any) -> acp.Pool:
    return acp.Pool(sys.executable, args=DEMO, client_options=options(), **settings)


def slow_args(*flags: str) -> tuple[str, ...]:
    return (SLOW_AGENT, *flags)

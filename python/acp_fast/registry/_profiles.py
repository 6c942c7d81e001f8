"""Agent profiles: the data (``profiles.json``) that makes each known agent ask the host.

Current agents start in modes where they decide permission requests themselves
(claude-agent-acp's ``auto``, codex-acp's "Auto review"); a host that wants to decide must
start them another way. What that way is differs per agent and per release, so it is kept as
data keyed by the official registry ids, not as code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class AgentProfile:
    """How to make one agent send its permission requests to the host.

    Attributes:
        id: The registry id it is for.
        env: Variables set for the agent.
        ask_mode: The session mode a client started from the spec switches each new session to
            (when the agent offers it), or None.
        ask_modes: Modes in which the agent sends its requests to the host.
        autonomous_modes: Modes in which the agent decides (some) requests by itself.
        note: What the profile works around, for people.
    """

    id: str
    env: Mapping[str, str] = field(default_factory=dict)
    ask_mode: str | None = None
    ask_modes: frozenset[str] = frozenset()
    autonomous_modes: frozenset[str] = frozenset()
    note: str = ""

    def asks_in(self, mode: str | None) -> bool | None:
        """True when `mode` sends requests to the host, False when the agent decides by
        itself in it, None when the profile does not know the mode."""
        if mode is None:
            return None
        if mode in self.ask_modes:
            return True
        if mode in self.autonomous_modes:
            return False
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType does not pickle (specs travel to fleet hosts).
        return (
            AgentProfile,
            (
                self.id,
                dict(self.env),
                self.ask_mode,
                self.ask_modes,
                self.autonomous_modes,
                self.note,
            ),
        )


def _build(agent_id: str, raw: dict[str, Any]) -> AgentProfile:
    return AgentProfile(
        id=agent_id,
        env=MappingProxyType(dict(raw.get("env", {}))),
        ask_mode=raw.get("ask_mode"),
        ask_modes=frozenset(raw.get("ask_modes", ())),
        autonomous_modes=frozenset(raw.get("autonomous_modes", ())),
        note=raw.get("note", ""),
    )


@cache
def profiles() -> Mapping[str, AgentProfile]:
    """Every known profile, by registry id."""
    text = resources.files(__package__).joinpath("profiles.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    return MappingProxyType(
        {k: _build(k, v) for k, v in raw.items() if not k.startswith("_") and isinstance(v, dict)}
    )


def profile_for(agent_id: str) -> AgentProfile | None:
    """The profile of the agent with registry id `agent_id`, or None when there is none."""
    return profiles().get(agent_id)

"""`AgentSpec`: how to start one agent, as a value that can be sent to another process.

A minimal form for `acp_fast.fleet` (the host actors start agents from it on other machines):
the command, its arguments and environment, and the other `Client`/`AsyncClient` options.
Building specs from the agent registry (``AgentSpec.from_registry``) and named profiles come
later, with the registry's issue."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import _spawn_args

#: Options a spec must not carry in ``client_options``: they are the spec's own fields, or
#: per-session (cwd, observer: the fleet sets them for every task).
_RESERVED = frozenset({"command", "args", "env", "cwd", "observer"})


@dataclass(frozen=True)
class AgentSpec:
    """How to start an agent: ``AgentSpec("claude-agent-acp", args=(), env={...})``.

    Args:
        command: The agent's program (looked up on ``PATH`` where it is started).
        args: Its arguments (a sequence of strings, not one string).
        env: Its whole environment, or None for the starting process's.
        client_options: Any other `AsyncClient` option (limits, capabilities, policy...),
            except ``cwd`` and ``observer``, which the user of the spec sets per session.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    client_options: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        command: str | os.PathLike[str],
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        # Checked (and converted) as the client does, so a bad spec fails where it is written,
        # not on a remote host.
        spawn = _spawn_args.convert(command, args, env, None)
        if not spawn.command:
            raise ValueError("command must not be empty")
        options = dict(client_options or {})
        reserved = sorted(_RESERVED & set(options))
        if reserved:
            raise ValueError(
                f"client_options must not set {', '.join(reserved)}: "
                "command, args and env are the spec's own fields; cwd and observer are per session"
            )
        object.__setattr__(self, "command", spawn.command)
        object.__setattr__(self, "args", tuple(spawn.args))
        object.__setattr__(self, "env", None if spawn.env is None else dict(spawn.env))
        object.__setattr__(self, "client_options", MappingProxyType(options))

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType does not pickle: send plain dicts (the fleet ships specs to hosts).
        env = None if self.env is None else dict(self.env)
        return (AgentSpec, (self.command, self.args, env, dict(self.client_options)))

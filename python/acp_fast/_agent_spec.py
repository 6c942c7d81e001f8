"""`AgentSpec`: how to start one agent, as a value that can be sent to another process.

The command, its arguments and environment, and the other `Client`/`AsyncClient` options;
`acp_fast.fleet`'s host actors start agents from it on other machines. ``from_registry`` builds
one from an ACP registry entry (`acp_fast.registry`), with the agent's profile: the variables
and session mode that make it send permission requests to the host."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from . import _spawn_args

if TYPE_CHECKING:
    from .registry import AgentProfile, Registry
    from .registry._fetch import Progress

_KNOWN: Any = object()  # from_registry's default profile: the agent's known one

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
        add_env: Variables set on top of `env` (or of the starting process's environment
            when `env` is None) where the agent starts: the registry's and the profile's.
        profile: What makes the agent ask the host (`acp_fast.registry.AgentProfile`):
            ``Client.from_spec`` switches each new session to its ``ask_mode``.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    client_options: Mapping[str, Any] = field(default_factory=dict)
    add_env: Mapping[str, str] = field(default_factory=dict)
    profile: AgentProfile | None = None

    def __init__(
        self,
        command: str | os.PathLike[str],
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        client_options: Mapping[str, Any] | None = None,
        add_env: Mapping[str, str] | None = None,
        profile: AgentProfile | None = None,
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
        extra = dict(add_env or {})
        _spawn_args.convert(spawn.command, (), extra, None)  # the same checks as env's
        object.__setattr__(self, "add_env", MappingProxyType(extra))
        object.__setattr__(self, "profile", profile)

    def environment(self) -> dict[str, str] | None:
        """The agent's whole environment where it starts now: `env` (or this process's) with
        `add_env` set on top; None when neither is given (the agent inherits)."""
        if not self.add_env:
            return None if self.env is None else dict(self.env)
        base = dict(os.environ) if self.env is None else dict(self.env)
        base.update(self.add_env)
        return base

    @classmethod
    def from_registry(
        cls,
        agent_id: str,
        *,
        registry: str | os.PathLike[str] | Registry,
        channel: str = "stable",
        cache_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        client_options: Mapping[str, Any] | None = None,
        profile: AgentProfile | None = _KNOWN,
        platform: str | None = None,
        progress: Progress | None = None,
    ) -> AgentSpec:
        """The spec of registry agent `agent_id`.

        Args:
            agent_id: Its registry id (``claude-acp``, ``codex-acp``, ``gemini``...).
            registry: The registry: a path or URL, or one `acp_fast.registry.load` read.
            channel: ``"stable"`` or ``"preview"``.
            cache_dir: Where binaries are installed (default
                `acp_fast.registry.default_cache_dir`); created 0700.
            env: The agent's whole environment (default: the starting process's).
            client_options: As for the constructor.
            profile: The agent's profile; by default its known one
                (`acp_fast.registry.profile_for`); None for none.
            platform: The registry's platform name to install for (default: this machine's).
            progress: Called with (bytes done, total or None) while a binary downloads.

        Raises:
            acp_fast.registry.RegistryError: No such agent, nothing for this platform, a
                download that failed or whose sha256 does not match.
        """
        from . import registry as _registry

        entry = _registry.load(registry).get(agent_id)
        launch = _registry.resolve(
            entry, channel=channel, platform=platform, cache_dir=cache_dir, progress=progress
        )
        chosen = _registry.profile_for(entry.id) if profile is _KNOWN else profile
        extra = dict(launch.env)
        if chosen is not None:
            extra.update(chosen.env)  # the profile's purpose (asking the host) wins
        return cls(launch.command, launch.args, env, client_options, extra, chosen)

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType does not pickle: send plain dicts (the fleet ships specs to hosts).
        env = None if self.env is None else dict(self.env)
        return (
            AgentSpec,
            (
                self.command,
                self.args,
                env,
                dict(self.client_options),
                dict(self.add_env),
                self.profile,
            ),
        )


def ask_mode_to_set(
    profile: AgentProfile | None, current: str, offered: Sequence[str]
) -> str | None:
    """The mode a new session of an agent with `profile` should be switched to so that it asks
    the host (its ``ask_mode``), or None: no profile or ask mode, already in it, or not offered
    (the agent's modes changed: nothing is forced on it)."""
    if profile is None or not profile.ask_mode or current == profile.ask_mode:
        return None
    return profile.ask_mode if profile.ask_mode in offered else None

"""The ACP agent registry: which agents exist and how to start each.

A registry is a JSON document (``{"version", "agents": [...]}``, the format of
github.com/agentclientprotocol/registry) at a path or URL the caller gives; nothing is fetched
otherwise. Each entry says how to start an agent: ``npx`` or ``uvx`` a package, or download a
binary for this platform (once, into a private cache, its sha256 checked when the registry gives
one). `acp_fast.AgentSpec.from_registry` turns an entry into a spec, with the agent's profile
(`AgentProfile`: what makes it send permission requests to the host) unless asked not to.

    registry = acp_fast.registry.load("registry.json")
    spec = acp_fast.AgentSpec.from_registry("claude-acp", registry=registry)
"""

from __future__ import annotations

import os
import platform as _platform
from dataclasses import dataclass, field
from typing import Any

from .. import _json
from ._fetch import Progress, describe
from ._fetch import read as _read
from ._format import (
    ID_PATTERN,
    PLATFORMS,
    Binary,
    Distribution,
    Package,
    Registry,
    RegistryEntry,
    RegistryError,
    parse,
)
from ._install import default_cache_dir, install
from ._profiles import AgentProfile, profile_for, profiles

__all__ = [
    "ID_PATTERN",
    "PLATFORMS",
    "AgentProfile",
    "Binary",
    "Distribution",
    "Launch",
    "Package",
    "Registry",
    "RegistryEntry",
    "RegistryError",
    "current_platform",
    "default_cache_dir",
    "describe_entry",
    "load",
    "profile_for",
    "profiles",
    "resolve",
]

#: The largest registry document read.
MAX_REGISTRY_BYTES = 16 << 20
#: The time reading it may take, seconds.
REGISTRY_TIMEOUT = 60.0


def load(
    source: str | os.PathLike[str] | Registry, *, timeout: float = REGISTRY_TIMEOUT
) -> Registry:
    """The registry at `source` (a path, ``file://``, ``http://`` or ``https://`` URL), read
    and checked; a `Registry` is returned as it is. `RegistryError` says what is wrong."""
    if isinstance(source, Registry):
        return source
    data = _read(source, limit=MAX_REGISTRY_BYTES, timeout=timeout)
    name = describe(source)
    try:
        document = _json.loads(data)
    except ValueError as exc:
        raise RegistryError(f"{name} is not JSON: {exc}") from exc
    return parse(document, name)


def current_platform() -> str:
    """This machine as the registry names platforms (``linux-x86_64``, ``darwin-aarch64``...)."""
    system = _platform.system().lower()
    machine = _platform.machine().lower()
    machine = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{system}-{machine}"


@dataclass(frozen=True)
class Launch:
    """What starts an agent: the program, its arguments, variables to set, and how it is got
    (``npx``, ``uvx`` or ``binary``)."""

    command: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    via: str = "binary"


def resolve(
    entry: RegistryEntry,
    *,
    channel: str = "stable",
    platform: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> Launch:
    """How to start `entry`: its binary for this platform (downloaded and checked once), else
    its npx package, else its uvx package; `RegistryError` naming what exists otherwise."""
    version, distribution = entry.channel(channel)
    where = platform or current_platform()
    binary = distribution.binaries.get(where)
    if binary is not None:
        program = install(entry.id, version, binary, cache_dir, progress=progress)
        return Launch(str(program), binary.args, dict(binary.env), "binary")
    for package in (distribution.npx, distribution.uvx):
        if package is not None:
            return _package_launch(package)
    offered = ", ".join(sorted(distribution.binaries)) or "none"
    raise RegistryError(
        f"agent {entry.id!r} ({channel}) has no build for {where} and no npx or uvx package; "
        f"its binaries are for: {offered}"
    )


def _package_launch(package: Package) -> Launch:
    # npx --yes: the agent's stdin is the protocol, so npx must never stop to ask.
    if package.runner == "npx":
        head = (
            ["--yes", package.package]
            if package.cmd is None
            else ["--yes", "--package", package.package, package.cmd]
        )
    else:
        head = (
            [package.package] if package.cmd is None else ["--from", package.package, package.cmd]
        )
    return Launch(package.runner, (*head, *package.args), dict(package.env), package.runner)


def describe_entry(entry: RegistryEntry, *, platform: str | None = None) -> dict[str, Any]:
    """What `acp-fast agents show` prints: the entry, how it would start here, its profile."""
    where = platform or current_platform()
    ways: list[str] = []
    for channel in ("stable", "preview"):
        try:
            version, distribution = entry.channel(channel)
        except RegistryError:
            continue
        if where in distribution.binaries:
            binary: Binary = distribution.binaries[where]
            checked = "sha256 checked" if binary.sha256 else "no sha256 in the registry"
            ways.append(f"{channel} {version}: binary {binary.archive} ({checked})")
        elif distribution.npx is not None or distribution.uvx is not None:
            launch = _package_launch(distribution.npx or distribution.uvx)  # type: ignore[arg-type]
            ways.append(f"{channel} {version}: {launch.command} {' '.join(launch.args)}")
        else:
            ways.append(
                f"{channel} {version}: nothing for {where} "
                f"(binaries for {', '.join(sorted(distribution.binaries))})"
            )
    profile = profile_for(entry.id)
    return {
        "id": entry.id,
        "name": entry.name,
        "version": entry.version,
        "description": entry.description,
        "start": ways,
        "profile": None
        if profile is None
        else {
            "env": dict(profile.env),
            "ask_mode": profile.ask_mode,
            "note": profile.note,
        },
    }

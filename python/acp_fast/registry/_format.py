"""The registry's JSON (``{"version", "agents": [...]}``) read into frozen values.

A registry is a file or URL someone else publishes: everything in it is checked before use.
An entry that breaks a rule is kept out with the reason (`Registry.refused`), so one bad entry
does not hide the others; a registry that is not an object with an ``agents`` list is refused
whole. Ids are what ``--agent ID`` and cache directories are named by: a strict pattern, so an
id can never be a path, an option or a shell word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._text import printable_line


class RegistryError(ValueError):
    """A registry, an entry or a download is not usable; the message says which and why."""


#: Registry ids and versions: letters, digits, ``.``, ``_``, ``-`` (ids start with a letter or
#: digit), at most 64 characters.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}")
#: An environment variable's name.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: The platforms of a binary distribution (the registry's FORMAT.md).
PLATFORMS = (
    "darwin-aarch64",
    "darwin-x86_64",
    "linux-aarch64",
    "linux-x86_64",
    "windows-aarch64",
    "windows-x86_64",
)
_MAX_AGENTS = 10_000
_MAX_TEXT = 4096
_MAX_ARGS = 256
_MAX_ENV = 256


@dataclass(frozen=True)
class Package:
    """An ``npx`` or ``uvx`` distribution: a package, optionally the command in it to run."""

    runner: str  # "npx" | "uvx"
    package: str
    cmd: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Binary:
    """One platform's build: an archive (or a bare program) to download, its sha256 when the
    registry gives one, and the command in it to run."""

    platform: str
    archive: str
    cmd: str
    sha256: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Distribution:
    """How one version of an agent is installed: any of npx, uvx, binaries by platform."""

    npx: Package | None = None
    uvx: Package | None = None
    binaries: Mapping[str, Binary] = field(default_factory=dict)


@dataclass(frozen=True)
class RegistryEntry:
    """One agent of the registry, its stable distribution and, when it has one, its preview."""

    id: str
    name: str
    version: str
    description: str
    distribution: Distribution
    preview_version: str | None = None
    preview: Distribution | None = None
    repository: str | None = None
    license: str | None = None

    def channel(self, channel: str) -> tuple[str, Distribution]:
        """The version and distribution of ``"stable"`` or ``"preview"``."""
        if channel == "stable":
            return self.version, self.distribution
        if channel == "preview":
            if self.preview is None or self.preview_version is None:
                raise RegistryError(f"agent {self.id!r} has no preview channel")
            return self.preview_version, self.preview
        raise ValueError(f'channel must be "stable" or "preview", not {channel!r}')


@dataclass(frozen=True)
class Registry:
    """A parsed registry: its entries by id, and the entries it refused with the reason."""

    version: str
    entries: Mapping[str, RegistryEntry]
    refused: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def get(self, agent_id: str) -> RegistryEntry:
        """The entry of `agent_id`; `RegistryError` naming the known ids when there is none."""
        entry = self.entries.get(agent_id)
        if entry is not None:
            return entry
        if agent_id in self.refused:
            raise RegistryError(
                f"agent {printable_line(agent_id)!r} in {self.source} is not usable: "
                f"{self.refused[agent_id]}"
            )
        known = ", ".join(sorted(self.entries)[:40]) or "none"
        raise RegistryError(
            f"no agent {printable_line(agent_id)!r} in {self.source} (known: {known})"
        )


def parse(document: Any, source: str) -> Registry:
    """`document` (parsed JSON) as a `Registry`; `RegistryError` when it is not one."""
    if not isinstance(document, dict) or not isinstance(document.get("agents"), list):
        raise RegistryError(f'{source} is not an ACP registry: no "agents" list')
    agents = document["agents"]
    if len(agents) > _MAX_AGENTS:
        raise RegistryError(f"{source} lists {len(agents):,} agents (at most {_MAX_AGENTS:,})")
    entries: dict[str, RegistryEntry] = {}
    refused: dict[str, str] = {}
    for index, raw in enumerate(agents):
        name = raw.get("id") if isinstance(raw, dict) else None
        key = name if isinstance(name, str) and ID_PATTERN.fullmatch(name) else f"#{index}"
        try:
            entry = _entry(raw)
        except RegistryError as exc:
            refused[key] = str(exc)
            continue
        if entry.id in entries:
            refused[entry.id] = "listed twice (the first is kept)"
            continue
        entries[entry.id] = entry
    version = document.get("version")
    return Registry(
        version=version if isinstance(version, str) else "",
        entries=entries,
        refused=refused,
        source=source,
    )


def _entry(raw: Any) -> RegistryEntry:
    if not isinstance(raw, dict):
        raise RegistryError("not an object")
    agent_id = _text(raw, "id", pattern=ID_PATTERN)
    version = _text(raw, "version", pattern=_VERSION)
    distribution = _distribution(raw.get("distribution"))
    preview_version: str | None = None
    preview: Distribution | None = None
    if raw.get("preview") is not None:
        block = raw["preview"]
        if not isinstance(block, dict):
            raise RegistryError("preview is not an object")
        preview_version = _text(block, "version", pattern=_VERSION)
        preview = _distribution(block.get("distribution"))
    return RegistryEntry(
        id=agent_id,
        name=_text(raw, "name", default=agent_id),
        version=version,
        description=_text(raw, "description", default=""),
        distribution=distribution,
        preview_version=preview_version,
        preview=preview,
        repository=_optional_text(raw, "repository"),
        license=_optional_text(raw, "license"),
    )


def _distribution(raw: Any) -> Distribution:
    if not isinstance(raw, dict):
        raise RegistryError("no distribution object")
    npx = _package("npx", raw["npx"]) if raw.get("npx") is not None else None
    uvx = _package("uvx", raw["uvx"]) if raw.get("uvx") is not None else None
    binaries: dict[str, Binary] = {}
    if raw.get("binary") is not None:
        if not isinstance(raw["binary"], dict):
            raise RegistryError("distribution.binary is not an object")
        for platform, target in raw["binary"].items():
            if platform not in PLATFORMS:
                continue  # a platform we do not know cannot be ours: ignored, not refused
            binaries[platform] = _binary(platform, target)
    if npx is None and uvx is None and not binaries:
        raise RegistryError("the distribution has no npx, uvx or binary")
    return Distribution(npx=npx, uvx=uvx, binaries=binaries)


def _package(runner: str, raw: Any) -> Package:
    if not isinstance(raw, dict):
        raise RegistryError(f"distribution.{runner} is not an object")
    package = _text(raw, "package")
    if package.startswith("-"):
        raise RegistryError(f"distribution.{runner}.package starts with '-': {package!r}")
    cmd = _optional_text(raw, "cmd")
    if cmd is not None and cmd.startswith("-"):
        raise RegistryError(f"distribution.{runner}.cmd starts with '-': {cmd!r}")
    return Package(runner, package, cmd, _args(raw, runner), _env(raw, runner))


def _binary(platform: str, raw: Any) -> Binary:
    where = f"distribution.binary.{platform}"
    if not isinstance(raw, dict):
        raise RegistryError(f"{where} is not an object")
    archive = _text(raw, "archive")
    cmd = _text(raw, "cmd")
    if cmd.startswith("/") or "\\" in cmd or ".." in cmd.split("/"):
        raise RegistryError(f"{where}.cmd must be a path inside the archive, not {cmd!r}")
    sha256 = _optional_text(raw, "sha256")
    if sha256 is not None:
        sha256 = sha256.lower()
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise RegistryError(f"{where}.sha256 is not 64 hexadecimal digits")
    return Binary(platform, archive, cmd, sha256, _args(raw, where), _env(raw, where))


def _text(
    raw: dict[str, Any],
    key: str,
    *,
    pattern: re.Pattern[str] | None = None,
    default: str | None = None,
) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or (not value and default is None):
        raise RegistryError(f"{key} is missing or not a string")
    if len(value) > _MAX_TEXT or "\x00" in value:
        raise RegistryError(f"{key} is longer than {_MAX_TEXT} characters or holds NUL")
    if pattern is not None and not pattern.fullmatch(value):
        raise RegistryError(f"{key} {printable_line(value)!r} does not match {pattern.pattern}")
    return value


def _optional_text(raw: dict[str, Any], key: str) -> str | None:
    return None if raw.get(key) is None else _text(raw, key)


def _args(raw: dict[str, Any], where: str) -> tuple[str, ...]:
    args = raw.get("args", [])
    if (
        not isinstance(args, list)
        or len(args) > _MAX_ARGS
        or not all(isinstance(a, str) and len(a) <= _MAX_TEXT and "\x00" not in a for a in args)
    ):
        raise RegistryError(f"{where}.args is not a list of at most {_MAX_ARGS} strings")
    return tuple(args)


def _env(raw: dict[str, Any], where: str) -> dict[str, str]:
    env = raw.get("env", {})
    if not isinstance(env, dict) or len(env) > _MAX_ENV:
        raise RegistryError(f"{where}.env is not an object of at most {_MAX_ENV} variables")
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(name) or not isinstance(value, str) or "\x00" in value:
            raise RegistryError(f"{where}.env has a bad variable {printable_line(name)!r}")
    return dict(env)

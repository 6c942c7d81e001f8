"""The agent's command, arguments, environment and directory, converted as `subprocess` does:
str, bytes or os.PathLike, through `os.fsencode` (so bytes and surrogate-escaped strings reach
the agent byte for byte), with `TypeError` for other types and `ValueError` for a NUL byte or an
environment name that is empty or holds "=". The core receives `os.fsdecode`d strings and
encodes them back with the file-system encoding, so nothing is lossy."""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

_PathArg = str | bytes | os.PathLike[str] | os.PathLike[bytes]


class SpawnArgs(NamedTuple):
    command: str
    args: list[str]
    env: list[tuple[str, str]] | None
    cwd: str | None


def _encode(value: object, what: str) -> bytes:
    try:
        encoded = os.fsencode(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{what}: expected str, bytes or os.PathLike object, not {type(value).__name__}"
        ) from None
    if b"\0" in encoded:
        raise ValueError(f"{what}: embedded null byte")
    return encoded


def _fs(value: object, what: str) -> str:
    return os.fsdecode(_encode(value, what))


def convert(command: object, args: object, env: object, cwd: object) -> SpawnArgs:
    if isinstance(args, (str, bytes)):
        raise TypeError("args must be a sequence of strings, not a string")
    try:
        items = list(args)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"args must be a sequence, not {type(args).__name__}") from None
    pairs: list[tuple[str, str]] | None = None
    if env is not None:
        if not callable(getattr(env, "items", None)):
            raise TypeError(f"env must be a mapping or None, not {type(env).__name__}")
        pairs = []
        for key, value in env.items():  # type: ignore[attr-defined]
            name = _encode(key, "env name")
            if not name or b"=" in name:
                raise ValueError(f"illegal environment variable name: {key!r}")
            pairs.append((os.fsdecode(name), _fs(value, f"env[{key!r}]")))
    return SpawnArgs(
        command=_fs(command, "command"),
        args=[_fs(arg, f"args[{i}]") for i, arg in enumerate(items)],
        env=pairs,
        cwd=None if cwd is None else _fs(cwd, "cwd"),
    )


def session_cwd(cwd: str | None) -> str:
    """The directory named in `session/new`: `cwd`, or the host's own. ACP sends it as a JSON
    string, so a path that is not UTF-8 is refused here rather than sent altered."""
    if cwd is None:
        try:
            cwd = os.getcwd()
        except FileNotFoundError as exc:
            raise FileNotFoundError(
                exc.errno,
                "the host's current directory no longer exists; pass cwd= to the Client",
            ) from None
    try:
        cwd.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"cwd {cwd!r} is not valid UTF-8: ACP sends it as a JSON string; pass a UTF-8 cwd="
        ) from None
    return cwd


def demo_agent_command() -> tuple[str, list[str]]:
    """The command and arguments of the demo agent bundled with acp-fast, run by this
    interpreter: ``(sys.executable, ["-m", "acp_fast.demo_agent"])``. It needs nothing
    installed, so ``acp.Client(*acp.demo_agent_command())`` works on any machine.

    Returns:
        ``(command, args)``, to pass as `Client`'s first two arguments.
    """
    return (sys.executable, ["-m", "acp_fast.demo_agent"])

"""Terminal authentication (``authMethods`` entries of type ``"terminal"``, ACP v1).

The agent asks to be run again, as a separate interactive program on the user's terminal, with
the method's extra ``args`` and ``env`` on top of the command that started it; the user logs in
through the agent's own TUI and a zero exit status is success. The running agent does not see
the new credentials: the caller starts its client again.

Everything in the method is the agent's text, so it is checked before anything runs: at most
`MAX_ARGS` arguments and `MAX_ENV` variables of at most `MAX_TEXT_BYTES` bytes each, no NUL, no
variable that would make the dynamic loader run other code (``LD_*``, ``DYLD_*``), and the
program is resolved to an absolute path once, with the client's own ``PATH``, before the
method's variables apply (a method cannot choose another program by setting ``PATH``).

The login runs in a process group of its own, made the terminal's foreground group while it runs
(as a shell runs a job: Ctrl-C reaches the login, not the host), and the group is killed when it
ends, times out or the host is interrupted: nothing it started is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import AgentProtocolError, CapabilityError
from ._text import printable_line

#: The most arguments a terminal method may add.
MAX_ARGS = 64
#: The most variables a terminal method may set.
MAX_ENV = 64
#: The longest argument, variable name or value a terminal method may give (UTF-8 bytes).
MAX_TEXT_BYTES = 4096
#: Variable names a method may not set: they make the dynamic loader run other code.
REFUSED_ENV_PREFIXES = ("LD_", "DYLD_")
#: Seconds between SIGTERM and SIGKILL when the login is stopped.
STOP_GRACE = 2.0


@dataclass(frozen=True)
class TerminalLogin:
    """A terminal login, checked and ready to run (`login_for`)."""

    #: The method's id, name and description as the agent sent them.
    method_id: str
    name: str
    description: str
    #: The program (an absolute path) and its arguments: the agent's, then the method's.
    argv: tuple[str, ...]
    #: The variables the method sets, over the client's environment.
    env_overrides: tuple[tuple[str, str], ...]
    #: The whole environment the login runs with.
    env: Mapping[str, str]
    cwd: str | None

    def describe(self) -> str:
        """One line saying what will run, every piece of agent text made printable."""
        command = " ".join(printable_line(arg) for arg in self.argv)
        names = " ".join(f"{printable_line(k)}=…" for k, _ in self.env_overrides)
        return f"{command}" + (f" (with {names})" if names else "")


def terminal_methods(raw_initialize: Any) -> list[dict[str, Any]]:
    """The ``authMethods`` entries of type ``"terminal"`` in an ``initialize`` result (a dict as
    sent; anything else holds none)."""
    if not isinstance(raw_initialize, dict):
        return []
    methods = raw_initialize.get("authMethods")
    if not isinstance(methods, list):
        return []
    return [m for m in methods if isinstance(m, dict) and m.get("type") == "terminal"]


def login_for(
    raw_initialize: Any,
    method_id: str,
    *,
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    agent_id: str = "",
) -> TerminalLogin:
    """The terminal login of `method_id`, from the agent's ``initialize`` result and the
    command that started the agent. `CapabilityError` when the agent offers no such terminal
    method; `AgentProtocolError` when the method is malformed or asks for what is refused."""
    methods = terminal_methods(raw_initialize)
    found = [m for m in methods if m.get("id") == method_id]
    if not found:
        offered = ", ".join(repr(printable_line(str(m.get("id")))) for m in methods) or "none"
        raise CapabilityError(
            f"the agent offers no terminal login method {printable_line(method_id)!r} "
            f"(terminal methods offered: {offered}); the client must advertise "
            "ClientCapabilityConfig(auth_terminal=True) for an agent to offer them",
            capability="auth.terminal",
            agent_id=agent_id,
        )
    method = found[0]
    extra_args = _method_args(method.get("args"))
    overrides = _method_env(method.get("env"))
    base = dict(os.environ if env is None else env)
    program = _resolve(command, base.get("PATH"), cwd)
    return TerminalLogin(
        method_id=method_id,
        name=_text(method.get("name"), "name") if method.get("name") is not None else "",
        description=_text(method.get("description"), "description")
        if isinstance(method.get("description"), str)
        else "",
        argv=(program, *args, *extra_args),
        env_overrides=tuple(overrides),
        env={**base, **dict(overrides)},
        cwd=cwd,
    )


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise AgentProtocolError(f"terminal login: {what} is not a string")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise AgentProtocolError(f"terminal login: {what} is longer than {MAX_TEXT_BYTES} bytes")
    if "\0" in value:
        raise AgentProtocolError(f"terminal login: {what} holds a NUL byte")
    return value


def _method_args(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AgentProtocolError("terminal login: args is not a list of strings")
    if len(value) > MAX_ARGS:
        raise AgentProtocolError(f"terminal login: more than {MAX_ARGS} args")
    return [_text(arg, f"args[{i}]") for i, arg in enumerate(value)]


def _method_env(value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    if not isinstance(value, dict):
        raise AgentProtocolError("terminal login: env is not an object of strings")
    if len(value) > MAX_ENV:
        raise AgentProtocolError(f"terminal login: more than {MAX_ENV} env variables")
    pairs = []
    for name, text in value.items():
        name = _text(name, "an env name")
        if not name or "=" in name:
            raise AgentProtocolError(f"terminal login: illegal env name {printable_line(name)!r}")
        if name.upper().startswith(REFUSED_ENV_PREFIXES):
            raise AgentProtocolError(
                f"terminal login: refused to set {printable_line(name)}: variables of the "
                "dynamic loader (LD_*, DYLD_*) would run other code; log in by hand"
            )
        pairs.append((name, _text(text, f"env[{printable_line(name)!r}]")))
    return pairs


def _resolve(command: str, path: str | None, cwd: str | None) -> str:
    """The agent's program as an absolute path, found once (with the client's PATH)."""
    if os.sep in command:
        resolved = command if os.path.isabs(command) else os.path.join(cwd or os.getcwd(), command)
        return os.path.normpath(resolved)
    found = shutil.which(command, path=path if path is not None else os.defpath)
    if found is None:
        raise FileNotFoundError(f"terminal login: the agent's program {command!r} is not on PATH")
    return os.path.abspath(found)


def run_login(
    login: TerminalLogin,
    *,
    timeout: float | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Runs `login` on this process's terminal and waits for it; its exit status (a signal's
    death is ``-signum``, as `subprocess` reports it). On `timeout` (seconds) the login's group
    is stopped and `subprocess.TimeoutExpired` raised; when `stop` is set (another thread gave
    up on it) the group is stopped and `LoginStopped` raised; on KeyboardInterrupt in the host,
    the group is stopped and the interrupt re-raised."""
    if timeout is not None and not timeout > 0:
        raise ValueError("timeout must be a number of seconds > 0 or None")
    child = subprocess.Popen(
        login.argv,
        env=dict(login.env),
        cwd=login.cwd,
        process_group=0,
        close_fds=True,
    )
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        with _foreground(child.pid):
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(list(login.argv), timeout or 0.0)
                wait = 0.1 if stop is not None else left
                if wait is not None and left is not None:
                    wait = min(wait, left)
                try:
                    return child.wait(wait)
                except subprocess.TimeoutExpired:
                    if stop is not None and stop.is_set():
                        raise LoginStopped("the terminal login was stopped") from None
    finally:
        _stop_group(child)


class LoginStopped(Exception):
    """`run_login` was told to stop (its ``stop`` event): the login's group was stopped."""


@contextlib.contextmanager
def _foreground(pgid: int) -> Iterator[None]:
    """Makes process group `pgid` the terminal's foreground group while it runs (when stdin is
    this process's controlling terminal), and gives the terminal back afterwards."""
    try:
        fd = sys.stdin.fileno()
        ours = os.tcgetpgrp(fd)
    except (AttributeError, OSError, ValueError):  # no terminal: nothing to hand over
        yield
        return
    # SIGTTOU blocked: a background process may then set the foreground group (POSIX).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, pgid)
        # The login may have read before it became the foreground: resume it if it stopped.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGCONT)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, ours)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """Stops whatever is left of the login's process group: SIGTERM, then SIGKILL after
    `STOP_GRACE`; reaps the login."""
    pgid = child.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        child.wait()
        return
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        if child.poll() is not None and not _group_alive(pgid):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    child.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

"""``acp-fast login``: log in to an agent through its terminal login (ACP ``authMethods`` of
type ``"terminal"``).

The agent is started with ``auth.terminal`` advertised, only to learn its terminal methods
(``initialize``), and stopped; then the chosen method runs on this terminal (the agent's own
program with the method's arguments and variables, `acp_fast._login`). What would run is shown,
agent text made printable, and asked for on a terminal (``--yes`` skips the question). The exit
status is the login's (0: logged in; start the agent again to use it), 1 when the agent offers
no terminal login or an error happens, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import acp_fast
from acp_fast import _login
from acp_fast._text import printable_line

from . import agent, errors, options
from .options import Parser, command_parser

#: Seconds the agent may take to answer ``initialize`` (--timeout overrides).
START_TIMEOUT = 60.0


def add_parser(commands: Any) -> None:
    parser = command_parser(
        commands,
        "login",
        help="log in to an agent through its terminal login method",
        description="Start the agent only to learn its terminal login methods, stop it, then "
        "run the chosen one on this terminal (the agent's program with the method's arguments "
        "and variables). Start the agent again afterwards to use the login.",
    )
    parser.add_argument(
        "--agent",
        metavar="CMD",
        default=None,
        help="the agent command line, split like a shell does, or the id of an agent of "
        "--registry (default: the bundled demo agent)",
    )
    options.add_registry_option(parser)
    options.add_protocol_option(parser)
    parser.add_argument("--cwd", metavar="DIR", default=None, help="the agent's directory")
    parser.add_argument(
        "--method",
        metavar="ID",
        default=None,
        help="the terminal method's id (default: the only one, or a question on a terminal)",
    )
    parser.add_argument("--list", action="store_true", help="only list the agent's login methods")
    parser.add_argument("--yes", "-y", action="store_true", help="run without asking first")
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=options._seconds,
        default=None,
        help=f"seconds the agent may take to start (default {START_TIMEOUT:g}) and the login "
        "may take (default: no limit)",
    )
    parser.set_defaults(handler=login)


def login(parser: Parser, args: argparse.Namespace) -> int:
    command = options.agent_command(parser, args)
    spec = getattr(args, "agent_spec", None)
    env = spec.environment() if spec is not None else None
    try:
        cwd = options.session_cwd(args)
    except OSError as exc:
        errors.report(exc)
        return 1
    raw = _initialize(command, env, cwd, args.timeout or START_TIMEOUT, args.protocol)
    if raw is None:
        return 1
    methods = _login.terminal_methods(raw)
    if args.list or not methods:
        return _list(raw, methods, args.list)
    chosen = _choose(parser, args, methods)
    if chosen is None:
        return 2
    try:
        planned = _login.login_for(
            raw, chosen, command=command[0], args=command[1:], env=env, cwd=cwd
        )
    except (acp_fast.AcpError, OSError) as exc:
        errors.report(exc)
        return 1
    sys.stderr.write(f"acp-fast: login {printable_line(chosen)!r} runs: {planned.describe()}\n")
    if not args.yes and not _confirm():
        sys.stderr.write("acp-fast: not run\n")
        return 1
    try:
        status = _login.run_login(planned, timeout=args.timeout)
    except OSError as exc:
        errors.report(exc)
        return 1
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"acp-fast: the login did not end within {args.timeout:g} s; stopped\n")
        return 1
    if status == 0:
        sys.stderr.write("acp-fast: logged in; start the agent again to use it\n")
        return 0
    sys.stderr.write(f"acp-fast: the login ended with status {status}\n")
    return 128 - status if status < 0 else status


def _initialize(
    command: list[str], env: Any, cwd: str | None, timeout: float, protocol: str = "v1"
) -> dict[str, Any] | None:
    """The agent's ``initialize`` result, with terminal authentication advertised; None (the
    error reported, the agent's stderr under it) when the agent could not be started."""
    capabilities = acp_fast.ClientCapabilityConfig(
        read_text_file=False, write_text_file=False, terminal=False, auth_terminal=True
    )
    client = None
    try:
        with acp_fast.Client(
            command[0],
            command[1:],
            cwd=cwd,
            env=env,
            capabilities=capabilities,
            protocol=protocol,  # type: ignore[arg-type] # argparse's choices checked it
        ) as client:
            client.start(new_session=False, timeout=timeout)
            raw = client.initialize.raw
    except (acp_fast.AcpError, OSError) as exc:
        errors.report(exc, tail=agent.stderr_tail(client))
        return None
    return raw if isinstance(raw, dict) else {}


def _list(raw: dict[str, Any], methods: list[dict[str, Any]], asked: bool) -> int:
    out = sys.stdout if asked else sys.stderr
    if not methods:
        out.write("acp-fast: the agent offers no terminal login method\n")
    for method in methods:
        out.write(_method_line(method, "terminal"))
    others = raw.get("authMethods")
    for method in others if isinstance(others, list) else []:
        if isinstance(method, dict) and method.get("type") != "terminal":
            out.write(_method_line(method, str(method.get("type") or "agent")))
    return 0 if asked or methods else 1


def _method_line(method: dict[str, Any], kind: str) -> str:
    name = method.get("name")
    shown = f"  {printable_line(str(method.get('id')))[:200]} ({printable_line(kind)[:40]})"
    if isinstance(name, str) and name:
        shown += f": {printable_line(name)[:200]}"
    return shown + "\n"


def _choose(parser: Parser, args: argparse.Namespace, methods: list[dict[str, Any]]) -> str | None:
    ids = [str(m.get("id")) for m in methods]
    if args.method is not None:
        return str(args.method)
    if len(ids) == 1:
        return ids[0]
    if not sys.stdin.isatty():
        offered = ", ".join(printable_line(i) for i in ids)
        parser.fail(f"the agent offers several terminal logins ({offered}): choose with --method")
    for number, method in enumerate(methods, 1):
        sys.stderr.write(f"{number}. {_method_line(method, 'terminal').strip()}\n")
    answer = input("login method number: ").strip()
    if answer.isdigit() and 1 <= int(answer) <= len(ids):
        return ids[int(answer) - 1]
    sys.stderr.write("acp-fast: no such method\n")
    return None


def _confirm() -> bool:
    if not sys.stdin.isatty():
        sys.stderr.write("acp-fast: stdin is not a terminal: give --yes to run the login\n")
        return False
    try:
        return input("Run it? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False

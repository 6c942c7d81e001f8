"""The options `run` and `chat` share (the agent, its directory, permission rules, the host
side, the journal, the view, stderr and timeouts), and what they become: the agent's command,
a `PermissionPolicy`, a `ClientCapabilityConfig`, the prompt."""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import sys
from typing import Any, NoReturn

import acp_fast
from acp_fast import _host, registry
from acp_fast import journal as journal_module
from acp_fast._options import PROTOCOLS
from acp_fast._text import printable_line


def default_agent_command() -> list[str]:
    """The bundled demo agent run by this interpreter, as one command line."""
    command, args = acp_fast.demo_agent_command()
    return [command, *args]


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors name the subcommand's own usage (argparse does that for
    the subparser it is; `fail` is for the checks made after parsing)."""

    def fail(self, message: str) -> NoReturn:
        self.error(message)


def command_parser(commands: Any, name: str, **kwargs: Any) -> Parser:
    parser = commands.add_parser(name, **kwargs)
    assert isinstance(parser, Parser)
    return parser


#: Where ``--registry`` defaults from.
REGISTRY_VARIABLE = "ACP_FAST_REGISTRY"


def add_registry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry",
        metavar="PATH|URL",
        default=os.environ.get(REGISTRY_VARIABLE) or None,
        help=f"an ACP registry (registry.json), a path or URL (default: ${REGISTRY_VARIABLE}); "
        "nothing is fetched unless named",
    )


def add_protocol_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="v1",
        help="the ACP version to speak: v1 (default), v2 (the v2 preview; an agent that only "
        "speaks v1 is refused) or auto (offer v2, fall back to v1); the one agreed is shown "
        "unless it is v1. v2 has no host side: --fs and --terminal need v1 (or auto, where "
        "they are served only if the agent speaks v1)",
    )


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="CMD",
        default=None,
        help="the agent command line, split like a shell does, or the id of an agent of "
        "--registry (default: the bundled demo agent, python -m acp_fast.demo_agent)",
    )
    add_registry_option(parser)
    add_protocol_option(parser)
    parser.add_argument(
        "--cwd",
        metavar="DIR",
        default=None,
        help="the session's working directory (default: the current directory)",
    )
    parser.add_argument(
        "--agent-stderr",
        choices=("tail", "inherit", "discard"),
        default="tail",
        help="the agent's stderr: tail (default) keeps its last lines and shows them under any "
        "error; inherit writes it to this terminal as it comes (as it is: its control characters "
        "reach the terminal); discard drops it",
    )
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=_seconds,
        default=None,
        help="give up when the agent has not started within S seconds, or a turn has not "
        "ended within S seconds (the turn is cancelled first); default: no limit",
    )
    kinds = ", ".join(_host.TOOL_KINDS)
    parser.add_argument(
        "--allow-kind",
        metavar="KIND",
        action="append",
        default=[],
        help=f"allow permission requests for tool calls of this kind ({kinds}); repeatable",
    )
    parser.add_argument(
        "--allow-title-prefix",
        metavar="PREFIX",
        action="append",
        default=[],
        help="allow permission requests whose tool call title starts with PREFIX; repeatable",
    )
    parser.add_argument(
        "--allow",
        metavar="RULE",
        action="append",
        default=[],
        help="allow permission requests matching RULE, [KIND][:TITLE] (TITLE a case-insensitive "
        "substring, or /REGEX/); repeatable",
    )
    parser.add_argument(
        "--deny",
        metavar="RULE",
        action="append",
        default=[],
        help="reject permission requests matching RULE (as --allow; deny rules win); repeatable",
    )
    parser.add_argument(
        "--fs",
        action="store_true",
        help="serve fs/read_text_file and fs/write_text_file, confined to --cwd (and --add-dir)",
    )
    parser.add_argument(
        "--terminal",
        action="store_true",
        help="serve terminal/* (commands run without a shell, in --cwd or below)",
    )
    parser.add_argument(
        "--terminal-shell",
        metavar="SHELL",
        default=None,
        help="with --terminal: run a terminal/create without args as SHELL -c COMMAND (e.g. "
        "/bin/sh; for agents that send whole shell lines, such as claude-code-acp)",
    )
    parser.add_argument(
        "--add-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="another directory the agent's files and terminals may reach; repeatable",
    )
    parser.add_argument(
        "--journal",
        metavar="PATH",
        default=None,
        help="record the whole conversation in this journal (appended to when it exists; a new "
        "one is SQLite when its name ends in .sqlite, .sqlite3 or .db, else JSONL)",
    )
    parser.add_argument(
        "--fsync",
        choices=journal_module.FSYNC_MODES,
        default="batch",
        help="when journal records are synced to disk: every record, each batch (default), "
        "or never (left to the OS)",
    )
    parser.add_argument(
        "--journal-kind",
        choices=("jsonl", "sqlite"),
        default=None,
        help="the kind of a new journal (default: by its name)",
    )
    parser.add_argument(
        "--view",
        choices=("auto", "live", "plain"),
        default="auto",
        help="live: the terminal view (needs rich: pip install 'acp-fast[live]'); plain: one "
        "line per event; auto (default): live when stdout is a terminal and rich is installed",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0 (got {text!r})")
    return value


def agent_command(parser: Parser, args: argparse.Namespace) -> list[str]:
    """The agent's command line; for a registry id, its spec's (kept as ``args.agent_spec``,
    whose environment and profile `agent.open_client` applies)."""
    args.agent_spec = None
    if args.agent is None:
        return default_agent_command()
    spec = registry_spec(parser, args)
    if spec is not None:
        args.agent_spec = spec
        return [spec.command, *spec.args]
    try:
        command = shlex.split(args.agent)
    except ValueError as exc:
        parser.fail(f"--agent: {exc}")
    if not command:
        parser.fail("--agent: empty command")
    return command


def registry_spec(parser: Parser, args: argparse.Namespace) -> acp_fast.AgentSpec | None:
    """The spec of ``--agent`` when it is an id of ``--registry``'s; None when it is a command
    line. An id-like word that is neither in the registry nor a program is a usage error that
    names the registry's ids (a typo should not become "program not found")."""
    word = args.agent.strip()
    if not args.registry or not registry.ID_PATTERN.fullmatch(word):
        return None
    try:
        loaded = registry.load(args.registry)
        if word not in loaded.entries and shutil.which(word) is not None:
            return None
        loaded.get(word)  # the error names the known ids
        return acp_fast.AgentSpec.from_registry(
            word, registry=loaded, progress=_download_progress(word)
        )
    except registry.RegistryError as exc:
        parser.fail(f"--agent {word}: {exc}")


def _download_progress(agent_id: str) -> Any:
    """Prints a binary download's progress on stderr (a line a 10%, or a 16 MiB when the
    size is unknown)."""
    shown = [-1]

    def progress(done: int, total: int | None) -> None:
        step = done * 10 // total if total else done >> 24
        if step != shown[0]:
            shown[0] = step
            size = f"{done / 1e6:.1f} of {total / 1e6:.1f} MB" if total else f"{done / 1e6:.1f} MB"
            sys.stderr.write(f"acp-fast: downloading {agent_id}: {size}\n")

    return progress


def agent_name(command: list[str]) -> str:
    """How the agent is named in messages: the demo agent, else its program's base name."""
    if command[1:3] == ["-m", "acp_fast.demo_agent"]:
        return "the demo agent"
    return printable_line(os.path.basename(command[0]) or command[0])


def session_cwd(args: argparse.Namespace) -> str | None:
    """The absolute --cwd, or None; an error line when it is not a directory."""
    if args.cwd is None:
        return None
    cwd = os.path.abspath(str(args.cwd))
    if not os.path.isdir(cwd):
        raise NotADirectoryError(f"--cwd {args.cwd}: not a directory")
    return cwd


def permission_policy(parser: Parser, args: argparse.Namespace) -> acp_fast.PermissionPolicy:
    """The rules, each checked: --allow-kind and --allow-title-prefix are allow rules too, so
    they decide before anyone is asked (first-use.md §1)."""
    try:
        allow = [_host.parse_rule(rule) for rule in args.allow]
        deny = [_host.parse_rule(rule) for rule in args.deny]
        kinds = [_host.tool_kind(kind, "--allow-kind") for kind in args.allow_kind]
    except ValueError as exc:
        parser.fail(str(exc))
    allow.extend(acp_fast.PermissionRule(kind=kind) for kind in kinds)
    allow.extend(
        acp_fast.PermissionRule(title=re.compile("^" + _literal(prefix)))
        for prefix in args.allow_title_prefix
        if prefix
    )
    return acp_fast.PermissionPolicy(allow=allow, deny=deny)


_META = frozenset("\\.^$*+?()[]{}|")


def _literal(text: str) -> str:
    """`text` as a pattern matching itself, escaping only the metacharacters, which Python's
    `re` and a linear-time engine (Rust's regex) both read the same way (`re.escape` also
    escapes spaces and dashes, which such an engine may refuse)."""
    return "".join("\\" + c if c in _META else c for c in text)


def capabilities(parser: Parser, args: argparse.Namespace) -> acp_fast.ClientCapabilityConfig:
    if args.terminal_shell is not None and not args.terminal:
        parser.fail("--terminal-shell needs --terminal")
    if getattr(args, "protocol", "v1") == "v2" and (args.fs or args.terminal):
        served = " and ".join(
            flag for flag, on in (("--fs", args.fs), ("--terminal", args.terminal)) if on
        )
        parser.fail(
            f"{served} cannot be served with --protocol v2: ACP v2 has no fs/* or terminal/* "
            "methods (use --protocol auto, served when the agent speaks v1, or v1)"
        )
    try:
        # The host side is off by default (the agent is told the host serves nothing); the
        # CLI shows notices and compactions, so it always asks for them (a notice then never
        # lands in the reply text).
        return acp_fast.ClientCapabilityConfig(
            read_text_file=args.fs,
            write_text_file=args.fs,
            terminal=args.terminal,
            additional_directories=tuple(os.path.abspath(d) for d in args.add_dir),
            terminal_shell=args.terminal_shell,
            notices=True,
            compaction=True,
        )
    except ValueError as exc:
        parser.fail(f"--terminal-shell: {exc}")


def read_prompt(parser: Parser, text: str, limit: int) -> str:
    """The prompt: `text`, or stdin's whole text when it is ``-`` (at most `limit` bytes)."""
    if text != "-":
        return text
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    if stdin is None:
        parser.fail("PROMPT is -, but there is no stdin to read it from")
    if sys.stdin.isatty():
        sys.stderr.write("acp-fast: reading the prompt from stdin; end it with Ctrl-D\n")
        sys.stderr.flush()
    data = stdin.read(limit + 1)
    if len(data) > limit:
        parser.fail(f"the prompt on stdin is longer than {limit:,} bytes")
    try:
        prompt = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        parser.fail(f"the prompt on stdin is not UTF-8 ({exc.reason} at byte {exc.start})")
    if not prompt.strip():
        parser.fail("the prompt on stdin is empty")
    return prompt


def client_options(
    parser: Parser, args: argparse.Namespace, observer: Any, epoch: int
) -> dict[str, Any]:
    """`Client`'s keyword options for these arguments."""
    return {
        "reader_limits": acp_fast.DEFAULT_READER_LIMITS,
        "transfer_limits": acp_fast.DEFAULT_TRANSFER_LIMITS,
        "transport_epoch": epoch,
        "permission_policy": permission_policy(parser, args),
        "observer": observer,
        "capabilities": capabilities(parser, args),
        "stderr": args.agent_stderr,
        "protocol": args.protocol,
        "client_info": acp_fast.ClientInfo(
            name="acp-fast", title="acp-fast", version=acp_fast.__version__
        ),
    }

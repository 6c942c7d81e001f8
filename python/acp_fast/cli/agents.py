"""``acp-fast agents list|show``: the agents of an ACP registry, and how each would start here.

The registry is the file or URL given with ``--registry`` (or ``ACP_FAST_REGISTRY``); nothing is
fetched otherwise. Every field of it is someone else's text: made printable before it is shown.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from acp_fast import registry as registry_module
from acp_fast._text import printable_line

from . import errors
from .options import REGISTRY_VARIABLE, Parser, add_registry_option, command_parser


def add_parser(commands: Any) -> None:
    agents = command_parser(
        commands,
        "agents",
        help="list the agents of an ACP registry, or show one",
        description="Read an ACP registry (the format of github.com/agentclientprotocol/"
        "registry) and say which agents it has and how each starts on this machine.",
    )
    actions = agents.add_subparsers(dest="agents_command", metavar="ACTION")
    listing = command_parser(actions, "list", help="one line an agent: id, version, name")
    add_registry_option(listing)
    listing.add_argument("--json", action="store_true", help="the entries as JSON lines")
    listing.set_defaults(handler=list_agents)
    show = command_parser(
        actions, "show", help="one agent: how it starts here, its profile, its checks"
    )
    show.add_argument("agent_id", metavar="ID")
    add_registry_option(show)
    show.add_argument("--json", action="store_true", help="as one JSON object")
    show.set_defaults(handler=show_agent)
    agents.set_defaults(handler=lambda parser, args: _usage(agents))


def _usage(parser: Parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _load(parser: Parser, args: argparse.Namespace) -> registry_module.Registry:
    if not args.registry:
        parser.fail(f"no registry: give --registry PATH|URL or set ${REGISTRY_VARIABLE}")
    return registry_module.load(args.registry)


def list_agents(parser: Parser, args: argparse.Namespace) -> int:
    try:
        registry = _load(parser, args)
    except registry_module.RegistryError as exc:
        errors.report(exc)
        return 1
    out = sys.stdout
    for entry in sorted(registry.entries.values(), key=lambda e: e.id):
        if args.json:
            record = {"id": entry.id, "version": entry.version, "name": entry.name}
            out.write(json.dumps(record, ensure_ascii=True) + "\n")
        else:
            name = printable_line(entry.name)
            out.write(f"{entry.id:<24} {printable_line(entry.version):<16} {name}\n")
    for agent_id, reason in sorted(registry.refused.items()):
        sys.stderr.write(
            f"acp-fast: skipped {printable_line(agent_id)}: {printable_line(reason)}\n"
        )
    return 0


def show_agent(parser: Parser, args: argparse.Namespace) -> int:
    try:
        entry = _load(parser, args).get(args.agent_id)
    except registry_module.RegistryError as exc:
        errors.report(exc)
        return 1
    shown = registry_module.describe_entry(entry)
    if args.json:
        sys.stdout.write(json.dumps(shown, ensure_ascii=True) + "\n")
        return 0
    lines = [
        f"{entry.id}: {printable_line(entry.name)} {printable_line(entry.version)}",
        f"  {printable_line(entry.description)}" if entry.description else None,
        *(f"  starts: {printable_line(way)}" for way in shown["start"]),
    ]
    profile = shown["profile"]
    if profile is None:
        lines.append("  profile: none (acp-fast does not know how to make it ask the host)")
    else:
        env = " ".join(f"{k}={v}" for k, v in profile["env"].items()) or "no variables"
        mode = profile["ask_mode"] or "none"
        lines.append(f"  profile: {printable_line(env)}; ask mode {printable_line(mode)}")
        if profile["note"]:
            lines.append(f"    {printable_line(profile['note'])}")
    sys.stdout.write("".join(line + "\n" for line in lines if line is not None))
    return 0

"""The ACP tool kinds are listed once: the CLI's --allow/--deny/--allow-kind accept exactly the
kinds `PermissionRule` accepts (two copies of the list, one per merged branch, could drift)."""

from __future__ import annotations

import acp_fast
from acp_fast import _host, _types


def test_one_list_of_tool_kinds() -> None:
    assert _host.TOOL_KINDS is _types.TOOL_KINDS is acp_fast.TOOL_KINDS
    for kind in acp_fast.TOOL_KINDS:
        assert _host.parse_rule(kind.upper()) == acp_fast.PermissionRule(kind=kind)

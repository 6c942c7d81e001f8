#!/usr/bin/env python3
"""Generate python/acp_fast/model/_generated.py from the ACP v1 JSON schema, with ACP v2's
additions merged in.

The schemas are the vendored schema/v1/schema.json (1.25.0) and schema/v2/schema.json (the v2
preview of the same SDK release; each SOURCE.md says where it came from). One model serves both
versions (design/protocol-now.md §4): v2's new session updates join the `SessionUpdate` union,
the shapes both versions have gain v2's fields (a field only one version requires is optional),
and v2's open unions (`other` variants) become one class with an open-enum tag, so a custom or
future variant decodes as a value, never as an error (see `merge_v2`).

The schema is the wire contract; this script maps each of its object definitions to a frozen
msgspec Struct (or, for the few shapes msgspec cannot express, a hand-shaped "custom" class),
and emits a field table (SPECS) that the pure-Python decoder in model/_codec.py interprets for
exact errors and lenient decoding. Names follow design/model.md, not the schema's Rust names.

    python scripts/gen_model.py            # rewrite the generated module
    python scripts/gen_model.py --check    # exit 1 if the checked-in module is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_CANDIDATES = [
    ROOT / "schema" / "v1" / "schema.json",
]
SCHEMA_V2 = ROOT / "schema" / "v2" / "schema.json"
OUT = ROOT / "python" / "acp_fast" / "model" / "_generated.py"

# Schema definition -> public class name (model.md §5). Definitions not listed keep their name.
RENAME = {
    "InitializeRequest": "InitializeParams",
    "InitializeResponse": "InitializeResult",
    "AuthenticateRequest": "AuthenticateParams",
    "AuthenticateResponse": "AuthenticateResult",
    "LogoutRequest": "LogoutParams",
    "LogoutResponse": "LogoutResult",
    "NewSessionRequest": "NewSessionParams",
    "NewSessionResponse": "NewSessionResult",
    "LoadSessionRequest": "LoadSessionParams",
    "LoadSessionResponse": "LoadSessionResult",
    "ResumeSessionRequest": "ResumeSessionParams",
    "ResumeSessionResponse": "ResumeSessionResult",
    "ListSessionsRequest": "ListSessionsParams",
    "ListSessionsResponse": "ListSessionsResult",
    "CloseSessionRequest": "CloseSessionParams",
    "CloseSessionResponse": "CloseSessionResult",
    "DeleteSessionRequest": "DeleteSessionParams",
    "DeleteSessionResponse": "DeleteSessionResult",
    "SetSessionModeRequest": "SetSessionModeParams",
    "SetSessionModeResponse": "SetSessionModeResult",
    "SetSessionConfigOptionRequest": "SetSessionConfigOptionParams",
    "SetSessionConfigOptionResponse": "SetSessionConfigOptionResult",
    "PromptRequest": "PromptParams",
    "PromptResponse": "PromptResult",
    "CancelNotification": "CancelParams",
    "CancelRequestNotification": "CancelRequestParams",
    "CompleteElicitationNotification": "ElicitationCompleteParams",
    "ReadTextFileRequest": "ReadTextFileParams",
    "ReadTextFileResponse": "ReadTextFileResult",
    "WriteTextFileRequest": "WriteTextFileParams",
    "WriteTextFileResponse": "WriteTextFileResult",
    "CreateTerminalRequest": "TerminalCreateParams",
    "CreateTerminalResponse": "TerminalCreateResult",
    "TerminalOutputRequest": "TerminalOutputParams",
    "TerminalOutputResponse": "TerminalOutputResult",
    "ReleaseTerminalRequest": "TerminalReleaseParams",
    "ReleaseTerminalResponse": "TerminalReleaseResult",
    "WaitForTerminalExitRequest": "TerminalWaitForExitParams",
    "WaitForTerminalExitResponse": "TerminalWaitForExitResult",
    "KillTerminalRequest": "TerminalKillParams",
    "KillTerminalResponse": "TerminalKillResult",
    "PromptCapabilities": "AgentPromptCapabilities",
    "McpCapabilities": "AgentMcpCapabilities",
    "SessionCapabilities": "AgentSessionCapabilities",
    "FileSystemCapabilities": "ClientFileSystemCapabilities",
    "AuthCapabilities": "ClientAuthCapabilities",
    "ElicitationCapabilities": "ClientElicitationCapabilities",
    "AuthMethodAgent": "AuthMethod",
    "EnvVariable": "McpEnvVariable",
    "HttpHeader": "McpHttpHeader",
    "AuthMethod": "AuthMethodUnion",
}
# Definitions that hold nothing but `_meta`: one class, CapabilityMarker (model.md §5).
MARKERS = {
    "SessionListCapabilities",
    "SessionDeleteCapabilities",
    "SessionAdditionalDirectoriesCapabilities",
    "SessionResumeCapabilities",
    "SessionCloseCapabilities",
    "LogoutCapabilities",
    "BooleanConfigOptionCapabilities",
    "ElicitationFormCapabilities",
    "ElicitationUrlCapabilities",
    # 1.25: empty objects in the schema (not even `_meta`); a marker keeps `_meta` readable.
    "NoticeCapabilities",
    "CompactionCapabilities",
    # v2
    "TerminalCancelCapabilities",
    "ToolCallCancelCapabilities",
}
# The three chunk variants share ContentChunk on the wire but are distinct classes.
CHUNKS = {
    "user_message_chunk": "UserMessageChunk",
    "agent_message_chunk": "AgentMessageChunk",
    "agent_thought_chunk": "AgentThoughtChunk",
}
# Objects whose wire shape msgspec cannot express (flattened tagged parts, a tagged Struct used
# untagged): plain frozen classes encoded and decoded by model/_codec.py.
CUSTOM = {"SessionConfigOption", "SetSessionConfigOptionRequest", "RequestPermissionRequest"}
# Not generated: elicitation (form schemas, scopes, open actions) stays free-form JSON for now.
SKIP = {
    "CreateElicitationRequest",
    "CreateElicitationResponse",
    "ElicitationAcceptAction",
    "ElicitationSessionScope",
    "ElicitationRequestScope",
    "ElicitationFormMode",
    "ElicitationUrlMode",
    "ElicitationSchema",
    "StringPropertySchema",
    "NumberPropertySchema",
    "IntegerPropertySchema",
    "BooleanPropertySchema",
    "MultiSelectPropertySchema",
    "StringMultiSelectItems",
    "TitledMultiSelectItems",
    "EnumOption",
    "AgentRequest",
    "AgentResponse",
    "AgentNotification",
    "ClientRequest",
    "ClientResponse",
    "ClientNotification",
    "ContentChunk",
    "Error",
}
# Tagged unions msgspec decodes natively: (tag field, {tag: schema definition}).
NATIVE_UNIONS = ("ContentBlock", "ToolCallContent", "SessionUpdate", "RequestPermissionOutcome")
# Unions the decoder resolves in Python (untagged or array-shaped members).
HOOK_UNIONS = {
    "McpServer": "McpServerStdio | McpServerHttp | McpServerSse",
    "AuthMethodUnion": "AuthMethod | AuthMethodTerminal",
    "EmbeddedResourceResource": "TextResourceContents | BlobResourceContents",
    "SessionConfigSelectOptions": (
        "tuple[SessionConfigSelectOption, ...] | tuple[SessionConfigSelectGroup, ...]"
    ),
}
# Fields that must hold an absolute path (INVALID_PATH) or base64 (INVALID_BASE64).
ABS_PATH = {
    ("ReadTextFileRequest", "path"),
    ("WriteTextFileRequest", "path"),
    ("CreateTerminalRequest", "cwd"),
    ("NewSessionRequest", "cwd"),
    ("LoadSessionRequest", "cwd"),
    ("ResumeSessionRequest", "cwd"),
    ("ListSessionsRequest", "cwd"),
    ("SessionInfo", "cwd"),
}
ABS_PATH_ITEMS = {
    ("NewSessionRequest", "additionalDirectories"),
    ("LoadSessionRequest", "additionalDirectories"),
    ("ResumeSessionRequest", "additionalDirectories"),
}
ABS_PATH |= {
    ("TerminalUpdate", "cwd"),
    ("DiffChange", "path"),
    ("DiffChange", "oldPath"),
    ("RequestPermissionSubject", "cwd"),
}
BASE64 = {
    ("ImageContent", "data"),
    ("AudioContent", "data"),
    ("BlobResourceContents", "blob"),
    ("TerminalOutputChunk", "data"),
    ("TerminalOutput", "data"),
}
INT_RANGES = {
    "uint16": ("U16", 0, 2**16 - 1),
    "uint32": ("U32", 0, 2**32 - 1),
    "uint64": ("U64", 0, 2**64 - 1),
    "int32": ("I32", -(2**31), 2**31 - 1),
    "int64": ("I64", -(2**63), 2**63 - 1),
}
# Open enums (known string constants plus "any other string") are found in the schema; these
# must be among them, so a schema change that closes one fails here rather than silently.
OPEN_ENUMS_EXPECTED = {"SessionConfigOptionCategory", "NoticeSeverity", "CompactionStatus"}
# Fields that schema 1.21 read leniently (`x-deserialize-default-on-error`, and for arrays
# `x-deserialize-skip-invalid-items`) and 1.25 no longer marks: all in requests an agent sends
# the host or a client sends an agent. The model keeps 1.21's tolerance so that nothing that
# decoded before fails now. (def, field) -> skip invalid items.
KEEP_1_21_LENIENCY = {
    ("ReadTextFileRequest", "line"): False,
    ("ReadTextFileRequest", "limit"): False,
    ("CreateTerminalRequest", "args"): True,
    ("CreateTerminalRequest", "env"): True,
    ("CreateTerminalRequest", "cwd"): False,
    ("CreateTerminalRequest", "outputByteLimit"): False,
    ("AuthMethodTerminal", "args"): True,
    ("AuthMethodTerminal", "env"): False,
    ("NewSessionRequest", "additionalDirectories"): True,
    ("NewSessionRequest", "mcpServers"): True,
    ("LoadSessionRequest", "mcpServers"): True,
    ("LoadSessionRequest", "additionalDirectories"): True,
    ("ResumeSessionRequest", "additionalDirectories"): True,
    ("ResumeSessionRequest", "mcpServers"): True,
}
# `sessionUpdate` tags the Rust core classifies (acp.UpdateKind, crates/acp-proto/src/update.rs).
# A generated update class whose tag is not here reports UpdateKind.UNKNOWN, as the core's own
# Update does for it, instead of failing in UpdateKind(tag); add a tag here when the core
# learns it (tests/model/test_schema_current.py holds the two lists equal).
CORE_UPDATE_KINDS = {
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
    "notice",
    "compaction_update",
    "compaction_summary_chunk",
    # ACP v2
    "user_message",
    "agent_message",
    "agent_thought",
    "state_update",
    "tool_call_content_chunk",
    "plan_update",
    "terminal_update",
    "terminal_output_chunk",
}

# --- ACP v2 (schema/v2) merged into the one model ------------------------------------------

#: v2's new `sessionUpdate` variants: tag -> the definition that becomes its class.
V2_UPDATES = {
    "user_message": "UserMessage",
    "agent_message": "AgentMessage",
    "agent_thought": "AgentThought",
    "state_update": "StateUpdate",
    "tool_call_content_chunk": "ToolCallContentChunk",
    "plan_update": "PlanUpdate",
    "terminal_update": "TerminalUpdate",
    "terminal_output_chunk": "TerminalOutputChunk",
}
#: Shapes both versions have that v2 changed: the union of the fields, required where both
#: versions require them (v1's `Diff.path` and v2's `Diff.changes` are both optional).
V2_SHARED = ("Diff", "ToolCallUpdate", "RequestPermissionRequest")
#: v2's open unions (an `other` variant: custom `_` or future values): one class, the tag an
#: open enum, every variant's fields optional unless all variants require them. Union ->
#: (class name, tag field, tag enum name, extra properties).
V2_OPEN_UNIONS = {
    "StateUpdate": ("StateUpdate", "state", "SessionActivity"),
    "DiffChange": ("DiffChange", "operation", "DiffOperation"),
    "RequestPermissionSubject": ("RequestPermissionSubject", "type", "PermissionSubjectType"),
    "PlanUpdateContent": ("PlanUpdateContent", "type", "PlanContentType"),
    "BackgroundWork": ("BackgroundWork", "type", "BackgroundWorkType"),
}


def _refs(node: object) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.add(ref.split("/")[-1])
        for value in node.values():
            out |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            out |= _refs(value)
    return out


def _open_union(v2: dict, union: str) -> dict:
    """One object definition for an open union of v2: the tag (an open enum), then each
    variant's fields in order (and the fields the union itself declares)."""
    node = v2[union]
    _cls, tag, enum_name = V2_OPEN_UNIONS[union]
    props: dict = {tag: {"$ref": f"#/$defs/{enum_name}"}}
    required_each: list[set[str]] = []
    values: list[str] = []
    for alt in node["anyOf"]:
        const = alt.get("properties", {}).get(tag, {}).get("const")
        body: dict = {"properties": {}, "required": []}
        if const is None:  # the `other` variant: the open enum's free string
            body = {
                "properties": {k: v for k, v in alt["properties"].items() if k != tag},
                "required": [k for k in alt.get("required", []) if k != tag],
            }
        else:
            values.append(const)
        for part in alt.get("allOf", []):
            body = v2[part["$ref"].split("/")[-1]]
        required_each.append(set(body.get("required", [])))
        for key, prop in body.get("properties", {}).items():
            if key != "_meta":
                props.setdefault(key, prop)
    for key, prop in node.get("properties", {}).items():
        if key != "_meta":
            props.setdefault(key, prop)
    if union == "RequestPermissionSubject":
        # `ToolCallUpdate` is the tagged `tool_call_update` variant, whose class writes its
        # `sessionUpdate` tag; the subject's tool call has none: its own, untagged class.
        props["toolCall"] = {"$ref": "#/$defs/PermissionToolCall"}
    if union == "StateUpdate":
        # Only `idle` carries a stop reason (an open set of values: `error` holds a JSON-RPC
        # error object, kept as JSON).
        props["stopReason"] = {"type": ["string", "null"], "x-deserialize-default-on-error": True}
        props["error"] = {"type": ["object", "null"], "x-deserialize-default-on-error": True}
    props["_meta"] = {"type": ["object", "null"], "additionalProperties": True}
    required = {tag} | (set.intersection(*required_each) if required_each else set())
    enum = {"anyOf": [*({"type": "string", "const": v} for v in values), {"type": "string"}]}
    return {
        "description": (node.get("description") or "").split("\n")[0],
        "type": "object",
        "properties": props,
        "required": [k for k in props if k in required],
        "$enum": (enum_name, enum),
    }


def merge_v2(v1: dict, v2: dict) -> dict:
    """v1's definitions with v2's additions (see the module's docstring)."""
    defs = dict(v1)
    for name in V2_SHARED:
        old, new = v1[name], v2[name]
        props = {k: v for k, v in old["properties"].items() if k != "_meta"}
        for key, prop in new["properties"].items():
            if key != "_meta":
                props.setdefault(key, prop)
        props["_meta"] = old["properties"]["_meta"]
        required = set(old.get("required", [])) & set(new.get("required", []))
        defs[name] = {**old, "properties": props, "required": [k for k in props if k in required]}
    defs["PermissionToolCall"] = {
        **defs["ToolCallUpdate"],
        "description": "The tool call a permission request is about (a tool call upsert).",
    }
    for union in V2_OPEN_UNIONS:
        merged = _open_union(v2, union)
        enum_name, enum = merged.pop("$enum")
        defs[V2_OPEN_UNIONS[union][0]] = merged
        defs[enum_name] = enum
    # Every v2-only definition the new updates and fields reach; v1's keep v1's shape.
    todo = [*V2_UPDATES.values(), *V2_SHARED, *V2_OPEN_UNIONS]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in defs:
            defs[name] = v2[name]
        for ref in sorted(_refs(defs[name]), reverse=True):
            if ref not in v1 or ref in V2_OPEN_UNIONS:
                todo.append(ref)
    union = defs["SessionUpdate"]
    alts = list(union["oneOf"])
    for tag, ref in V2_UPDATES.items():
        alts.append(
            {
                "type": "object",
                "properties": {"sessionUpdate": {"type": "string", "const": tag}},
                "required": ["sessionUpdate"],
                "allOf": [{"$ref": f"#/$defs/{ref}"}],
            }
        )
    defs["SessionUpdate"] = {**union, "oneOf": alts}
    return defs


def snake(name: str) -> str:
    if name == "_meta":
        return "meta"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def enum_member(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", value).upper()


def is_open_enum(node: dict) -> bool:
    """String constants plus one unconstrained string ("other": custom or future values)."""
    alts = node.get("anyOf")
    if not alts or any(a.get("type") != "string" for a in alts):
        return False
    free = [a for a in alts if "const" not in a and "enum" not in a]
    return len(free) == 1 and len(alts) > 1


class Gen:
    def __init__(self, schema: dict) -> None:
        self.defs: dict = schema["$defs"]
        self.open_enums = {d for d, node in self.defs.items() if is_open_enum(node)}
        missing = OPEN_ENUMS_EXPECTED - self.open_enums
        if missing:
            raise SystemExit(f"no longer open enums in the schema: {sorted(missing)}")
        self.enums: dict[str, list[str]] = {}
        self.classes: list[tuple[str, str, dict, tuple[str, str] | None]] = []
        self.union_variants: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        self.open_aliases: set[str] = set()

    def pub(self, d: str) -> str:
        if d in MARKERS:
            return "CapabilityMarker"
        return RENAME.get(d, d)

    def is_enum(self, d: str) -> bool:
        one = self.defs.get(d, {}).get("oneOf")
        return bool(one) and all("const" in o and o.get("type") == "string" for o in one)

    # -- types -----------------------------------------------------------------------------
    def field_type(self, owner: str, wire: str, prop: dict) -> tuple[str, str, bool]:
        """(annotation without Nullable/Opt, spec expression, nullable)."""
        nullable = False
        p = prop
        types = p.get("type")
        if isinstance(types, list):
            nullable = "null" in types
            rest = [t for t in types if t != "null"]
            p = {**p, "type": rest[0]}
        if "anyOf" in p and "type" not in p:
            alts = p["anyOf"]
            if any(a.get("type") == "null" for a in alts):
                nullable = True
                alts = [a for a in alts if a.get("type") != "null"]
            if len(alts) == 1:
                p = {**alts[0], **{k: v for k, v in p.items() if k not in ("anyOf",)}}
                p.pop("anyOf", None)
                p.update(alts[0])
        if "allOf" in p and len(p["allOf"]) == 1:
            p = {**p, **p["allOf"][0]}
            p.pop("allOf")
        ann, spec = self.type_of(owner, wire, p)
        return ann, spec, nullable

    def type_of(self, owner: str, wire: str, p: dict) -> tuple[str, str]:
        if "$ref" in p:
            return self.ref(p["$ref"].split("/")[-1], owner, wire)
        t = p.get("type")
        if t is None:
            return "Json", "('j',)"
        if t == "string":
            if (owner, wire) in ABS_PATH:
                return "AbsPath", "('p',)"
            if (owner, wire) in BASE64:
                return "B64", "('64',)"
            return "str", "('s',)"
        if t == "boolean":
            return "bool", "('b',)"
        if t == "number":
            return "float", "('f',)"
        if t == "integer":
            alias, lo, hi = INT_RANGES[p["format"]]
            return alias, f"('i', {lo}, {hi})"
        if t == "array":
            items = p["items"]
            if (owner, wire) in ABS_PATH_ITEMS:
                ia, ispec = "AbsPath", "('p',)"
            else:
                ia, ispec = self.type_of(owner, wire + "[]", items)
            return f"tuple[{ia}, ...]", f"('a', {ispec})"
        if t == "object":
            ap = p.get("additionalProperties", True)
            if ap is True or ap == {}:
                return "JsonObject", "('o',)"
            va, vspec = self.type_of(owner, wire + "{}", ap)
            return f"dict[str, {va}]", f"('m', {vspec})"
        raise SystemExit(f"unhandled type {p!r} at {owner}.{wire}")

    def ref(self, d: str, owner: str, wire: str) -> tuple[str, str]:
        node = self.defs[d]
        if d == "ProtocolVersion":
            return "U16", f"('i', 0, {2**16 - 1})"
        if d == "RequestId":
            return "int | str | None", "('rid',)"
        if d == "ErrorCode":
            return "I32", f"('i', {-(2**31)}, {2**31 - 1})"
        if d in self.open_enums:
            return f"{d} | str", f"('E', {d})"
        if d == "AvailableCommandInput":
            return "UnstructuredCommandInput", "('c', UnstructuredCommandInput)"
        if node.get("type") == "string" and "oneOf" not in node:
            if (owner, wire) in ABS_PATH:
                return "AbsPath", "('p',)"
            return "str", "('s',)"
        if self.is_enum(d):
            return d, f"('e', {d})"
        if d in NATIVE_UNIONS:
            return d, f"('u', '{d}')"
        pub = self.pub(d)
        if pub in HOOK_UNIONS:
            return pub, f"('u', '{pub}')"
        if node.get("type") == "object":
            return pub, f"('c', {pub})"
        raise SystemExit(f"unhandled ref {d} at {owner}.{wire}")

    # -- emit ------------------------------------------------------------------------------
    def run(self) -> str:
        for d, node in self.defs.items():
            if self.is_enum(d) or d in self.open_enums:
                alts = node.get("oneOf") or node.get("anyOf")
                self.enums[d] = [a["const"] for a in alts if "const" in a]
        for u in NATIVE_UNIONS:
            node = self.defs[u]
            tag = node["discriminator"]["propertyName"]
            vs = []
            for alt in node["oneOf"]:
                tv = alt["properties"][tag]["const"]
                ref = alt["allOf"][0]["$ref"].split("/")[-1] if "allOf" in alt else None
                vs.append((tv, ref))
            self.union_variants[u] = (tag, vs)

        out: list[str] = [HEADER]
        for name, values in self.enums.items():
            out.append(f"\n\nclass {name}(enum.StrEnum):")
            for v in values:
                out.append(f"    {enum_member(v)} = {v!r}")

        aliases_at = len(out)
        tagged: dict[str, tuple[str, str, str]] = {}  # def -> (class, tag field, tag value)
        for u, (tag, vs) in self.union_variants.items():
            for tv, ref in vs:
                if u == "SessionUpdate" and ref == "ContentChunk":
                    tagged[CHUNKS[tv]] = (CHUNKS[tv], tag, tv)
                elif ref is None:  # a variant with no fields: its own empty class
                    cname = "CancelledPermissionOutcome"
                    tagged[cname] = (cname, tag, tv)
                else:
                    tagged[ref] = (self.pub(ref), tag, tv)
        # McpServer's http/sse variants and the auth method terminal variant carry `type` too.
        tagged["McpServerHttp"] = ("McpServerHttp", "type", "http")
        tagged["McpServerSse"] = ("McpServerSse", "type", "sse")
        tagged["AuthMethodTerminal"] = ("AuthMethodTerminal", "type", "terminal")

        emitted: set[str] = set()
        specs: list[str] = []
        chunk = self.defs["ContentChunk"]
        order = list(self.defs.items())
        for _tv, cname in CHUNKS.items():
            order.append((cname, chunk))
        order.append(("CancelledPermissionOutcome", {"type": "object", "properties": {}}))
        order.append(("SessionConfigMarker", None))
        for d, node in order:
            if node is None or d in SKIP or self.is_enum(d) or d in self.open_enums:
                continue
            if node.get("type") != "object":
                continue
            pub = self.pub(d)
            if pub in emitted:
                continue
            emitted.add(pub)
            tag = tagged.get(d)
            src = d if d not in CHUNKS.values() else "ContentChunk"
            out.append(self.emit_class(src, pub, node, tag, specs))
        if self.open_aliases:
            block = ["\n\n# Open enums inside Structs: see open_enum() below.", "if TYPE_CHECKING:"]
            block += [f"    _Open{e}: TypeAlias = {e} | str" for e in sorted(self.open_aliases)]
            block.append("else:")
            block += [f"    _Open{e} = str" for e in sorted(self.open_aliases)]
            block.append(OPEN_ENUM_HELPER)
            out[aliases_at:aliases_at] = block
        # A SessionConfigOption's kind parts: wire fields flattened into the option.
        out.append(UNION_ALIASES_HEAD)
        for u, (_tag, vs) in self.union_variants.items():
            members = []
            for tv, ref in vs:
                if u == "SessionUpdate" and ref == "ContentChunk":
                    members.append(CHUNKS[tv])
                elif ref is None:
                    members.append("CancelledPermissionOutcome")
                else:
                    members.append(self.pub(ref))
            out.append(f"{u}: TypeAlias = {' | '.join(members)}")
        out.append("\nif TYPE_CHECKING:")
        for u, ann in HOOK_UNIONS.items():
            out.append(f"    {u}: TypeAlias = {ann}")
        out.append("else:")
        for u in HOOK_UNIONS:
            out.append(f"    {u} = hook_marker({u!r})")
        for u, ann in HOOK_UNIONS.items():
            if not ann.startswith("tuple"):
                for m in ann.split(" | "):
                    out.append(f"    {u}.register({m})")
            else:
                out.append(f"    {u}.register(tuple)")
        out.append("\n# Native tagged unions: (tag field, {wire tag: class}).")
        out.append("UNIONS: dict[str, tuple[str, dict[str, type[Any]]]] = {")
        for u, (tag, vs) in self.union_variants.items():
            items = []
            for tv, ref in vs:
                if u == "SessionUpdate" and ref == "ContentChunk":
                    cls = CHUNKS[tv]
                elif ref is None:
                    cls = "CancelledPermissionOutcome"
                else:
                    cls = self.pub(ref)
                items.append(f"{tv!r}: {cls}")
            out.append(f"    {u!r}: ({tag!r}, {{{', '.join(items)}}}),")
        out.append("}")
        out.append("\n# Per class: (attr, wire, type spec, required, nullable, default-on-error,")
        out.append("# skip-invalid-items, default for a required field in lenient mode).")
        out.append("SPECS: dict[type[Any], tuple[FieldSpec, ...]] = {")
        out.extend(specs)
        out.append("}")
        out.append("TAGS: dict[type[Any], tuple[str, str]] = {")
        for _d, (cls, tf, tv) in sorted(tagged.items(), key=lambda kv: kv[1][0]):
            out.append(f"    {cls}: ({tf!r}, {tv!r}),")
        out.append("}")
        out.append(
            "# v2's open unions as one class: (tag field, its open enum). A variant whose tag is"
        )
        out.append(
            "# not a member is a custom or future one, whose other fields the schema leaves open."
        )
        out.append("OPEN_TAGS: dict[type[Any], tuple[str, type[enum.StrEnum]]] = {")
        for cls, tf, enum_name in sorted(V2_OPEN_UNIONS.values()):
            if cls in emitted:
                out.append(f"    {cls}: ({tf!r}, {enum_name}),")
        out.append("}")
        names = sorted(emitted | set(self.enums) | set(self.union_variants) | set(HOOK_UNIONS))
        out.append("\n__all__ = [")
        for n in names:
            out.append(f"    {n!r},")
        out.append("]")
        return "\n".join(out) + "\n"

    def emit_class(
        self, d: str, pub: str, node: dict, tag: tuple[str, str, str] | None, specs: list[str]
    ) -> str:
        props: dict = node.get("properties", {})
        required = set(node.get("required", []))
        if d in MARKERS:
            props = {"_meta": self.defs["SessionListCapabilities"]["properties"]["_meta"]}
        fields: list[tuple[str, str, str, str, bool, bool, bool, bool, str]] = []
        if d == "SessionConfigOption":
            props = {k: v for k, v in props.items() if k != "_meta"}
            props["kind"] = {"$kind": True}
            props["_meta"] = node["properties"]["_meta"]
            required.add("kind")
        if d == "SetSessionConfigOptionRequest":
            props = dict(props)
            meta = props.pop("_meta")
            props["value"] = {"$value": True}
            props["_meta"] = meta
            required.add("value")
        for wire, prop in props.items():
            if wire == "kind" and prop.get("$kind"):
                ann, spec, nullable = "SessionConfigSelect | SessionConfigBoolean", "('k',)", False
            elif wire == "value" and prop.get("$value"):
                ann, spec, nullable = "str | bool", "('v',)", False
            else:
                ann, spec, nullable = self.field_type(d, wire, prop)
            req = wire in required
            doe = bool(prop.get("x-deserialize-default-on-error"))
            skip = bool(prop.get("x-deserialize-skip-invalid-items"))
            if (d, wire) in KEEP_1_21_LENIENCY:
                doe, skip = True, skip or KEEP_1_21_LENIENCY[(d, wire)]
            attr = snake(wire)
            default = "None"
            if req and doe:
                default = "()" if ann.startswith("tuple") else repr(prop.get("default"))
            fields.append((attr, wire, ann, spec, req, nullable, doe, skip, default))
        custom = d in CUSTOM
        # An open enum in a Struct: msgspec cannot decode `Enum | str`, so at run time the field
        # is a str (alias _Open<Enum>) and __post_init__ turns a known value into its member;
        # type checkers see `Enum | str`. The walker (spec 'E') gives the same result.
        open_fields: list[tuple[str, str]] = []
        if not custom:
            for i, f in enumerate(fields):
                if f[3].startswith("('E',"):
                    enum_name = f[3].split(", ")[1].rstrip(")")
                    if f[2] != f"{enum_name} | str":
                        raise SystemExit(f"open enum {enum_name} nested at {d}.{f[1]}")
                    self.open_aliases.add(enum_name)
                    fields[i] = (f[0], f[1], f"_Open{enum_name}", *f[3:])
                    open_fields.append((f[0], enum_name))
        lines = []
        # Repeated per class: msgspec does not inherit kw_only, and type checkers want frozen.
        kw = [] if custom else ["frozen=True", "kw_only=True"]
        if tag and not custom:
            kw.append(f"tag_field={tag[1]!r}, tag={tag[2]!r}")
        renames = {f[0]: f[1] for f in fields if f[0] != f[1]}
        if renames and not custom:
            kw.append("rename={" + ", ".join(f"{a!r}: {w!r}" for a, w in renames.items()) + "}")
        base = "Custom" if custom else "Base"
        head = f"class {pub}({base}" + (", " + ", ".join(kw) if kw else "") + "):"
        if len(head) > 100:
            head = f"class {pub}(\n    {base},\n" + "".join(f"    {k},\n" for k in kw) + "):"
        lines.append("\n\n" + head)
        doc = (node.get("description") or "").strip().split("\n")[0]
        if d in MARKERS:
            doc = "An empty capability object: present means supported."
        if doc:
            doc = doc.replace('"""', "'''").replace("\\", "\\\\")
            if len(doc) > 92:
                doc = doc[:88].rsplit(" ", 1)[0] + " ..."
            lines.append(f'    """{doc}"""\n')
        if tag and tag[1] == "sessionUpdate":
            lines.append(f"    SESSION_UPDATE: ClassVar[str] = {tag[2]!r}")
            lines.append("\n    @property")
            lines.append("    def update_kind(self) -> UpdateKind:")
            if tag[2] in CORE_UPDATE_KINDS:
                lines.append("        return update_kind_of(self.SESSION_UPDATE)\n")
            else:
                lines.append(UNCLASSIFIED_KIND)
        if custom:
            lines.append(f"    __slots__ = ({''.join(repr(f[0]) + ', ' for f in fields)})")
        for attr, _wire, ann, _spec, req, nullable, _doe, _skip, _default in fields:
            if custom:  # slots: annotations only, the defaults live in __init__
                opt = "Nullable" if nullable else "Opt"
                wrap = ann if req and not nullable else f"{opt}[{ann}]"
                lines.append(f"    {attr}: {wrap}")
            elif req and not nullable:
                lines.append(f"    {attr}: {ann}")
            elif nullable:
                lines.append(f"    {attr}: Nullable[{ann}] = OMITTED")
            else:
                lines.append(f"    {attr}: Opt[{ann}] = OMITTED")
        u64 = [f[0] for f in fields if f[2] == "U64"]
        if (u64 or open_fields) and not custom:
            lines.append("\n    def __post_init__(self) -> None:")
        if u64 and not custom:
            args = ", ".join(repr(a) for a in u64)
            lines.append(f"        check_u64(self, {args})")
        for attr, enum_name in open_fields:
            lines.append(f"        open_enum(self, {attr!r}, {enum_name})")
        if not fields:
            lines.append("    pass")
        if custom:
            params = []
            for attr, _wire, ann, _spec, req, nullable, _doe, _skip, _default in fields:
                if req and not nullable:
                    params.append(f"{attr}: {ann}")
                elif nullable:
                    params.append(f"{attr}: Nullable[{ann}] = OMITTED")
                else:
                    params.append(f"{attr}: Opt[{ann}] = OMITTED")
            lines.append("\n    def __init__(\n        self,\n        *,")
            for p_ in params:
                lines.append(f"        {p_},")
            lines.append("    ) -> None:")
            for attr, *_ in fields:
                lines.append(f"        object.__setattr__(self, {attr!r}, {attr})")
        spec_items = []
        for attr, wire, _ann, spec, req, nullable, doe, skip, default in fields:
            spec_items.append(
                f"        FieldSpec({attr!r}, {wire!r}, {spec}, {req}, {nullable}, {doe}, {skip},"
                f" {default}),"
            )
        specs.append(f"    {pub}: (\n" + "\n".join(spec_items) + "\n    ),")
        return "\n".join(lines)


HEADER = '''\
# Generated by scripts/gen_model.py from the ACP v1 schema and v2's additions: do not edit.
# ruff: noqa: E501, F401, RUF023
"""Every ACP v1 type, and what ACP v2 adds, as a frozen class (design/model.md §5)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from msgspec.structs import force_setattr

from ._base import (
    B64,
    I32,
    I64,
    OMITTED,
    U16,
    U32,
    U64,
    AbsPath,
    Base,
    Custom,
    FieldSpec,
    Json,
    JsonObject,
    Nullable,
    Opt,
    check_u64,
    hook_marker,
    update_kind_of,
)

if TYPE_CHECKING:
    from .._kinds import UpdateKind'''

UNCLASSIFIED_KIND = '        return update_kind_of("unknown")  # not classified by the core yet\n'

OPEN_ENUM_HELPER = """

def open_enum(obj: Any, attr: str, cls: type[enum.StrEnum]) -> None:
    \"\"\"A known value of an open enum becomes its member; a custom or future one stays str.\"\"\"
    value = getattr(obj, attr)
    if type(value) is str:
        try:
            force_setattr(obj, attr, cls(value))
        except ValueError:
            pass"""

UNION_ALIASES_HEAD = (
    "\n\n# Unions: the tagged ones are msgspec-native; the others resolve in model/_codec.py."
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if the generated file is stale")
    ap.add_argument("--schema", type=Path, help="schema.json (default: the vendored copy)")
    args = ap.parse_args()
    schema_path = args.schema or next((p for p in SCHEMA_CANDIDATES if p.exists()), None)
    if schema_path is None:
        print("schema.json not found", file=sys.stderr)
        return 2
    schema = json.loads(schema_path.read_text())
    schema["$defs"] = merge_v2(schema["$defs"], json.loads(SCHEMA_V2.read_text())["$defs"])
    text = Gen(schema).run()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            rel = OUT.relative_to(ROOT)
            print(f"{rel} is stale: run python scripts/gen_model.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

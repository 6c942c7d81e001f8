"""`UpdateKind`, a leaf module: the model names it for its update classes and the facade
re-exports it from `_types` (where the Rust core looks it up by name), so neither the model nor
the core needs the facade's other records to know an update's kind."""

from __future__ import annotations

import enum

__all__ = ["UpdateKind"]


class UpdateKind(enum.StrEnum):
    """The `sessionUpdate` of an update; values are the wire names."""

    USER_MESSAGE_CHUNK = "user_message_chunk"
    AGENT_MESSAGE_CHUNK = "agent_message_chunk"
    AGENT_THOUGHT_CHUNK = "agent_thought_chunk"
    TOOL_CALL = "tool_call"
    TOOL_CALL_UPDATE = "tool_call_update"
    PLAN = "plan"
    AVAILABLE_COMMANDS_UPDATE = "available_commands_update"
    CURRENT_MODE_UPDATE = "current_mode_update"
    CONFIG_OPTION_UPDATE = "config_option_update"
    SESSION_INFO_UPDATE = "session_info_update"
    USAGE_UPDATE = "usage_update"
    #: A user-facing notice (`model.Notice`); sent only when the client opts in
    #: (`ClientCapabilityConfig(notices=True)`); never part of the reply text.
    NOTICE = "notice"
    #: A compaction's state and its summary's chunks; sent only when the client opts in
    #: (`ClientCapabilityConfig(compaction=True)`).
    COMPACTION_UPDATE = "compaction_update"
    COMPACTION_SUMMARY_CHUNK = "compaction_summary_chunk"
    #: ACP v2 (``protocol="v2"``/``"auto"``): a whole user, agent or thought message by
    #: ``messageId`` (the last one wins; later chunks of that id append). The reply is folded
    #: from these, so ``TurnResult.response`` means the same in both versions.
    USER_MESSAGE = "user_message"
    AGENT_MESSAGE = "agent_message"
    AGENT_THOUGHT = "agent_thought"
    #: ACP v2: the session's activity (``Update.text`` is ``running``, ``idle`` or
    #: ``requires_action``); the ``idle`` after a turn's ``running`` ends ``prompt()``.
    STATE_UPDATE = "state_update"
    #: ACP v2: a tool call's content item, a plan, a terminal's state and its output.
    TOOL_CALL_CONTENT_CHUNK = "tool_call_content_chunk"
    PLAN_UPDATE = "plan_update"
    TERMINAL_UPDATE = "terminal_update"
    TERMINAL_OUTPUT_CHUNK = "terminal_output_chunk"
    #: A `sessionUpdate` the client does not know (e.g. unstable variants); delivered as is.
    UNKNOWN = "unknown"

//! Updates: the known `sessionUpdate` kinds and one numbered update borrowed from its line.

use std::borrow::Cow;

use crate::wire::{self, UpdateFields};

/// The known `sessionUpdate` values, in the order of the Python `UpdateKind` enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UpdateKind {
    UserMessageChunk,
    AgentMessageChunk,
    AgentThoughtChunk,
    ToolCall,
    ToolCallUpdate,
    Plan,
    AvailableCommandsUpdate,
    CurrentModeUpdate,
    ConfigOptionUpdate,
    SessionInfoUpdate,
    UsageUpdate,
    /// A user-facing notice (schema 1.25), sent only to a client that advertises
    /// `session.notices`; never part of the reply.
    Notice,
    /// A compaction's upsert and its summary's chunks (schema 1.25), sent only to a client
    /// that advertises `session.compaction`.
    CompactionUpdate,
    CompactionSummaryChunk,
    /// ACP v2 (design/protocol-now.md §4): whole-message upserts with a required `messageId`
    /// (the last one wins, later chunks append), the session's activity (`running`, `idle` with
    /// the stop reason, `requires_action`), and v2's tool call content, plan and terminals.
    UserMessage,
    AgentMessage,
    AgentThought,
    StateUpdate,
    ToolCallContentChunk,
    PlanUpdate,
    TerminalUpdate,
    TerminalOutputChunk,
    Unknown,
}

impl UpdateKind {
    pub const ALL: [UpdateKind; 23] = [
        UpdateKind::UserMessageChunk,
        UpdateKind::AgentMessageChunk,
        UpdateKind::AgentThoughtChunk,
        UpdateKind::ToolCall,
        UpdateKind::ToolCallUpdate,
        UpdateKind::Plan,
        UpdateKind::AvailableCommandsUpdate,
        UpdateKind::CurrentModeUpdate,
        UpdateKind::ConfigOptionUpdate,
        UpdateKind::SessionInfoUpdate,
        UpdateKind::UsageUpdate,
        UpdateKind::Notice,
        UpdateKind::CompactionUpdate,
        UpdateKind::CompactionSummaryChunk,
        UpdateKind::UserMessage,
        UpdateKind::AgentMessage,
        UpdateKind::AgentThought,
        UpdateKind::StateUpdate,
        UpdateKind::ToolCallContentChunk,
        UpdateKind::PlanUpdate,
        UpdateKind::TerminalUpdate,
        UpdateKind::TerminalOutputChunk,
        UpdateKind::Unknown,
    ];

    /// Whether an update of this kind changes the session state a client publishes to other
    /// threads (its mode, config options, commands): the pump republishes the session after it.
    pub fn publishes(self) -> bool {
        matches!(
            self,
            UpdateKind::CurrentModeUpdate
                | UpdateKind::ConfigOptionUpdate
                | UpdateKind::AvailableCommandsUpdate
        )
    }

    pub fn from_wire(name: &str) -> UpdateKind {
        match name {
            "user_message_chunk" => UpdateKind::UserMessageChunk,
            "agent_message_chunk" => UpdateKind::AgentMessageChunk,
            "agent_thought_chunk" => UpdateKind::AgentThoughtChunk,
            "tool_call" => UpdateKind::ToolCall,
            "tool_call_update" => UpdateKind::ToolCallUpdate,
            "plan" => UpdateKind::Plan,
            "available_commands_update" => UpdateKind::AvailableCommandsUpdate,
            "current_mode_update" => UpdateKind::CurrentModeUpdate,
            "config_option_update" => UpdateKind::ConfigOptionUpdate,
            "session_info_update" => UpdateKind::SessionInfoUpdate,
            "usage_update" => UpdateKind::UsageUpdate,
            "notice" => UpdateKind::Notice,
            "compaction_update" => UpdateKind::CompactionUpdate,
            "compaction_summary_chunk" => UpdateKind::CompactionSummaryChunk,
            "user_message" => UpdateKind::UserMessage,
            "agent_message" => UpdateKind::AgentMessage,
            "agent_thought" => UpdateKind::AgentThought,
            "state_update" => UpdateKind::StateUpdate,
            "tool_call_content_chunk" => UpdateKind::ToolCallContentChunk,
            "plan_update" => UpdateKind::PlanUpdate,
            "terminal_update" => UpdateKind::TerminalUpdate,
            "terminal_output_chunk" => UpdateKind::TerminalOutputChunk,
            _ => UpdateKind::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            UpdateKind::UserMessageChunk => "user_message_chunk",
            UpdateKind::AgentMessageChunk => "agent_message_chunk",
            UpdateKind::AgentThoughtChunk => "agent_thought_chunk",
            UpdateKind::ToolCall => "tool_call",
            UpdateKind::ToolCallUpdate => "tool_call_update",
            UpdateKind::Plan => "plan",
            UpdateKind::AvailableCommandsUpdate => "available_commands_update",
            UpdateKind::CurrentModeUpdate => "current_mode_update",
            UpdateKind::ConfigOptionUpdate => "config_option_update",
            UpdateKind::SessionInfoUpdate => "session_info_update",
            UpdateKind::UsageUpdate => "usage_update",
            UpdateKind::Notice => "notice",
            UpdateKind::CompactionUpdate => "compaction_update",
            UpdateKind::CompactionSummaryChunk => "compaction_summary_chunk",
            UpdateKind::UserMessage => "user_message",
            UpdateKind::AgentMessage => "agent_message",
            UpdateKind::AgentThought => "agent_thought",
            UpdateKind::StateUpdate => "state_update",
            UpdateKind::ToolCallContentChunk => "tool_call_content_chunk",
            UpdateKind::PlanUpdate => "plan_update",
            UpdateKind::TerminalUpdate => "terminal_update",
            UpdateKind::TerminalOutputChunk => "terminal_output_chunk",
            UpdateKind::Unknown => "unknown",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The v2 kinds whose `text` (and fold) is read from the update as a JSON value.
    pub fn reads_value(self) -> bool {
        matches!(
            self,
            UpdateKind::UserMessage
                | UpdateKind::AgentMessage
                | UpdateKind::AgentThought
                | UpdateKind::StateUpdate
                | UpdateKind::PlanUpdate
        )
    }

    /// The three message-chunk kinds, whose `text` is their text content block's.
    pub fn is_chunk(self) -> bool {
        matches!(
            self,
            UpdateKind::UserMessageChunk
                | UpdateKind::AgentMessageChunk
                | UpdateKind::AgentThoughtChunk
        )
    }
}

/// What an update does to the reply of its session's turn, for a host that assembles the reply
/// itself (`Config::collect_reply` off): v1's chunks and v2's in-order chunks append; a v2
/// upsert that replaces a message, or a chunk of an earlier message, splices: the reply's
/// bytes `at..at + remove` become the update's `text`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Joined {
    No,
    Append,
    Splice { at: usize, remove: usize },
}

impl Joined {
    pub fn any(self) -> bool {
        self != Joined::No
    }
}

/// One numbered update, borrowed from its line.
#[derive(Debug)]
pub struct UpdateEvent<'a> {
    pub kind: UpdateKind,
    /// The wire name, which differs from `kind` only for `Unknown`.
    pub session_update: Cow<'a, str>,
    pub transport_epoch: u64,
    pub update_sequence: u64,
    pub session_id: Cow<'a, str>,
    /// The exact line, surrounding whitespace trimmed.
    pub envelope: &'a str,
    pub text: Cow<'a, str>,
    pub message_id: Option<Cow<'a, str>>,
    pub tool_call_id: Option<Cow<'a, str>>,
    /// The envelope (and so every string taken from it) is known to be ASCII; false when unknown.
    pub ascii: bool,
}

impl<'a> UpdateEvent<'a> {
    pub(crate) fn text_of(kind: UpdateKind, fields: &UpdateFields<'a>) -> Cow<'a, str> {
        let take = |s: &wire::Str<'a>| s.0.clone().unwrap_or(Cow::Borrowed(""));
        match kind {
            // A summary chunk's text is its text block's, as a message chunk's is (it never
            // joins the reply: only agent message chunks do).
            _ if kind.is_chunk() || kind == UpdateKind::CompactionSummaryChunk => {
                match &fields.content.0 {
                    Some(content) if content.kind.as_str() == Some("text") => take(&content.text),
                    _ => Cow::Borrowed(""),
                }
            }
            UpdateKind::ToolCall
            | UpdateKind::ToolCallUpdate
            | UpdateKind::SessionInfoUpdate
            | UpdateKind::Notice => take(&fields.title),
            UpdateKind::CurrentModeUpdate => take(&fields.current_mode_id),
            UpdateKind::Plan => {
                let entries = fields.entries.0.as_deref().unwrap_or(&[]);
                let parts: Vec<&str> = entries
                    .iter()
                    .filter_map(|entry| entry.0.as_ref().and_then(|e| e.content.as_str()))
                    .collect();
                match parts.as_slice() {
                    [] => Cow::Borrowed(""),
                    [only] => Cow::Owned((*only).to_owned()),
                    _ => Cow::Owned(parts.join("\n")),
                }
            }
            _ => Cow::Borrowed(""),
        }
    }
}

/// The `text` of a v2 update read as a JSON value (`UpdateKind::reads_value`): a message
/// upsert's text blocks joined, a state update's state, a plan's entries one per line.
pub(crate) fn text_of_value(kind: UpdateKind, update: &serde_json::Value) -> String {
    match kind {
        UpdateKind::UserMessage | UpdateKind::AgentMessage | UpdateKind::AgentThought => {
            blocks_text(update.get("content")).unwrap_or_default()
        }
        UpdateKind::StateUpdate => update
            .get("state")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned(),
        UpdateKind::PlanUpdate => update
            .get("plan")
            .and_then(|p| p.get("entries"))
            .and_then(serde_json::Value::as_array)
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|e| e.get("content").and_then(serde_json::Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The text blocks of a v2 message's `content` array, joined; `None` when `content` is absent,
/// null or not an array (an upsert that leaves the message's content as it was).
pub(crate) fn blocks_text(content: Option<&serde_json::Value>) -> Option<String> {
    let blocks = content?.as_array()?;
    let mut text = String::new();
    for block in blocks {
        if block.get("type").and_then(serde_json::Value::as_str) == Some("text") {
            if let Some(part) = block.get("text").and_then(serde_json::Value::as_str) {
                text.push_str(part);
            }
        }
    }
    Some(text)
}

/// The durable-observer check for an update (`durable=True`): an observer that cannot record
/// it fails the call.
pub fn missing_observer(update: &UpdateEvent<'_>) -> crate::error::AcpError {
    crate::error::AcpError::MissingDurableObserver(format!(
        "update {} ({}) arrived but the observer has no on_update to record it",
        update.update_sequence, update.session_update
    ))
}

//! The sessions table: per open session, what the agent said of it (modes, config options,
//! legacy models, commands), the turn in flight with its reply capture and `TurnResult` record,
//! the cancel latch, and the tool kinds announced for the permission fallback.

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value};

use crate::calls::CallId;
use crate::results::{self, ModelsInfo, ModesInfo, SessionResult};

/// How many tool calls' kinds a session remembers for permission requests that omit the kind.
pub const ANNOUNCED_KINDS: usize = 1024;

/// A record that a reply stopped at a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    pub kind: OverflowKind,
    pub admitted_bytes: usize,
    pub admitted_segments: usize,
    pub withheld_update_sequence: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverflowKind {
    ResponseBytes,
    ResponseSegments,
}

impl OverflowKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OverflowKind::ResponseBytes => "response_bytes",
            OverflowKind::ResponseSegments => "response_segments",
        }
    }
}

/// The reply of one turn within the transfer limits.
#[derive(Debug, Default)]
pub struct Capture {
    pub text: String,
    pub bytes: usize,
    pub segments: usize,
    pub overflow: Option<Overflow>,
}

/// One turn in flight: its reply and the final state of what it announced.
#[derive(Debug)]
pub struct Turn {
    pub call: CallId,
    pub capture: Capture,
    /// Tool calls announced in the turn, first-seen order, merged to their final state.
    pub tool_calls: Vec<(String, ToolCallState)>,
    /// Position of each tool call id in `tool_calls` (a turn may announce thousands).
    index: HashMap<String, usize>,
    pub plan: Option<Value>,
    pub commands: Option<Value>,
    pub usage: Option<Value>,
}

impl Turn {
    pub fn new(call: CallId) -> Turn {
        Turn {
            call,
            capture: Capture::default(),
            tool_calls: Vec::new(),
            index: HashMap::new(),
            plan: None,
            commands: None,
            usage: None,
        }
    }

    /// A `tool_call` (re)announces the call: a repeated id is replaced in place.
    pub fn announce(&mut self, id: &str, mut fields: Map<String, Value>) {
        fields.remove("sessionUpdate");
        self.put(id, ToolCallState::Object(fields));
    }

    /// A permission request announces a call it names as its `toolCall` object's text.
    pub fn announce_raw(&mut self, id: &str, object: &str) {
        let state = if object.contains("\"sessionUpdate\"") {
            // Kept out of the record, as `announce` does (rare: parsed to drop it).
            let mut fields: Map<String, Value> = serde_json::from_str(object).unwrap_or_default();
            fields.remove("sessionUpdate");
            ToolCallState::Object(fields)
        } else {
            ToolCallState::Raw(object.to_owned())
        };
        self.put(id, state);
    }

    fn put(&mut self, id: &str, state: ToolCallState) {
        match self.index.get(id) {
            Some(&at) => self.tool_calls[at].1 = state,
            None => {
                self.index.insert(id.to_owned(), self.tool_calls.len());
                self.tool_calls.push((id.to_owned(), state));
            }
        }
    }

    /// A `tool_call_update` sets the keys it carries; a null removes one, except `title`.
    pub fn amend(&mut self, id: &str, fields: Map<String, Value>) {
        let Some(&at) = self.index.get(id) else {
            return; // not announced in this turn: left out
        };
        let call = self.tool_calls[at].1.object();
        for (key, value) in fields {
            if key == "sessionUpdate" {
                continue;
            }
            if value.is_null() {
                if key != "title" {
                    call.remove(&key);
                }
            } else {
                call.insert(key, value);
            }
        }
    }

    pub fn knows(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }
}

/// A tool call's state in a turn's record: the object as the agent sent it (a permission
/// request's `toolCall`; most are never amended, so most are never built as JSON values), or
/// built once an update amends it.
#[derive(Debug)]
pub enum ToolCallState {
    Raw(String),
    Object(Map<String, Value>),
}

impl ToolCallState {
    fn object(&mut self) -> &mut Map<String, Value> {
        if let ToolCallState::Raw(text) = self {
            *self = ToolCallState::Object(serde_json::from_str(text).unwrap_or_default());
        }
        match self {
            ToolCallState::Object(fields) => fields,
            ToolCallState::Raw(_) => unreachable!("built above"),
        }
    }

    /// The final state as JSON text.
    pub fn into_json(self) -> String {
        match self {
            ToolCallState::Raw(text) => text,
            ToolCallState::Object(fields) => Value::Object(fields).to_string(),
        }
    }
}

/// What a finished turn hands back.
#[derive(Debug, PartialEq)]
pub struct TurnOutcome {
    pub session_id: String,
    pub response: String,
    pub stop_reason: String,
    pub overflow: Option<Overflow>,
    /// The timeout fired, and the response came within the cancel grace.
    pub timed_out: bool,
    /// Each tool call's final state as a JSON object.
    pub tool_calls: Vec<String>,
    pub plan: Option<String>,
    pub available_commands: Option<String>,
    pub usage: Option<String>,
    pub current_mode_id: String,
}

#[derive(Debug)]
pub struct SessionEntry {
    pub id: String,
    pub modes: ModesInfo,
    /// The latest `configOptions` array.
    pub config_options: Option<Value>,
    /// The legacy `models` object of the new/load/resume result.
    pub legacy_models: Option<ModelsInfo>,
    /// The latest `availableCommands` array.
    pub commands: Option<Value>,
    pub turn: Option<Turn>,
    /// The cancel latch of the turn in flight (or of a timed-out one until its late answer).
    pub latched: bool,
    /// A timed-out turn's request id, still answered `cancelled` until it is answered.
    pub late_turn: Option<i64>,
    announced: VecDeque<(String, String)>,
}

impl SessionEntry {
    pub fn new(id: &str) -> SessionEntry {
        SessionEntry {
            id: id.to_owned(),
            modes: ModesInfo::default(),
            config_options: None,
            legacy_models: None,
            commands: None,
            turn: None,
            latched: false,
            late_turn: None,
            announced: VecDeque::new(),
        }
    }

    /// A new/load/resume result: what it carries replaces; what it lacks stays.
    pub fn apply(&mut self, result: SessionResult) {
        if let Some(modes) = result.modes {
            self.modes = modes;
        }
        if let Some(options) = result.config_options {
            self.config_options = Some(options);
        }
        if let Some(models) = result.models {
            self.legacy_models = Some(models);
        }
    }

    /// The `modes` the agent sent, else its `"mode"` config option (an agent that offers its
    /// modes only that way), else empty.
    pub fn offered_modes(&self) -> ModesInfo {
        if !self.modes.available.is_empty() {
            return self.modes.clone();
        }
        self.config_options
            .as_ref()
            .and_then(results::modes_from_config)
            .unwrap_or_else(|| self.modes.clone())
    }

    /// The id of the `"mode"` select config option when the modes come from it.
    pub fn mode_option(&self) -> Option<String> {
        if !self.modes.available.is_empty() {
            return None;
        }
        let options = self.config_options.as_ref()?;
        results::select_config_ids(options)
            .find(|(_, category)| *category == "mode")
            .map(|(id, _)| id.to_owned())
    }

    /// From the `"model"` config option, else the legacy models, else empty.
    pub fn models(&self) -> ModelsInfo {
        self.config_options
            .as_ref()
            .and_then(results::models_from_config)
            .or_else(|| self.legacy_models.clone())
            .unwrap_or_default()
    }

    pub fn announce_kind(&mut self, tool_call_id: &str, kind: &str) {
        if let Some(slot) = self.announced.iter_mut().find(|(id, _)| id == tool_call_id) {
            slot.1 = kind.to_owned();
            return;
        }
        if self.announced.len() == ANNOUNCED_KINDS {
            self.announced.pop_front();
        }
        self.announced
            .push_back((tool_call_id.to_owned(), kind.to_owned()));
    }

    pub fn announced_kind(&self, tool_call_id: &str) -> Option<String> {
        self.announced
            .iter()
            .rev()
            .find(|(known, _)| known == tool_call_id)
            .map(|(_, kind)| kind.clone())
    }
}

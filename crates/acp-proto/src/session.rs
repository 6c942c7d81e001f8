//! The sessions table: per open session, what the agent said of it (modes, config options,
//! legacy models, commands), the turn in flight with its reply capture and `TurnResult` record,
//! the cancel latch, and the tool kinds announced for the permission fallback.

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value};

use crate::calls::CallId;
use crate::results::{self, ModelsInfo, ModesInfo, SessionResult};
use crate::update::Joined;

/// How many tool calls' kinds a session remembers for permission requests that omit the kind.
pub const ANNOUNCED_KINDS: usize = 1024;

/// How many notices, and how many distinct compactions, one turn's record keeps: the first
/// ones (every one still reaches the observer and the journal). An agent that sends more in
/// one turn is flooding; the record stays bounded.
pub const TURN_NOTICES: usize = 256;
pub const TURN_COMPACTIONS: usize = 256;

/// How many `tool_call_content_chunk` items one tool call's record keeps (v2).
pub const TOOL_CALL_CONTENT_ITEMS: usize = 1024;

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
    /// v2: the reply per `messageId`, in first-seen order (`text` stays empty).
    pub messages: Messages,
    /// v2: some admitted text was not known to be ASCII (the reply's `str` is then decoded).
    pub not_ascii: bool,
}

/// A v2 reply: each agent message by `messageId`, in first-seen order. A chunk appends to its
/// message, an `agent_message` upsert replaces it; the reply is the messages joined. Each
/// message's place in the reply (`spans`) is kept so a host that assembles the reply itself is
/// told exactly what changed (`Joined`); the texts themselves only when the connection
/// collects the reply.
#[derive(Debug, Default)]
pub struct Messages {
    /// (start, length) in bytes of the joined reply, per message.
    spans: Vec<(usize, usize)>,
    /// The texts, when collecting.
    texts: Vec<String>,
    index: HashMap<String, usize>,
    /// The message the last chunk went to: chunks of one message come in a row, so most
    /// lookups compare one id instead of hashing it.
    last: Option<(String, usize)>,
    /// The joined reply's length.
    total: usize,
}

impl Messages {
    /// Where message `id` is, if it was seen (the last message's id is compared first: chunks
    /// of one message come in a row).
    #[inline]
    pub fn find(&self, id: &str) -> Option<usize> {
        match &self.last {
            Some((last, at)) if last == id => Some(*at),
            _ => self.index.get(id).copied(),
        }
    }

    /// The bytes message `at` holds (what a replacement gives back).
    pub fn len_at(&self, at: usize) -> usize {
        self.spans[at].1
    }

    /// Message `id`'s place, made at the end when `found` is `None`.
    fn slot(&mut self, found: Option<usize>, id: &str, collect: bool) -> usize {
        let at = found.unwrap_or_else(|| {
            self.index.insert(id.to_owned(), self.spans.len());
            self.spans.push((self.total, 0));
            if collect {
                self.texts.push(String::new());
            }
            self.spans.len() - 1
        });
        if !matches!(&self.last, Some((_, last)) if *last == at) {
            self.last = Some((id.to_owned(), at));
        }
        at
    }

    /// Message `at` becomes `remove` bytes shorter and `text` longer at `offset`; the messages
    /// after it move. The last message's growth at its end is an append.
    fn edit(&mut self, at: usize, offset: usize, remove: usize, added: usize) -> Joined {
        let span = &mut self.spans[at];
        span.1 = span.1 - remove + added;
        self.total = self.total - remove + added;
        if at + 1 == self.spans.len() && remove == 0 && offset == self.total - added {
            return Joined::Append;
        }
        for later in &mut self.spans[at + 1..] {
            later.0 = later.0 - remove + added;
        }
        Joined::Splice { at: offset, remove }
    }

    /// `found`: what `find(id)` gave.
    pub fn append(&mut self, found: Option<usize>, id: &str, text: &str, collect: bool) -> Joined {
        let at = self.slot(found, id, collect);
        if collect {
            self.texts[at].push_str(text);
        }
        let (start, len) = self.spans[at];
        self.edit(at, start + len, 0, text.len())
    }

    pub fn replace(&mut self, found: Option<usize>, id: &str, text: &str, collect: bool) -> Joined {
        let at = self.slot(found, id, collect);
        if collect {
            text.clone_into(&mut self.texts[at]);
        }
        let (start, len) = self.spans[at];
        self.edit(at, start, len, text.len())
    }

    /// The collected reply: a turn of one message hands its text over whole, more are joined
    /// into one allocation.
    pub fn joined(mut self) -> String {
        if self.texts.len() == 1 {
            return self.texts.pop().unwrap_or_default();
        }
        let mut reply = String::with_capacity(self.total);
        for text in &self.texts {
            reply.push_str(text);
        }
        reply
    }
}

/// Where a v2 turn is (design/protocol-now.md §4): its `session/prompt` answer is only an
/// acknowledgement, and the turn ends at the session's `idle` after the turn's own `running`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Lifecycle {
    /// A `running` or `requires_action` came after the prompt was sent.
    pub started: bool,
    /// The acknowledgement (`{messageId}`) came.
    pub acknowledged: bool,
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
    /// The turn's `notice` updates (their fields but `sessionUpdate`), first `TURN_NOTICES`.
    pub notices: Vec<Map<String, Value>>,
    /// The turn's compactions, first-seen order, folded to their final state.
    pub compactions: Compactions,
    /// v2 only: the turn's lifecycle.
    pub lifecycle: Lifecycle,
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
            notices: Vec::new(),
            compactions: Compactions::default(),
            lifecycle: Lifecycle::default(),
        }
    }

    /// v2's `tool_call_update` is an upsert: the first one of an id announces the call.
    pub fn upsert(&mut self, id: &str, fields: Map<String, Value>) {
        if self.knows(id) {
            self.amend(id, fields);
        } else {
            self.announce(id, fields);
        }
    }

    /// v2's `tool_call_content_chunk`: its `content` item joins the call's `content` array (a
    /// call not announced yet is announced with it).
    pub fn append_content(&mut self, id: &str, item: Value) {
        if !self.knows(id) {
            let mut fields = Map::new();
            fields.insert("toolCallId".into(), Value::String(id.to_owned()));
            self.put(id, ToolCallState::Object(fields));
        }
        let at = self.index[id];
        let call = self.tool_calls[at].1.object();
        match call.get_mut("content") {
            // Bounded: the record keeps a call's first items (every chunk still reaches the
            // observer and the journal).
            Some(Value::Array(items)) if items.len() >= TOOL_CALL_CONTENT_ITEMS => {}
            Some(Value::Array(items)) => items.push(item),
            _ => {
                call.insert("content".into(), Value::Array(vec![item]));
            }
        }
    }

    /// A `notice` joins the record (never the reply), while the record has room.
    pub fn notice(&mut self, mut fields: Map<String, Value>) {
        if self.notices.len() < TURN_NOTICES {
            fields.remove("sessionUpdate");
            self.notices.push(fields);
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

/// A turn's compactions, each folded as the schema says: a `compaction_update` sets `status`
/// and patches `summary`, `error` and `_meta` (absent: unchanged, null: cleared, `summary: []`
/// clears too); a `compaction_summary_chunk` appends its `content` to the summary, a first-seen
/// id creating an `in_progress` compaction. The summaries together stay within
/// `summary_budget` bytes of JSON (the turn's `response_bytes`): past it, chunks are left out
/// of the record (the observer and the journal still get every one).
#[derive(Debug, Default)]
pub struct Compactions {
    pub entries: Vec<Map<String, Value>>,
    index: HashMap<String, usize>,
    summary_bytes: usize,
}

impl Compactions {
    fn slot(&mut self, id: &str) -> Option<&mut Map<String, Value>> {
        let at = match self.index.get(id) {
            Some(&at) => at,
            None if self.entries.len() < TURN_COMPACTIONS => {
                let mut fields = Map::new();
                fields.insert("compactionId".into(), Value::String(id.to_owned()));
                fields.insert("status".into(), Value::String("in_progress".into()));
                self.index.insert(id.to_owned(), self.entries.len());
                self.entries.push(fields);
                self.entries.len() - 1
            }
            None => return None,
        };
        Some(&mut self.entries[at])
    }

    /// A `compaction_update`'s fields; a missing or non-string id is left out.
    pub fn update(&mut self, fields: Map<String, Value>, summary_budget: usize) {
        let Some(id) = fields.get("compactionId").and_then(Value::as_str) else {
            return;
        };
        let id = id.to_owned();
        let mut grown = 0usize;
        let mut freed = 0usize;
        {
            let Some(entry) = self.slot(&id) else {
                return;
            };
            for (key, value) in fields {
                match key.as_str() {
                    "sessionUpdate" | "compactionId" => {}
                    // Required and a string: anything else keeps the status it had.
                    "status" if !value.is_string() => {}
                    "summary" => {
                        if let Some(old) = entry.remove("summary") {
                            freed += json_len(&old);
                        }
                        if let Value::Array(blocks) = &value {
                            if !blocks.is_empty() {
                                grown += json_len(&value);
                                entry.insert(key, value);
                            }
                        }
                    }
                    _ if value.is_null() => {
                        entry.remove(&key);
                    }
                    _ => {
                        entry.insert(key, value);
                    }
                }
            }
        }
        self.summary_bytes = self.summary_bytes.saturating_sub(freed);
        if self.summary_bytes.saturating_add(grown) > summary_budget {
            // A replacement summary past the budget is left out, as chunks past it are.
            if let Some(&at) = self.index.get(&id) {
                self.entries[at].remove("summary");
            }
        } else {
            self.summary_bytes += grown;
        }
    }

    /// A `compaction_summary_chunk`: its `content` appended to the compaction's summary.
    pub fn chunk(&mut self, fields: &mut Map<String, Value>, summary_budget: usize) {
        let Some(id) = fields.get("compactionId").and_then(Value::as_str) else {
            return;
        };
        let id = id.to_owned();
        let Some(content) = fields.remove("content").filter(Value::is_object) else {
            return;
        };
        let size = json_len(&content);
        let within = self.summary_bytes.saturating_add(size) <= summary_budget;
        let Some(entry) = self.slot(&id) else {
            return;
        };
        if !within {
            return;
        }
        match entry.get_mut("summary") {
            Some(Value::Array(blocks)) => blocks.push(content),
            _ => {
                entry.insert("summary".into(), Value::Array(vec![content]));
            }
        }
        self.summary_bytes += size;
    }
}

/// A value's size as JSON text, near enough for a budget (strings and containers counted by
/// their contents; no serialisation).
fn json_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(json_len).sum::<usize>() + items.len() + 1,
        Value::Object(fields) => {
            fields
                .iter()
                .map(|(k, v)| k.len() + 3 + json_len(v))
                .sum::<usize>()
                + 1
        }
        _ => 8,
    }
}

/// Keeps `value` for a tool call id, the newest `ANNOUNCED_KINDS` ids.
fn remember(table: &mut VecDeque<(String, String)>, tool_call_id: &str, value: &str) {
    if let Some(slot) = table.iter_mut().find(|(id, _)| id == tool_call_id) {
        slot.1 = value.to_owned();
        return;
    }
    if table.len() == ANNOUNCED_KINDS {
        table.pop_front();
    }
    table.push_back((tool_call_id.to_owned(), value.to_owned()));
}

fn recall(table: &VecDeque<(String, String)>, tool_call_id: &str) -> Option<String> {
    table
        .iter()
        .rev()
        .find(|(known, _)| known == tool_call_id)
        .map(|(_, value)| value.clone())
}

/// What a finished turn hands back.
#[derive(Debug, Default, PartialEq)]
pub struct TurnOutcome {
    pub session_id: String,
    pub response: String,
    /// `response` is known to be ASCII (a host makes its string by one copy).
    pub response_ascii: bool,
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
    /// The turn's notices, JSON object texts (`Turn::notices`).
    pub notices: Vec<String>,
    /// Each compaction's final state, JSON object texts (`Compactions`).
    pub compactions: Vec<String>,
    /// The prompt result's `usage` object (unstable `Usage`: the turn's tokens), JSON text.
    pub prompt_usage: Option<String>,
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
    /// The tool names announced, as `announced` keeps the kinds (same bound).
    announced_names: VecDeque<(String, String)>,
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
            announced_names: VecDeque::new(),
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
            .and_then(|options| results::select_from_config(options, "mode"))
            .unwrap_or_else(|| self.modes.clone())
    }

    /// The id of the `"mode"` select config option when the modes come from it.
    pub fn mode_option(&self) -> Option<String> {
        if !self.modes.available.is_empty() {
            return None;
        }
        self.select_option("mode")
    }

    /// The id of the first select config option of `category` (`"mode"`, `"model"`).
    pub fn select_option(&self, category: &str) -> Option<String> {
        let options = self.config_options.as_ref()?;
        results::select_config_ids(options)
            .find(|(_, c)| *c == category)
            .map(|(id, _)| id.to_owned())
    }

    /// From the `"model"` config option, else the legacy models, else empty.
    pub fn models(&self) -> ModelsInfo {
        self.config_options
            .as_ref()
            .and_then(|options| results::select_from_config(options, "model"))
            .or_else(|| self.legacy_models.clone())
            .unwrap_or_default()
    }

    pub fn announce_kind(&mut self, tool_call_id: &str, kind: &str) {
        remember(&mut self.announced, tool_call_id, kind);
    }

    pub fn announced_kind(&self, tool_call_id: &str) -> Option<String> {
        recall(&self.announced, tool_call_id)
    }

    pub fn announce_name(&mut self, tool_call_id: &str, name: &str) {
        remember(&mut self.announced_names, tool_call_id, name);
    }

    pub fn announced_name(&self, tool_call_id: &str) -> Option<String> {
        recall(&self.announced_names, tool_call_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(fields) => fields,
            _ => panic!("an object"),
        }
    }

    #[test]
    fn compactions_patch_and_append_as_the_schema_says() {
        let mut c = Compactions::default();
        let chunk = |text: &str| {
            object(json!({"compactionId": "a", "content": {"type": "text", "text": text}}))
        };
        c.chunk(&mut chunk("one "), 1 << 20);
        c.chunk(&mut chunk("two"), 1 << 20);
        assert_eq!(c.entries[0]["status"], "in_progress");
        assert_eq!(c.entries[0]["summary"].as_array().unwrap().len(), 2);
        c.update(
            object(json!({"compactionId": "a", "status": "completed", "error": "e"})),
            1 << 20,
        );
        assert_eq!(
            c.entries[0]["summary"].as_array().unwrap().len(),
            2,
            "absent: unchanged"
        );
        c.update(
            object(json!({"compactionId": "a", "status": null, "error": null, "summary": []})),
            1 << 20,
        );
        assert_eq!(
            c.entries[0]["status"], "completed",
            "a null status keeps the old one"
        );
        assert!(c.entries[0].get("error").is_none() && c.entries[0].get("summary").is_none());
        c.update(object(json!({"status": "completed"})), 1 << 20);
        c.chunk(
            &mut object(json!({"compactionId": 7, "content": {}})),
            1 << 20,
        );
        assert_eq!(c.entries.len(), 1, "no id, no compaction");
    }

    #[test]
    fn compactions_stay_within_their_budgets() {
        let mut c = Compactions::default();
        for _ in 0..100 {
            let mut chunk = object(
                json!({"compactionId": "a", "content": {"type": "text", "text": "x".repeat(100)}}),
            );
            c.chunk(&mut chunk, 1000);
        }
        let kept = c.entries[0]["summary"].as_array().unwrap().len();
        assert!(kept > 0 && kept < 10, "{kept}");
        assert!(c.summary_bytes <= 1000);
        for i in 0..(TURN_COMPACTIONS + 10) {
            c.update(
                object(json!({"compactionId": format!("c{i}"), "status": "completed"})),
                1000,
            );
        }
        assert_eq!(c.entries.len(), TURN_COMPACTIONS);
        let mut turn = Turn::new(CallId(1));
        for _ in 0..(TURN_NOTICES + 1) {
            turn.notice(object(
                json!({"sessionUpdate": "notice", "severity": "info", "title": "t"}),
            ));
        }
        assert_eq!(turn.notices.len(), TURN_NOTICES);
        assert!(turn.notices[0].get("sessionUpdate").is_none());
    }
}

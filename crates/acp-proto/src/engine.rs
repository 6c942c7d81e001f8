//! The conversation engine: request ids, update numbering and caps, the reply capture with its
//! overflow record and single `session/cancel`, permission selection, and what every incoming
//! line means for the call in flight. It takes lines in and gives steps and bytes out; it never
//! touches a pipe, so a blocking reader, an event loop or an in-memory transport can drive it.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::encode::{self, ClientInfo, ContentBlock, McpServer};
use crate::error::{excerpt, AcpError, ProtocolError};
use crate::wire::{self, Envelope, Params, UpdateFields, WireError};

/// Caps on traffic; every one must be above zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferLimits {
    pub request_bytes: usize,
    pub response_bytes: usize,
    pub update_bytes: usize,
    pub update_count: u64,
    pub response_segment_count: usize,
}

impl TransferLimits {
    pub fn validate(&self, transport_epoch: u64) -> Result<(), AcpError> {
        let fields = [
            ("request_bytes", self.request_bytes as u64),
            ("response_bytes", self.response_bytes as u64),
            ("update_bytes", self.update_bytes as u64),
            ("update_count", self.update_count),
            ("response_segment_count", self.response_segment_count as u64),
        ];
        for (name, value) in fields {
            if value == 0 {
                return Err(AcpError::InvalidLimits(format!(
                    "transfer_limits.{name} must be above zero (got 0)"
                )));
            }
        }
        if transport_epoch == 0 {
            return Err(AcpError::InvalidLimits(
                "transport_epoch must be nonzero (got 0)".into(),
            ));
        }
        Ok(())
    }
}

/// What the client grants when the observer leaves a permission request unanswered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionPolicy {
    pub allowed_tool_kinds: Vec<String>,
    pub allowed_title_prefixes: Vec<String>,
}

impl PermissionPolicy {
    fn allows(&self, kind: Option<&str>, title: Option<&str>) -> bool {
        kind.is_some_and(|kind| self.allowed_tool_kinds.iter().any(|k| k == kind))
            || title.is_some_and(|title| {
                self.allowed_title_prefixes
                    .iter()
                    .any(|p| title.starts_with(p.as_str()))
            })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub limits: TransferLimits,
    pub transport_epoch: u64,
    pub client_info: ClientInfo,
    pub mcp_servers: Vec<McpServer>,
    pub policy: PermissionPolicy,
    /// Whether the engine assembles the reply text itself. A host that already holds each
    /// admitted chunk's text (as the Python binding does) assembles it once at the end instead,
    /// and `PromptOutcome::response` is then empty.
    pub collect_reply: bool,
}

/// What `Engine::admit_update` decided about one update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// The update's text joined the reply.
    pub joined: bool,
    /// The `session/cancel` to send: this chunk is the first one left out.
    pub cancel: Option<Vec<u8>>,
}

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
    Unknown,
}

impl UpdateKind {
    pub const ALL: [UpdateKind; 12] = [
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
        UpdateKind::Unknown,
    ];

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
            UpdateKind::Unknown => "unknown",
        }
    }

    pub fn index(self) -> usize {
        self as usize
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
    fn text_of(kind: UpdateKind, fields: &UpdateFields<'a>) -> Cow<'a, str> {
        let take = |s: &wire::Str<'a>| s.0.clone().unwrap_or(Cow::Borrowed(""));
        match kind {
            _ if kind.is_chunk() => match &fields.content.0 {
                Some(content) if content.kind.as_str() == Some("text") => take(&content.text),
                _ => Cow::Borrowed(""),
            },
            UpdateKind::ToolCall | UpdateKind::ToolCallUpdate | UpdateKind::SessionInfoUpdate => {
                take(&fields.title)
            }
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

/// A permission request from the agent, borrowed from its line.
#[derive(Debug)]
pub struct PermissionEvent<'a> {
    /// The agent's id, exactly as sent.
    pub raw_id: &'a str,
    pub envelope: &'a str,
    pub fields: Params<'a>,
    /// The kind an earlier `tool_call`/`tool_call_update` gave this tool call, for a request
    /// that leaves `toolCall.kind` out (the protocol lets it send only what changed).
    pub announced_kind: Option<String>,
}

impl PermissionEvent<'_> {
    /// The tool call's kind: the request's own, else the one announced for its id.
    pub fn tool_kind(&self) -> Option<&str> {
        let own = self
            .fields
            .tool_call
            .0
            .as_ref()
            .and_then(|t| t.kind.as_str());
        own.or(self.announced_kind.as_deref())
    }
}

/// A decision on a permission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub outcome: String,
    pub option_id: String,
    pub option_kind: String,
}

impl Selection {
    fn cancelled() -> Selection {
        Selection {
            outcome: "cancelled".into(),
            option_id: String::new(),
            option_kind: String::new(),
        }
    }
}

/// A permission request as the observer sees it (owned, so it can outlive the line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermissionRecord {
    pub session_id: String,
    pub tool_call_id: String,
    pub title: String,
    pub tool_kind: String,
    pub status: String,
    pub outcome: String,
    pub option_id: String,
    pub option_kind: String,
    /// (option_id, name, kind) of every object in `options`; absent fields are "".
    pub options: Vec<(String, String, String)>,
    pub envelope: String,
    /// The agent's id as raw JSON text.
    pub request_id: String,
}

impl PermissionEvent<'_> {
    /// The request with a decision (the preview has outcome "pending" and an empty envelope).
    pub fn record(&self, selection: &Selection, with_envelope: bool) -> PermissionRecord {
        let tool = self.fields.tool_call.0.clone().unwrap_or_default();
        let options = self
            .fields
            .options
            .0
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .filter_map(|option| option.0.as_ref())
            .map(|o| {
                (
                    o.option_id.or_empty().to_owned(),
                    o.name.or_empty().to_owned(),
                    o.kind.or_empty().to_owned(),
                )
            })
            .collect();
        PermissionRecord {
            session_id: self.fields.session_id.or_empty().to_owned(),
            tool_call_id: tool.tool_call_id.or_empty().to_owned(),
            title: tool.title.or_empty().to_owned(),
            tool_kind: self.tool_kind().unwrap_or("").to_owned(),
            status: tool.status.or_empty().to_owned(),
            outcome: selection.outcome.clone(),
            option_id: selection.option_id.clone(),
            option_kind: selection.option_kind.clone(),
            options,
            envelope: if with_envelope {
                self.envelope.to_owned()
            } else {
                String::new()
            },
            request_id: self.raw_id.to_owned(),
        }
    }

    pub fn preview(&self) -> PermissionRecord {
        self.record(
            &Selection {
                outcome: "pending".into(),
                option_id: String::new(),
                option_kind: String::new(),
            },
            false,
        )
    }
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

/// A record that a reply stopped at a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    pub kind: OverflowKind,
    pub admitted_bytes: usize,
    pub admitted_segments: usize,
    pub withheld_update_sequence: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptOutcome {
    pub response: String,
    pub stop_reason: String,
    pub overflow: Option<Overflow>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedEntry {
    pub id: String,
    pub name: String,
    pub description: String,
}

/// The agent's answer to `initialize`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitializeInfo {
    pub protocol_version: i64,
    pub load_session: bool,
    pub prompt_image: bool,
    pub prompt_audio: bool,
    pub prompt_embedded_content: bool,
    pub auth_methods: Vec<NamedEntry>,
    /// `agentInfo` as raw JSON text, when it is an object.
    pub agent_info: Option<String>,
    /// The whole result object as raw JSON text.
    pub raw: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModesInfo {
    pub current: String,
    pub available: Vec<NamedEntry>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    Initialize,
    SessionNew,
    Prompt,
}

impl CallKind {
    pub fn method(self) -> &'static str {
        match self {
            CallKind::Initialize => "initialize",
            CallKind::SessionNew => "session/new",
            CallKind::Prompt => "session/prompt",
        }
    }
}

/// The awaited response arrived and was applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    Initialized,
    SessionOpened,
    Prompted(PromptOutcome),
}

/// What one incoming line asks of the driver.
#[derive(Debug)]
// Unboxed on purpose: boxing would cost an allocation per line on the hot path.
#[allow(clippy::large_enum_variant)]
pub enum Step<'a> {
    /// Nothing to do (a blank line, a notification the client does not serve).
    Nothing,
    /// Write these bytes to the agent (the answer to a request the client does not serve).
    Send(Vec<u8>),
    /// Hand the update to the observer, then call `Engine::admit_update`.
    Update(UpdateEvent<'a>),
    /// Decide (observer first, then `Engine::policy_selection`), commit, then send
    /// `Engine::permission_answer`.
    Permission(PermissionEvent<'a>),
    /// The awaited response; the call is over.
    Done(Completion),
}

#[derive(Default)]
struct Capture {
    text: String,
    bytes: usize,
    segments: usize,
    overflow: Option<Overflow>,
}

struct Pending {
    id: i64,
    kind: CallKind,
    capture: Capture,
}

pub struct Engine {
    config: Config,
    next_id: i64,
    next_update_sequence: u64,
    session_id: Option<String>,
    initialize: InitializeInfo,
    modes: ModesInfo,
    agent_error: Option<String>,
    pending: Option<Pending>,
    /// (toolCallId, kind) of the latest tool calls, newest last, at most ANNOUNCED_KINDS.
    announced_kinds: std::collections::VecDeque<(String, String)>,
}

/// How many tool calls' kinds the engine remembers for permission requests that omit the kind.
const ANNOUNCED_KINDS: usize = 1024;

fn trim(line: &[u8]) -> &[u8] {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|b| !is_space(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |i| i + 1);
    &line[start..end]
}

impl Engine {
    pub fn new(config: Config) -> Result<Engine, AcpError> {
        config.limits.validate(config.transport_epoch)?;
        Ok(Engine {
            config,
            next_id: 0,
            next_update_sequence: 1,
            session_id: None,
            initialize: InitializeInfo::default(),
            modes: ModesInfo::default(),
            agent_error: None,
            pending: None,
            announced_kinds: std::collections::VecDeque::new(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn next_update_sequence(&self) -> u64 {
        self.next_update_sequence
    }
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
    pub fn initialize(&self) -> &InitializeInfo {
        &self.initialize
    }
    pub fn modes(&self) -> &ModesInfo {
        &self.modes
    }
    pub fn agent_error(&self) -> Option<&str> {
        self.agent_error.as_deref()
    }
    /// The call in flight: its method and id.
    pub fn pending(&self) -> Option<(CallKind, i64)> {
        self.pending.as_ref().map(|p| (p.kind, p.id))
    }

    fn checked(&self, bytes: Vec<u8>, what: &str) -> Result<Vec<u8>, AcpError> {
        let limit = self.config.limits.request_bytes;
        if bytes.len() > limit {
            return Err(AcpError::RequestCapacityExceeded(format!(
                "{what} is {} bytes (newline included), more than transfer_limits.request_bytes ({limit}); nothing was sent",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    fn begin(
        &mut self,
        kind: CallKind,
        encode: impl FnOnce(i64) -> Vec<u8>,
    ) -> Result<Vec<u8>, AcpError> {
        let id = self.next_id;
        self.next_id += 1;
        self.pending = None;
        let bytes = self.checked(encode(id), &format!("the {} request", kind.method()))?;
        self.pending = Some(Pending {
            id,
            kind,
            capture: Capture::default(),
        });
        Ok(bytes)
    }

    /// The `initialize` request; its response completes the call.
    pub fn begin_initialize(&mut self) -> Result<Vec<u8>, AcpError> {
        let info = self.config.client_info.clone();
        self.begin(CallKind::Initialize, |id| encode::initialize(id, &info))
    }

    /// The `session/new` request for `cwd`.
    pub fn begin_session_new(&mut self, cwd: &str) -> Result<Vec<u8>, AcpError> {
        let servers = std::mem::take(&mut self.config.mcp_servers);
        let result = self.begin(CallKind::SessionNew, |id| {
            encode::session_new(id, cwd, &servers)
        });
        self.config.mcp_servers = servers;
        result
    }

    /// The `session/prompt` request; fails before `start` has opened a session.
    pub fn begin_prompt(&mut self, content: &[ContentBlock]) -> Result<Vec<u8>, AcpError> {
        let Some(session_id) = self.session_id.clone() else {
            return Err(AcpError::protocol(
                "no session is open: call start() before sending a prompt",
            ));
        };
        self.begin(CallKind::Prompt, |id| {
            encode::prompt(id, &session_id, content)
        })
    }

    /// Abandons the call in flight (after an error or an interrupt).
    pub fn abandon(&mut self) {
        self.pending = None;
    }

    /// The error for the agent's output ending while a call waits.
    pub fn output_ended(&self) -> AcpError {
        let description = match self.pending() {
            Some((kind, id)) => format!(
                "the agent's output ended before the response to {} (id {id}): the agent exited or closed its stdout",
                kind.method()
            ),
            None => "the agent's output ended".to_owned(),
        };
        AcpError::AgentProtocol(ProtocolError {
            description,
            output_ended: true,
            ..ProtocolError::default()
        })
    }

    /// Interprets one line (its `\n` already removed).
    pub fn handle_line<'a>(&mut self, line: &'a [u8]) -> Result<Step<'a>, AcpError> {
        let line = trim(line);
        if line.is_empty() {
            return Ok(Step::Nothing);
        }
        if let Some(chunk) = wire::text_chunk(line) {
            // No id, so it cannot be the awaited response: the update path is the only one.
            return self.text_chunk_update(chunk).map(Step::Update);
        }
        let message = wire::classify(line).map_err(|e| self.wire_error(&e, line))?;
        let envelope = message.text;
        if let Some(pending) = &self.pending {
            if message.is_response_for(pending.id) {
                return self.complete(&message).map(Step::Done);
            }
        }
        match message.method.as_deref() {
            Some("session/update") => self.update(message).map(Step::Update),
            Some("session/request_permission") => match message.id {
                Some(raw_id) => {
                    let fields = wire::permission_request(message.params);
                    let announced_kind = self.announced_kind(&fields);
                    Ok(Step::Permission(PermissionEvent {
                        raw_id: raw_id.get(),
                        envelope,
                        fields,
                        announced_kind,
                    }))
                }
                None => Err(AcpError::protocol(format!(
                    "the agent sent session/request_permission without an id, so it cannot be answered: {}",
                    excerpt(line, 200)
                ))),
            },
            Some(_) => match message.id {
                Some(raw_id) => Ok(Step::Send(
                    self.checked(encode::method_not_found(raw_id.get()), "the method-not-found answer")?,
                )),
                None => Ok(Step::Nothing),
            },
            None => Err(self.unexpected(line)),
        }
    }

    fn waiting_for(&self) -> String {
        match self.pending() {
            Some((kind, id)) => format!("the response to {} (id {id})", kind.method()),
            None => "no response (no call in flight)".into(),
        }
    }

    fn unexpected(&self, line: &[u8]) -> AcpError {
        AcpError::protocol(format!(
            "unexpected message from the agent while waiting for {}: not a response with that id carrying result or error, a request, or a notification: {}",
            self.waiting_for(),
            excerpt(line, 200)
        ))
    }

    fn wire_error(&self, error: &WireError, line: &[u8]) -> AcpError {
        match error {
            WireError::NotAnObject => AcpError::protocol(format!(
                "the agent sent JSON that is not a JSON object while waiting for {}: {}",
                self.waiting_for(),
                excerpt(line, 200)
            )),
            other => AcpError::protocol(format!(
                "the agent sent {other} while waiting for {}: {}",
                self.waiting_for(),
                excerpt(line, 200)
            )),
        }
    }

    /// Checks the caps (count, then size) and takes the next update number, as the reference
    /// does before it parses the update.
    fn number_update(&mut self, envelope: &str) -> Result<u64, AcpError> {
        let limits = self.config.limits;
        let update_sequence = self.next_update_sequence;
        if update_sequence > limits.update_count {
            return Err(AcpError::UpdateCountCapacityExceeded(format!(
                "update {update_sequence} would pass transfer_limits.update_count ({}), the most updates this client accepts over its life",
                limits.update_count
            )));
        }
        if envelope.len() > limits.update_bytes {
            return Err(AcpError::UpdateCapacityExceeded(format!(
                "a session/update of {} bytes is larger than transfer_limits.update_bytes ({})",
                envelope.len(),
                limits.update_bytes
            )));
        }
        self.next_update_sequence = update_sequence.checked_add(1).ok_or_else(|| {
            AcpError::UpdateCountCapacityExceeded(
                "the update sequence cannot go past 2^64 - 1".into(),
            )
        })?;
        Ok(update_sequence)
    }

    fn update<'a>(&mut self, message: Envelope<'a>) -> Result<UpdateEvent<'a>, AcpError> {
        let envelope = message.text;
        let update_sequence = self.number_update(envelope)?;
        let update = wire::session_update(message.params).map_err(|e| {
            AcpError::protocol(format!(
                "malformed {e} (update {update_sequence}): {}",
                excerpt(envelope.as_bytes(), 200)
            ))
        })?;
        let wire_name = update.fields.session_update.0.clone().unwrap_or_default();
        let kind = UpdateKind::from_wire(&wire_name);
        if matches!(kind, UpdateKind::ToolCall | UpdateKind::ToolCallUpdate) {
            if let (Some(id), Some(tool_kind)) = (
                update.fields.tool_call_id.as_str(),
                update.fields.kind.as_str(),
            ) {
                self.announce_kind(id, tool_kind);
            }
        }
        let text = UpdateEvent::text_of(kind, &update.fields);
        Ok(UpdateEvent {
            kind,
            session_update: wire_name,
            transport_epoch: self.config.transport_epoch,
            update_sequence,
            session_id: update.session_id,
            envelope,
            text,
            message_id: update.fields.message_id.0,
            tool_call_id: update.fields.tool_call_id.0,
            ascii: false,
        })
    }

    fn announce_kind(&mut self, tool_call_id: &str, kind: &str) {
        if let Some(slot) = self
            .announced_kinds
            .iter_mut()
            .find(|(id, _)| id == tool_call_id)
        {
            slot.1 = kind.to_owned();
            return;
        }
        if self.announced_kinds.len() == ANNOUNCED_KINDS {
            self.announced_kinds.pop_front();
        }
        self.announced_kinds
            .push_back((tool_call_id.to_owned(), kind.to_owned()));
    }

    fn announced_kind(&self, fields: &Params<'_>) -> Option<String> {
        let tool = fields.tool_call.0.as_ref()?;
        if tool.kind.as_str().is_some() {
            return None;
        }
        let id = tool.tool_call_id.as_str()?;
        self.announced_kinds
            .iter()
            .rev()
            .find(|(known, _)| known == id)
            .map(|(_, kind)| kind.clone())
    }

    /// The same update as `update` would make of this line, read by `wire::text_chunk`.
    fn text_chunk_update<'a>(
        &mut self,
        chunk: wire::TextChunk<'a>,
    ) -> Result<UpdateEvent<'a>, AcpError> {
        let update_sequence = self.number_update(chunk.text_line)?;
        let kind = UpdateKind::from_wire(chunk.session_update);
        let text = if kind.is_chunk() { chunk.text } else { "" };
        Ok(UpdateEvent {
            kind,
            session_update: Cow::Borrowed(chunk.session_update),
            transport_epoch: self.config.transport_epoch,
            update_sequence,
            session_id: Cow::Borrowed(chunk.session_id),
            envelope: chunk.text_line,
            text: Cow::Borrowed(text),
            message_id: None,
            tool_call_id: None,
            ascii: chunk.ascii,
        })
    }

    /// After the observer has seen `update`: joins an agent message chunk to the reply within the
    /// reply limits, or records the overflow and hands out the one `session/cancel` to send.
    pub fn admit_update(&mut self, update: &UpdateEvent<'_>) -> Result<Admission, AcpError> {
        if update.kind != UpdateKind::AgentMessageChunk {
            return Ok(Admission::default());
        }
        let limits = self.config.limits;
        let collect = self.config.collect_reply;
        let Some(pending) = self.pending.as_mut() else {
            return Ok(Admission::default());
        };
        if pending.kind != CallKind::Prompt {
            return Ok(Admission::default());
        }
        let capture = &mut pending.capture;
        if capture.overflow.is_some() {
            return Ok(Admission::default());
        }
        let kind = if capture.segments + 1 > limits.response_segment_count {
            Some(OverflowKind::ResponseSegments)
        } else if capture.bytes.saturating_add(update.text.len()) > limits.response_bytes {
            Some(OverflowKind::ResponseBytes)
        } else {
            None
        };
        match kind {
            None => {
                if collect {
                    capture.text.push_str(&update.text);
                }
                capture.bytes += update.text.len();
                capture.segments += 1;
                Ok(Admission {
                    joined: true,
                    cancel: None,
                })
            }
            Some(kind) => {
                capture.overflow = Some(Overflow {
                    kind,
                    admitted_bytes: capture.bytes,
                    admitted_segments: capture.segments,
                    withheld_update_sequence: update.update_sequence,
                });
                let session_id = self.session_id.clone().unwrap_or_default();
                let cancel = self.checked(
                    encode::cancel(&session_id),
                    "the session/cancel notification",
                )?;
                Ok(Admission {
                    joined: false,
                    cancel: Some(cancel),
                })
            }
        }
    }

    /// The permission policy's choice, in the reference's option order.
    pub fn policy_selection(&self, event: &PermissionEvent<'_>) -> Selection {
        let Some(options) = event.fields.options.0.as_deref() else {
            return Selection::cancelled();
        };
        let tool = event.fields.tool_call.0.as_ref();
        let allowed = tool.is_some_and(|t| {
            self.config
                .policy
                .allows(event.tool_kind(), t.title.as_str())
        });
        let candidates = || {
            options.iter().filter_map(|option| {
                let option = option.0.as_ref()?;
                Some((option.kind.as_str()?, option.option_id.as_str()?))
            })
        };
        let first = |wanted: &str| {
            candidates()
                .find(|(kind, _)| *kind == wanted)
                .map(|(kind, id)| Selection {
                    outcome: "selected".into(),
                    option_id: id.into(),
                    option_kind: kind.into(),
                })
        };
        if allowed {
            if let Some(selection) = first("allow_once").or_else(|| first("allow_always")) {
                return selection;
            }
        }
        if let Some(selection) = first("reject_once") {
            return selection;
        }
        candidates()
            .rfind(|(kind, _)| *kind == "reject_always")
            .map(|(kind, id)| Selection {
                outcome: "selected".into(),
                option_id: id.into(),
                option_kind: kind.into(),
            })
            .unwrap_or_else(Selection::cancelled)
    }

    /// The answer that carries `selection` to the agent.
    pub fn permission_answer(
        &self,
        event: &PermissionEvent<'_>,
        selection: &Selection,
    ) -> Result<Vec<u8>, AcpError> {
        self.checked(
            encode::permission_answer(event.raw_id, &selection.outcome, &selection.option_id),
            "the session/request_permission answer",
        )
    }

    fn result_object<'a>(
        &mut self,
        message: &Envelope<'a>,
        kind: CallKind,
        id: i64,
    ) -> Result<&'a RawValue, AcpError> {
        if let Some(error) = message.error {
            let answer = wire::error_answer(error);
            if let Some(text) = &answer.message {
                self.agent_error = Some(text.clone());
            }
            let code = answer
                .code
                .map_or_else(|| "without a code".to_owned(), |c| c.to_string());
            let text = answer
                .message
                .clone()
                .unwrap_or_else(|| "(no message)".into());
            return Err(AcpError::AgentProtocol(ProtocolError {
                description: format!(
                    "the agent answered {} (id {id}) with error {code}: {text}",
                    kind.method()
                ),
                code: answer.code,
                message: answer.message,
                data: answer.data,
                output_ended: false,
            }));
        }
        match message.result {
            Some(result) if result.get().starts_with('{') => Ok(result),
            Some(result) => Err(AcpError::protocol(format!(
                "the agent's result for {} (id {id}) is not a JSON object: {}",
                kind.method(),
                excerpt(result.get().as_bytes(), 200)
            ))),
            None => Err(AcpError::protocol(format!(
                "the agent's response to {} (id {id}) has no result",
                kind.method()
            ))),
        }
    }

    fn complete(&mut self, message: &Envelope<'_>) -> Result<Completion, AcpError> {
        let pending = self
            .pending
            .take()
            .expect("complete() runs only with a call in flight");
        let (kind, id) = (pending.kind, pending.id);
        let result = self.result_object(message, kind, id)?;
        let malformed = |e: WireError| AcpError::protocol(format!("malformed {e}"));
        match kind {
            CallKind::Initialize => {
                let fields = wire::initialize_result(result).map_err(malformed)?;
                let version = fields
                    .protocol_version
                    .and_then(|raw| serde_json::from_str::<i64>(raw.get()).ok());
                match version {
                    Some(1) => {}
                    Some(other) => {
                        return Err(AcpError::protocol(format!(
                            "the agent speaks ACP protocol version {other}; this client speaks version 1"
                        )))
                    }
                    None => {
                        return Err(AcpError::protocol(format!(
                            "the agent's initialize result has no integer protocolVersion: {}",
                            excerpt(result.get().as_bytes(), 200)
                        )))
                    }
                }
                let caps = fields.capabilities.0.unwrap_or_default();
                let prompt = caps.prompt.0.unwrap_or_default();
                self.initialize = InitializeInfo {
                    protocol_version: 1,
                    load_session: caps.load_session.0,
                    prompt_image: prompt.image.0,
                    prompt_audio: prompt.audio.0,
                    prompt_embedded_content: prompt.embedded_context.0 || prompt.embedded_content.0,
                    auth_methods: named_entries(fields.auth_methods.0),
                    agent_info: fields
                        .agent_info
                        .filter(|raw| raw.get().starts_with('{'))
                        .map(|raw| raw.get().to_owned()),
                    raw: result.get().to_owned(),
                };
                Ok(Completion::Initialized)
            }
            CallKind::SessionNew => {
                let fields = wire::session_new_result(result).map_err(malformed)?;
                let Some(session_id) = fields.session_id.0 else {
                    return Err(AcpError::protocol(format!(
                        "the agent's session/new result has no string sessionId: {}",
                        excerpt(result.get().as_bytes(), 200)
                    )));
                };
                self.session_id = Some(session_id.into_owned());
                self.modes = match fields.modes.0 {
                    Some(modes) => ModesInfo {
                        current: modes.current.or_empty().to_owned(),
                        available: named_entries(modes.available.0),
                    },
                    None => ModesInfo::default(),
                };
                Ok(Completion::SessionOpened)
            }
            CallKind::Prompt => {
                let fields = wire::prompt_result(result).map_err(malformed)?;
                let Some(stop_reason) = fields.stop_reason.0 else {
                    return Err(AcpError::protocol(format!(
                        "the agent's session/prompt result has no string stopReason: {}",
                        excerpt(result.get().as_bytes(), 200)
                    )));
                };
                Ok(Completion::Prompted(PromptOutcome {
                    response: pending.capture.text,
                    stop_reason: stop_reason.into_owned(),
                    overflow: pending.capture.overflow,
                }))
            }
        }
    }
}

fn named_entries(items: Option<Vec<wire::Obj<wire::NamedEntry<'_>>>>) -> Vec<NamedEntry> {
    items
        .unwrap_or_default()
        .into_iter()
        .filter_map(|item| item.0)
        .map(|e| NamedEntry {
            id: e.id.or_empty().to_owned(),
            name: e.name.or_empty().to_owned(),
            description: e.description.or_empty().to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> TransferLimits {
        TransferLimits {
            request_bytes: 1 << 20,
            response_bytes: 1 << 20,
            update_bytes: 1 << 20,
            update_count: 1024,
            response_segment_count: 1024,
        }
    }

    fn engine_with(limits: TransferLimits, policy: PermissionPolicy) -> Engine {
        Engine::new(Config {
            limits,
            transport_epoch: 7,
            client_info: ClientInfo::default(),
            mcp_servers: Vec::new(),
            policy,
            collect_reply: true,
        })
        .unwrap()
    }

    /// An engine with an open session "s" and a prompt (id 2) in flight.
    fn prompting(limits: TransferLimits, policy: PermissionPolicy) -> Engine {
        let mut engine = engine_with(limits, policy);
        engine.begin_initialize().unwrap();
        let step = engine
            .handle_line(br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#)
            .unwrap();
        assert!(matches!(step, Step::Done(Completion::Initialized)));
        engine.begin_session_new("/w").unwrap();
        let step = engine
            .handle_line(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#)
            .unwrap();
        assert!(matches!(step, Step::Done(Completion::SessionOpened)));
        engine
            .begin_prompt(&[ContentBlock::Text("hi".into())])
            .unwrap();
        engine
    }

    fn chunk(text: &str) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
        )
        .into_bytes()
    }

    fn feed_update(engine: &mut Engine, line: &[u8]) -> Result<Option<Vec<u8>>, AcpError> {
        let sequence_before = engine.next_update_sequence();
        match engine.handle_line(line)? {
            Step::Update(update) => {
                assert_eq!(update.update_sequence, sequence_before);
                let text = update.text.to_string();
                let kind = update.kind;
                let cancel = engine.admit_update(&UpdateEvent {
                    kind,
                    session_update: Cow::Borrowed(kind.as_str()),
                    transport_epoch: 7,
                    update_sequence: sequence_before,
                    session_id: Cow::Borrowed("s"),
                    envelope: "",
                    text: Cow::Owned(text),
                    message_id: None,
                    tool_call_id: None,
                    ascii: false,
                })?;
                Ok(cancel.cancel)
            }
            other => panic!("expected an update, got {other:?}"),
        }
    }

    fn finish(engine: &mut Engine, line: &[u8]) -> PromptOutcome {
        match engine.handle_line(line).unwrap() {
            Step::Done(Completion::Prompted(outcome)) => outcome,
            other => panic!("expected the prompt's end, got {other:?}"),
        }
    }

    #[test]
    fn validates_limits_and_epoch() {
        let mut bad = limits();
        bad.update_count = 0;
        let error = Engine::new(Config {
            limits: bad,
            transport_epoch: 1,
            client_info: ClientInfo::default(),
            mcp_servers: vec![],
            policy: PermissionPolicy::default(),
            collect_reply: true,
        })
        .err()
        .unwrap();
        assert!(error.description().contains("update_count"));
        assert!(matches!(
            limits().validate(0),
            Err(AcpError::InvalidLimits(m)) if m.contains("transport_epoch")
        ));
    }

    #[test]
    fn request_ids_run_0_1_2_3() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        assert_eq!(engine.pending(), Some((CallKind::Prompt, 2)));
        finish(
            &mut engine,
            br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#,
        );
        let line = engine
            .begin_prompt(&[ContentBlock::Text("again".into())])
            .unwrap();
        assert!(String::from_utf8(line).unwrap().contains(r#""id":3,"#));
    }

    #[test]
    fn collects_chunks_and_numbers_updates_for_life() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        assert_eq!(feed_update(&mut engine, &chunk("a")).unwrap(), None);
        assert_eq!(feed_update(&mut engine, &chunk("b")).unwrap(), None);
        let outcome = finish(
            &mut engine,
            br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#,
        );
        assert_eq!(outcome.response, "ab");
        assert_eq!(outcome.overflow, None);
        engine.begin_prompt(&[]).unwrap();
        assert_eq!(engine.next_update_sequence(), 3);
        feed_update(&mut engine, &chunk("c")).unwrap();
        let outcome = finish(
            &mut engine,
            br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#,
        );
        assert_eq!(outcome.response, "c", "each prompt's reply starts empty");
    }

    #[test]
    fn overflow_keeps_what_fit_and_cancels_once() {
        let mut tight = limits();
        tight.response_bytes = 3;
        let mut engine = prompting(tight, PermissionPolicy::default());
        assert_eq!(feed_update(&mut engine, &chunk("ok")).unwrap(), None);
        let cancel = feed_update(&mut engine, &chunk("no"))
            .unwrap()
            .expect("a cancel");
        assert_eq!(
            cancel,
            b"{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s\"}}\n"
        );
        assert_eq!(
            feed_update(&mut engine, &chunk("x")).unwrap(),
            None,
            "only one cancel"
        );
        let outcome = finish(
            &mut engine,
            br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}"#,
        );
        assert_eq!(outcome.response, "ok");
        assert_eq!(
            outcome.overflow,
            Some(Overflow {
                kind: OverflowKind::ResponseBytes,
                admitted_bytes: 2,
                admitted_segments: 1,
                withheld_update_sequence: 2,
            })
        );
    }

    #[test]
    fn segment_cap_is_checked_before_bytes() {
        let mut tight = limits();
        tight.response_segment_count = 1;
        tight.response_bytes = 1;
        let mut engine = prompting(tight, PermissionPolicy::default());
        feed_update(&mut engine, &chunk("a")).unwrap();
        assert!(feed_update(&mut engine, &chunk("bb")).unwrap().is_some());
        let outcome = finish(
            &mut engine,
            br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}"#,
        );
        assert_eq!(
            outcome.overflow.unwrap().kind,
            OverflowKind::ResponseSegments
        );
    }

    #[test]
    fn update_caps_in_the_reference_order() {
        let mut tight = limits();
        tight.update_count = 1;
        tight.update_bytes = 170;
        let mut engine = prompting(tight, PermissionPolicy::default());
        let long = chunk(&"x".repeat(200));
        let error = engine.handle_line(&long).unwrap_err();
        assert!(
            matches!(error, AcpError::UpdateCapacityExceeded(ref m) if m.contains("update_bytes"))
        );
        assert_eq!(
            engine.next_update_sequence(),
            1,
            "a refused update is not numbered"
        );
        feed_update(&mut engine, &chunk("a")).unwrap();
        let error = engine.handle_line(&long).unwrap_err();
        assert!(
            matches!(error, AcpError::UpdateCountCapacityExceeded(ref m) if m.contains("update_count")),
            "the count cap is checked before the size cap"
        );
    }

    #[test]
    fn a_malformed_update_still_consumes_its_number() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        let error = engine
            .handle_line(br#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{}}}"#)
            .unwrap_err();
        assert!(error.description().contains("sessionUpdate"));
        assert_eq!(engine.next_update_sequence(), 2);
    }

    #[test]
    fn texts_follow_the_update_kind() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        let cases: [(&str, UpdateKind, &str); 6] = [
            (
                r#"{"sessionUpdate":"tool_call","toolCallId":"t","title":"Read"}"#,
                UpdateKind::ToolCall,
                "Read",
            ),
            (
                r#"{"sessionUpdate":"plan","entries":[{"content":"a"},{"content":"b"}]}"#,
                UpdateKind::Plan,
                "a\nb",
            ),
            (
                r#"{"sessionUpdate":"current_mode_update","currentModeId":"code"}"#,
                UpdateKind::CurrentModeUpdate,
                "code",
            ),
            (
                r#"{"sessionUpdate":"session_info_update","title":"T"}"#,
                UpdateKind::SessionInfoUpdate,
                "T",
            ),
            (
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"x"}}"#,
                UpdateKind::AgentMessageChunk,
                "",
            ),
            (
                r#"{"sessionUpdate":"plan_update","title":"x"}"#,
                UpdateKind::Unknown,
                "",
            ),
        ];
        for (update, kind, text) in cases {
            let line = format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{update}}}}}"#
            );
            match engine.handle_line(line.as_bytes()).unwrap() {
                Step::Update(event) => {
                    assert_eq!(event.kind, kind, "{update}");
                    assert_eq!(event.text, text, "{update}");
                    assert_eq!(event.envelope, line);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn other_requests_get_method_not_found_and_notifications_are_dropped() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        match engine
            .handle_line(br#"{"jsonrpc":"2.0","id":"x-1","method":"fs/read_text_file","params":{}}"#)
            .unwrap()
        {
            Step::Send(bytes) => assert_eq!(
                bytes,
                b"{\"jsonrpc\":\"2.0\",\"id\":\"x-1\",\"error\":{\"code\":-32601,\"message\":\"method not found\"}}\n"
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            engine
                .handle_line(br#"{"jsonrpc":"2.0","method":"_auth/status_update","params":{}}"#)
                .unwrap(),
            Step::Nothing
        ));
        assert!(matches!(
            engine.handle_line(b"  \r").unwrap(),
            Step::Nothing
        ));
    }

    #[test]
    fn unexpected_and_invalid_lines_fail() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        for (line, needle) in [
            (&b"{oops"[..], "invalid JSON"),
            (b"[1,2]", "not a JSON object"),
            (br#"{"jsonrpc":"2.0","id":2}"#, "unexpected message"),
            (
                br#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
                "unexpected message",
            ),
            (b"{\"a\":\"\xff\"}", "UTF-8"),
        ] {
            let error = engine.handle_line(line).unwrap_err();
            assert!(error.description().contains(needle), "{error}");
        }
    }

    #[test]
    fn error_answers_are_recorded() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        let error = engine
            .handle_line(
                br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"boom","data":[1]}}"#,
            )
            .unwrap_err();
        match error {
            AcpError::AgentProtocol(p) => {
                assert_eq!(p.code, Some(-32000));
                assert_eq!(p.message.as_deref(), Some("boom"));
                assert_eq!(p.data.as_deref(), Some("[1]"));
                assert!(p.description.contains("session/prompt (id 2)"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(engine.agent_error(), Some("boom"));
    }

    #[test]
    fn initialize_rejects_other_protocol_versions() {
        let mut engine = engine_with(limits(), PermissionPolicy::default());
        engine.begin_initialize().unwrap();
        let error = engine
            .handle_line(br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2}}"#)
            .unwrap_err();
        assert!(error.description().contains("version 2"));
    }

    #[test]
    fn prompts_need_a_session_and_fit_request_bytes() {
        let mut engine = engine_with(limits(), PermissionPolicy::default());
        assert!(engine
            .begin_prompt(&[])
            .unwrap_err()
            .description()
            .contains("start()"));
        let mut tight = limits();
        tight.request_bytes = 64;
        let mut engine = prompting(limits(), PermissionPolicy::default());
        engine.config.limits = tight;
        let error = engine
            .begin_prompt(&[ContentBlock::Text("x".repeat(100))])
            .unwrap_err();
        assert!(
            matches!(error, AcpError::RequestCapacityExceeded(ref m) if m.contains("request_bytes"))
        );
    }

    fn select(policy: PermissionPolicy, tool_call: &str, options: &str) -> Selection {
        let mut engine = prompting(limits(), policy.clone());
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{{"sessionId":"s","toolCall":{tool_call},"options":{options}}}}}"#
        );
        match engine.handle_line(line.as_bytes()).unwrap() {
            Step::Permission(event) => engine.policy_selection(&event),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn permission_policy_follows_the_reference_order() {
        let all = r#"[{"optionId":"ra1","kind":"reject_always"},{"optionId":"aa","kind":"allow_always"},{"optionId":"ao","kind":"allow_once"},{"optionId":"ro","kind":"reject_once"},{"optionId":"ra2","kind":"reject_always"}]"#;
        let execute = r#"{"toolCallId":"t","title":"mcp__x__run","kind":"execute"}"#;
        let by_kind = PermissionPolicy {
            allowed_tool_kinds: vec!["execute".into()],
            ..Default::default()
        };
        let by_title = PermissionPolicy {
            allowed_title_prefixes: vec!["mcp__x__".into()],
            ..Default::default()
        };
        assert_eq!(select(by_kind.clone(), execute, all).option_id, "ao");
        assert_eq!(
            select(by_title, r#"{"title":"mcp__x__run"}"#, all).option_id,
            "ao"
        );
        let no_once = r#"[{"optionId":"aa","kind":"allow_always"},{"optionId":"ra1","kind":"reject_always"},{"optionId":"ra2","kind":"reject_always"}]"#;
        assert_eq!(select(by_kind.clone(), execute, no_once).option_id, "aa");
        assert_eq!(
            select(PermissionPolicy::default(), execute, all).option_id,
            "ro"
        );
        let last_reject = select(PermissionPolicy::default(), execute, no_once);
        assert_eq!(
            (
                last_reject.option_id.as_str(),
                last_reject.option_kind.as_str()
            ),
            ("ra2", "reject_always")
        );
        assert_eq!(
            select(by_kind.clone(), execute, "[]"),
            Selection::cancelled()
        );
        assert_eq!(
            select(by_kind, execute, r#""not an array""#),
            Selection::cancelled()
        );
    }

    #[test]
    fn a_request_without_a_kind_uses_the_announced_one() {
        let policy = PermissionPolicy {
            allowed_tool_kinds: vec!["edit".into()],
            ..Default::default()
        };
        let mut engine = prompting(limits(), policy);
        let announce = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Write a","kind":"edit"}}}"#;
        assert!(matches!(
            engine.handle_line(announce).unwrap(),
            Step::Update(_)
        ));
        let ask = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{{"sessionId":"s","toolCall":{{"toolCallId":"{id}","title":"Write a"}},"options":[{{"optionId":"yes","kind":"allow_once"}},{{"optionId":"no","kind":"reject_once"}}]}}}}"#
            )
        };
        let line = ask("t1");
        let Step::Permission(event) = engine.handle_line(line.as_bytes()).unwrap() else {
            panic!("expected a permission request")
        };
        assert_eq!(engine.policy_selection(&event).option_id, "yes");
        assert_eq!(event.preview().tool_kind, "edit");
        let line = ask("other");
        let Step::Permission(event) = engine.handle_line(line.as_bytes()).unwrap() else {
            panic!("expected a permission request")
        };
        assert_eq!(engine.policy_selection(&event).option_id, "no");
        assert_eq!(event.preview().tool_kind, "");
    }

    #[test]
    fn permission_answers_echo_the_id() {
        let mut engine = prompting(limits(), PermissionPolicy::default());
        let line = br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t","title":"x","kind":"edit","status":"pending"},"options":[{"optionId":"r","name":"Reject","kind":"reject_once"}]}}"#;
        let Step::Permission(event) = engine.handle_line(line).unwrap() else {
            panic!("expected a permission request")
        };
        let preview = event.preview();
        assert_eq!(
            (preview.outcome.as_str(), preview.envelope.as_str()),
            ("pending", "")
        );
        let selection = engine.policy_selection(&event);
        let record = event.record(&selection, true);
        assert_eq!(record.tool_kind, "edit");
        assert_eq!(
            record.options,
            vec![("r".into(), "Reject".into(), "reject_once".into())]
        );
        assert_eq!(record.envelope.as_bytes(), line);
        assert_eq!(
            engine.permission_answer(&event, &selection).unwrap(),
            b"{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234567890,\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"r\"}}}\n"
        );
    }
}

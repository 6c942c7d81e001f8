//! The `Connection`: one sans-I/O engine that owns every protocol rule, for every driver. Bytes
//! go in (`read_buf`/`received`/`input_ended`), events and bytes come out (`poll_event`,
//! `poll_transmit`), time is passed in (`handle_timeout`). A blocking loop and an asyncio
//! readiness loop drive the same type, so they obey the same rules by construction:
//!
//! 1. Lines are handled in arrival order; each event is finished by the driver (callbacks
//!    returned, answer queued) before the next line's event is produced.
//! 2. Update: count cap, size cap, numbering, parse, route by `sessionId` (session attributes,
//!    reply capture, the turn's record), event.
//! 3. Permission: event with a preview; `decide` (cancel latch, observer, policy), the record,
//!    `on_permission_commit` by the driver, then `send` queues the answer.
//! 4. Outgoing lines leave whole and in FIFO order; `request_bytes` is checked before queueing.
//! 5. A response is matched by integer id to a live call; one to a tombstoned id is dropped;
//!    any other is an error.
//! 6. Prompt timeouts and their cancel grace are timers here.

use std::collections::VecDeque;

use serde_json::Value;

use crate::calls::{Call, CallId, CallKind, Calls, Listing};
use crate::encode::{self, ConfigValue, ContentBlock, McpServer};
use crate::error::{excerpt, AcpError, ProtocolError};
use crate::limits::Config;
use crate::permission::{Ask, PermissionRecord, Selection};
use crate::reader::{self, Poll, Storage};
use crate::results::{self, InitializeInfo, ModelsInfo, ModesInfo};
use crate::session::{Overflow, OverflowKind, SessionEntry, Turn, TurnOutcome};
use crate::update::{UpdateEvent, UpdateKind};
use crate::wire::{self, Envelope, WireError};

/// A permission request waiting for `decide`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AskId(pub u64);

/// What a finished call returns.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Initialized,
    SessionOpened(String),
    /// Every page's sessions, raw JSON objects in the agent's order.
    Listed(Vec<String>),
    /// The `configOptions` array after `set_config_option` (raw JSON), when there is one.
    ConfigOptions(Option<String>),
    Turn(Box<TurnOutcome>),
    Done,
}

#[derive(Debug)]
pub enum Event<'a> {
    /// A numbered update; `joined`: its text joined the reply of its session's turn.
    Update {
        update: UpdateEvent<'a>,
        joined: bool,
    },
    /// Ask the observer (unless `cancelled`), then `decide`.
    Permission {
        ask: AskId,
        preview: PermissionRecord,
        /// The session's cancel latch is tripped: the answer will be `cancelled` whatever
        /// the observer says, so it need not be asked.
        cancelled: bool,
    },
    /// A call finished (`line` is its response; "" when a timer ended it).
    Done {
        call: CallId,
        outcome: Result<Outcome, AcpError>,
        line: &'a str,
    },
    /// A line handled here: a notification dropped, a request answered "method not found", a
    /// late response to an abandoned call.
    Other { line: &'a str },
}

/// A decided permission request: the committed record and the answer. `send` queues the answer;
/// dropping it (the commit callback raised) writes nothing.
#[derive(Debug)]
pub struct Decided {
    pub record: PermissionRecord,
    bytes: Vec<u8>,
}

/// The calls a host can make.
#[derive(Clone, Copy, Debug)]
pub enum Request<'a> {
    Initialize,
    NewSession {
        cwd: &'a str,
        additional_directories: &'a [String],
        mcp_servers: Option<&'a [McpServer]>,
    },
    LoadSession {
        session_id: &'a str,
        cwd: &'a str,
        additional_directories: &'a [String],
        mcp_servers: Option<&'a [McpServer]>,
        resume: bool,
    },
    ListSessions {
        cwd: Option<&'a str>,
    },
    DeleteSession {
        session_id: &'a str,
    },
    Authenticate {
        method_id: &'a str,
    },
    Logout,
    Prompt {
        session_id: &'a str,
        content: &'a [ContentBlock],
        /// Timeout in ms from now; the prompt capability gate applies when `gated`.
        timeout_ms: Option<u64>,
        gated: bool,
    },
    SetMode {
        session_id: &'a str,
        mode_id: &'a str,
    },
    SetConfigOption {
        session_id: &'a str,
        config_id: &'a str,
        value: ConfigValue<'a>,
    },
    SetModel {
        session_id: &'a str,
        model_id: &'a str,
    },
}

pub struct Connection {
    reader: Storage,
    core: Core,
}

struct Core {
    config: Config,
    next_id: i64,
    next_update_sequence: u64,
    initialize: Option<InitializeInfo>,
    agent_error: Option<String>,
    calls: Calls,
    sessions: Vec<SessionEntry>,
    asks: Vec<(AskId, Ask)>,
    next_ask: u64,
    done: VecDeque<(CallId, Result<Outcome, AcpError>)>,
    outbox: VecDeque<Vec<u8>>,
    /// Bytes of the front line already written.
    written: usize,
    stopped: Option<String>,
    now_ms: u64,
}

fn trim(line: &[u8]) -> &[u8] {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|b| !is_space(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |i| i + 1);
    &line[start..end]
}

impl Connection {
    /// Validates the settings and allocates the reader's buffer (`message_bytes + 1` bytes).
    pub fn new(config: Config, reader_limits: reader::Limits) -> Result<Connection, AcpError> {
        config.validate()?;
        let mut reader = Storage::new(reader_limits).map_err(|e| {
            AcpError::CapacityOverflow(format!(
                "the reader's buffer of reader_limits.message_bytes + 1 ({} + 1) bytes cannot be allocated; nothing was started",
                e.message_bytes
            ))
        })?;
        reader.activate();
        Ok(Connection {
            reader,
            core: Core {
                config,
                next_id: 0,
                next_update_sequence: 1,
                initialize: None,
                agent_error: None,
                calls: Calls::default(),
                sessions: Vec::new(),
                asks: Vec::new(),
                next_ask: 0,
                done: VecDeque::new(),
                outbox: VecDeque::new(),
                written: 0,
                stopped: None,
                now_ms: 0,
            },
        })
    }

    // --- bytes in ------------------------------------------------------------------------

    /// Where the next read goes (empty once reading has stopped).
    pub fn read_buf(&mut self) -> &mut [u8] {
        self.reader.writable()
    }

    pub fn received(&mut self, count: usize) {
        self.reader.commit(count);
    }

    /// The agent's output ended.
    pub fn input_ended(&mut self) {
        self.reader.finish();
    }

    pub fn reader_status(&self) -> reader::Status {
        self.reader.status()
    }

    /// Releases the reader's buffer (the client is closed).
    pub fn close_reader(&mut self) {
        self.reader.close();
    }

    /// The next event, or `None` when more input is needed (or the output ended with no call
    /// waiting). An error here is about a line (invalid, unexpected, over a cap) or the end of
    /// the output while calls wait; the driver fails its call with it.
    pub fn poll_event(&mut self) -> Result<Option<Event<'_>>, AcpError> {
        if let Some((call, outcome)) = self.core.done.pop_front() {
            return Ok(Some(Event::Done {
                call,
                outcome,
                line: "",
            }));
        }
        loop {
            let range = match self.reader.poll() {
                Ok(Poll::Line(range)) => range,
                Ok(Poll::NeedInput) => return Ok(None),
                Ok(Poll::End) => {
                    return match self.core.calls.oldest() {
                        Some(_) => Err(self.core.output_ended()),
                        None => Ok(None),
                    }
                }
                Err(too_long) => {
                    return Err(AcpError::ReaderMessageCapacityExceeded(format!(
                        "the agent sent a line longer than reader_limits.message_bytes ({} bytes); reading from the agent has stopped, so this client can only be closed",
                        too_long.message_bytes
                    )))
                }
            };
            if trim(self.reader.bytes(range.clone())).is_empty() {
                continue; // blank lines mean nothing
            }
            // Lines are borrowed from the reader while the core changes: disjoint fields.
            let line = self.reader.bytes(range);
            return self.core.handle_line(line).map(Some);
        }
    }

    /// Whether the agent's output has ended (everything read).
    pub fn output_ended(&self) -> bool {
        self.reader.is_terminal()
    }

    // --- bytes out -----------------------------------------------------------------------

    /// The unwritten rest of the next outgoing line, and whether none of it was written yet.
    pub fn poll_transmit(&self) -> Option<(&[u8], bool)> {
        let line = self.core.outbox.front()?;
        Some((&line[self.core.written..], self.core.written == 0))
    }

    pub fn transmitted(&mut self, count: usize) {
        self.core.written += count;
        if let Some(line) = self.core.outbox.front() {
            if self.core.written >= line.len() {
                self.core.outbox.pop_front();
                self.core.written = 0;
            }
        }
    }

    /// Drops every line not yet written (the agent's stdin is gone).
    pub fn discard_transmit(&mut self) {
        self.core.outbox.clear();
        self.core.written = 0;
    }

    // --- calls ---------------------------------------------------------------------------

    pub fn request(&mut self, request: Request<'_>) -> Result<CallId, AcpError> {
        self.core.request(request)
    }

    /// Closes a session: writes `session/close` when the agent advertises it (the call
    /// returned), else closes it here at once (`None`).
    pub fn close_session(&mut self, session_id: &str) -> Result<Option<CallId>, AcpError> {
        self.core.close_session(session_id)
    }

    /// Stops waiting for a call: its id is tombstoned (a late answer is dropped).
    pub fn abandon(&mut self, call: CallId) {
        self.core.abandon(call);
    }

    /// Trips the cancel latch of the session's turn: one `session/cancel` per turn.
    pub fn cancel(&mut self, session_id: &str) {
        self.core.cancel(session_id);
    }

    pub fn decide(&mut self, ask: AskId, observer: Option<Selection>) -> Result<Decided, AcpError> {
        self.core.decide(ask, observer)
    }

    pub fn send(&mut self, decided: Decided) {
        self.core.outbox.push_back(decided.bytes);
    }

    /// After a callback raised: nothing more is read or written; calls fail with `reason`.
    pub fn stop(&mut self, reason: String) {
        self.core.stopped = Some(reason);
        self.discard_transmit();
    }

    pub fn stopped(&self) -> Option<&str> {
        self.core.stopped.as_deref()
    }

    // --- time ----------------------------------------------------------------------------

    /// The earliest deadline (ms on the driver's clock).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.core.calls.iter().filter_map(|c| c.deadline_ms).min()
    }

    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.core.handle_timeout(now_ms);
    }

    /// The driver's clock, for the timeouts of new requests.
    pub fn set_now(&mut self, now_ms: u64) {
        self.core.now_ms = now_ms;
    }

    // --- state ---------------------------------------------------------------------------

    pub fn config(&self) -> &Config {
        &self.core.config
    }
    pub fn set_policy(&mut self, policy: crate::limits::PermissionPolicy) {
        self.core.config.policy = policy;
    }
    pub fn next_update_sequence(&self) -> u64 {
        self.core.next_update_sequence
    }
    pub fn initialize(&self) -> Option<&InitializeInfo> {
        self.core.initialize.as_ref()
    }
    pub fn agent_error(&self) -> Option<&str> {
        self.core.agent_error.as_deref()
    }
    pub fn is_waiting(&self, call: CallId) -> bool {
        self.core.calls.get(call).is_some()
    }
    pub fn session(&self, session_id: &str) -> Option<&SessionEntry> {
        self.core.session(session_id)
    }
    pub fn session_ids(&self) -> impl Iterator<Item = &str> {
        self.core.sessions.iter().map(|s| s.id.as_str())
    }
    pub fn session_models(&self, session_id: &str) -> Option<ModelsInfo> {
        self.core.session(session_id).map(SessionEntry::models)
    }
}

impl Core {
    fn session(&self, id: &str) -> Option<&SessionEntry> {
        self.sessions.iter().find(|s| s.id == id)
    }

    fn session_mut(&mut self, id: &str) -> Option<&mut SessionEntry> {
        self.sessions.iter_mut().find(|s| s.id == id)
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

    fn capability(&self, advertised: bool, capability: &str) -> Result<(), AcpError> {
        if advertised {
            return Ok(());
        }
        Err(AcpError::Capability {
            capability: capability.to_owned(),
            message: format!(
                "ACP agent '{}' did not advertise the '{capability}' capability.",
                self.config.agent_id
            ),
        })
    }

    fn caps(&self) -> results::Capabilities {
        self.initialize
            .as_ref()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default()
    }

    /// The checks every call makes before it takes an id, in the design's order.
    fn admit_request(&self, request: &Request<'_>) -> Result<(), AcpError> {
        if let Some(reason) = &self.stopped {
            return Err(AcpError::protocol(reason.clone()));
        }
        let started = self.initialize.is_some();
        if !started && !matches!(request, Request::Initialize) {
            return Err(AcpError::protocol(
                "the client is not started: call start() first",
            ));
        }
        if started && matches!(request, Request::Initialize) {
            return Err(AcpError::Misuse("start() was already called".into()));
        }
        let caps = self.caps();
        let servers_gate = |servers: Option<&[McpServer]>| -> Result<(), AcpError> {
            let servers = servers.unwrap_or(&self.config.mcp_servers);
            for server in servers {
                match server {
                    McpServer::Http { .. } => {
                        self.capability(caps.mcp_http, "mcpCapabilities.http")?
                    }
                    McpServer::Sse { .. } => {
                        self.capability(caps.mcp_sse, "mcpCapabilities.sse")?
                    }
                    McpServer::Stdio { .. } => {}
                }
            }
            Ok(())
        };
        let absolute = |dirs: &[String]| -> Result<(), AcpError> {
            match dirs.iter().find(|d| !d.starts_with('/')) {
                Some(d) => Err(AcpError::InvalidArgument(format!(
                    "additional_directories must be absolute paths (got {d:?})"
                ))),
                None => Ok(()),
            }
        };
        match *request {
            Request::Initialize | Request::ListSessions { .. } if !started => Ok(()),
            Request::Initialize => Ok(()),
            Request::NewSession {
                additional_directories,
                mcp_servers,
                ..
            } => {
                if !additional_directories.is_empty() {
                    self.capability(
                        caps.session_additional_directories,
                        "sessionCapabilities.additionalDirectories",
                    )?;
                }
                servers_gate(mcp_servers)?;
                absolute(additional_directories)
            }
            Request::LoadSession {
                session_id,
                additional_directories,
                mcp_servers,
                resume,
                ..
            } => {
                if resume {
                    self.capability(caps.session_resume, "sessionCapabilities.resume")?;
                } else {
                    self.capability(caps.load_session, "loadSession")?;
                }
                if !additional_directories.is_empty() {
                    self.capability(
                        caps.session_additional_directories,
                        "sessionCapabilities.additionalDirectories",
                    )?;
                }
                servers_gate(mcp_servers)?;
                absolute(additional_directories)?;
                if self.session(session_id).is_some() {
                    return Err(AcpError::InvalidArgument(format!(
                        "session {session_id:?} is already open on this client"
                    )));
                }
                Ok(())
            }
            Request::ListSessions { .. } => {
                self.capability(caps.session_list, "sessionCapabilities.list")
            }
            Request::DeleteSession { .. } => {
                self.capability(caps.session_delete, "sessionCapabilities.delete")
            }
            Request::Logout => self.capability(caps.auth_logout, "auth.logout"),
            Request::Authenticate { method_id } => {
                let methods = &self.initialize.as_ref().expect("started").auth_methods;
                match methods.iter().find(|m| m.id == method_id) {
                    None => Err(AcpError::InvalidArgument(format!(
                        "{method_id:?} is not one of the agent's auth methods ({})",
                        methods.iter().map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
                    ))),
                    Some(m) if m.kind == "terminal" => Err(AcpError::InvalidArgument(format!(
                        "{method_id:?} is a terminal auth method: the user runs it in a terminal; clients must not pass it to authenticate"
                    ))),
                    Some(_) => Ok(()),
                }
            }
            Request::Prompt {
                session_id,
                content,
                gated,
                ..
            } => {
                let session = self.open_session(session_id)?;
                if session.turn.is_some() {
                    return Err(AcpError::Misuse(format!(
                        "session {session_id:?} already has a turn in flight (one turn at a time per session)"
                    )));
                }
                if gated {
                    for block in content {
                        match block {
                            ContentBlock::Image { .. } => {
                                self.capability(caps.prompt_image, "promptCapabilities.image")?
                            }
                            ContentBlock::Audio { .. } => {
                                self.capability(caps.prompt_audio, "promptCapabilities.audio")?
                            }
                            ContentBlock::TextResource { .. }
                            | ContentBlock::BlobResource { .. } => self.capability(
                                caps.prompt_embedded_context,
                                "promptCapabilities.embeddedContext",
                            )?,
                            ContentBlock::Raw(raw) => {
                                let kind = raw_block_type(raw);
                                match kind.as_deref() {
                                    Some("image") => self.capability(
                                        caps.prompt_image,
                                        "promptCapabilities.image",
                                    )?,
                                    Some("audio") => self.capability(
                                        caps.prompt_audio,
                                        "promptCapabilities.audio",
                                    )?,
                                    Some("resource") => self.capability(
                                        caps.prompt_embedded_context,
                                        "promptCapabilities.embeddedContext",
                                    )?,
                                    _ => {}
                                }
                            }
                            ContentBlock::Text(_) | ContentBlock::ResourceLink { .. } => {}
                        }
                    }
                }
                Ok(())
            }
            Request::SetMode {
                session_id,
                mode_id,
            } => {
                let session = self.idle_session(session_id)?;
                if session.modes.available.is_empty() {
                    self.capability(false, "session/set_mode")?;
                }
                if !session.modes.available.iter().any(|m| m.id == mode_id) {
                    return Err(AcpError::InvalidArgument(format!(
                        "{mode_id:?} is not one of the session's modes ({})",
                        ids(session.modes.available.iter().map(|m| m.id.as_str()))
                    )));
                }
                Ok(())
            }
            Request::SetConfigOption {
                session_id,
                config_id,
                value,
            } => {
                let session = self.idle_session(session_id)?;
                let option = session
                    .config_options
                    .as_ref()
                    .and_then(|o| results::config_option(o, config_id));
                let Some(option) = option else {
                    return Err(AcpError::InvalidArgument(format!(
                        "{config_id:?} is not one of the session's config options"
                    )));
                };
                let kind = option.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, value) {
                    ("boolean", ConfigValue::Boolean(_)) => Ok(()),
                    ("boolean", ConfigValue::Select(_)) => Err(AcpError::InvalidArgument(format!(
                        "config option {config_id:?} is a boolean: pass True or False"
                    ))),
                    (_, ConfigValue::Boolean(_)) => Err(AcpError::InvalidArgument(format!(
                        "config option {config_id:?} is a select: pass one of its values as a str"
                    ))),
                    (_, ConfigValue::Select(chosen)) => {
                        let offered: Vec<&str> = results::select_values(option)
                            .filter_map(|v| v.get("value").and_then(Value::as_str))
                            .collect();
                        if offered.contains(&chosen) {
                            Ok(())
                        } else {
                            Err(AcpError::InvalidArgument(format!(
                                "{chosen:?} is not a value of config option {config_id:?} ({})",
                                offered.join(", ")
                            )))
                        }
                    }
                }
            }
            Request::SetModel {
                session_id,
                model_id,
            } => {
                let session = self.idle_session(session_id)?;
                let models = session.models();
                let from_config = session
                    .config_options
                    .as_ref()
                    .and_then(results::models_from_config)
                    .is_some();
                if !from_config && session.legacy_models.is_none() {
                    self.capability(false, "session/set_model")?;
                }
                if !models.available.iter().any(|m| m.id == model_id) {
                    return Err(AcpError::InvalidArgument(format!(
                        "{model_id:?} is not one of the session's models ({})",
                        ids(models.available.iter().map(|m| m.id.as_str()))
                    )));
                }
                Ok(())
            }
        }
    }

    fn open_session(&self, session_id: &str) -> Result<&SessionEntry, AcpError> {
        self.session(session_id).ok_or_else(|| {
            AcpError::Misuse(format!(
                "session {session_id:?} is closed or not open on this client"
            ))
        })
    }

    /// A session that can take a control call (set_mode etc.): open, with no turn in flight.
    fn idle_session(&self, session_id: &str) -> Result<&SessionEntry, AcpError> {
        let session = self.open_session(session_id)?;
        if session.turn.is_some() {
            return Err(AcpError::Misuse(format!(
                "session {session_id:?} has a turn in flight"
            )));
        }
        Ok(session)
    }

    fn take_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn request(&mut self, request: Request<'_>) -> Result<CallId, AcpError> {
        self.admit_request(&request)?;
        let id = self.take_id();
        let servers_or_default = |servers: Option<&[McpServer]>, config: &Config| {
            servers
                .map(<[McpServer]>::to_vec)
                .unwrap_or_else(|| config.mcp_servers.clone())
        };
        let mut call = Call {
            handle: CallId(id),
            wire_id: id,
            kind: CallKind::Initialize,
            session: None,
            argument: String::new(),
            listing: None,
            deadline_ms: None,
            timed_out: false,
        };
        let bytes = match request {
            Request::Initialize => encode::initialize(id, &self.config.client_info),
            Request::NewSession {
                cwd,
                additional_directories,
                mcp_servers,
            } => {
                call.kind = CallKind::SessionNew;
                let servers = servers_or_default(mcp_servers, &self.config);
                encode::session_new(id, cwd, additional_directories, &servers)
            }
            Request::LoadSession {
                session_id,
                cwd,
                additional_directories,
                mcp_servers,
                resume,
            } => {
                call.kind = if resume {
                    CallKind::SessionResume
                } else {
                    CallKind::SessionLoad
                };
                call.session = Some(session_id.to_owned());
                let servers = servers_or_default(mcp_servers, &self.config);
                encode::session_load(
                    id,
                    call.kind.method(),
                    session_id,
                    cwd,
                    additional_directories,
                    &servers,
                )
            }
            Request::ListSessions { cwd } => {
                call.kind = CallKind::SessionList;
                call.listing = Some(Listing {
                    cwd: cwd.map(str::to_owned),
                    ..Listing::default()
                });
                encode::session_list(id, cwd, None)
            }
            Request::DeleteSession { session_id } => {
                call.kind = CallKind::SessionDelete;
                call.session = Some(session_id.to_owned());
                encode::session_call(id, "session/delete", session_id, &[])
            }
            Request::Authenticate { method_id } => {
                call.kind = CallKind::Authenticate;
                encode::authenticate(id, method_id)
            }
            Request::Logout => {
                call.kind = CallKind::Logout;
                encode::logout(id)
            }
            Request::Prompt {
                session_id,
                content,
                timeout_ms,
                ..
            } => {
                call.kind = CallKind::Prompt;
                call.session = Some(session_id.to_owned());
                call.deadline_ms = timeout_ms.map(|t| self.now_ms.saturating_add(t));
                encode::prompt(id, session_id, content)
            }
            Request::SetMode {
                session_id,
                mode_id,
            } => {
                call.kind = CallKind::SetMode;
                call.session = Some(session_id.to_owned());
                call.argument = mode_id.to_owned();
                encode::session_call(id, "session/set_mode", session_id, &[("modeId", mode_id)])
            }
            Request::SetConfigOption {
                session_id,
                config_id,
                value,
            } => {
                call.kind = CallKind::SetConfigOption;
                call.session = Some(session_id.to_owned());
                encode::set_config_option(id, session_id, config_id, value)
            }
            Request::SetModel {
                session_id,
                model_id,
            } => {
                call.session = Some(session_id.to_owned());
                call.argument = model_id.to_owned();
                let session = self.session(session_id).expect("checked");
                let model_option = session
                    .config_options
                    .as_ref()
                    .and_then(|options| {
                        results::select_config_ids(options)
                            .find(|(_, category)| *category == "model")
                    })
                    .map(|(id, _)| id.to_owned());
                match model_option {
                    Some(config_id) => {
                        call.kind = CallKind::SetConfigOption;
                        encode::set_config_option(
                            id,
                            session_id,
                            &config_id,
                            ConfigValue::Select(model_id),
                        )
                    }
                    None => {
                        call.kind = CallKind::SetModel;
                        encode::session_call(
                            id,
                            "session/set_model",
                            session_id,
                            &[("modelId", model_id)],
                        )
                    }
                }
            }
        };
        let bytes = self.checked(bytes, &format!("the {} request", call.kind.method()))?;
        match call.kind {
            // Registered before the request is written, so replayed updates are routed to it.
            CallKind::SessionLoad | CallKind::SessionResume => {
                let id = call.session.as_deref().expect("set above");
                self.sessions.push(SessionEntry::new(id));
            }
            CallKind::Prompt => {
                let id = call.session.as_deref().expect("set above");
                let handle = call.handle;
                let session = self.session_mut(id).expect("checked");
                session.turn = Some(Turn::new(handle));
                session.latched = false;
                session.late_turn = None;
            }
            _ => {}
        }
        let handle = call.handle;
        self.calls.insert(call);
        self.outbox.push_back(bytes);
        Ok(handle)
    }

    fn close_session(&mut self, session_id: &str) -> Result<Option<CallId>, AcpError> {
        if self.session(session_id).is_none() {
            return Ok(None); // already closed: closing is idempotent
        }
        if let Some(reason) = &self.stopped {
            return Err(AcpError::protocol(reason.clone()));
        }
        if !self.caps().session_close {
            self.forget_session(session_id);
            return Ok(None);
        }
        let id = self.take_id();
        let bytes = self.checked(
            encode::session_call(id, "session/close", session_id, &[]),
            "the session/close request",
        )?;
        self.calls.insert(Call {
            handle: CallId(id),
            wire_id: id,
            kind: CallKind::SessionClose,
            session: Some(session_id.to_owned()),
            argument: String::new(),
            listing: None,
            deadline_ms: None,
            timed_out: false,
        });
        self.outbox.push_back(bytes);
        Ok(Some(CallId(id)))
    }

    fn forget_session(&mut self, session_id: &str) {
        self.sessions.retain(|s| s.id != session_id);
    }

    fn abandon(&mut self, handle: CallId) {
        if let Some(call) = self.calls.remove(handle) {
            self.calls.tombstone(call.wire_id);
            self.end_turn_of(&call);
            if matches!(call.kind, CallKind::SessionLoad | CallKind::SessionResume) {
                let id = call.session.clone().unwrap_or_default();
                self.forget_session(&id);
            }
        }
    }

    /// A prompt call ended without its response: the session is free for a new turn, and its
    /// permission requests are answered `cancelled` until the late response arrives.
    fn end_turn_of(&mut self, call: &Call) {
        if call.kind != CallKind::Prompt {
            return;
        }
        let session_id = call.session.as_deref().unwrap_or("");
        if let Some(session) = self.session_mut(session_id) {
            if session.turn.as_ref().is_some_and(|t| t.call == call.handle) {
                session.turn = None;
                session.late_turn = Some(call.wire_id);
            }
        }
    }

    fn cancel(&mut self, session_id: &str) {
        let Some(session) = self.session_mut(session_id) else {
            return;
        };
        if session.turn.is_none() || session.latched {
            return;
        }
        session.latched = true;
        if self.stopped.is_none() {
            // A session id small enough to have been sent always fits its cancel.
            if let Ok(bytes) = self.checked(
                encode::cancel(session_id),
                "the session/cancel notification",
            ) {
                self.outbox.push_back(bytes);
            }
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        let grace = self.config.cancel_grace_ms;
        let mut fired = Vec::new();
        let mut expired = Vec::new();
        for call in self.calls.iter_mut() {
            match call.deadline_ms {
                Some(deadline) if deadline <= now_ms => {
                    if call.timed_out {
                        expired.push(call.handle);
                    } else {
                        call.timed_out = true;
                        call.deadline_ms = Some(deadline.saturating_add(grace));
                        fired.push(call.session.clone().unwrap_or_default());
                    }
                }
                _ => {}
            }
        }
        for session_id in fired {
            self.cancel(&session_id);
        }
        for handle in expired {
            let session_id = self
                .calls
                .get(handle)
                .and_then(|c| c.session.clone())
                .unwrap_or_default();
            self.abandon(handle);
            self.done
                .push_back((handle, Err(AcpError::TurnTimeout { session_id })));
        }
    }

    fn decide(&mut self, ask: AskId, observer: Option<Selection>) -> Result<Decided, AcpError> {
        let index = self
            .asks
            .iter()
            .position(|(id, _)| *id == ask)
            .ok_or_else(|| {
                AcpError::Misuse("this permission request was already decided".into())
            })?;
        let (_, request) = self.asks.remove(index);
        let selection = if self.latched(&request.record.session_id) {
            Selection::cancelled()
        } else {
            observer.unwrap_or_else(|| request.policy_selection(&self.config.policy))
        };
        let bytes = self.checked(
            encode::permission_answer(
                &request.record.request_id,
                &selection.outcome,
                &selection.option_id,
            ),
            "the session/request_permission answer",
        )?;
        Ok(Decided {
            record: request.with(&selection, true),
            bytes,
        })
    }

    fn latched(&self, session_id: &str) -> bool {
        self.session(session_id)
            .is_some_and(|s| s.latched && (s.turn.is_some() || s.late_turn.is_some()))
    }

    // --- incoming lines --------------------------------------------------------------------

    fn waiting_for(&self) -> String {
        match self.calls.oldest() {
            Some(call) => format!(
                "the response to {} (id {})",
                call.kind.method(),
                call.wire_id
            ),
            None => "no response (no call in flight)".into(),
        }
    }

    fn output_ended(&self) -> AcpError {
        let description = match self.calls.oldest() {
            Some(call) => format!(
                "the agent's output ended before the response to {} (id {}): the agent exited or closed its stdout",
                call.kind.method(),
                call.wire_id
            ),
            None => "the agent's output ended".to_owned(),
        };
        AcpError::AgentProtocol(ProtocolError {
            description,
            output_ended: true,
            ..ProtocolError::default()
        })
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

    fn handle_line<'a>(&mut self, line: &'a [u8]) -> Result<Event<'a>, AcpError> {
        let line = trim(line);
        if let Some(chunk) = wire::text_chunk(line) {
            // No id, so it cannot be a response: the update path is the only one.
            let update = self.text_chunk_update(chunk)?;
            let joined = self.admit(&update, None)?;
            return Ok(Event::Update { update, joined });
        }
        let message = wire::classify(line).map_err(|e| self.wire_error(&e, line))?;
        let envelope = message.text;
        if message.result.is_some() || message.error.is_some() {
            if let Some(id) = message.integer_id() {
                if let Some(call) = self.calls.take(id) {
                    return Ok(self.complete(call, &message, envelope));
                }
                if message.method.is_none() && self.calls.bury(id) {
                    self.late_answer(id);
                    return Ok(Event::Other { line: envelope });
                }
            }
        }
        match message.method.as_deref() {
            Some("session/update") => {
                let (update, raw) = self.update(message)?;
                let joined = self.admit(&update, raw)?;
                Ok(Event::Update { update, joined })
            }
            Some("session/request_permission") => match message.id {
                Some(raw_id) => {
                    let fields = wire::permission_request(message.params);
                    Ok(self.permission(raw_id.get(), envelope, &fields))
                }
                None => Err(AcpError::protocol(format!(
                    "the agent sent session/request_permission without an id, so it cannot be answered: {}",
                    excerpt(line, 200)
                ))),
            },
            Some(_) => {
                if let Some(raw_id) = message.id {
                    let answer = self.checked(
                        encode::method_not_found(raw_id.get()),
                        "the method-not-found answer",
                    )?;
                    self.outbox.push_back(answer);
                }
                Ok(Event::Other { line: envelope })
            }
            None => Err(self.unexpected(line)),
        }
    }

    /// A late answer to a timed-out prompt: its session's requests are no longer cancelled.
    fn late_answer(&mut self, wire_id: i64) {
        for session in &mut self.sessions {
            if session.late_turn == Some(wire_id) {
                session.late_turn = None;
                if session.turn.is_none() {
                    session.latched = false;
                }
            }
        }
    }

    fn permission<'a>(
        &mut self,
        raw_id: &str,
        envelope: &'a str,
        fields: &wire::Params<'_>,
    ) -> Event<'a> {
        let session_id = fields.session_id.or_empty();
        let tool = fields.tool_call.0.as_deref();
        let announced = match tool {
            Some(t) if t.kind.as_str().is_none() => t
                .tool_call_id
                .as_str()
                .and_then(|id| self.session(session_id)?.announced_kind(id)),
            _ => None,
        };
        // Gemini CLI asks permission for calls it never announced: the request announces them.
        if let (Some(session), Some(tool_id)) = (
            self.sessions.iter_mut().find(|s| s.id == session_id),
            tool.and_then(|t| t.tool_call_id.as_str()),
        ) {
            if let Some(turn) = session.turn.as_mut().filter(|t| !t.knows(tool_id)) {
                if let Some(Value::Object(tool_call)) = serde_json::from_str::<Value>(envelope)
                    .ok()
                    .and_then(|mut v| v.get_mut("params")?.get_mut("toolCall").map(Value::take))
                {
                    turn.announce(tool_id, tool_call);
                }
            }
        }
        let request = Ask::new(raw_id, envelope, fields, announced);
        let ask = AskId(self.next_ask);
        self.next_ask += 1;
        let preview = request.preview();
        let cancelled = self.latched(session_id);
        self.asks.push((ask, request));
        Event::Permission {
            ask,
            preview,
            cancelled,
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

    /// A general update, and its `params.update` as a JSON value when an open session needs
    /// more of it than the borrowed fields (kinds other than the three chunks).
    fn update<'a>(
        &mut self,
        message: Envelope<'a>,
    ) -> Result<(UpdateEvent<'a>, Option<Value>), AcpError> {
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
        let session_id = update.session_id.as_ref();
        let mut raw = None;
        if let Some(session) = self.sessions.iter_mut().find(|s| s.id == session_id) {
            if matches!(kind, UpdateKind::ToolCall | UpdateKind::ToolCallUpdate) {
                if let (Some(id), Some(tool_kind)) = (
                    update.fields.tool_call_id.as_str(),
                    update.fields.kind.as_str(),
                ) {
                    session.announce_kind(id, tool_kind);
                }
            }
            if !kind.is_chunk() && kind != UpdateKind::Unknown {
                raw = serde_json::from_str::<Value>(envelope)
                    .ok()
                    .and_then(|mut v| v.get_mut("params")?.get_mut("update").map(Value::take));
            }
        }
        let text = UpdateEvent::text_of(kind, &update.fields);
        Ok((
            UpdateEvent {
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
            },
            raw,
        ))
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
            session_update: std::borrow::Cow::Borrowed(chunk.session_update),
            transport_epoch: self.config.transport_epoch,
            update_sequence,
            session_id: std::borrow::Cow::Borrowed(chunk.session_id),
            envelope: chunk.text_line,
            text: std::borrow::Cow::Borrowed(text),
            message_id: None,
            tool_call_id: None,
            ascii: chunk.ascii,
        })
    }

    /// Routes an update to its open session: attributes, the turn's record, and for an agent
    /// message chunk the reply capture within the limits (or the overflow record and the one
    /// `session/cancel`). Returns whether the text joined the reply.
    fn admit(&mut self, update: &UpdateEvent<'_>, raw: Option<Value>) -> Result<bool, AcpError> {
        let limits = self.config.limits;
        let collect = self.config.collect_reply;
        let Some(session) = self
            .sessions
            .iter_mut()
            .find(|s| s.id == update.session_id.as_ref())
        else {
            return Ok(false);
        };
        if let Some(Value::Object(mut fields)) = raw {
            match update.kind {
                UpdateKind::CurrentModeUpdate => {
                    session.modes.current = update.text.to_string();
                }
                UpdateKind::ConfigOptionUpdate => {
                    if let Some(options) = fields.remove("configOptions").filter(Value::is_array) {
                        session.config_options = Some(options);
                    }
                }
                UpdateKind::AvailableCommandsUpdate => {
                    if let Some(commands) = fields.get("availableCommands").filter(|c| c.is_array())
                    {
                        session.commands = Some(commands.clone());
                        if let Some(turn) = session.turn.as_mut() {
                            turn.commands = Some(commands.clone());
                        }
                    }
                }
                UpdateKind::ToolCall | UpdateKind::ToolCallUpdate => {
                    if let (Some(turn), Some(id)) =
                        (session.turn.as_mut(), update.tool_call_id.as_deref())
                    {
                        if update.kind == UpdateKind::ToolCall {
                            turn.announce(id, fields);
                        } else {
                            turn.amend(id, fields);
                        }
                    }
                }
                UpdateKind::Plan => {
                    if let Some(turn) = session.turn.as_mut() {
                        turn.plan = Some(fields.remove("entries").unwrap_or(Value::Array(vec![])));
                    }
                }
                UpdateKind::UsageUpdate => {
                    if let Some(turn) = session.turn.as_mut() {
                        fields.remove("sessionUpdate");
                        turn.usage = Some(Value::Object(fields));
                    }
                }
                _ => {}
            }
        }
        if update.kind != UpdateKind::AgentMessageChunk {
            return Ok(false);
        }
        let Some(turn) = session.turn.as_mut() else {
            return Ok(false);
        };
        let capture = &mut turn.capture;
        if capture.overflow.is_some() {
            return Ok(false);
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
                Ok(true)
            }
            Some(kind) => {
                capture.overflow = Some(Overflow {
                    kind,
                    admitted_bytes: capture.bytes,
                    admitted_segments: capture.segments,
                    withheld_update_sequence: update.update_sequence,
                });
                let session_id = session.id.clone();
                self.cancel(&session_id);
                Ok(false)
            }
        }
    }

    // --- responses -----------------------------------------------------------------------

    fn complete<'a>(&mut self, mut call: Call, message: &Envelope<'_>, line: &'a str) -> Event<'a> {
        let handle = call.handle;
        match self.outcome(&mut call, message) {
            Ok(None) => {
                // A listing's next page was requested under a new id: keep waiting.
                self.calls.insert(call);
                Event::Other { line }
            }
            Ok(Some(outcome)) => Event::Done {
                call: handle,
                outcome: Ok(outcome),
                line,
            },
            Err(error) => {
                self.end_turn_of(&call);
                if let Some(session) = call.session.as_deref() {
                    if matches!(call.kind, CallKind::SessionLoad | CallKind::SessionResume) {
                        let session = session.to_owned();
                        self.forget_session(&session);
                    } else if call.kind == CallKind::Prompt {
                        // The turn is over: its latch and late state go with it.
                        if let Some(entry) = self.session_mut(session) {
                            entry.late_turn = None;
                            entry.latched = false;
                        }
                    }
                }
                Event::Done {
                    call: handle,
                    outcome: Err(error),
                    line,
                }
            }
        }
    }

    /// The result of a call, or the error its answer carries. `Ok(None)`: not finished yet.
    fn outcome(
        &mut self,
        call: &mut Call,
        message: &Envelope<'_>,
    ) -> Result<Option<Outcome>, AcpError> {
        let method = call.kind.method();
        let id = call.wire_id;
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
                    "the agent answered {method} (id {id}) with error {code}: {text}"
                ),
                code: answer.code,
                message: answer.message,
                data: answer.data,
                output_ended: false,
            }));
        }
        let raw = message.result.map_or("null", |r| r.get());
        // Calls whose result is empty accept `{}` and `null` (the docs' load example is null).
        let object_required = matches!(
            call.kind,
            CallKind::Initialize | CallKind::SessionNew | CallKind::Prompt | CallKind::SessionList
        );
        if object_required && !raw.starts_with('{') {
            return Err(AcpError::protocol(format!(
                "the agent's result for {method} (id {id}) is not a JSON object: {}",
                excerpt(raw.as_bytes(), 200)
            )));
        }
        let session_id = call.session.clone().unwrap_or_default();
        Ok(Some(match call.kind {
            CallKind::Initialize => {
                self.initialize = Some(results::initialize(raw)?);
                Outcome::Initialized
            }
            CallKind::SessionNew => {
                let result = results::session(raw, method)?;
                let Some(id) = result.session_id.clone() else {
                    return Err(AcpError::protocol(format!(
                        "the agent's session/new result has no string sessionId: {}",
                        excerpt(raw.as_bytes(), 200)
                    )));
                };
                if self.session(&id).is_some() {
                    return Err(AcpError::protocol(format!(
                        "the agent's session/new result names session {id:?}, which is already open"
                    )));
                }
                let mut entry = SessionEntry::new(&id);
                entry.apply(result);
                self.sessions.push(entry);
                Outcome::SessionOpened(id)
            }
            CallKind::SessionLoad | CallKind::SessionResume => {
                let result = results::session(raw, method)?;
                if let Some(entry) = self.session_mut(&session_id) {
                    entry.apply(result);
                }
                Outcome::SessionOpened(session_id)
            }
            CallKind::SessionList => {
                let (sessions, cursor) = results::list_page(raw)?;
                let listing = call.listing.as_mut().expect("a listing call");
                listing.sessions.extend(sessions);
                if let Some(cursor) = cursor {
                    if listing.cursors.contains(&cursor) {
                        return Err(AcpError::protocol(format!(
                            "the agent's session/list returned cursor {cursor:?} a second time; stopped to avoid a loop"
                        )));
                    }
                    listing.cursors.push(cursor.clone());
                    let cwd = listing.cwd.clone();
                    let next = self.take_id();
                    let bytes = self.checked(
                        encode::session_list(next, cwd.as_deref(), Some(&cursor)),
                        "the session/list request",
                    )?;
                    call.wire_id = next;
                    self.outbox.push_back(bytes);
                    return Ok(None);
                }
                Outcome::Listed(std::mem::take(&mut listing.sessions))
            }
            CallKind::SessionDelete | CallKind::SessionClose => {
                self.forget_session(&session_id);
                Outcome::Done
            }
            CallKind::SetMode => {
                if let Some(entry) = self.session_mut(&session_id) {
                    entry.modes.current = call.argument.clone();
                }
                Outcome::Done
            }
            CallKind::SetConfigOption => {
                let result: Value = results::parse_object(raw, method)?;
                let options = result
                    .get("configOptions")
                    .filter(|o| o.is_array())
                    .cloned();
                let entry = self.session_mut(&session_id);
                match (options, entry) {
                    (Some(options), Some(entry)) => {
                        entry.config_options = Some(options);
                    }
                    (_, Some(entry)) if !call.argument.is_empty() => {
                        // set_model through a "model" option the agent did not echo back.
                        if let Some(models) = entry.legacy_models.as_mut() {
                            models.current = call.argument.clone();
                        }
                    }
                    _ => {}
                }
                let options = self
                    .session(&session_id)
                    .and_then(|s| s.config_options.as_ref())
                    .map(Value::to_string);
                Outcome::ConfigOptions(options)
            }
            CallKind::SetModel => {
                if let Some(models) = self
                    .session_mut(&session_id)
                    .and_then(|e| e.legacy_models.as_mut())
                {
                    models.current = call.argument.clone();
                }
                Outcome::Done
            }
            CallKind::Authenticate | CallKind::Logout => Outcome::Done,
            CallKind::Prompt => {
                let fields = wire::prompt_result(message.result.expect("checked above"))
                    .map_err(|e| AcpError::protocol(format!("malformed {e}")))?;
                let Some(stop_reason) = fields.stop_reason.0 else {
                    return Err(AcpError::protocol(format!(
                        "the agent's session/prompt result has no string stopReason: {}",
                        excerpt(raw.as_bytes(), 200)
                    )));
                };
                let entry = self.session_mut(&session_id);
                let (turn, mode) = match entry {
                    Some(entry) => {
                        entry.latched = false;
                        entry.late_turn = None;
                        (entry.turn.take(), entry.modes.current.clone())
                    }
                    None => (None, String::new()),
                };
                let turn = turn.unwrap_or_else(|| Turn::new(call.handle));
                Outcome::Turn(Box::new(TurnOutcome {
                    session_id,
                    response: turn.capture.text,
                    stop_reason: stop_reason.into_owned(),
                    overflow: turn.capture.overflow,
                    timed_out: call.timed_out,
                    tool_calls: turn
                        .tool_calls
                        .into_iter()
                        .map(|(_, fields)| Value::Object(fields).to_string())
                        .collect(),
                    plan: turn.plan.map(|p| p.to_string()),
                    available_commands: turn.commands.map(|c| c.to_string()),
                    usage: turn.usage.map(|u| u.to_string()),
                    current_mode_id: mode,
                }))
            }
        }))
    }
}

fn ids<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = items.collect();
    if all.is_empty() {
        "none offered".into()
    } else {
        all.join(", ")
    }
}

/// The `type` of a block encoded as JSON text.
fn raw_block_type(raw: &str) -> Option<String> {
    let value: Value = serde_json::from_str(raw).ok()?;
    value.get("type")?.as_str().map(str::to_owned)
}

// Session state a host reads; re-exported for the drivers.
pub use crate::results::NamedEntry;
pub type Modes = ModesInfo;

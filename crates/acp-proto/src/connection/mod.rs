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
//!
//! The core is split by concern: `checks` (what a call must pass before it takes an id),
//! `requests` (encoding and registering calls), `lines` (incoming lines: updates, permission
//! requests, routing) and `answers` (responses completing calls); `events` holds what the
//! connection hands out and takes in (events, outcomes, requests, decisions).

use std::collections::VecDeque;

mod answers;
mod checks;
mod elicit;
mod events;
mod host;
mod lifecycle;
mod lines;
mod outbox;
mod requests;

pub use elicit::ElicitationDecided;
pub use events::{AskId, Decided, Event, Outcome, Request};
pub use host::{HostAnswer, HostId};

use serde_json::Value;

use crate::calls::{Call, CallId, CallKind, Calls, Listing};
use crate::encode::{self, ConfigValue, ContentBlock, McpServer, SystemPrompt};
use crate::error::{excerpt, AcpError, ProtocolError};
use crate::limits::Config;
use crate::permission::{Ask, ObserverAnswer, PermissionRecord};
use crate::reader::{self, Poll, Storage};
use crate::results::{self, InitializeInfo};
use crate::rules::Remembered;
use crate::session::{Overflow, OverflowKind, SessionEntry, Turn, TurnOutcome};
use crate::update::{Joined, UpdateEvent, UpdateKind};
use crate::wire::{self, Envelope, WireError};

/// How much of what was read and not yet handled `Connection::withdrawn_ahead` looks at.
pub const LOOK_AHEAD_BYTES: usize = 1 << 20;

pub struct Connection {
    reader: Storage,
    core: Core,
}

struct Core {
    config: Config,
    next_id: i64,
    next_update_sequence: u64,
    initialize: Option<InitializeInfo>,
    /// The version `initialize` agreed (0 before it answered): read on every update, so kept
    /// apart from `initialize`.
    version: i64,
    agent_error: Option<String>,
    calls: Calls,
    sessions: Vec<SessionEntry>,
    asks: Vec<(AskId, Ask)>,
    elicitations: elicit::Elicitations,
    hosts: Vec<host::PendingHost>,
    next_host: u64,
    /// Per session: the answers kept by `remember=True` (forgotten when it closes).
    remembered: std::collections::HashMap<String, Remembered>,
    next_ask: u64,
    done: VecDeque<(CallId, Result<Outcome, AcpError>)>,
    outbox: outbox::Outbox,
    /// Bytes of the front line already written.
    written: usize,
    /// The front line was handed out as new (`poll_transmit`'s flag), so a retried write of
    /// it (the pipe was full) is not reported again.
    announced: bool,
    stopped: Option<String>,
    now_ms: u64,
    /// The handshake's deadline (ms) and the reason it stops the connection with.
    start_deadline: Option<(u64, String)>,
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
                version: 0,
                agent_error: None,
                calls: Calls::default(),
                sessions: Vec::new(),
                asks: Vec::new(),
                elicitations: Default::default(),
                remembered: Default::default(),
                hosts: Vec::new(),
                next_host: 0,
                next_ask: 0,
                done: VecDeque::new(),
                outbox: outbox::Outbox::default(),
                written: 0,
                announced: false,
                stopped: None,
                now_ms: 0,
                start_deadline: None,
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
            return self.core.handle_line(line);
        }
    }

    /// Whether the agent's output has ended (its end read; once `poll_event` gives `None`,
    /// every line was handed out) or reading stopped on an overlong line.
    pub fn output_ended(&self) -> bool {
        self.reader.input_ended() || self.reader.is_terminal()
    }

    // --- bytes out -----------------------------------------------------------------------

    /// The unwritten rest of the next outgoing line, and whether it is new: not yet marked
    /// by `announce_transmit` (a driver reports each line once, e.g. to a wire tap, however
    /// many writes it takes).
    pub fn poll_transmit(&self) -> Option<(&[u8], bool)> {
        let line = self.core.outbox.front()?;
        Some((&line[self.core.written..], !self.core.announced))
    }

    /// Marks the front line as reported: `poll_transmit` no longer calls it new.
    pub fn announce_transmit(&mut self) {
        self.core.announced = self.core.outbox.front().is_some();
    }

    pub fn transmitted(&mut self, count: usize) {
        self.core.written += count;
        if let Some(line) = self.core.outbox.front() {
            if self.core.written >= line.len() {
                self.core.outbox.pop_front();
                self.core.written = 0;
                self.core.announced = false;
            }
        }
    }

    /// Bytes queued for the agent and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.core.outbox.bytes() - self.core.written
    }

    /// The agent is not taking what is queued for it (`outbox::BACKLOG_BYTES`): a driver
    /// that can stop reading its output until it does should.
    pub fn backlogged(&self) -> bool {
        let limit =
            outbox::BACKLOG_BYTES.max(self.core.config.limits.request_bytes.saturating_mul(2));
        self.queued_bytes() > limit
    }

    /// Drops every line not yet written (the agent's stdin is gone).
    pub fn discard_transmit(&mut self) {
        self.core.outbox.clear();
        self.core.written = 0;
        self.core.announced = false;
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

    /// Gives up on a call whose caller went away (an asyncio task cancelled): its id is
    /// tombstoned and `$/cancel_request` tells the agent. A prompt is cancelled with `cancel`
    /// instead; this one only abandons it.
    pub fn cancel_request(&mut self, call: CallId) {
        let Some(wire_id) = self.core.calls.get(call).map(|c| c.wire_id) else {
            return;
        };
        let kind = self.core.calls.get(call).map(|c| c.kind);
        self.core.abandon(call);
        if kind == Some(CallKind::Prompt) || self.core.stopped.is_some() {
            return;
        }
        if let Ok(bytes) = self.core.checked(
            encode::cancel_request(wire_id),
            "the $/cancel_request notification",
        ) {
            self.core.outbox.push_back(bytes);
        }
    }

    /// Whether a permission request still waiting for `decide` will be answered `cancelled`
    /// whatever the observer says: its session's turn is being cancelled, or the agent withdrew
    /// it with `$/cancel_request` (an observer asked about it can stop).
    pub fn ask_cancelled(&self, ask: AskId) -> bool {
        self.core.ask(ask).is_some_and(|request| {
            request.withdrawn || self.core.latched(&request.record.session_id)
        }) || self.elicitation_cancelled(ask)
    }

    /// Whether `withdrawn_ahead` would look at more bytes than are already read (a driver
    /// reads before asking only then).
    pub fn room_to_look_ahead(&self) -> bool {
        self.reader.unhandled().len() < LOOK_AHEAD_BYTES
    }

    /// After a blocking `on_permission` returned (nothing was read while it ran): whether the
    /// agent has withdrawn the request meanwhile, by a `$/cancel_request` among the complete
    /// lines already read and not yet handled. Such a request is then answered `cancelled`
    /// (sessions.md §5); nothing is handled out of order (the line is handled in its turn, and
    /// then names an answered request).
    pub fn withdrawn_ahead(&mut self, ask: AskId) -> bool {
        let Some(index) = self.core.asks.iter().position(|(id, _)| *id == ask) else {
            return false;
        };
        let request = &mut self.core.asks[index].1;
        if request.withdrawn {
            return true;
        }
        let bytes = self.reader.unhandled();
        // Bounded: an agent that buffers a flood behind each request cannot make every request
        // rescan it (the cancellation of interest follows its request closely).
        let bytes = &bytes[..bytes.len().min(LOOK_AHEAD_BYTES)];
        // The common case: no cancellation anywhere in the buffer, one memchr-speed scan.
        if memchr::memmem::find(bytes, b"$/cancel_request").is_none() {
            return false;
        }
        let Ok(wanted) = serde_json::from_str::<Value>(&request.record.request_id) else {
            return false;
        };
        let complete = match memchr::memrchr(b'\n', bytes) {
            Some(last) => &bytes[..last],
            None => return false,
        };
        let found = complete
            .split(|b| *b == b'\n')
            .filter(|line| memchr::memmem::find(line, b"$/cancel_request").is_some())
            .filter_map(|line| std::str::from_utf8(line).ok())
            .filter(|line| is_cancel_request(line))
            .any(|line| requested_id(line).is_some_and(|id| id == wanted));
        request.withdrawn = found;
        found
    }

    /// What the observer's `on_permission` is shown of a request not yet decided (built on
    /// demand: most hosts decide by policy and never look).
    pub fn preview(&self, ask: AskId) -> Option<PermissionRecord> {
        self.core.ask(ask).map(Ask::preview)
    }

    /// The exact line of a request not yet decided (the preview leaves its `envelope` empty:
    /// `PermissionRequest.decode()` on the preview reads this instead, model.md §4).
    pub fn ask_line(&self, ask: AskId) -> Option<&str> {
        self.core.ask(ask).map(|a| a.record.envelope.as_str())
    }

    /// The session of a request not yet decided.
    pub fn ask_session(&self, ask: AskId) -> Option<&str> {
        self.core.ask(ask).map(|a| a.record.session_id.as_str())
    }

    /// Trips the cancel latch of the session's turn: one `session/cancel` per turn.
    pub fn cancel(&mut self, session_id: &str) {
        self.core.cancel(session_id);
    }

    /// Tiers 4–6 (unless 0–3 decided on arrival), the record, and the answer's bytes.
    pub fn decide(
        &mut self,
        ask: AskId,
        observer: Option<ObserverAnswer>,
    ) -> Result<Decided, AcpError> {
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
        let calls = self.core.calls.iter().filter_map(|c| c.deadline_ms).min();
        match &self.core.start_deadline {
            Some((at, _)) => Some(calls.map_or(*at, |c| c.min(*at))),
            None => calls,
        }
    }

    /// The `start()` timeout (design §6), one timer for both drivers: `timeout_s` after now
    /// (`set_now`) every call still waiting ends with `AcpError::StartTimeout` and the
    /// connection stops. `None` clears it (the handshake finished).
    pub fn set_start_deadline(&mut self, timeout_s: Option<f64>) {
        self.core.start_deadline = timeout_s.map(|seconds| {
            let ms = (seconds * 1000.0).ceil().max(1.0) as u64;
            let reason = format!(
                "start() timed out after {seconds} s; only close() is accepted (and request_cancel())"
            );
            (self.core.now_ms.saturating_add(ms), reason)
        });
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
}

impl Core {
    pub(super) fn session(&self, id: &str) -> Option<&SessionEntry> {
        self.sessions.iter().find(|s| s.id == id)
    }

    pub(super) fn session_mut(&mut self, id: &str) -> Option<&mut SessionEntry> {
        self.sessions.iter_mut().find(|s| s.id == id)
    }

    pub(super) fn checked(&self, bytes: Vec<u8>, what: &str) -> Result<Vec<u8>, AcpError> {
        let limit = self.config.limits.request_bytes;
        if bytes.len() > limit {
            return Err(AcpError::RequestCapacityExceeded(format!(
                "{what} is {} bytes (newline included), more than transfer_limits.request_bytes ({limit}); nothing was sent",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    pub(super) fn capability(&self, advertised: bool, capability: &str) -> Result<(), AcpError> {
        if advertised {
            return Ok(());
        }
        Err(AcpError::Capability {
            capability: capability.to_owned(),
            agent_id: self.config.agent_id.clone(),
            message: format!(
                "ACP agent '{}' did not advertise the '{capability}' capability.",
                self.config.agent_id
            ),
        })
    }

    pub(super) fn caps(&self) -> results::Capabilities {
        self.initialize
            .as_ref()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default()
    }

    /// The checks every call makes before it takes an id, in the design's order.
    pub(super) fn forget_session(&mut self, session_id: &str) {
        self.sessions.retain(|s| s.id != session_id);
        self.remembered.remove(session_id);
    }

    pub(super) fn abandon(&mut self, handle: CallId) {
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
    pub(super) fn end_turn_of(&mut self, call: &Call) {
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

    pub(super) fn cancel(&mut self, session_id: &str) {
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

    pub(super) fn handle_timeout(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        if self
            .start_deadline
            .as_ref()
            .is_some_and(|(at, _)| *at <= now_ms)
        {
            let (_, reason) = self.start_deadline.take().expect("checked");
            let waiting: Vec<CallId> = self.calls.iter().map(|c| c.handle).collect();
            for handle in waiting {
                self.abandon(handle);
                self.done
                    .push_back((handle, Err(AcpError::StartTimeout(reason.clone()))));
            }
            self.stopped = Some(reason);
            self.outbox.clear();
            self.written = 0;
            self.announced = false;
        }
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

    pub(super) fn decide(
        &mut self,
        ask: AskId,
        observer: Option<ObserverAnswer>,
    ) -> Result<Decided, AcpError> {
        let index = self
            .asks
            .iter()
            .position(|(id, _)| *id == ask)
            .ok_or_else(|| {
                AcpError::Misuse("this permission request was already decided".into())
            })?;
        let (_, request) = self.asks.remove(index);
        let latched = self.latched(&request.record.session_id);
        let resolved = request.resolve(latched, observer);
        let bytes = self.checked(
            encode::permission_answer(
                &resolved.record.request_id,
                &resolved.selection.outcome,
                &resolved.selection.option_id,
            ),
            "the session/request_permission answer",
        )?;
        if let Some((kind, title, decision)) = resolved.remember {
            let session_id = &resolved.record.session_id;
            if self.session(session_id).is_some() {
                self.remembered
                    .entry(session_id.clone())
                    .or_default()
                    .keep(&kind, &title, decision);
            }
        }
        Ok(Decided {
            record: resolved.record,
            bytes,
        })
    }

    /// `$/cancel_request` naming a permission request still waiting for `decide` (an awaited
    /// `on_permission`): it is marked withdrawn, so `decide` answers it `cancelled` (sessions.md
    /// §5). Whether one matched; an unknown or answered id, or a malformed line, matches none.
    pub(super) fn withdraw_ask(&mut self, line: &str) -> bool {
        let Some(wanted) = requested_id(line) else {
            return false;
        };
        let found = self.asks.iter_mut().find(|(_, request)| {
            serde_json::from_str::<Value>(&request.record.request_id).is_ok_and(|id| id == wanted)
        });
        match found {
            Some((_, request)) => {
                request.withdrawn = true;
                true
            }
            None => false,
        }
    }

    fn ask(&self, ask: AskId) -> Option<&Ask> {
        self.asks
            .iter()
            .find(|(id, _)| *id == ask)
            .map(|(_, request)| request)
    }

    pub(super) fn latched(&self, session_id: &str) -> bool {
        self.session(session_id)
            .is_some_and(|s| s.latched && (s.turn.is_some() || s.late_turn.is_some()))
    }
}

/// Whether a line is a `$/cancel_request` notification (its method, and no id).
fn is_cancel_request(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| {
        v.get("method").and_then(Value::as_str) == Some("$/cancel_request") && v.get("id").is_none()
    })
}

/// `params.requestId` of a `$/cancel_request` line (any JSON value but null).
pub(crate) fn requested_id(line: &str) -> Option<Value> {
    let mut value: Value = serde_json::from_str(line).ok()?;
    let id = value.get_mut("params")?.get_mut("requestId")?.take();
    (!id.is_null()).then_some(id)
}

pub(crate) fn ids<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = items.collect();
    if all.is_empty() {
        "none offered".into()
    } else {
        all.join(", ")
    }
}

/// The `type` of a block encoded as JSON text.
pub(crate) fn raw_block_type(raw: &str) -> Option<String> {
    let value: Value = serde_json::from_str(raw).ok()?;
    value.get("type")?.as_str().map(str::to_owned)
}

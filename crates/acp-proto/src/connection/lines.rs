//! Incoming lines: classification, updates (numbering, caps, routing, the turn's record and
//! reply capture) and permission requests.

use serde_json::Value;

use super::*;
use crate::host::ClientMethod;

impl Core {
    // --- incoming lines --------------------------------------------------------------------

    pub(super) fn waiting_for(&self) -> String {
        match self.calls.oldest() {
            Some(call) => format!(
                "the response to {} (id {})",
                call.kind.method(),
                call.wire_id
            ),
            None => "no response (no call in flight)".into(),
        }
    }

    pub(super) fn output_ended(&self) -> AcpError {
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

    pub(super) fn unexpected(&self, line: &[u8]) -> AcpError {
        AcpError::protocol(format!(
            "unexpected message from the agent while waiting for {}: not a response with that id carrying result or error, a request, or a notification: {}",
            self.waiting_for(),
            excerpt(line, 200)
        ))
    }

    pub(super) fn wire_error(&self, error: &WireError, line: &[u8]) -> AcpError {
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

    /// The event of one line (always `Some`: the `Option` is `poll_event`'s, so the event is
    /// built where the caller reads it, not moved through two return values).
    pub(super) fn handle_line<'a>(
        &mut self,
        line: &'a [u8],
    ) -> Result<Option<Event<'a>>, AcpError> {
        let line = trim(line);
        if let Some(chunk) = wire::text_chunk(line) {
            // No id, so it cannot be a response: the update path is the only one.
            return self.text_chunk_event(chunk);
        }
        self.handle_message(line).map(Some)
    }

    fn handle_message<'a>(&mut self, line: &'a [u8]) -> Result<Event<'a>, AcpError> {
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
                let (joined, routed) = self.admit(
                    Admit {
                        session_id: &update.session_id,
                        kind: update.kind,
                        text: &update.text,
                        update_sequence: update.update_sequence,
                        tool_call_id: update.tool_call_id.as_deref(),
                    },
                    raw,
                )?;
                Ok(Event::Update {
                    update,
                    joined,
                    routed,
                })
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
            Some("$/cancel_request") if message.id.is_none() => Ok(self
                .cancel_host(envelope)
                .unwrap_or_else(|| {
                    if !self.withdraw_ask(envelope) {
                        self.withdraw_elicitation(envelope);
                    }
                    Event::Other { line: envelope }
                })),
            Some("elicitation/create") if message.id.is_some() => {
                let raw_id = message.id.expect("checked").get();
                self.elicitation(raw_id, envelope)
            }
            Some(method) if message.id.is_some() && ClientMethod::from_wire(method).is_some() => {
                let method = ClientMethod::from_wire(method).expect("checked");
                let raw_id = message.id.expect("checked").get();
                Ok(self.host_request(method, raw_id, envelope))
            }
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
    pub(super) fn late_answer(&mut self, wire_id: i64) {
        for session in &mut self.sessions {
            if session.late_turn == Some(wire_id) {
                session.late_turn = None;
                if session.turn.is_none() {
                    session.latched = false;
                }
            }
        }
    }

    pub(super) fn permission<'a>(
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
        let announced_name = match tool {
            Some(t) if t.name.as_str().is_none() => t
                .tool_call_id
                .as_str()
                .and_then(|id| self.session(session_id)?.announced_name(id)),
            _ => None,
        };
        // Gemini CLI asks permission for calls it never announced: the request announces them.
        if let (Some(session), Some(tool_id)) = (
            self.sessions.iter_mut().find(|s| s.id == session_id),
            tool.and_then(|t| t.tool_call_id.as_str()),
        ) {
            if let Some(turn) = session.turn.as_mut().filter(|t| !t.knows(tool_id)) {
                if let Some(raw) = fields.tool_call.1 {
                    turn.announce_raw(tool_id, raw.get());
                }
            }
        }
        let mut request = Ask::new(raw_id, envelope, fields, announced, announced_name);
        let remembered = self
            .remembered
            .get(session_id)
            .filter(|_| self.config.policy.remember)
            .and_then(|r| r.get(&request.record.tool_kind, &request.record.title));
        request.rule(&self.config.policy, self.latched(session_id), remembered);
        let ask = AskId(self.next_ask);
        self.next_ask += 1;
        // Tiers 0–3 decided: the observer is not asked.
        let cancelled = request.ruled.is_some();
        self.asks.push((ask, request));
        Event::Permission { ask, cancelled }
    }

    /// Checks the caps (count, then size) and takes the next update number, as the reference
    /// does before it parses the update.
    pub(super) fn number_update(&mut self, envelope: &str) -> Result<u64, AcpError> {
        let limits = self.config.limits;
        let update_sequence = self.next_update_sequence;
        if update_sequence > limits.update_count {
            return Err(AcpError::UpdateCountCapacityExceeded(format!(
                "update {update_sequence} would pass transfer_limits.update_count ({}), the most updates this client accepts over its life: raise transfer_limits.update_count or open a new client",
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
    pub(super) fn update<'a>(
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
                if let Some(id) = update.fields.tool_call_id.as_str() {
                    if let Some(tool_kind) = update.fields.kind.as_str() {
                        session.announce_kind(id, tool_kind);
                    }
                    if let Some(name) = update.fields.name.as_str() {
                        session.announce_name(id, name);
                    }
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

    /// The same event as `update` and `admit` would make of this line, read by
    /// `wire::text_chunk`, built in place: the hot path of a streaming reply.
    fn text_chunk_event<'a>(
        &mut self,
        chunk: wire::TextChunk<'a>,
    ) -> Result<Option<Event<'a>>, AcpError> {
        let update_sequence = self.number_update(chunk.text_line)?;
        let kind = UpdateKind::from_wire(chunk.session_update);
        let text = if kind.is_chunk() { chunk.text } else { "" };
        let (joined, routed) = self.admit(
            Admit {
                session_id: chunk.session_id,
                kind,
                text,
                update_sequence,
                tool_call_id: None,
            },
            None,
        )?;
        Ok(Some(Event::Update {
            update: UpdateEvent {
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
            },
            joined,
            routed,
        }))
    }

    /// Routes an update to its open session: attributes, the turn's record, and for an agent
    /// message chunk the reply capture within the limits (or the overflow record and the one
    /// `session/cancel`). Returns whether the text joined the reply, and whether an open session
    /// took the update.
    pub(super) fn admit(
        &mut self,
        update: Admit<'_>,
        raw: Option<Value>,
    ) -> Result<(bool, bool), AcpError> {
        let limits = self.config.limits;
        let collect = self.config.collect_reply;
        let Some(session) = self.sessions.iter_mut().find(|s| s.id == update.session_id) else {
            return Ok((false, false));
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
                    if let (Some(turn), Some(id)) = (session.turn.as_mut(), update.tool_call_id) {
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
                UpdateKind::Notice => {
                    if let Some(turn) = session.turn.as_mut() {
                        turn.notice(fields);
                    }
                }
                UpdateKind::CompactionUpdate => {
                    if let Some(turn) = session.turn.as_mut() {
                        turn.compactions.update(fields, limits.response_bytes);
                    }
                }
                UpdateKind::CompactionSummaryChunk => {
                    if let Some(turn) = session.turn.as_mut() {
                        turn.compactions.chunk(&mut fields, limits.response_bytes);
                    }
                }
                _ => {}
            }
        }
        if update.kind != UpdateKind::AgentMessageChunk {
            return Ok((false, true));
        }
        let Some(turn) = session.turn.as_mut() else {
            return Ok((false, true));
        };
        let capture = &mut turn.capture;
        if capture.overflow.is_some() {
            return Ok((false, true));
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
                    capture.text.push_str(update.text);
                }
                capture.bytes += update.text.len();
                capture.segments += 1;
                Ok((true, true))
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
                Ok((false, true))
            }
        }
    }
}

/// What `admit` reads of an update.
pub(super) struct Admit<'u> {
    session_id: &'u str,
    kind: UpdateKind,
    text: &'u str,
    update_sequence: u64,
    tool_call_id: Option<&'u str>,
}

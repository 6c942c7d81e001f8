//! Incoming lines: classification, updates (numbering, caps, routing, the turn's record and
//! reply capture) and permission requests.

use serde_json::Value;

use super::*;
use crate::host::ClientMethod;

/// How many permission requests may wait for the host's answer at once (an awaited
/// `on_permission`); more are refused on arrival.
pub const PENDING_ASKS: usize = 64;

impl Core {
    // --- incoming lines --------------------------------------------------------------------

    pub(super) fn waiting_for(&self) -> String {
        match self.calls.oldest() {
            Some(call) => format!(
                "the response to {} (id {})",
                self.method_of(call.kind),
                call.wire_id
            ),
            None => "no response (no call in flight)".into(),
        }
    }

    pub(super) fn output_ended(&self) -> AcpError {
        let description = match self.calls.oldest() {
            Some(call) => format!(
                "the agent's output ended before the response to {} (id {}): the agent exited or closed its stdout",
                self.method_of(call.kind),
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
                // v2: an `idle` may end the session's turn once the update itself is handed out.
                let idle_stop = match (&raw, update.kind) {
                    (Some(raw), UpdateKind::StateUpdate) => lifecycle::idle_stop_reason(raw),
                    _ => None,
                };
                let (joined, routed) = self.admit(
                    Admit {
                        session_id: &update.session_id,
                        kind: update.kind,
                        text: &update.text,
                        update_sequence: update.update_sequence,
                        tool_call_id: update.tool_call_id.as_deref(),
                        message_id: update.message_id.as_deref(),
                        ascii: update.ascii,
                    },
                    raw,
                )?;
                if routed && update.kind == UpdateKind::StateUpdate {
                    self.state_changed(&update.session_id, &update.text, idle_stop);
                }
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
            // v2 has no fs/* or terminal/*: a v2 agent asking for them is answered "method not
            // found" below, as for any method the client does not have.
            Some(method)
                if message.id.is_some()
                    && self.version() != 2
                    && ClientMethod::from_wire(method).is_some() =>
            {
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
        if self.version() == 2 {
            return; // a v2 turn ends at its `idle`, not at its acknowledgement
        }
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
        if request.ruled.is_none() && self.asks.len() >= PENDING_ASKS {
            // Bounded as elicitations are: an agent flooding requests while the host's answers
            // are awaited gets the rest refused, not a queue the host can never work through.
            request.ruled = Some(crate::rules::Ruling::new(
                crate::rules::Decision::Deny,
                format!("too many permission requests pending ({PENDING_ASKS} wait already)"),
                false,
            ));
        }
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
        let session = self.sessions.iter_mut().find(|s| s.id == session_id);
        let routed = session.is_some();
        if let Some(session) = session {
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
        }
        if (routed && !kind.is_chunk() && kind != UpdateKind::Unknown) || kind.reads_value() {
            raw = serde_json::from_str::<Value>(envelope)
                .ok()
                .and_then(|mut v| v.get_mut("params")?.get_mut("update").map(Value::take));
        }
        let text = match &raw {
            Some(value) if kind.reads_value() => {
                std::borrow::Cow::Owned(crate::update::text_of_value(kind, value))
            }
            _ => UpdateEvent::text_of(kind, &update.fields),
        };
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
                message_id: chunk.message_id,
                ascii: chunk.ascii,
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
                message_id: chunk.message_id.map(std::borrow::Cow::Borrowed),
                tool_call_id: None,
                ascii: chunk.ascii,
            },
            joined,
            routed,
        }))
    }

    /// Routes an update to its open session: attributes, the turn's record, and for an agent
    /// message chunk the reply capture within the limits (or the overflow record and the one
    /// `session/cancel`). Returns what the text did to the reply, and whether an open session
    /// took the update.
    pub(super) fn admit(
        &mut self,
        update: Admit<'_>,
        raw: Option<Value>,
    ) -> Result<(Joined, bool), AcpError> {
        let limits = self.config.limits;
        let collect = self.config.collect_reply;
        let v2 = self.version() == 2;
        let Some(session) = self.sessions.iter_mut().find(|s| s.id == update.session_id) else {
            return Ok((Joined::No, false));
        };
        // v2: an `agent_message` whose `content` is an array replaces its message's text.
        let mut replaces = false;
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
                        } else if v2 {
                            turn.upsert(id, fields);
                        } else {
                            turn.amend(id, fields);
                        }
                    }
                }
                UpdateKind::ToolCallContentChunk => {
                    if let (Some(turn), Some(id), Some(item)) = (
                        session.turn.as_mut(),
                        update.tool_call_id,
                        fields.remove("content"),
                    ) {
                        turn.append_content(id, item);
                    }
                }
                UpdateKind::PlanUpdate => {
                    let plan = fields.remove("plan");
                    let items = plan
                        .as_ref()
                        .is_some_and(|p| p.get("type").and_then(Value::as_str) == Some("items"));
                    if let (Some(turn), true, Some(Value::Object(mut plan))) =
                        (session.turn.as_mut(), items, plan)
                    {
                        let entries = plan.remove("entries").filter(Value::is_array);
                        turn.plan = Some(entries.unwrap_or(Value::Array(vec![])));
                    }
                }
                UpdateKind::AgentMessage => {
                    replaces = fields.get("content").is_some_and(Value::is_array);
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
        if update.kind != UpdateKind::AgentMessageChunk && !replaces {
            return Ok((Joined::No, true));
        }
        let Some(turn) = session.turn.as_mut() else {
            return Ok((Joined::No, true));
        };
        let capture = &mut turn.capture;
        if capture.overflow.is_some() {
            return Ok((Joined::No, true));
        }
        // v1 (the hot path: kept as it was before v2): the host assembles the chunks, unless
        // `collect_reply`. v2 keeps each message's place in the reply (and its text when
        // collecting), since an upsert may replace a message's text.
        // A message's id counts against the reply's bytes when it first appears: an agent
        // cannot make the record hold megabytes of ids for a short reply.
        let (total, message_id, found) = if v2 {
            let message_id = update.message_id.unwrap_or("");
            let found = capture.messages.find(message_id);
            let total = match found {
                Some(at) if replaces => capture.bytes - capture.messages.len_at(at),
                Some(_) => capture.bytes,
                None => capture.bytes.saturating_add(message_id.len()),
            };
            (total.saturating_add(update.text.len()), message_id, found)
        } else {
            (capture.bytes.saturating_add(update.text.len()), "", None)
        };
        let kind = if capture.segments + 1 > limits.response_segment_count {
            Some(OverflowKind::ResponseSegments)
        } else if total > limits.response_bytes {
            Some(OverflowKind::ResponseBytes)
        } else {
            None
        };
        match kind {
            None => {
                let joined = if !v2 {
                    if collect {
                        capture.text.push_str(update.text);
                    }
                    Joined::Append
                } else {
                    capture.not_ascii |= !update.ascii;
                    let messages = &mut capture.messages;
                    if replaces {
                        messages.replace(found, message_id, update.text, collect)
                    } else {
                        messages.append(found, message_id, update.text, collect)
                    }
                };
                capture.bytes = total;
                capture.segments += 1;
                Ok((joined, true))
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
                Ok((Joined::No, true))
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
    message_id: Option<&'u str>,
    /// The text is known to be ASCII (the fast path found the whole line so).
    ascii: bool,
}

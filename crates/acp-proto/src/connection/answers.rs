//! Responses: matching a live call and applying what its answer says.

use serde_json::Value;

use super::*;

impl Core {
    // --- responses -----------------------------------------------------------------------

    pub(super) fn complete<'a>(
        &mut self,
        mut call: Call,
        message: &Envelope<'_>,
        line: &'a str,
    ) -> Event<'a> {
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
    pub(super) fn outcome(
        &mut self,
        call: &mut Call,
        message: &Envelope<'_>,
    ) -> Result<Option<Outcome>, AcpError> {
        let method = self.method_of(call.kind);
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
                version_refused: false,
            }));
        }
        let raw = message.result.map_or("null", |r| r.get());
        // Calls whose result is empty accept `{}` and `null` (the docs' load example is null).
        let object_required = matches!(
            call.kind,
            CallKind::Initialize
                | CallKind::SessionNew
                | CallKind::SessionFork
                | CallKind::Prompt
                | CallKind::SessionList
                | CallKind::SetTitle
                | CallKind::SessionStatus
                | CallKind::Steer
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
                let info = results::initialize(raw, self.config.protocol)?;
                self.version = info.protocol_version;
                self.initialize = Some(info);
                Outcome::Initialized
            }
            CallKind::SessionNew | CallKind::SessionFork => {
                let result = results::session(raw, method)?;
                let Some(id) = result.session_id.clone() else {
                    return Err(AcpError::protocol(format!(
                        "the agent's {method} result has no string sessionId: {}",
                        excerpt(raw.as_bytes(), 200)
                    )));
                };
                if self.session(&id).is_some() {
                    return Err(AcpError::protocol(format!(
                        "the agent's {method} result names session {id:?}, which is already open"
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
            CallKind::SetTitle | CallKind::SessionStatus | CallKind::Steer => {
                Outcome::Raw(raw.to_owned())
            }
            CallKind::Prompt if self.version() == 2 => return self.acknowledged(call),
            CallKind::Prompt => {
                let fields = wire::prompt_result(message.result.expect("checked above"))
                    .map_err(|e| AcpError::protocol(format!("malformed {e}")))?;
                let Some(stop_reason) = fields.stop_reason.0 else {
                    return Err(AcpError::protocol(format!(
                        "the agent's session/prompt result has no string stopReason: {}",
                        excerpt(raw.as_bytes(), 200)
                    )));
                };
                // An object, or nothing: `null` and other types read as absent.
                let prompt_usage = fields
                    .usage
                    .map(|raw| raw.get())
                    .filter(|text| text.starts_with('{'))
                    .map(str::to_owned);
                Outcome::Turn(Box::new(self.turn_outcome(
                    session_id,
                    call.handle,
                    stop_reason.into_owned(),
                    prompt_usage,
                    call.timed_out,
                )))
            }
        }))
    }
}

impl Core {
    /// A finished turn's record: the session's turn taken (its latch and late state cleared),
    /// the reply (v2's messages joined; v1's chunks when the connection collects them).
    pub(super) fn turn_outcome(
        &mut self,
        session_id: String,
        handle: CallId,
        stop_reason: String,
        prompt_usage: Option<String>,
        timed_out: bool,
    ) -> TurnOutcome {
        let v2 = self.version() == 2;
        let (turn, mode) = match self.session_mut(&session_id) {
            Some(entry) => {
                entry.latched = false;
                entry.late_turn = None;
                (entry.turn.take(), entry.offered_modes().current)
            }
            None => (None, String::new()),
        };
        let turn = turn.unwrap_or_else(|| Turn::new(handle));
        let capture = turn.capture;
        // A host that assembles the reply itself (`collect_reply` off) has it from the updates'
        // `Joined`; the connection hands over only what it collected.
        let (response, response_ascii) = if v2 && self.config.collect_reply {
            (capture.messages.joined(), !capture.not_ascii)
        } else {
            (capture.text, false)
        };
        TurnOutcome {
            session_id,
            response,
            response_ascii,
            stop_reason,
            overflow: capture.overflow,
            timed_out,
            tool_calls: turn
                .tool_calls
                .into_iter()
                .map(|(_, state)| state.into_json())
                .collect(),
            plan: turn.plan.map(|p| p.to_string()),
            available_commands: turn.commands.map(|c| c.to_string()),
            usage: turn.usage.map(|u| u.to_string()),
            current_mode_id: mode,
            notices: turn
                .notices
                .into_iter()
                .map(|n| Value::Object(n).to_string())
                .collect(),
            compactions: turn
                .compactions
                .entries
                .into_iter()
                .map(|c| Value::Object(c).to_string())
                .collect(),
            prompt_usage,
        }
    }
}

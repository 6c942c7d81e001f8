//! Encoding a call, taking its id and registering it (and a loaded session before its replay).

use super::*;

impl Core {
    pub(super) fn take_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub(super) fn request(&mut self, request: Request<'_>) -> Result<CallId, AcpError> {
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
            Request::Initialize => {
                let opt_ins = crate::host::OptIns {
                    elicitation: self.elicitations.advertised,
                    ..self.config.opt_ins
                };
                let offered = self.config.protocol.offered();
                let v1 = crate::host::client_capabilities_json(
                    self.config.capabilities.as_ref(),
                    opt_ins,
                );
                match self.config.protocol {
                    crate::limits::Protocol::V1 => {
                        encode::initialize_as(id, &self.config.client_info, &v1, offered)
                    }
                    // v2 has no fs/terminal: the host side is not offered to a v2 agent; an
                    // offer that falls back carries v1's too, for an agent that answers 1.
                    protocol => encode::initialize_offer(
                        id,
                        &self.config.client_info,
                        &crate::host::client_capabilities_v2_json(opt_ins),
                        offered,
                        (protocol == crate::limits::Protocol::Auto).then_some(v1.as_str()),
                    ),
                }
            }
            Request::NewSession {
                cwd,
                additional_directories,
                mcp_servers,
                system_prompt,
            } => {
                call.kind = CallKind::SessionNew;
                let servers = servers_or_default(mcp_servers, &self.config);
                encode::session_new(id, cwd, additional_directories, &servers, system_prompt)
            }
            Request::LoadSession {
                session_id,
                cwd,
                additional_directories,
                mcp_servers,
                resume,
                system_prompt,
                replay_from_start,
            } => {
                call.kind = if resume {
                    CallKind::SessionResume
                } else {
                    CallKind::SessionLoad
                };
                call.session = Some(session_id.to_owned());
                let servers = servers_or_default(mcp_servers, &self.config);
                encode::session_resume(
                    id,
                    call.kind.method(),
                    session_id,
                    cwd,
                    additional_directories,
                    &servers,
                    system_prompt,
                    replay_from_start,
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
                let method = if self.version() == 2 {
                    "auth/login"
                } else {
                    "authenticate"
                };
                encode::authenticate(id, method, method_id)
            }
            Request::Logout => {
                call.kind = CallKind::Logout;
                let method = if self.version() == 2 {
                    "auth/logout"
                } else {
                    "logout"
                };
                encode::logout(id, method)
            }
            Request::Prompt {
                session_id,
                content,
                timeout_ms,
                meta,
                ..
            } => {
                call.kind = CallKind::Prompt;
                call.session = Some(session_id.to_owned());
                call.deadline_ms = timeout_ms.map(|t| self.now_ms.saturating_add(t));
                encode::prompt(id, session_id, content, meta)
            }
            Request::SetMode {
                session_id,
                mode_id,
            } => {
                call.session = Some(session_id.to_owned());
                let session = self.session(session_id).expect("checked");
                match session.mode_option() {
                    // Modes offered only as a "mode" config option: set through it (its
                    // answer carries the options, so the current mode follows).
                    Some(config_id) => {
                        call.kind = CallKind::SetConfigOption;
                        encode::set_config_option(
                            id,
                            session_id,
                            &config_id,
                            ConfigValue::Select(mode_id),
                            self.version() == 2,
                        )
                    }
                    None => {
                        call.kind = CallKind::SetMode;
                        call.argument = mode_id.to_owned();
                        encode::session_call(
                            id,
                            "session/set_mode",
                            session_id,
                            &[("modeId", mode_id)],
                        )
                    }
                }
            }
            Request::SetConfigOption {
                session_id,
                config_id,
                value,
            } => {
                call.kind = CallKind::SetConfigOption;
                call.session = Some(session_id.to_owned());
                encode::set_config_option(id, session_id, config_id, value, self.version() == 2)
            }
            Request::SetModel {
                session_id,
                model_id,
            } => {
                call.session = Some(session_id.to_owned());
                call.argument = model_id.to_owned();
                let session = self.session(session_id).expect("checked");
                match session.select_option("model") {
                    Some(config_id) => {
                        call.kind = CallKind::SetConfigOption;
                        encode::set_config_option(
                            id,
                            session_id,
                            &config_id,
                            ConfigValue::Select(model_id),
                            self.version() == 2,
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
            Request::ForkSession {
                session_id,
                cwd,
                additional_directories,
                mcp_servers,
                system_prompt,
            } => {
                call.kind = CallKind::SessionFork;
                let servers = servers_or_default(mcp_servers, &self.config);
                encode::session_fork(
                    id,
                    session_id,
                    cwd,
                    additional_directories,
                    &servers,
                    system_prompt,
                )
            }
            Request::SetTitle { session_id, title } => {
                call.kind = CallKind::SetTitle;
                call.session = Some(session_id.to_owned());
                encode::session_call(id, "session/set_title", session_id, &[("title", title)])
            }
            Request::SessionStatus { session_id } => {
                call.kind = CallKind::SessionStatus;
                call.session = Some(session_id.to_owned());
                encode::session_call(id, "session/status", session_id, &[])
            }
            Request::Steer {
                session_id,
                content,
            } => {
                call.kind = CallKind::Steer;
                call.session = Some(session_id.to_owned());
                encode::steer(id, session_id, content)
            }
        };
        let bytes = self.checked(bytes, &format!("the {} request", self.method_of(call.kind)))?;
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

    pub(super) fn close_session(&mut self, session_id: &str) -> Result<Option<CallId>, AcpError> {
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
}

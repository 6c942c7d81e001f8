//! The checks a call passes before it takes an id, in the design's order: the client stopped
//! or not started, the session closed or busy, the capability, then the arguments.

use serde_json::Value;

use super::*;

impl Core {
    pub(super) fn admit_request(&self, request: &Request<'_>) -> Result<(), AcpError> {
        if let Some(reason) = &self.stopped {
            return Err(AcpError::protocol(reason.clone()));
        }
        let started = self.initialize.is_some();
        if !started && !matches!(request, Request::Initialize) {
            return Err(AcpError::Misuse(
                "the client is not started: call start() first".into(),
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
        // What opening a session (new, load/resume, fork) checks of its directories and servers.
        let session_gate =
            |dirs: &[String], servers: Option<&[McpServer]>| -> Result<(), AcpError> {
                if !dirs.is_empty() {
                    self.capability(
                        caps.session_additional_directories,
                        "sessionCapabilities.additionalDirectories",
                    )?;
                }
                servers_gate(servers)?;
                absolute(dirs)
            };
        let system_prompt_gate = |prompt: Option<&SystemPrompt>| -> Result<(), AcpError> {
            let Some(prompt) = prompt else {
                return Ok(());
            };
            match prompt.mode.as_str() {
                "append" => self.capability(caps.system_prompt, "sessionCapabilities.systemPrompt"),
                "override" => self.capability(
                    caps.system_prompt_override,
                    "sessionCapabilities.systemPrompt.mode.override",
                ),
                other => Err(AcpError::InvalidArgument(format!(
                    "system_prompt_mode must be \"append\" or \"override\" (got {other:?})"
                ))),
            }
        };
        match *request {
            Request::Initialize | Request::ListSessions { .. } if !started => Ok(()),
            Request::Initialize => Ok(()),
            Request::NewSession {
                additional_directories,
                mcp_servers,
                system_prompt,
                ..
            } => {
                system_prompt_gate(system_prompt)?;
                session_gate(additional_directories, mcp_servers)
            }
            Request::LoadSession {
                session_id,
                additional_directories,
                mcp_servers,
                resume,
                system_prompt,
                replay_from_start,
                ..
            } => {
                let version = self.version();
                if !resume && version == 2 {
                    return Err(self.absent_in_version(
                        "session/load",
                        "resume the session with resume_session(replay_from=\"start\") to have its history replayed",
                    ));
                }
                if replay_from_start && version == 1 {
                    return Err(self.absent_in_version(
                        "session/resume replayFrom",
                        "load the session with load_session() to have its history replayed",
                    ));
                }
                if resume {
                    self.capability(caps.session_resume, "sessionCapabilities.resume")?;
                } else {
                    self.capability(caps.load_session, "loadSession")?;
                }
                system_prompt_gate(system_prompt)?;
                session_gate(additional_directories, mcp_servers)?;
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
            Request::ForkSession {
                session_id,
                additional_directories,
                mcp_servers,
                system_prompt,
                ..
            } => {
                self.capability(caps.session_fork, "sessionCapabilities.fork")?;
                system_prompt_gate(system_prompt)?;
                session_gate(additional_directories, mcp_servers)?;
                if session_id.is_empty() {
                    return Err(AcpError::InvalidArgument(
                        "session_fork needs the id of the session to fork".into(),
                    ));
                }
                Ok(())
            }
            Request::SetTitle { session_id, .. } => {
                self.capability(caps.session_title, "sessionCapabilities.title")?;
                self.open_session(session_id).map(|_| ())
            }
            Request::SessionStatus { session_id } => {
                self.capability(caps.session_status, "sessionCapabilities.status")?;
                self.open_session(session_id).map(|_| ())
            }
            Request::Steer {
                session_id,
                content,
            } => {
                self.capability(caps.steering, "_meta.steering")?;
                self.open_session(session_id)?;
                if content.is_empty() {
                    return Err(AcpError::InvalidArgument(
                        "steer needs a non-empty prompt".into(),
                    ));
                }
                Ok(())
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
                // Allowed while a turn runs (async.md §4): only a second prompt is refused.
                let session = self.open_session(session_id)?;
                if self.version() == 2 && session.mode_option().is_none() {
                    return Err(self.absent_in_version(
                        "session/set_mode",
                        "modes are config options in v2, and this session offers no \"mode\" config option",
                    ));
                }
                let modes = session.offered_modes();
                if modes.available.is_empty() {
                    self.capability(false, "session/set_mode")?;
                }
                if !modes.available.iter().any(|m| m.id == mode_id) {
                    return Err(AcpError::InvalidArgument(format!(
                        "{mode_id:?} is not one of the session's modes ({})",
                        ids(modes.available.iter().map(|m| m.id.as_str()))
                    )));
                }
                Ok(())
            }
            Request::SetConfigOption {
                session_id,
                config_id,
                value,
            } => {
                let session = self.open_session(session_id)?;
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
                let session = self.open_session(session_id)?;
                let models = session.models();
                let from_config = session
                    .config_options
                    .as_ref()
                    .and_then(|options| results::select_from_config(options, "model"))
                    .is_some();
                if !from_config && self.version() == 2 {
                    return Err(self.absent_in_version(
                        "session/set_model",
                        "models are config options in v2, and this session offers no \"model\" config option",
                    ));
                }
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

    /// The ACP version `initialize` agreed (0 before it answered).
    #[inline]
    pub(super) fn version(&self) -> i64 {
        self.version
    }

    /// A call's method as the agreed version names it (errors quote it).
    pub(super) fn method_of(&self, kind: CallKind) -> &'static str {
        match (kind, self.version()) {
            (CallKind::Authenticate, 2) => "auth/login",
            (CallKind::Logout, 2) => "auth/logout",
            (kind, _) => kind.method(),
        }
    }

    /// A call the agreed version does not have: a `CapabilityError` whose capability is the
    /// method and whose message names the version and what to use instead.
    pub(super) fn absent_in_version(&self, method: &str, instead: &str) -> AcpError {
        let version = self.version();
        AcpError::Capability {
            capability: method.to_owned(),
            agent_id: self.config.agent_id.clone(),
            message: format!(
                "ACP agent '{}' speaks ACP v{version}, which has no {method}: {instead}.",
                self.config.agent_id
            ),
        }
    }

    pub(super) fn open_session(&self, session_id: &str) -> Result<&SessionEntry, AcpError> {
        self.session(session_id).ok_or_else(|| {
            AcpError::Misuse(format!(
                "session {session_id:?} is closed or not open on this client"
            ))
        })
    }
}

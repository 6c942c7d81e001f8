//! A call of the client, owned: what it asks the `Connection` for, which session it is about
//! (a stop caused by that session's messages fails it), and `start()`'s two steps.

use acp_proto::calls::CallId;
use acp_proto::encode::{ConfigValue, ContentBlock, McpServer, SystemPrompt};
use acp_proto::error::AcpError;
use acp_proto::session::TurnOutcome;
use acp_proto::{Connection, Outcome, Request};

/// A call, owned (its arguments read once).
pub enum Call {
    /// `start()`: `initialize` under the start deadline, then (`new_session`) `StartSession`.
    Start {
        cwd: String,
        new_session: bool,
        timeout: Option<f64>,
    },
    /// `start()`'s `session/new`, reported under the id of the `Start` it continues.
    StartSession {
        cwd: String,
        origin: CallId,
    },
    NewSession {
        cwd: String,
        directories: Vec<String>,
        servers: Option<Vec<McpServer>>,
        system_prompt: Option<SystemPrompt>,
    },
    LoadSession {
        session_id: String,
        cwd: String,
        directories: Vec<String>,
        servers: Option<Vec<McpServer>>,
        resume: bool,
        system_prompt: Option<SystemPrompt>,
        /// v2's `replayFrom: {"type": "start"}` on a resume.
        replay_from_start: bool,
    },
    ListSessions(Option<String>),
    DeleteSession(String),
    Authenticate(String),
    Logout,
    SetMode(String, String),
    SetModel(String, String),
    SetConfigOption {
        session_id: String,
        config_id: String,
        text: String,
        flag: Option<bool>,
    },
    CloseSession(String),
    Prompt {
        session_id: String,
        content: Vec<ContentBlock>,
        timeout_ms: Option<u64>,
        gated: bool,
        meta: Vec<(String, String)>,
    },
    /// Unstable: `session/fork` of `session_id`, `session/set_title`, `session/status`.
    ForkSession {
        session_id: String,
        cwd: String,
        directories: Vec<String>,
        servers: Option<Vec<McpServer>>,
        system_prompt: Option<SystemPrompt>,
    },
    SetTitle(String, String),
    SessionStatus(String),
    /// The `_session/steering` extension: a message into the session's running turn.
    Steer(String, Vec<ContentBlock>),
}

impl Call {
    /// Queues the request; `None` when it finished at once (a session closed locally).
    pub fn start(&self, conn: &mut Connection) -> Result<Option<CallId>, AcpError> {
        let request = match self {
            Call::Start { timeout, .. } => {
                conn.set_start_deadline(*timeout);
                Request::Initialize
            }
            Call::StartSession { cwd, .. } => Request::NewSession {
                cwd,
                additional_directories: &[],
                mcp_servers: None,
                system_prompt: None,
            },
            Call::NewSession {
                cwd,
                directories,
                servers,
                system_prompt,
            } => Request::NewSession {
                cwd,
                additional_directories: directories,
                mcp_servers: servers.as_deref(),
                system_prompt: system_prompt.as_ref(),
            },
            Call::LoadSession {
                session_id,
                cwd,
                directories,
                servers,
                resume,
                system_prompt,
                replay_from_start,
            } => Request::LoadSession {
                session_id,
                cwd,
                additional_directories: directories,
                mcp_servers: servers.as_deref(),
                resume: *resume,
                system_prompt: system_prompt.as_ref(),
                replay_from_start: *replay_from_start,
            },
            Call::ListSessions(cwd) => Request::ListSessions {
                cwd: cwd.as_deref(),
            },
            Call::DeleteSession(session_id) => Request::DeleteSession { session_id },
            Call::Authenticate(method_id) => Request::Authenticate { method_id },
            Call::Logout => Request::Logout,
            Call::SetMode(session_id, mode_id) => Request::SetMode {
                session_id,
                mode_id,
            },
            Call::SetModel(session_id, model_id) => Request::SetModel {
                session_id,
                model_id,
            },
            Call::SetConfigOption {
                session_id,
                config_id,
                text,
                flag,
            } => Request::SetConfigOption {
                session_id,
                config_id,
                value: match flag {
                    Some(flag) => ConfigValue::Boolean(*flag),
                    None => ConfigValue::Select(text),
                },
            },
            Call::CloseSession(session_id) => return conn.close_session(session_id),
            Call::Prompt {
                session_id,
                content,
                timeout_ms,
                gated,
                meta,
            } => Request::Prompt {
                session_id,
                content,
                timeout_ms: *timeout_ms,
                gated: *gated,
                meta,
            },
            Call::ForkSession {
                session_id,
                cwd,
                directories,
                servers,
                system_prompt,
            } => Request::ForkSession {
                session_id,
                cwd,
                additional_directories: directories,
                mcp_servers: servers.as_deref(),
                system_prompt: system_prompt.as_ref(),
            },
            Call::SetTitle(session_id, title) => Request::SetTitle { session_id, title },
            Call::SessionStatus(session_id) => Request::SessionStatus { session_id },
            Call::Steer(session_id, content) => Request::Steer {
                session_id,
                content,
            },
        };
        conn.request(request).map(Some)
    }

    /// Part of `start()`: its failures to connect are `ConnectError`s.
    pub fn handshake(&self) -> bool {
        matches!(self, Call::Start { .. } | Call::StartSession { .. })
    }

    /// The id the caller knows this call by (`start()`'s second step goes by its first's).
    pub fn reported(&self, call: CallId) -> CallId {
        match *self {
            Call::StartSession { origin, .. } => origin,
            _ => call,
        }
    }

    /// `start()`'s next step after `outcome`, if it has one (`session/new` after
    /// `initialize`).
    pub fn next_step(&self, call: CallId, outcome: &Result<Outcome, AcpError>) -> Option<Call> {
        match (self, outcome) {
            (
                Call::Start {
                    cwd,
                    new_session: true,
                    ..
                },
                Ok(Outcome::Initialized),
            ) => Some(Call::StartSession {
                cwd: cwd.clone(),
                origin: call,
            }),
            _ => None,
        }
    }

    /// The session whose turn this is (a prompt), whose reply it collects.
    pub fn turn_session(&self) -> Option<&str> {
        match self {
            Call::Prompt { session_id, .. } => Some(session_id),
            _ => None,
        }
    }

    /// The session a call is about, so a stop caused by that session's messages fails it.
    pub fn session(&self) -> Option<&str> {
        match self {
            Call::LoadSession { session_id, .. }
            | Call::DeleteSession(session_id)
            | Call::SetMode(session_id, _)
            | Call::SetModel(session_id, _)
            | Call::SetConfigOption { session_id, .. }
            | Call::CloseSession(session_id)
            | Call::Prompt { session_id, .. }
            | Call::SetTitle(session_id, _)
            | Call::SessionStatus(session_id)
            | Call::Steer(session_id, _) => Some(session_id),
            _ => None,
        }
    }
}

/// A finished call's value, for the binding to make its own value of.
#[derive(Debug, PartialEq)]
pub enum Value {
    None,
    /// The session opened (or loaded).
    SessionId(String),
    /// The listed sessions, raw JSON objects (none when the agent listed none).
    Listed(Vec<String>),
    /// The `configOptions` array's JSON text, when there is one.
    ConfigOptions(Option<String>),
    /// A finished turn (`timed_out`: it ended after its timeout, "late").
    Turn(Box<TurnOutcome>),
    /// A prompt given up after its timeout and grace: a status, not an error.
    TimedOut,
    /// A result's JSON text, for the binding to read (`session/set_title`, `session/status`).
    Raw(String),
}

impl Call {
    /// The call's value from its outcome: a turn's timeout is its status; a session/new or
    /// session/prompt that finished without its session or turn is a protocol error.
    pub fn value(&self, outcome: Result<Option<Outcome>, AcpError>) -> Result<Value, AcpError> {
        let outcome = match (self, outcome) {
            (Call::Prompt { .. }, Err(AcpError::TurnTimeout { .. })) => return Ok(Value::TimedOut),
            (_, outcome) => outcome?,
        };
        Ok(match (self, outcome) {
            (
                Call::NewSession { .. } | Call::StartSession { .. },
                Some(Outcome::SessionOpened(id)),
            ) => Value::SessionId(id),
            (Call::NewSession { .. } | Call::StartSession { .. }, _) => {
                return Err(AcpError::protocol("session/new finished without a session"))
            }
            (Call::ForkSession { .. }, Some(Outcome::SessionOpened(id))) => Value::SessionId(id),
            (Call::ForkSession { .. }, _) => {
                return Err(AcpError::protocol(
                    "session/fork finished without a session",
                ))
            }
            (
                Call::SetTitle(..) | Call::SessionStatus(_) | Call::Steer(..),
                Some(Outcome::Raw(raw)),
            ) => Value::Raw(raw),
            (Call::LoadSession { session_id, .. }, _) => Value::SessionId(session_id.clone()),
            (Call::ListSessions(_), Some(Outcome::Listed(sessions))) => Value::Listed(sessions),
            (Call::ListSessions(_), _) => Value::Listed(Vec::new()),
            (Call::SetConfigOption { .. }, Some(Outcome::ConfigOptions(options))) => {
                Value::ConfigOptions(options)
            }
            (Call::Prompt { .. }, Some(Outcome::Turn(turn))) => Value::Turn(turn),
            (Call::Prompt { .. }, _) => {
                return Err(AcpError::protocol("session/prompt finished without a turn"))
            }
            _ => Value::None,
        })
    }
}

/// A failed `start()` step that fails to connect (design §6): the `ConnectError`'s message, and
/// why the client stops (`None`: it stays usable, or it stopped already).
#[derive(Debug, PartialEq)]
pub struct ConnectFailure {
    pub message: String,
    pub stop: Option<String>,
}

/// JSON-RPC error code of an agent that requires authentication before a session.
const AUTH_REQUIRED: i64 = -32000;

/// What a failure to connect means, from its detail's text (`shown`), whether the agent exited
/// (it then fails as its output ending does) and the agent's error code: -32000
/// (authentication required) leaves the client usable and its message lists the methods
/// `initialize` offered; anything else stops the client.
pub fn connect_failure(
    conn: &Connection,
    shown: &str,
    exited: bool,
    code: Option<i64>,
) -> ConnectFailure {
    let auth_required = code == Some(AUTH_REQUIRED);
    let methods: Option<Vec<&str>> = auth_required.then(|| {
        let info = conn.initialize();
        info.map(|i| i.auth_methods.iter().map(|m| m.id.as_str()).collect())
            .unwrap_or_default()
    });
    let message = connect_message(shown, exited, methods.as_deref());
    let stop = (!auth_required && conn.stopped().is_none()).then(|| {
        format!("start() failed ({shown}); only close() is accepted (and request_cancel())")
    });
    ConnectFailure { message, stop }
}

fn connect_message(detail: &str, exited: bool, auth_methods: Option<&[&str]>) -> String {
    if exited {
        return format!("the agent exited during start(): {detail}");
    }
    let Some(methods) = auth_methods else {
        return detail.to_owned();
    };
    let methods = if methods.is_empty() {
        "none offered".to_owned()
    } else {
        methods.join(", ")
    };
    format!(
        "{detail} (authentication required: the agent offers {methods}; call start(new_session=False), authenticate(method_id), then new_session())"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> Call {
        Call::Prompt {
            session_id: "s".into(),
            content: Vec::new(),
            timeout_ms: None,
            gated: false,
            meta: Vec::new(),
        }
    }

    fn turn(timed_out: bool) -> Box<TurnOutcome> {
        Box::new(TurnOutcome {
            session_id: "s".into(),
            response: String::new(),
            stop_reason: "end_turn".into(),
            overflow: None,
            timed_out,
            tool_calls: Vec::new(),
            plan: None,
            available_commands: None,
            usage: None,
            current_mode_id: String::new(),
            ..TurnOutcome::default()
        })
    }

    #[test]
    fn a_turns_timeout_is_its_status_and_any_other_failure_its_error() {
        let timeout = AcpError::TurnTimeout {
            session_id: "s".into(),
        };
        assert_eq!(prompt().value(Err(timeout)), Ok(Value::TimedOut));
        let timeout = AcpError::TurnTimeout {
            session_id: "s".into(),
        };
        assert_eq!(Call::Logout.value(Err(timeout.clone())), Err(timeout));
        let other = AcpError::protocol("boom");
        assert_eq!(prompt().value(Err(other.clone())), Err(other));
    }

    #[test]
    fn a_turn_is_its_value_and_a_prompt_without_one_is_a_protocol_error() {
        let late = prompt().value(Ok(Some(Outcome::Turn(turn(true)))));
        assert_eq!(late, Ok(Value::Turn(turn(true))));
        let error = prompt().value(Ok(Some(Outcome::Done))).unwrap_err();
        assert!(error
            .description()
            .contains("session/prompt finished without a turn"));
    }

    #[test]
    fn each_call_has_the_value_of_its_kind() {
        let new = Call::NewSession {
            cwd: "/".into(),
            directories: Vec::new(),
            servers: None,
            system_prompt: None,
        };
        let opened = new.value(Ok(Some(Outcome::SessionOpened("n".into()))));
        assert_eq!(opened, Ok(Value::SessionId("n".into())));
        let error = new.value(Ok(Some(Outcome::Done))).unwrap_err();
        assert!(error
            .description()
            .contains("session/new finished without a session"));
        let load = Call::LoadSession {
            session_id: "l".into(),
            cwd: "/".into(),
            directories: Vec::new(),
            servers: None,
            resume: false,
            system_prompt: None,
            replay_from_start: false,
        };
        assert_eq!(load.value(Ok(None)), Ok(Value::SessionId("l".into())));
        let list = Call::ListSessions(None);
        assert_eq!(list.value(Ok(None)), Ok(Value::Listed(Vec::new())));
        let listed = list.value(Ok(Some(Outcome::Listed(vec!["{}".into()]))));
        assert_eq!(listed, Ok(Value::Listed(vec!["{}".into()])));
        let set = Call::SetConfigOption {
            session_id: "s".into(),
            config_id: "c".into(),
            text: "v".into(),
            flag: None,
        };
        let options = set.value(Ok(Some(Outcome::ConfigOptions(Some("[]".into())))));
        assert_eq!(options, Ok(Value::ConfigOptions(Some("[]".into()))));
        assert_eq!(set.value(Ok(Some(Outcome::Done))), Ok(Value::None));
        assert_eq!(Call::Logout.value(Ok(Some(Outcome::Done))), Ok(Value::None));
    }
}

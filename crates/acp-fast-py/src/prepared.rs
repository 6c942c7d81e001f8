//! A call read from its Python arguments once, for either driver: the blocking loop runs it to
//! its end, the asyncio driver starts it and completes a future when its answer arrives. Both
//! turn the outcome into the same Python value here.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList};
use pyo3::IntoPyObjectExt;

use acp_proto::calls::CallId;
use acp_proto::encode::{ConfigValue, ContentBlock, McpServer};
use acp_proto::error::AcpError;
use acp_proto::session::TurnOutcome;
use acp_proto::{Connection, Outcome, Request};

use crate::errors::CallError;
use crate::options;
use crate::reply::ReplyBuilder;

/// The request, owned.
pub(crate) enum Owned {
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
    },
    LoadSession {
        session_id: String,
        cwd: String,
        directories: Vec<String>,
        servers: Option<Vec<McpServer>>,
        resume: bool,
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
}

pub(crate) struct Prepared(pub Owned);

fn servers(list: Option<Bound<'_, PyAny>>) -> PyResult<Option<Vec<McpServer>>> {
    list.map(|s| options::mcp_servers(&s)).transpose()
}

impl Prepared {
    pub fn new_session(
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        directories: Vec<String>,
    ) -> PyResult<Prepared> {
        Ok(Prepared(Owned::NewSession {
            cwd,
            directories,
            servers: servers(mcp_servers)?,
        }))
    }

    pub fn load_session(
        session_id: String,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        directories: Vec<String>,
        resume: bool,
    ) -> PyResult<Prepared> {
        Ok(Prepared(Owned::LoadSession {
            session_id,
            cwd,
            directories,
            servers: servers(mcp_servers)?,
            resume,
        }))
    }

    pub fn set_config_option(
        session_id: String,
        config_id: String,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Prepared> {
        let (text, flag) = if value.is_instance_of::<PyBool>() {
            (String::new(), Some(value.extract::<bool>()?))
        } else if let Ok(text) = value.extract::<String>() {
            (text, None)
        } else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a config option's value is a str (select) or a bool (boolean)",
            ));
        };
        Ok(Prepared(Owned::SetConfigOption {
            session_id,
            config_id,
            text,
            flag,
        }))
    }

    pub fn prompt(
        py: Python<'_>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
        timeout: Option<f64>,
        gated: bool,
        meta: Vec<(String, String)>,
    ) -> PyResult<Prepared> {
        let content = options::content(blocks)?;
        let _ = py;
        let timeout_ms =
            options::deadline(timeout, "timeout")?.map(|d| d.as_millis().max(1) as u64);
        Ok(Prepared(Owned::Prompt {
            session_id,
            content,
            timeout_ms,
            gated,
            meta,
        }))
    }

    /// Queues the request; `None` when it finished at once (a session closed locally).
    pub fn start(&self, conn: &mut Connection) -> Result<Option<CallId>, AcpError> {
        let request = match &self.0 {
            Owned::Start { timeout, .. } => {
                conn.set_start_deadline(*timeout);
                Request::Initialize
            }
            Owned::StartSession { cwd, .. } => Request::NewSession {
                cwd,
                additional_directories: &[],
                mcp_servers: None,
            },
            Owned::NewSession {
                cwd,
                directories,
                servers,
            } => Request::NewSession {
                cwd,
                additional_directories: directories,
                mcp_servers: servers.as_deref(),
            },
            Owned::LoadSession {
                session_id,
                cwd,
                directories,
                servers,
                resume,
            } => Request::LoadSession {
                session_id,
                cwd,
                additional_directories: directories,
                mcp_servers: servers.as_deref(),
                resume: *resume,
            },
            Owned::ListSessions(cwd) => Request::ListSessions {
                cwd: cwd.as_deref(),
            },
            Owned::DeleteSession(session_id) => Request::DeleteSession { session_id },
            Owned::Authenticate(method_id) => Request::Authenticate { method_id },
            Owned::Logout => Request::Logout,
            Owned::SetMode(session_id, mode_id) => Request::SetMode {
                session_id,
                mode_id,
            },
            Owned::SetModel(session_id, model_id) => Request::SetModel {
                session_id,
                model_id,
            },
            Owned::SetConfigOption {
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
            Owned::CloseSession(session_id) => return conn.close_session(session_id),
            Owned::Prompt {
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
        };
        conn.request(request).map(Some)
    }

    /// Part of `start()`: its failures to connect are `ConnectError`s.
    pub fn handshake(&self) -> bool {
        matches!(self.0, Owned::Start { .. } | Owned::StartSession { .. })
    }

    /// The id the caller knows this call by (`start()`'s second step goes by its first's).
    pub fn reported(&self, call: CallId) -> CallId {
        match self.0 {
            Owned::StartSession { origin, .. } => origin,
            _ => call,
        }
    }

    /// `start()`'s next step after `outcome`, if it has one (`session/new` after
    /// `initialize`).
    pub fn next_step(&self, call: CallId, outcome: &Result<Outcome, AcpError>) -> Option<Prepared> {
        match (&self.0, outcome) {
            (
                Owned::Start {
                    cwd,
                    new_session: true,
                    ..
                },
                Ok(Outcome::Initialized),
            ) => Some(Prepared(Owned::StartSession {
                cwd: cwd.clone(),
                origin: call,
            })),
            _ => None,
        }
    }

    /// The session whose turn this is (a prompt), whose reply it collects.
    pub fn turn_session(&self) -> Option<&str> {
        match &self.0 {
            Owned::Prompt { session_id, .. } => Some(session_id),
            _ => None,
        }
    }

    /// The session a call is about, so a stop caused by that session's messages fails it.
    pub fn session(&self) -> Option<&str> {
        match &self.0 {
            Owned::LoadSession { session_id, .. }
            | Owned::DeleteSession(session_id)
            | Owned::SetMode(session_id, _)
            | Owned::SetModel(session_id, _)
            | Owned::SetConfigOption { session_id, .. }
            | Owned::CloseSession(session_id)
            | Owned::Prompt { session_id, .. } => Some(session_id),
            _ => None,
        }
    }

    /// The call's Python value: `None`, a session id, the listed sessions' JSON texts, the
    /// config options' JSON text, or a prompt's `("ok" | "late", turn tuple)` or
    /// `("timeout", None)` (given up after its timeout and grace: a status, not an error).
    pub fn value(
        &self,
        py: Python<'_>,
        reply: ReplyBuilder,
        outcome: Result<Option<Outcome>, AcpError>,
    ) -> Result<Py<PyAny>, CallError> {
        let outcome = match (&self.0, outcome) {
            (Owned::Prompt { .. }, Err(AcpError::TurnTimeout { .. })) => {
                return Ok(("timeout", py.None()).into_py_any(py)?)
            }
            (_, Err(error)) => return Err(error.into()),
            (_, Ok(outcome)) => outcome,
        };
        match (&self.0, outcome) {
            (
                Owned::NewSession { .. } | Owned::StartSession { .. },
                Some(Outcome::SessionOpened(id)),
            ) => Ok(id.into_py_any(py)?),
            (Owned::NewSession { .. } | Owned::StartSession { .. }, _) => {
                Err(AcpError::protocol("session/new finished without a session").into())
            }
            (Owned::LoadSession { session_id, .. }, _) => Ok(session_id.into_py_any(py)?),
            (Owned::ListSessions(_), Some(Outcome::Listed(sessions))) => {
                Ok(sessions.into_py_any(py)?)
            }
            (Owned::ListSessions(_), _) => Ok(PyList::empty(py).into_any().unbind()),
            (Owned::SetConfigOption { .. }, Some(Outcome::ConfigOptions(options))) => {
                Ok(options.into_py_any(py)?)
            }
            (Owned::Prompt { .. }, Some(Outcome::Turn(turn))) => {
                let late = turn.timed_out;
                let tuple = turn_tuple(py, reply, *turn)?;
                Ok((if late { "late" } else { "ok" }, Some(tuple)).into_py_any(py)?)
            }
            (Owned::Prompt { .. }, _) => {
                Err(AcpError::protocol("session/prompt finished without a turn").into())
            }
            _ => Ok(py.None()),
        }
    }
}

/// A turn as the facade reads it (reply, stop reason, overflow, session, tool calls, plan,
/// commands, usage, current mode).
fn turn_tuple(py: Python<'_>, reply: ReplyBuilder, turn: TurnOutcome) -> PyResult<Py<PyAny>> {
    let reply = reply.finish(py)?;
    let overflow = turn.overflow.map(|o| {
        (
            o.kind.as_str(),
            o.admitted_bytes,
            o.admitted_segments,
            o.withheld_update_sequence,
        )
    });
    Ok((
        reply,
        turn.stop_reason,
        overflow,
        turn.session_id,
        turn.tool_calls,
        turn.plan,
        turn.available_commands,
        turn.usage,
        turn.current_mode_id,
    )
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

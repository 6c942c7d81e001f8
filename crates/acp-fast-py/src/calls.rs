//! The calls of `CoreClient` that talk to the agent: the handshake, sessions, turns and their
//! control. Each queues a request on the `Connection` and drives it to its end (`run`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyList;

use acp_proto::encode::ConfigValue;
use acp_proto::error::AcpError;
use acp_proto::{Outcome, Request};

use crate::client::{deadline, lock, turn_tuple, CoreClient, TurnTuple, TURN_TIMED_OUT};
use crate::errors::to_pyerr;
use crate::options;

#[pymethods]
impl CoreClient {
    /// `initialize`, then (with `new_session`) `session/new` in `cwd`; the new session's id.
    /// On expiry of `timeout` the agent's group is signalled and the client stopped.
    #[pyo3(signature = (cwd, new_session, timeout=None))]
    fn start(
        &self,
        py: Python<'_>,
        cwd: String,
        new_session: bool,
        timeout: Option<f64>,
    ) -> PyResult<Option<String>> {
        let until = deadline(py, timeout, "timeout")?.map(|d| Instant::now() + d);
        drop(self.enter(py)?); // usage errors (closed, forked, stopped) are not handshake errors
                               // Errors past this point came from the handshake: the facade raises them as ConnectError.
        let mark = |error: PyErr| -> PyErr {
            let _ = error.value(py).setattr("_acp_handshake", true);
            error
        };
        let step = |this: &Self, request: Request<'_>| -> PyResult<Option<Outcome>> {
            let outcome = this.run(
                py,
                until,
                |conn| conn.request(request).map(Some),
                |_, outcome| Ok(outcome),
            );
            if outcome.as_ref().is_ok_and(Option::is_none) {
                // The deadline passed before the answer: stop the agent and the client.
                let reason = format!(
                    "start() timed out after {} s; only close() is accepted (and request_cancel())",
                    timeout.unwrap_or(0.0)
                );
                if let Ok(mut driven) = this.call.try_lock() {
                    driven.conn.stop(reason.clone());
                }
                this.stop_agent(py, false);
                return Err(to_pyerr(py, AcpError::protocol(reason)));
            }
            outcome
        };
        step(self, Request::Initialize).map_err(mark)?;
        if !new_session {
            return Ok(None);
        }
        match step(
            self,
            Request::NewSession {
                cwd: &cwd,
                additional_directories: &[],
                mcp_servers: None,
            },
        )
        .map_err(mark)?
        {
            Some(Outcome::SessionOpened(id)) => Ok(Some(id)),
            _ => Ok(None),
        }
    }

    #[pyo3(signature = (cwd, mcp_servers, additional_directories))]
    fn new_session(
        &self,
        py: Python<'_>,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
    ) -> PyResult<String> {
        let servers = mcp_servers.map(|s| options::mcp_servers(&s)).transpose()?;
        self.run(
            py,
            None,
            |conn| {
                conn.request(Request::NewSession {
                    cwd: &cwd,
                    additional_directories: &additional_directories,
                    mcp_servers: servers.as_deref(),
                })
                .map(Some)
            },
            |_, outcome| match outcome {
                Some(Outcome::SessionOpened(id)) => Ok(id),
                _ => Err(AcpError::protocol("session/new finished without a session").into()),
            },
        )
    }

    #[pyo3(signature = (session_id, cwd, mcp_servers, additional_directories, resume))]
    fn load_session(
        &self,
        py: Python<'_>,
        session_id: String,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
        resume: bool,
    ) -> PyResult<String> {
        let servers = mcp_servers.map(|s| options::mcp_servers(&s)).transpose()?;
        self.run(
            py,
            None,
            |conn| {
                conn.request(Request::LoadSession {
                    session_id: &session_id,
                    cwd: &cwd,
                    additional_directories: &additional_directories,
                    mcp_servers: servers.as_deref(),
                    resume,
                })
                .map(Some)
            },
            |_, _| Ok(session_id.clone()),
        )
    }

    /// Every page's sessions, as JSON object texts.
    #[pyo3(signature = (cwd=None))]
    fn list_sessions(&self, py: Python<'_>, cwd: Option<String>) -> PyResult<Vec<String>> {
        self.run(
            py,
            None,
            |conn| {
                conn.request(Request::ListSessions {
                    cwd: cwd.as_deref(),
                })
                .map(Some)
            },
            |_, outcome| match outcome {
                Some(Outcome::Listed(sessions)) => Ok(sessions),
                _ => Ok(Vec::new()),
            },
        )
    }

    fn delete_session(&self, py: Python<'_>, session_id: String) -> PyResult<()> {
        self.simple(
            py,
            Request::DeleteSession {
                session_id: &session_id,
            },
        )
    }

    fn authenticate(&self, py: Python<'_>, method_id: String) -> PyResult<()> {
        self.simple(
            py,
            Request::Authenticate {
                method_id: &method_id,
            },
        )
    }

    fn logout(&self, py: Python<'_>) -> PyResult<()> {
        self.simple(py, Request::Logout)
    }

    fn set_mode(&self, py: Python<'_>, session_id: String, mode_id: String) -> PyResult<()> {
        self.simple(
            py,
            Request::SetMode {
                session_id: &session_id,
                mode_id: &mode_id,
            },
        )
    }

    fn set_model(&self, py: Python<'_>, session_id: String, model_id: String) -> PyResult<()> {
        self.simple(
            py,
            Request::SetModel {
                session_id: &session_id,
                model_id: &model_id,
            },
        )
    }

    /// The session's config options after the call (JSON array text), if any.
    fn set_config_option(
        &self,
        py: Python<'_>,
        session_id: String,
        config_id: String,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Option<String>> {
        let (text, flag) = if value.is_instance_of::<pyo3::types::PyBool>() {
            (String::new(), Some(value.extract::<bool>()?))
        } else if let Ok(text) = value.extract::<String>() {
            (text, None)
        } else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a config option's value is a str (select) or a bool (boolean)",
            ));
        };
        let value = match flag {
            Some(flag) => ConfigValue::Boolean(flag),
            None => ConfigValue::Select(&text),
        };
        self.run(
            py,
            None,
            |conn| {
                conn.request(Request::SetConfigOption {
                    session_id: &session_id,
                    config_id: &config_id,
                    value,
                })
                .map(Some)
            },
            |_, outcome| match outcome {
                Some(Outcome::ConfigOptions(options)) => Ok(options),
                _ => Ok(None),
            },
        )
    }

    /// Closes a session (writing `session/close` only when the agent advertises it).
    fn close_session(&self, py: Python<'_>, session_id: String) -> PyResult<()> {
        self.run(
            py,
            None,
            |conn| conn.close_session(&session_id),
            |_, _| Ok(()),
        )
    }

    /// One turn of content-block tuples on `session_id`.
    #[pyo3(signature = (session_id, blocks, timeout=None, gated=true))]
    fn prompt(
        &self,
        py: Python<'_>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
        timeout: Option<f64>,
        gated: bool,
    ) -> PyResult<TurnTuple> {
        let content = options::content(blocks)?;
        let timeout_ms = deadline(py, timeout, "timeout")?.map(|d| d.as_millis().max(1) as u64);
        let result = self.run(
            py,
            None,
            |conn| {
                conn.request(Request::Prompt {
                    session_id: &session_id,
                    content: &content,
                    timeout_ms,
                    gated,
                })
                .map(Some)
            },
            |run, outcome| match outcome {
                Some(Outcome::Turn(turn)) => {
                    let late = turn.timed_out;
                    let tuple = turn_tuple(py, run, *turn)?;
                    Ok((if late { "late" } else { "ok" }, Some(tuple)))
                }
                _ => Err(AcpError::protocol("session/prompt finished without a turn").into()),
            },
        );
        match result {
            Err(error)
                if error.is_instance_of::<pyo3::exceptions::PyTimeoutError>(py)
                    && error.value(py).to_string() == TURN_TIMED_OUT =>
            {
                Ok(("timeout", None))
            }
            other => other,
        }
    }

    /// Trips the cancel latch of the session's turn (one `session/cancel`); any thread, never
    /// blocks, does nothing without a turn in flight.
    fn cancel(&self, session_id: String) {
        if self.call.try_lock().is_ok() {
            return; // no call runs, so no turn is in flight
        }
        lock(&self.shared.cancels).push(session_id);
        self.shared.cancel_pending.store(true, Ordering::SeqCst);
        self.shared.wake();
    }

    /// Reads and handles for up to `timeout` seconds; the number of updates delivered.
    fn drain(&self, py: Python<'_>, timeout: f64) -> PyResult<u64> {
        if !(timeout >= 0.0 && timeout.is_finite()) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "timeout must be a number of seconds >= 0 (got {timeout})"
            )));
        }
        let until = Instant::now() + Duration::from_secs_f64(timeout);
        self.run(py, Some(until), |_| Ok(None), |run, _| Ok(run.delivered))
    }

    /// The permission policy for later calls: `PermissionPolicy`-like object.
    fn set_policy(&self, py: Python<'_>, policy: &Bound<'_, PyAny>) -> PyResult<()> {
        let policy = options::read_policy(policy)?;
        let mut driven = self.enter(py)?;
        driven.conn.set_policy(policy);
        Ok(())
    }
}

//! The calls of `CoreClient` that talk to the agent: the handshake, sessions, turns and their
//! control. Each queues a request on the `Connection` and drives it to its end (`run`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyList;

use acp_proto::error::AcpError;
use acp_proto::Outcome;

use crate::client::{deadline, lock, CoreClient, TurnTuple, TURN_TIMED_OUT};
use crate::errors::to_pyerr;
use crate::options;
use crate::prepared::{Owned, Prepared};

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
        let step = |this: &Self, call: Prepared| -> PyResult<Option<Outcome>> {
            let outcome = this.run(py, until, |conn| call.start(conn), |_, outcome| Ok(outcome));
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
        step(self, Prepared(Owned::Initialize)).map_err(mark)?;
        if !new_session {
            return Ok(None);
        }
        match step(
            self,
            Prepared(Owned::NewSession {
                cwd,
                directories: Vec::new(),
                servers: None,
            }),
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
        let call = Prepared::new_session(cwd, mcp_servers, additional_directories)?;
        self.blocking(py, &call)?.extract(py)
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
        let call =
            Prepared::load_session(session_id, cwd, mcp_servers, additional_directories, resume)?;
        self.blocking(py, &call)?.extract(py)
    }

    /// Every page's sessions, as JSON object texts.
    #[pyo3(signature = (cwd=None))]
    fn list_sessions(&self, py: Python<'_>, cwd: Option<String>) -> PyResult<Vec<String>> {
        self.blocking(py, &Prepared(Owned::ListSessions(cwd)))?
            .extract(py)
    }

    fn delete_session(&self, py: Python<'_>, session_id: String) -> PyResult<()> {
        self.blocking(py, &Prepared(Owned::DeleteSession(session_id)))
            .map(drop)
    }

    fn authenticate(&self, py: Python<'_>, method_id: String) -> PyResult<()> {
        self.blocking(py, &Prepared(Owned::Authenticate(method_id)))
            .map(drop)
    }

    fn logout(&self, py: Python<'_>) -> PyResult<()> {
        self.blocking(py, &Prepared(Owned::Logout)).map(drop)
    }

    fn set_mode(&self, py: Python<'_>, session_id: String, mode_id: String) -> PyResult<()> {
        self.blocking(py, &Prepared(Owned::SetMode(session_id, mode_id)))
            .map(drop)
    }

    fn set_model(&self, py: Python<'_>, session_id: String, model_id: String) -> PyResult<()> {
        self.blocking(py, &Prepared(Owned::SetModel(session_id, model_id)))
            .map(drop)
    }

    /// The session's config options after the call (JSON array text), if any.
    fn set_config_option(
        &self,
        py: Python<'_>,
        session_id: String,
        config_id: String,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Option<String>> {
        let call = Prepared::set_config_option(session_id, config_id, value)?;
        self.blocking(py, &call)?.extract(py)
    }

    /// Closes a session (writing `session/close` only when the agent advertises it).
    fn close_session(&self, py: Python<'_>, session_id: String) -> PyResult<()> {
        self.blocking(py, &Prepared(Owned::CloseSession(session_id)))
            .map(drop)
    }

    /// One turn of content-block tuples on `session_id`.
    #[pyo3(signature = (session_id, blocks, timeout=None, gated=true, meta=Vec::new()))]
    fn prompt(
        &self,
        py: Python<'_>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
        timeout: Option<f64>,
        gated: bool,
        meta: Vec<(String, String)>,
    ) -> PyResult<TurnTuple> {
        let call = Prepared::prompt(py, session_id, blocks, timeout, gated, meta)?;
        match self.blocking(py, &call) {
            Ok(value) => {
                let (status, turn): (String, Py<PyAny>) = value.extract(py)?;
                Ok((if status == "late" { "late" } else { "ok" }, Some(turn)))
            }
            Err(error)
                if error.is_instance_of::<pyo3::exceptions::PyTimeoutError>(py)
                    && error.value(py).to_string() == TURN_TIMED_OUT =>
            {
                Ok(("timeout", None))
            }
            Err(error) => Err(error),
        }
    }

    /// Trips the cancel latch of the session's turn (one `session/cancel`); any thread, never
    /// blocks, does nothing without a turn in flight.
    fn cancel(&self, session_id: String) {
        if !self.shared.asynchronous.load(Ordering::Relaxed) && self.call.try_lock().is_ok() {
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

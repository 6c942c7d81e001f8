//! The blocking driver of `CoreClient` (`run`: a call queued on the `Connection`, the pump run
//! until it ends; `start()`'s two steps), and the controls that are not calls: cancel, drain,
//! the policy, a session's roots.

use std::sync::atomic::Ordering;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::PyList;

use acp_client::blocking::{start_steps, Outcomes};
use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::Connection;

use crate::client::CoreClient;
use crate::errors::CallError;
use crate::options;
use crate::prepared::Prepared;
use crate::reply::ReplyBuilder;
use crate::state::Locked;

impl CoreClient {
    /// Runs one call (`Pump::run_call`): `start` queues it on the connection; `finish` makes
    /// its value of the outcome, the updates delivered and the reply of `turn`.
    fn run<T>(
        &self,
        py: Python<'_>,
        until: Option<Instant>,
        turn: Option<&str>,
        start: impl FnOnce(&mut Connection) -> Result<Option<CallId>, AcpError>,
        finish: impl FnOnce(Outcomes, u64, ReplyBuilder) -> Result<T, CallError>,
    ) -> PyResult<T> {
        self.run_raw(py, until, turn, start, finish)
            .map_err(|error| self.call_error(py, error))
    }

    /// `run`, its error not yet made an exception (`start()` makes some `ConnectError`s).
    fn run_raw<T>(
        &self,
        py: Python<'_>,
        until: Option<Instant>,
        turn: Option<&str>,
        start: impl FnOnce(&mut Connection) -> Result<Option<CallId>, AcpError>,
        finish: impl FnOnce(Outcomes, u64, ReplyBuilder) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let mut guard = self.enter(py)?;
        let Locked {
            pump,
            callbacks,
            replies,
            ..
        } = &mut *guard;
        self.drain_stderr_in_thread();
        let mut edge = self.edge(py, callbacks, replies);
        let result = pump.run_call(
            &mut edge,
            until,
            start,
            |edge| {
                if let Some(session) = turn {
                    let reply = ReplyBuilder::default();
                    edge.replies().insert(session.to_owned(), reply);
                }
            },
            |edge, outcome| {
                let reply = turn.and_then(|s| edge.replies().remove(s));
                finish(outcome, edge.delivered, reply.unwrap_or_default())
            },
        );
        if let Some(session) = turn {
            edge.replies().remove(session);
        }
        self.publish(&pump.conn);
        result?
    }

    /// Runs a prepared call to its end on the blocking driver.
    pub(crate) fn blocking(&self, py: Python<'_>, call: &Prepared) -> PyResult<Py<PyAny>> {
        self.run(
            py,
            None,
            call.turn_session(),
            |conn| call.start(conn),
            |outcome, _, reply| call.value(py, reply, outcome),
        )
    }
    /// `initialize`, then (with `new_session`) `session/new` in `cwd`; the new session's id.
    /// Handshake failures raise `ConnectError`; on expiry of `timeout` (the connection's start
    /// deadline) the agent's group is signalled and the client stopped.
    pub(crate) fn start_blocking(
        &self,
        py: Python<'_>,
        first: Prepared,
    ) -> PyResult<Option<String>> {
        let result = start_steps(first.0, |call| {
            let start = |conn: &mut Connection| call.start(conn);
            self.run_raw(py, None, None, start, |outcome, _, _| Ok(outcome?))
        });
        // Another thread's call holds the lock only when this one never started (a usage
        // error): then there is no handshake to end.
        let Some(mut locked) = self.try_locked() else {
            return result.map_err(|error| self.call_error(py, error));
        };
        let conn = &mut locked.pump.conn;
        // The handshake is over (or failed): its deadline no longer applies.
        conn.set_start_deadline(None);
        result.map_err(|error| self.connect_error(py, conn, error))
    }
}

#[pymethods]
impl CoreClient {
    /// Trips the cancel latch of the session's turn (one `session/cancel`); any thread, never
    /// blocks, does nothing without a turn in flight.
    fn cancel(&self, session_id: String) {
        let controls = &self.shared.controls;
        if !controls.asynchronous.load(Ordering::Relaxed) && self.call.try_lock().is_ok() {
            return; // no call runs, so no turn is in flight
        }
        controls.queue_cancel(session_id);
    }

    /// The blocking client's steer into a running turn (another thread holds the call lock):
    /// queued for the turn's pump, which writes it before its next line; waits (without the
    /// GIL) up to 30 s for the answer's JSON text. `None`: no call runs (or the asyncio
    /// driver), so the caller runs `steer` as an ordinary call.
    fn steer_running(
        &self,
        py: Python<'_>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
    ) -> PyResult<Option<String>> {
        let controls = &self.shared.controls;
        if controls.asynchronous.load(Ordering::Relaxed) || self.call.try_lock().is_ok() {
            return Ok(None);
        }
        let content = options::content(blocks)?;
        let ticket = controls.queue_steer(session_id, content);
        let until = Instant::now() + std::time::Duration::from_secs(30);
        py.detach(|| controls.wait_steer(ticket, until))
            .map(Some)
            .map_err(|error| self.call_error(py, CallError::from(error)))
    }

    /// Reads and handles for up to `timeout` seconds; the number of updates delivered.
    fn drain(&self, py: Python<'_>, timeout: f64) -> PyResult<u64> {
        let until = Instant::now()
            + acp_client::settings::drain_timeout(timeout)
                .map_err(pyo3::exceptions::PyValueError::new_err)?;
        self.run(
            py,
            Some(until),
            None,
            |_| Ok(None),
            |outcome, delivered, _| outcome.map(|_| delivered).map_err(CallError::from),
        )
    }

    /// The permission policy for later calls: `PermissionPolicy`-like object.
    fn set_policy(&self, py: Python<'_>, policy: &Bound<'_, PyAny>) -> PyResult<()> {
        let policy = options::read_policy(policy)?;
        let mut locked = self.enter(py)?;
        locked.pump.conn.set_policy(policy);
        Ok(())
    }

    /// Sets a session's roots (design/host.md §2): its cwd, the config's and its own
    /// additional directories, each kept as given and as its realpath, taken now.
    fn host_roots(
        &self,
        py: Python<'_>,
        session_id: String,
        cwd: String,
        directories: Vec<String>,
    ) -> PyResult<()> {
        let locked = self.enter(py)?;
        let host = &locked.pump.host;
        // Opened now, without the GIL (a directory on a slow mount must not stall Python).
        let roots = py.detach(|| host.open_roots(cwd, directories));
        self.host_kill.set_roots(session_id, Some(roots));
        Ok(())
    }

    /// Forgets a closed session's roots (their descriptors close) and releases its terminals;
    /// needs no call lock, so it works while another session's call runs.
    fn host_forget(&self, py: Python<'_>, session_id: String) {
        py.detach(|| self.host_kill.forget(&session_id));
    }
}

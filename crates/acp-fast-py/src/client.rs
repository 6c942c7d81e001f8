//! `_core.CoreClient`: one agent process and its `Connection`, driven by the pump of
//! `acp_client` (blocking calls: `calls`; the asyncio driver's steps: `aio`). Here: construction,
//! the call lock, the published views, close, and a failed call's exception.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

use acp_client::call::connect_failure;
use acp_client::controls::lock;
use acp_client::host::{Host, KillSwitch};
use acp_client::{Controls, Pump};
use acp_os::io::Waker;
use acp_os::process::{self, Agent, SpawnOptions};
use acp_proto::error::AcpError;
use acp_proto::reader;
use acp_proto::Connection;

use crate::edge::PyEdge;
use crate::errors::{to_pyerr, CallError};
use crate::journal::Hook;
use crate::options;
use crate::state::{Callbacks, Locked, Published, Shared, Views};

#[pyclass(module = "acp_fast._core", name = "CoreClient")]
pub struct CoreClient {
    /// The state behind the call lock.
    pub(crate) call: Mutex<Locked>,
    /// Kills the agent's terminals from any thread (request_cancel, close).
    pub(crate) host_kill: KillSwitch,
    agent: Mutex<Option<Agent>>,
    pub(crate) published: Published,
    pub(crate) shared: Shared,
    pub(crate) pid: u32,
    /// The process that made this client; after fork() the child may not use it.
    owner: u32,
    pub(crate) stderr_tail: Option<std::sync::Arc<process::StderrTail>>,
}

impl CoreClient {
    /// Takes the call lock, or explains why no call can run now.
    pub(crate) fn enter(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Locked>> {
        if !self.owned_here() {
            return Err(to_pyerr(
                py,
                AcpError::protocol(format!(
                    "this client belongs to process {} and cannot be used in process {} (made by fork()); create a new client here",
                    self.owner,
                    std::process::id()
                )),
            ));
        }
        if self.shared.controls.is_closed() {
            // A usage error, not the agent's fault (first-use.md §1): RuntimeError.
            return Err(to_pyerr(
                py,
                AcpError::Misuse(acp_client::pump::CLOSED.into()),
            ));
        }
        let guard = match self.call.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(PyRuntimeError::new_err(
                "another call is running on this client (calls run one at a time; only request_cancel(), close() and Session.cancel() may be called meanwhile)",
            )),
        };
        if let Some(reason) = guard.pump.conn.stopped() {
            return Err(self.stopped_error(py, reason));
        }
        Ok(guard)
    }

    pub(crate) fn stopped_error(&self, py: Python<'_>, reason: &str) -> PyErr {
        let error = to_pyerr(py, AcpError::protocol(reason));
        if let Some(cause) = lock(&self.shared.stop_cause).as_ref() {
            error.set_cause(py, Some(PyErr::from_value(cause.bind(py).clone())));
        }
        error
    }

    /// Publishes everything after a call (with the call lock held).
    pub(crate) fn publish(&self, conn: &Connection) {
        self.published.all(conn);
        self.shared
            .controls
            .next_update_sequence
            .store(conn.next_update_sequence(), Ordering::Relaxed);
    }

    /// The edge of a pass of the pump over `locked` (split from its pump by the caller).
    pub(crate) fn edge<'py, 'a>(
        &'a self,
        py: Python<'py>,
        callbacks: &'a Callbacks,
        replies: &'a mut crate::reply::Replies,
    ) -> PyEdge<'py, 'a> {
        PyEdge::new(py, callbacks, replies, &self.shared, &self.published)
    }

    /// The blocking driver drains the agent's stderr with a thread, started at its first call
    /// (the asyncio driver reads it from the loop instead: async.md §2, no thread per agent).
    pub(crate) fn drain_stderr_in_thread(&self) {
        if self.stderr_tail.is_none() || self.shared.controls.asynchronous.load(Ordering::Relaxed) {
            return;
        }
        if let Some(agent) = lock(&self.agent).as_mut() {
            // Without a thread the tail still fills when read (`stderr_tail()`, an error).
            let _ = agent.drain_stderr_in_thread();
        }
    }

    /// A failed call's exception, with what is known about why the agent's output ended: in
    /// its message, and as its `exit_code` and `exit_signal`.
    pub(crate) fn call_error(&self, py: Python<'_>, error: CallError) -> PyErr {
        let (error, ended) = match error {
            CallError::Acp(AcpError::AgentProtocol(mut protocol)) if protocol.output_ended => {
                let ended = self.explain_end(py, &mut protocol.description);
                (AcpError::AgentProtocol(protocol), ended)
            }
            // The pipes failed: usually the agent died (e.g. at once, for want of an API key).
            CallError::Acp(AcpError::AgentTransportFailed(mut description)) => {
                let ended = self.explain_end(py, &mut description);
                (AcpError::AgentTransportFailed(description), ended)
            }
            other => return other.into_pyerr(py),
        };
        let raised = to_pyerr(py, error);
        let value = raised.value(py);
        let set = value
            .setattr("exit_code", ended.exit_code)
            .and_then(|()| value.setattr("exit_signal", ended.exit_signal));
        match set {
            Ok(()) => raised,
            Err(failed) => failed,
        }
    }

    /// A failed `start()` step's exception: what fails to connect (design §6: an error
    /// answer, another protocol version, the output ending, the deadline) is a `ConnectError`
    /// (its `__cause__` the detail) and stops the client, except -32000 (authentication
    /// required), which leaves it usable; anything else is raised as `call_error` makes it.
    pub(crate) fn connect_error(
        &self,
        py: Python<'_>,
        conn: &mut Connection,
        error: CallError,
    ) -> PyErr {
        let connects = matches!(&error, CallError::Acp(e) if e.fails_connect());
        let timed_out = matches!(&error, CallError::Acp(AcpError::StartTimeout(_)));
        let exited = matches!(&error, CallError::Acp(AcpError::AgentTransportFailed(_)));
        if timed_out {
            self.stop_agent(py, false);
        }
        let detail = self.call_error(py, error);
        if !connects {
            return detail;
        }
        match self.connect_exception(py, conn, &detail, exited) {
            Ok(failure) => failure,
            Err(error) => error,
        }
    }

    fn connect_exception(
        &self,
        py: Python<'_>,
        conn: &mut Connection,
        detail: &PyErr,
        exited: bool,
    ) -> PyResult<PyErr> {
        let value = detail.value(py);
        let shown = value.str()?.to_string();
        let field = |name: &str| -> Bound<'_, PyAny> {
            value
                .getattr(name)
                .unwrap_or_else(|_| py.None().into_bound(py))
        };
        let (code, message, data) = (field("code"), field("message"), field("data"));
        let failure = connect_failure(conn, &shown, exited, code.extract::<i64>().ok());
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("agent_id", &conn.config().agent_id)?;
        kwargs.set_item("code", code)?;
        kwargs.set_item("message", message)?;
        kwargs.set_item("data", data)?;
        let ended = field("output_ended").extract::<bool>().unwrap_or(false);
        kwargs.set_item("output_ended", ended)?;
        let class = crate::errors::errors_module(py)?.getattr("ConnectError")?;
        let instance = class.call((failure.message,), Some(&kwargs))?;
        // How the agent ended, as the detail has it: a host reads `exit_code` off the error
        // it caught, not off its cause.
        instance.setattr("exit_code", field("exit_code"))?;
        instance.setattr("exit_signal", field("exit_signal"))?;
        let error = PyErr::from_value(instance);
        error.set_cause(py, Some(detail.clone_ref(py)));
        if let Some(reason) = failure.stop {
            conn.stop(reason);
            *lock(&self.shared.stop_cause) = Some(error.value(py).clone().into_any().unbind());
        }
        Ok(error)
    }

    /// The call lock if no call holds it.
    pub(crate) fn try_locked(&self) -> Option<MutexGuard<'_, Locked>> {
        match self.call.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn owned_here(&self) -> bool {
        self.owner == std::process::id()
    }

    /// Adds what is known about why the agent's output ended (its exit status and the tail of
    /// its stderr) to `description`, and gives the status.
    fn explain_end(&self, py: Python<'_>, description: &mut String) -> acp_client::agent::Ended {
        let tail = self.stderr_tail.as_deref();
        let ended = py.detach(|| acp_client::agent::why_ended(&self.agent, tail));
        description.push_str(&ended.told);
        ended
    }

    pub(crate) fn stop_agent(&self, py: Python<'_>, reap: bool) {
        // Taken with the GIL released: `close` holds this lock while it waits for the agent.
        py.detach(|| {
            if let Some(agent) = lock(&self.agent).as_mut() {
                if reap {
                    agent.stop_and_reap();
                } else {
                    agent.stop();
                }
            }
        });
    }

    fn refresh(&self) {
        if let Ok(locked) = self.call.try_lock() {
            self.publish(&locked.pump.conn);
        }
    }

    pub(crate) fn views(&self) -> MutexGuard<'_, Views> {
        self.refresh();
        lock(&self.published.0)
    }
}

#[pymethods]
impl CoreClient {
    /// Validates `options` (see `acp_fast._client._CoreOptions`), allocates the reader and
    /// starts the agent, in that order.
    #[new]
    fn new(py: Python<'_>, options: &Bound<'_, PyAny>) -> PyResult<CoreClient> {
        let settings = options::read(py, options)?.map_err(|e| to_pyerr(py, e))?;
        let reader_limits = reader::Limits {
            message_bytes: usize::try_from(settings.message_bytes).unwrap_or(usize::MAX),
        };
        let mut conn =
            Connection::new(settings.config, reader_limits).map_err(|e| to_pyerr(py, e))?;
        let options::Spawn {
            command,
            args,
            cwd,
            env,
        } = options.extract()?;
        let spawn = SpawnOptions {
            command: command.clone(),
            args,
            cwd: cwd.clone(),
            env,
            stderr: settings.stderr,
        };
        let (agent, mut pipes) = py.detach(|| process::spawn(&spawn)).map_err(|e| {
            let reason = acp_client::settings::spawn_failure(&e, cwd.as_deref());
            match e.raw_os_error() {
                Some(errno) => PyOSError::new_err((errno, reason, command.clone())),
                None => to_pyerr(
                    py,
                    AcpError::AgentTransportFailed(format!(
                        "{reason} ({})",
                        command.to_string_lossy()
                    )),
                ),
            }
        })?;
        let waker = Waker::new()?;
        pipes.set_waker(waker.fd());
        let observer: options::Observer = options.extract()?;
        conn.advertise_elicitation(observer.elicitation_preview.is_some());
        // A journal's own `update` as on_update: the pump records each update into it
        // directly, and calls only the observer it wraps.
        let hook = observer
            .on_update
            .as_ref()
            .and_then(|c| Hook::find(c.bind(py)));
        let (journal, on_update) = match hook {
            Some((hook, inner)) => (Some(hook), inner),
            None => (None, observer.on_update),
        };
        let callbacks = Callbacks {
            on_update,
            journal,
            permission_preview: observer.permission_preview,
            permission_commit: observer.permission_commit,
            on_sent: observer.on_sent,
            on_received: observer.on_received,
            fold: observer.fold,
            on_activity: observer.on_activity,
            elicitation: observer.elicitation_preview,
            durable: observer.durable,
        };
        let pid = agent.pid();
        let stderr_tail = agent.stderr_tail().cloned();
        let published = Published::default();
        lock(&published.0).reader = Some(conn.reader_status());
        let mut host = Host::new(options::host_config(options)?);
        if host.configured() {
            host.set_notifier(Some(waker.notifier()?));
        }
        let controls = Arc::new(Controls::new(Some(waker)));
        Ok(CoreClient {
            host_kill: host.kill_switch(),
            call: Mutex::new(Locked {
                pump: Pump::new(conn, Some(pipes), host, Arc::clone(&controls)),
                callbacks,
                replies: Default::default(),
                aio: None,
            }),
            agent: Mutex::new(Some(agent)),
            published,
            shared: Shared {
                controls,
                stop_cause: Mutex::new(None),
            },
            pid,
            owner: std::process::id(),
            stderr_tail,
        })
    }

    /// The last bytes of the agent's stderr ("" unless stderr="tail").
    fn stderr_tail(&self, py: Python<'_>) -> String {
        match &self.stderr_tail {
            Some(tail) => {
                let bytes = py.detach(|| tail.now());
                String::from_utf8_lossy(&bytes).into_owned()
            }
            None => String::new(),
        }
    }

    /// Stops the client (a handshake failure): later calls raise `AgentProtocolError(reason)`.
    /// `cause` becomes the `__cause__` of those errors.
    #[pyo3(signature = (reason, cause=None))]
    fn stop(&self, py: Python<'_>, reason: String, cause: Option<Py<PyAny>>) -> PyResult<()> {
        let mut locked = self.enter(py)?;
        locked.pump.conn.stop(reason);
        *lock(&self.shared.stop_cause) = cause;
        Ok(())
    }

    /// Freezes, then kills, the agent's group and descendants (acp-os `kill`); returns without
    /// waiting. Any thread.
    fn request_cancel(&self, py: Python<'_>) {
        let controls = &self.shared.controls;
        controls.cancel_requested.store(true, Ordering::SeqCst);
        controls.wake();
        self.stop_agent(py, false);
        py.detach(|| self.host_kill.kill_all());
    }

    /// Stops the agent's group, reaps the agent and releases the pipes. Idempotent; any
    /// thread. With `grace` > 0 the agent's stdin is closed first, and it and the rest of its
    /// group have that long to exit.
    #[pyo3(signature = (grace=0.0))]
    fn close(&self, py: Python<'_>, grace: f64) {
        if !self.owned_here() {
            return; // the agent belongs to the process that forked us
        }
        let controls = &self.shared.controls;
        if grace > 0.0 && !controls.is_closed() {
            if let Ok(mut locked) = self.call.try_lock() {
                if let Some(pipes) = locked.pump.pipes.as_mut() {
                    pipes.close_stdin(); // the agent sees end of input; its stdout stays open
                }
                drop(locked);
                let until = Instant::now() + Duration::from_secs_f64(grace.min(3600.0));
                py.detach(|| acp_client::agent::wait_for_group(&self.agent, until));
            }
        }
        controls.closed.store(true, Ordering::SeqCst);
        controls.wake();
        self.stop_agent(py, true);
        py.detach(|| self.host_kill.kill_all());
        if let Ok(mut locked) = self.call.try_lock() {
            locked.pump.pipes = None;
            locked.aio = None; // its pidfd too
            locked.pump.host.set_notifier(None); // the waker's other write end
            *lock(&controls.waker) = None;
            locked.pump.conn.close_reader();
            self.publish(&locked.pump.conn);
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.shared.controls.is_closed()
    }

    /// The agent's process id; None once the client is closed.
    #[getter]
    fn pid(&self) -> Option<u32> {
        (!self.shared.controls.is_closed()).then_some(self.pid)
    }

    #[getter]
    fn next_update_sequence(&self) -> u64 {
        self.shared
            .controls
            .next_update_sequence
            .load(Ordering::Relaxed)
    }

    /// The ACP version `initialize` agreed (1 or 2); None before the agent answered it.
    #[getter]
    fn protocol_version(&self) -> Option<i64> {
        self.views().initialize.as_ref().map(|i| i.protocol_version)
    }

    #[getter]
    fn agent_error(&self) -> Option<String> {
        self.views().agent_error.clone()
    }

    /// Ids of the open sessions, in opening order.
    fn session_ids(&self) -> Vec<String> {
        self.views().open.clone()
    }

    /// The exception that stopped the client (a callback's, a failed start()'s), if any: the
    /// `__cause__` of the "the client stopped" errors (async.md §3).
    #[getter]
    fn stop_cause(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(&self.shared.stop_cause)
            .as_ref()
            .map(|cause| cause.clone_ref(py))
    }

    /// Whether a stop (a callback raised, Ctrl-C, a start() timeout) ended the client.
    #[getter]
    fn stopped(&self) -> bool {
        self.call
            .try_lock()
            .map(|locked| locked.pump.conn.stopped().is_some())
            .unwrap_or(false)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // A running call holds the lock and keeps the client reachable anyway.
        if let Ok(locked) = self.call.try_lock() {
            for callback in locked.callbacks.all() {
                visit.call(callback)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        if let Ok(mut locked) = self.call.try_lock() {
            locked.callbacks = Callbacks::default();
        }
    }
}

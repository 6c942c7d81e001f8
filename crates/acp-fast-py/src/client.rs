//! `_core.CoreClient`: one agent process and its `Connection`, driven by the blocking loop of
//! `driver`. The facade (`acp_fast._client`) turns its tuples into the typed records.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{PyTraverseError, PyVisit};

use acp_os::io::Waker;
use acp_os::process::{self, Agent, SpawnOptions};
use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::reader;
use acp_proto::results::{InitializeInfo, NamedEntry};
use acp_proto::session::TurnOutcome;
use acp_proto::{Connection, Outcome};

use crate::driver::{Callbacks, Driven, Run};
use crate::errors::{to_pyerr, CallError};
use crate::journal::Hook;
use crate::options;
use crate::prepared::Prepared;
use crate::reply::ReplyBuilder;

/// The marker of a turn given up after its timeout and grace, turned into a status by `prompt`.
pub(crate) const TURN_TIMED_OUT: &str = "acp-fast: the turn timed out past its cancel grace";

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Flags other threads set while a call runs.
#[derive(Default)]
pub(crate) struct Flags {
    pub closed: AtomicBool,
    pub cancel_requested: AtomicBool,
    pub interrupted: AtomicBool,
    pub next_update_sequence: AtomicU64,
}

/// What other threads share with the running call.
pub(crate) struct Shared {
    pub flags: Flags,
    /// Sessions whose turn another thread cancelled; the driver takes them per line.
    pub cancels: Mutex<Vec<String>>,
    /// Set with each push to `cancels`, so the driver takes the lock only when there is work.
    pub cancel_pending: AtomicBool,
    /// Released with the pipes when the client closes (its fds must not outlive `close()`).
    pub waker: Mutex<Option<Waker>>,
    /// The exception that stopped the client, set as `__cause__` of later calls' errors.
    pub stop_cause: Mutex<Option<Py<PyAny>>>,
    /// The driver's clock starts here.
    pub epoch: Instant,
    /// Driven by an asyncio loop (`aio_attach`): no call holds the lock while a turn runs.
    pub asynchronous: AtomicBool,
}

impl Shared {
    pub fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake();
        }
    }
}

#[derive(Clone, Default)]
pub(crate) struct SessionView {
    modes: (String, Vec<NamedEntry>),
    models: (String, Vec<NamedEntry>),
    config_options: Option<String>,
    commands: Option<String>,
}

/// What properties read while a call may be running (they must not need the call's lock).
#[derive(Default)]
struct Published {
    initialize: Option<InitializeInfo>,
    agent_error: Option<String>,
    reader: Option<reader::Status>,
    sessions: HashMap<String, SessionView>,
    open: Vec<String>,
}

#[pyclass(module = "acp_fast._core", name = "CoreClient")]
pub struct CoreClient {
    pub(crate) call: Mutex<Driven>,
    /// Kills the agent's terminals from any thread (request_cancel, close).
    pub(crate) host_kill: crate::host::KillSwitch,
    agent: Mutex<Option<Agent>>,
    published: Mutex<Published>,
    pub(crate) shared: Shared,
    pub(crate) pid: u32,
    /// The process that made this client; after fork() the child may not use it.
    owner: u32,
    pub(crate) stderr_tail: Option<std::sync::Arc<process::StderrTail>>,
}

/// `("ok" | "late" | "timeout", payload)`: a turn, a turn whose timeout fired before its
/// answer (within the grace), or a timed-out turn given up.
pub(crate) type TurnTuple = (&'static str, Option<Py<PyAny>>);

fn named(py: Python<'_>, entries: &[NamedEntry]) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for e in entries {
        list.append((&e.id, &e.name, &e.description))?;
    }
    Ok(list.into_any().unbind())
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("ended ({status})"),
    }
}

pub(crate) fn deadline(
    py: Python<'_>,
    seconds: Option<f64>,
    name: &str,
) -> PyResult<Option<Duration>> {
    let _ = py;
    match seconds {
        None => Ok(None),
        Some(s) if s > 0.0 && s.is_finite() => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{name} must be a positive number of seconds (got {s})"
        ))),
    }
}

impl CoreClient {
    /// Takes the call lock, or explains why no call can run now.
    pub(crate) fn enter(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Driven>> {
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
        if self.shared.flags.closed.load(Ordering::SeqCst) {
            // A usage error, not the agent's fault (first-use.md §1): RuntimeError.
            return Err(to_pyerr(
                py,
                AcpError::Misuse(
                    "the client is closed: close() was called; make a new client".into(),
                ),
            ));
        }
        let guard = match self.call.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(PyRuntimeError::new_err(
                "another call is running on this client (calls run one at a time; only request_cancel(), close() and Session.cancel() may be called meanwhile)",
            )),
        };
        if let Some(reason) = guard.conn.stopped() {
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

    fn publish(&self, driven: &Driven) {
        let conn = &driven.conn;
        let mut published = lock(&self.published);
        published.initialize = conn.initialize().cloned();
        published.agent_error = conn.agent_error().map(str::to_owned);
        published.reader = Some(conn.reader_status());
        published.open = conn.session_ids().map(str::to_owned).collect();
        let mut views = HashMap::new();
        for id in &published.open {
            views.insert(id.clone(), view(conn, id));
        }
        published.sessions = views;
        self.shared
            .flags
            .next_update_sequence
            .store(conn.next_update_sequence(), Ordering::Relaxed);
    }

    pub(crate) fn publish_session(&self, conn: &Connection, session_id: &str) {
        lock(&self.published)
            .sessions
            .insert(session_id.to_owned(), view(conn, session_id));
    }

    /// Runs one call: `start` queues it on the connection, then the loop drives it to its end.
    pub(crate) fn run<T>(
        &self,
        py: Python<'_>,
        until: Option<Instant>,
        start: impl FnOnce(&mut Connection) -> Result<Option<CallId>, AcpError>,
        finish: impl FnOnce(&mut Run<'_, '_>, Option<Outcome>) -> Result<T, CallError>,
    ) -> PyResult<T> {
        let mut guard = self.enter(py)?;
        let driven = &mut *guard;
        self.drain_stderr_in_thread();
        // A cancel() queued while no turn ran has nothing to cancel.
        lock(&self.shared.cancels).clear();
        let result = (|| -> Result<T, CallError> {
            // What the agent sent since the last call (updates after a response) is handled
            // first, so it is not taken for part of this call (a new turn's reply, say).
            let mut run = Run::new(py, self);
            run.drive(driven, None, Some(Instant::now()))?;
            driven
                .conn
                .set_now(self.shared.epoch.elapsed().as_millis() as u64);
            let call = start(&mut driven.conn)?;
            let outcome = run.drive(driven, call, until)?;
            finish(&mut run, outcome)
        })();
        self.publish(driven);
        // A cancel() that arrived as the call ended targeted a turn that is over.
        lock(&self.shared.cancels).clear();
        if self.shared.flags.closed.load(Ordering::SeqCst) {
            driven.pipes = None;
            *lock(&self.shared.waker) = None;
        }
        result.map_err(|error| self.call_error(py, error))
    }

    /// The blocking driver drains the agent's stderr with a thread, started at its first call
    /// (the asyncio driver reads it from the loop instead: async.md §2, no thread per agent).
    fn drain_stderr_in_thread(&self) {
        if self.stderr_tail.is_none() || self.shared.asynchronous.load(Ordering::Relaxed) {
            return;
        }
        if let Some(agent) = lock(&self.agent).as_mut() {
            // Without a thread the tail still fills when read (`stderr_tail()`, an error).
            let _ = agent.drain_stderr_in_thread();
        }
    }

    /// A failed call's exception, with what is known about why the agent's output ended.
    pub(crate) fn call_error(&self, py: Python<'_>, error: CallError) -> PyErr {
        match error {
            CallError::Acp(AcpError::AgentProtocol(mut protocol)) => {
                if protocol.output_ended {
                    self.explain_end(py, &mut protocol.description);
                }
                to_pyerr(py, AcpError::AgentProtocol(protocol))
            }
            // The pipes failed: usually the agent died (e.g. at once, for want of an API key).
            CallError::Acp(AcpError::AgentTransportFailed(mut description)) => {
                self.explain_end(py, &mut description);
                to_pyerr(py, AcpError::AgentTransportFailed(description))
            }
            // The prompt call reports this one as its "timeout" status.
            CallError::Acp(AcpError::TurnTimeout { .. }) => {
                pyo3::exceptions::PyTimeoutError::new_err(TURN_TIMED_OUT)
            }
            other => other.into_pyerr(py),
        }
    }

    /// Runs a prepared call to its end on the blocking driver.
    pub(crate) fn blocking(&self, py: Python<'_>, call: &Prepared) -> PyResult<Py<PyAny>> {
        self.run(
            py,
            None,
            |conn| call.start(conn),
            |run, outcome| call.value(py, std::mem::take(&mut run.reply), outcome),
        )
    }

    fn owned_here(&self) -> bool {
        self.owner == std::process::id()
    }

    /// Adds what is known about why the agent's output ended: its exit status and the tail of
    /// its stderr.
    fn explain_end(&self, py: Python<'_>, description: &mut String) {
        let status = py.detach(|| {
            // Give a dying agent a moment to become reapable, so its status can be told.
            let deadline = Instant::now() + Duration::from_millis(100);
            loop {
                let status = lock(&self.agent).as_ref().and_then(Agent::exit_status);
                if status.is_some() || Instant::now() >= deadline {
                    return status;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        if let Some(status) = status {
            description.push_str(&format!("; the agent {}", describe_exit(status)));
        }
        if let Some(tail) = &self.stderr_tail {
            let bytes = py.detach(|| tail.last_words(Duration::from_millis(200)));
            if !bytes.is_empty() {
                description.push_str(&format!(
                    "\nagent stderr (last {} bytes):\n{}",
                    bytes.len(),
                    String::from_utf8_lossy(&bytes)
                ));
            }
        }
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
        if let Ok(driven) = self.call.try_lock() {
            self.publish(&driven);
        }
    }
}

fn view(conn: &Connection, session_id: &str) -> SessionView {
    match conn.session(session_id) {
        Some(session) => {
            let models = session.models();
            SessionView {
                modes: (
                    session.modes.current.clone(),
                    session.modes.available.clone(),
                ),
                models: (models.current, models.available),
                config_options: session.config_options.as_ref().map(|v| v.to_string()),
                commands: session.commands.as_ref().map(|v| v.to_string()),
            }
        }
        None => SessionView::default(),
    }
}

pub(crate) fn turn_tuple(
    py: Python<'_>,
    reply: ReplyBuilder,
    turn: TurnOutcome,
) -> PyResult<Py<PyAny>> {
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
        let conn = Connection::new(settings.config, reader_limits).map_err(|e| to_pyerr(py, e))?;
        // str through the file-system encoding (surrogate escapes too), as subprocess does.
        let command: OsString = options.getattr("command")?.extract()?;
        let cwd: Option<OsString> = options.getattr("cwd")?.extract()?;
        let spawn = SpawnOptions {
            command: command.clone(),
            args: options.getattr("args")?.extract()?,
            cwd: cwd.clone(),
            env: options.getattr("env")?.extract()?,
            stderr: settings.stderr,
        };
        let (agent, mut pipes) = py.detach(|| process::spawn(&spawn)).map_err(|e| {
            // io::Error's text ends in " (os error N)"; Python's OSError shows the errno itself.
            let text = e.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_owned();
            let reason = match &cwd {
                Some(dir) => format!("could not start the agent in {dir:?}: {text}"),
                None => format!("could not start the agent: {text}"),
            };
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
        let get = |name: &str| -> PyResult<Option<Py<PyAny>>> {
            let value = options.getattr(name)?;
            Ok((!value.is_none()).then(|| value.unbind()))
        };
        // A journal's own `update` as on_update: the driver records each update into it
        // directly, and calls only the observer it wraps.
        let on_update = get("on_update")?;
        let hook = on_update.as_ref().and_then(|c| Hook::find(c.bind(py)));
        let (journal, on_update) = match hook {
            Some((hook, inner)) => (Some(hook), inner),
            None => (None, on_update),
        };
        let callbacks = Callbacks {
            on_update,
            journal,
            permission_preview: get("permission_preview")?,
            permission_commit: get("permission_commit")?,
            on_sent: get("on_sent")?,
            on_received: get("on_received")?,
            fold: get("fold")?,
            on_activity: get("on_activity")?,
            durable: options.getattr("durable")?.is_truthy()?,
        };
        let pid = agent.pid();
        let stderr_tail = agent.stderr_tail().cloned();
        let flags = Flags::default();
        flags.next_update_sequence.store(1, Ordering::Relaxed);
        let published = Published {
            reader: Some(conn.reader_status()),
            ..Published::default()
        };
        let mut host = crate::host::Host::new(options)?;
        if host.configured() {
            host.set_notifier(Some(waker.notifier()?));
        }
        Ok(CoreClient {
            host_kill: host.kill_switch(),
            call: Mutex::new(Driven {
                conn,
                pipes: Some(pipes),
                callbacks,
                aio: None,
                host,
            }),
            agent: Mutex::new(Some(agent)),
            published: Mutex::new(published),
            shared: Shared {
                flags,
                cancels: Mutex::new(Vec::new()),
                cancel_pending: AtomicBool::new(false),
                waker: Mutex::new(Some(waker)),
                stop_cause: Mutex::new(None),
                epoch: Instant::now(),
                asynchronous: AtomicBool::new(false),
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
        let mut driven = self.enter(py)?;
        driven.conn.stop(reason);
        *lock(&self.shared.stop_cause) = cause;
        Ok(())
    }

    /// SIGTERM then SIGKILL to the agent's group; returns without waiting. Any thread.
    fn request_cancel(&self, py: Python<'_>) {
        self.shared
            .flags
            .cancel_requested
            .store(true, Ordering::SeqCst);
        self.shared.wake();
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
        if grace > 0.0 && !self.shared.flags.closed.load(Ordering::SeqCst) {
            if let Ok(mut driven) = self.call.try_lock() {
                if let Some(pipes) = driven.pipes.as_mut() {
                    pipes.close_stdin(); // the agent sees end of input; its stdout stays open
                }
                drop(driven);
                let until = Instant::now() + Duration::from_secs_f64(grace.min(3600.0));
                // The grace is the group's: what the agent started may still be finishing
                // (persisting a session) after the agent itself has exited.
                py.detach(|| loop {
                    let (exited, busy) = match lock(&self.agent).as_ref() {
                        None => (true, false),
                        Some(agent) if agent.exit_status().is_some() => (true, agent.group_busy()),
                        Some(_) => (false, true),
                    };
                    if (exited && !busy) || Instant::now() >= until {
                        break;
                    }
                    // After the agent's exit each look walks /proc: look less often.
                    std::thread::sleep(Duration::from_millis(if exited { 20 } else { 5 }));
                });
            }
        }
        self.shared.flags.closed.store(true, Ordering::SeqCst);
        self.shared.wake();
        self.stop_agent(py, true);
        py.detach(|| self.host_kill.kill_all());
        if let Ok(mut driven) = self.call.try_lock() {
            driven.pipes = None;
            driven.aio = None; // its pidfd too
            driven.host.set_notifier(None); // the waker's other write end
            *lock(&self.shared.waker) = None;
            driven.conn.close_reader();
            self.publish(&driven);
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.shared.flags.closed.load(Ordering::SeqCst)
    }

    /// The agent's process id; None once the client is closed.
    #[getter]
    fn pid(&self) -> Option<u32> {
        (!self.shared.flags.closed.load(Ordering::SeqCst)).then_some(self.pid)
    }

    #[getter]
    fn next_update_sequence(&self) -> u64 {
        self.shared
            .flags
            .next_update_sequence
            .load(Ordering::Relaxed)
    }

    #[getter]
    fn agent_error(&self) -> Option<String> {
        self.refresh();
        lock(&self.published).agent_error.clone()
    }

    /// Ids of the open sessions, in opening order.
    fn session_ids(&self) -> Vec<String> {
        self.refresh();
        lock(&self.published).open.clone()
    }

    /// ((current mode, modes), (current model, models), config options JSON, commands JSON),
    /// or None when the session is not open.
    #[allow(clippy::type_complexity)]
    fn session_info(
        &self,
        py: Python<'_>,
        session_id: &str,
    ) -> PyResult<
        Option<(
            (String, Py<PyAny>),
            (String, Py<PyAny>),
            Option<String>,
            Option<String>,
        )>,
    > {
        self.refresh();
        let published = lock(&self.published);
        let Some(view) = published.sessions.get(session_id) else {
            return Ok(None);
        };
        Ok(Some((
            (view.modes.0.clone(), named(py, &view.modes.1)?),
            (view.models.0.clone(), named(py, &view.models.1)?),
            view.config_options.clone(),
            view.commands.clone(),
        )))
    }

    /// (protocol_version, load_session, image, audio, embedded, [(id, name, description,
    /// type)], agent_info JSON or None, raw JSON) or None before `start`.
    #[allow(clippy::type_complexity)]
    fn initialize_info(
        &self,
        py: Python<'_>,
    ) -> PyResult<
        Option<(
            i64,
            bool,
            bool,
            bool,
            bool,
            Py<PyAny>,
            Option<String>,
            String,
        )>,
    > {
        self.refresh();
        let published = lock(&self.published);
        let Some(info) = &published.initialize else {
            return Ok(None);
        };
        let methods = PyList::empty(py);
        for m in &info.auth_methods {
            methods.append((&m.id, &m.name, &m.description, &m.kind))?;
        }
        let caps = &info.capabilities;
        Ok(Some((
            info.protocol_version,
            caps.load_session,
            caps.prompt_image,
            caps.prompt_audio,
            caps.prompt_embedded_context,
            methods.into_any().unbind(),
            info.agent_info.clone(),
            info.raw.clone(),
        )))
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
            .map(|d| d.conn.stopped().is_some())
            .unwrap_or(false)
    }

    /// (phase, message_bytes, storage_bytes, buffered_bytes, high_water, rejected, terminal).
    fn reader_status(&self) -> (&'static str, usize, usize, usize, usize, u64, bool) {
        self.refresh();
        let status = lock(&self.published)
            .reader
            .expect("published at construction or after a call");
        (
            status.phase.as_str(),
            status.message_bytes,
            status.storage_bytes,
            status.buffered_bytes,
            status.high_water_message_bytes,
            status.rejected_message_count,
            status.terminal,
        )
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // A running call holds the lock and keeps the client reachable anyway.
        if let Ok(driven) = self.call.try_lock() {
            for callback in driven.callbacks.all() {
                visit.call(callback)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        if let Ok(mut driven) = self.call.try_lock() {
            driven.callbacks = Callbacks::default();
        }
    }
}

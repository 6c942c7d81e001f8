//! The asyncio driver: non-blocking steps over the same `Connection` and callbacks as the
//! blocking loop, called by `acp_fast._async` from the event loop's readiness callbacks. A call
//! is started (`aio_begin_*` gives its id) and completed later by a pump that handles what the
//! agent sent; the loop never waits inside the core.
//!
//! Every step returns a report: `(done, asks, cancelled_asks, flags, timeout)` — finished calls
//! `(id, ok, value or exception)`, permission requests whose observer returned an awaitable
//! `(token, awaitable)`, tokens of those whose session began cancelling, what the loop must
//! arrange (`MORE`, `WRITE`, `PAUSED`, `ENDED`, `STOPPED`, `BACKLOG`) and the next timer in
//! seconds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::IntoPyObjectExt;

use acp_os::io::ReadOutcome;
use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::permission::ObserverAnswer;
use acp_proto::update::UpdateEvent;
use acp_proto::{AskId, Outcome};

use crate::client::{lock, CoreClient};
use crate::driver::{Asked, Driven, Flow, Run};
use crate::errors::CallError;
use crate::prepared::{Owned, Prepared};
use crate::reply::ReplyBuilder;

/// Lines are left buffered: schedule another pump soon (fairness between clients).
const MORE: u32 = 1;
/// Bytes wait for the agent's stdin: watch it for writability.
const WRITE: u32 = 2;
/// An `updates()` queue is full: stop watching stdout until it drains.
const PAUSED: u32 = 4;
/// The agent's output has ended (or reading stopped): stop watching stdout.
const ENDED: u32 = 8;
/// The client stopped (a callback raised): only `close()` is accepted.
const STOPPED: u32 = 16;
/// The agent is not taking its stdin (`Connection::backlogged`): stop watching stdout until
/// the queued lines are written, so answers to what it keeps sending cannot pile up.
const BACKLOG: u32 = 32;

/// What the asyncio driver keeps between steps.
#[derive(Default)]
pub(crate) struct AsyncState {
    /// Calls in flight by id (ids grow, so the first is the oldest).
    pending: BTreeMap<CallId, Prepared>,
    /// The reply of each session's running turn.
    replies: HashMap<String, ReplyBuilder>,
    /// Permission requests waiting on an awaitable, by token, with their session.
    deferred: BTreeMap<u64, (AskId, String)>,
    /// Deferred requests already reported as cancelled.
    told: HashSet<u64>,
    next_token: u64,
    /// An error no call was waiting for: the next call raises it.
    next_error: Option<PyErr>,
    /// Readable once the agent exits (pidfd).
    exit_fd: Option<OwnedFd>,
    exited: bool,
}

impl AsyncState {
    pub fn push_reply(&mut self, py: Python<'_>, update: &UpdateEvent<'_>) {
        if let Some(reply) = self.replies.get_mut(update.session_id.as_ref()) {
            reply.push(py, &update.text, update.ascii);
        }
    }
}

type Done = (i64, bool, Py<PyAny>);
type ReportTuple = (Vec<Done>, Vec<(u64, Py<PyAny>)>, Vec<u64>, u32, Option<f64>);

#[derive(Default)]
struct Report {
    done: Vec<Done>,
    asks: Vec<(u64, Py<PyAny>)>,
    cancelled: Vec<u64>,
    flags: u32,
}

fn exception(py: Python<'_>, error: PyErr) -> Py<PyAny> {
    error.into_value(py).into_any()
}

impl CoreClient {
    fn aio_guard(&self) -> std::sync::MutexGuard<'_, Driven> {
        lock(&self.call)
    }

    fn begin(&self, py: Python<'_>, call: Prepared) -> PyResult<i64> {
        let mut guard = self.enter(py)?;
        let driven = &mut *guard;
        let Some(aio) = driven.aio.as_mut() else {
            return Err(PyRuntimeError::new_err(
                "this client is not driven by an event loop",
            ));
        };
        if let Some(error) = aio.next_error.take() {
            return Err(error);
        }
        driven
            .conn
            .set_now(self.shared.epoch.elapsed().as_millis() as u64);
        let started = call
            .start(&mut driven.conn)
            .map_err(|e| self.call_error(py, e.into()))?;
        let Some(id) = started else {
            return Ok(-1); // finished at once
        };
        if let Some(session) = call.turn_session() {
            aio.replies
                .insert(session.to_owned(), ReplyBuilder::default());
        }
        aio.pending.insert(id, call);
        Ok(id.0)
    }

    /// Completes a call with its outcome.
    fn complete(
        &self,
        py: Python<'_>,
        aio: &mut AsyncState,
        call: CallId,
        outcome: Result<Outcome, AcpError>,
        report: &mut Report,
    ) {
        let Some(prepared) = aio.pending.remove(&call) else {
            return;
        };
        let reply = prepared
            .turn_session()
            .and_then(|s| aio.replies.remove(s))
            .unwrap_or_default();
        let entry = match outcome {
            Ok(outcome) => match prepared.value(py, reply, Some(outcome)) {
                Ok(value) => (call.0, true, value),
                Err(error) => (call.0, false, exception(py, self.call_error(py, error))),
            },
            // The prompt's "timeout" status, as the blocking call returns it.
            Err(AcpError::TurnTimeout { .. }) => {
                let value = ("timeout", py.None())
                    .into_py_any(py)
                    .unwrap_or_else(|_| py.None());
                (call.0, true, value)
            }
            Err(error) => (
                call.0,
                false,
                exception(py, self.call_error(py, error.into())),
            ),
        };
        report.done.push(entry);
    }

    /// Fails one call (abandoned: a late answer is dropped).
    fn fail_call(
        &self,
        py: Python<'_>,
        driven: &mut Driven,
        call: CallId,
        error: PyErr,
        report: &mut Report,
    ) {
        driven.conn.abandon(call);
        let aio = driven.aio.as_mut().expect("attached");
        if let Some(prepared) = aio.pending.remove(&call) {
            if let Some(session) = prepared.turn_session() {
                aio.replies.remove(session);
            }
        }
        report.done.push((call.0, false, exception(py, error)));
    }

    /// An error while handling: when it stopped the client, the call about the failing
    /// message's session (else the oldest) raises it and every other call raises "the client
    /// stopped"; otherwise (a bad line, the output ending) the oldest call raises it. With no
    /// call waiting, the next call raises it. Whether the pump should stop.
    fn aio_error(
        &self,
        py: Python<'_>,
        run: &Run<'_, '_>,
        driven: &mut Driven,
        error: CallError,
        report: &mut Report,
    ) -> bool {
        let error = self.call_error(py, error);
        let aio = driven.aio.as_mut().expect("attached");
        let oldest = aio.pending.keys().next().copied();
        let Some(reason) = driven.conn.stopped().map(str::to_owned) else {
            match oldest {
                Some(call) => {
                    self.fail_call(py, driven, call, error, report);
                    return driven.conn.output_ended()
                        && driven.aio.as_ref().is_some_and(|a| a.pending.is_empty());
                }
                None => {
                    aio.next_error = Some(error);
                    return true;
                }
            }
        };
        report.flags |= STOPPED;
        let target = run
            .failed_session
            .as_deref()
            .and_then(|s| {
                aio.pending
                    .iter()
                    .find(|(_, p)| p.session() == Some(s))
                    .map(|(id, _)| *id)
            })
            .or(oldest);
        let calls: Vec<CallId> = aio.pending.keys().copied().collect();
        report
            .cancelled
            .extend(std::mem::take(&mut aio.deferred).into_keys());
        let mut error = Some(error);
        for call in calls {
            let raised = match error.take_if(|_| Some(call) == target) {
                Some(error) => error,
                None => self.stopped_error(py, &reason),
            };
            self.fail_call(py, driven, call, raised, report);
        }
        if let Some(error) = error {
            driven.aio.as_mut().expect("attached").next_error = Some(error);
        }
        true
    }

    /// One non-blocking read. With the agent gone, an empty pipe means its output has ended
    /// (a process it started may hold the pipe open forever).
    fn aio_read(&self, driven: &mut Driven) -> Result<bool, CallError> {
        let exited = driven.aio.as_ref().is_some_and(|a| a.exited);
        let Some(pipes) = driven.pipes.as_mut() else {
            return Ok(false);
        };
        let buf = driven.conn.read_buf();
        if buf.is_empty() {
            return Ok(false);
        }
        match pipes.read_now(buf) {
            Ok(ReadOutcome::Data(count)) => driven.received(count),
            Ok(ReadOutcome::Eof) => driven.conn.input_ended(),
            Ok(_) => {
                if !(exited && pipes.agent_exited()) {
                    return Ok(false);
                }
                driven.conn.input_ended();
            }
            Err(e) => {
                return Err(AcpError::AgentTransportFailed(format!(
                    "reading the agent's stdout failed: {e}"
                ))
                .into())
            }
        }
        Ok(true)
    }

    fn settle_flow(
        &self,
        run: &mut Run<'_, '_>,
        driven: &mut Driven,
        ask: AskId,
        reply: Option<ObserverAnswer>,
        report: &mut Report,
    ) -> bool {
        match run.settle(driven, ask, reply) {
            Ok(()) => false,
            Err(error) => self.aio_error(run.py, run, driven, error, report),
        }
    }

    /// Writes what is queued (never waiting) and fills in what the loop must arrange.
    fn finish_step(
        &self,
        run: &mut Run<'_, '_>,
        driven: &mut Driven,
        mut report: Report,
    ) -> ReportTuple {
        let py = run.py;
        if driven.pipes.is_some() && driven.conn.stopped().is_none() {
            match run.write_queued(driven, false) {
                Ok(true) => {}
                Ok(false) => report.flags |= WRITE,
                Err(error) => {
                    self.aio_error(py, run, driven, error, &mut report);
                }
            }
        }
        if driven.conn.backlogged() {
            report.flags |= BACKLOG;
        }
        let now = run.now_ms();
        let conn = &driven.conn;
        let timeout = conn
            .poll_timeout()
            .map(|deadline| deadline.saturating_sub(now) as f64 / 1000.0);
        if let Some(aio) = driven.aio.as_mut() {
            for (token, (ask, _)) in &aio.deferred {
                if !aio.told.contains(token) && conn.ask_cancelled(*ask) {
                    aio.told.insert(*token);
                    report.cancelled.push(*token);
                }
            }
        }
        if conn.output_ended() || driven.pipes.is_none() {
            report.flags |= ENDED;
        }
        if conn.stopped().is_some() {
            report.flags |= STOPPED;
        }
        (
            report.done,
            report.asks,
            report.cancelled,
            report.flags,
            timeout,
        )
    }
}

#[pymethods]
impl CoreClient {
    /// Hands the client to an event loop: `(stdout, stdin, waker, exit)` fds to watch (stdin
    /// -1 once closed; exit a pidfd, -1 where there is none). From now on no call blocks.
    fn aio_attach(&self) -> PyResult<(i32, i32, i32, i32)> {
        let mut driven = self.aio_guard();
        let Some(pipes) = driven.pipes.as_ref() else {
            return Err(PyRuntimeError::new_err("the client is closed"));
        };
        let (stdout, stdin) = pipes.raw_fds();
        let waker = lock(&self.shared.waker)
            .as_ref()
            .map(|w| w.fd())
            .unwrap_or(-1);
        self.shared.asynchronous.store(true, Ordering::SeqCst);
        let exit_fd = acp_os::io::pidfd(self.pid).ok();
        let exit = exit_fd.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        driven.aio.get_or_insert_with(AsyncState::default).exit_fd = exit_fd;
        Ok((stdout, stdin.unwrap_or(-1), waker, exit))
    }

    /// The agent's stderr pipe for the loop to watch (`stderr="tail"`), or -1.
    fn aio_stderr_fd(&self) -> i32 {
        self.stderr_tail
            .as_ref()
            .and_then(|tail| tail.raw_fd())
            .unwrap_or(-1)
    }

    /// Reads what the agent wrote to its stderr into the tail (bounded, never waiting); true
    /// once it has ended (the loop stops watching the fd; `close()` closes it).
    fn aio_stderr(&self, py: Python<'_>) -> bool {
        match &self.stderr_tail {
            Some(tail) => py.detach(|| tail.read_available(acp_os::process::STDERR_READ_BUDGET)),
            None => true,
        }
    }

    /// Handles what the agent sent: up to `budget` events, one read (more once the agent has
    /// exited); `woken`: the waker fired (another thread queued a cancel or a close).
    #[pyo3(signature = (budget, woken=false, exited=false))]
    fn aio_pump(&self, py: Python<'_>, budget: usize, woken: bool, exited: bool) -> ReportTuple {
        let mut guard = self.aio_guard();
        let driven = &mut *guard;
        let mut run = Run::new(py, self);
        let mut report = Report::default();
        if woken {
            if let Some(waker) = lock(&self.shared.waker).as_ref() {
                waker.drain();
            }
        }
        if exited {
            if let Some(aio) = driven.aio.as_mut() {
                aio.exited = true;
                aio.exit_fd = None;
            }
        }
        if driven.aio.is_none() || driven.pipes.is_none() || driven.conn.stopped().is_some() {
            return self.finish_step(&mut run, driven, report);
        }
        let exited = driven.aio.as_ref().is_some_and(|a| a.exited);
        let mut handled = 0usize;
        let mut read = false;
        loop {
            if let Err(error) = run.check_stops() {
                // close() or request_cancel() from another thread: every call fails.
                let error = self.call_error(py, error);
                let message = error.value(py).to_string();
                let calls: Vec<CallId> = driven
                    .aio
                    .as_ref()
                    .map(|a| a.pending.keys().copied().collect())
                    .unwrap_or_default();
                for call in calls {
                    let raised = crate::errors::to_pyerr(py, AcpError::protocol(&message));
                    self.fail_call(py, driven, call, raised, &mut report);
                }
                report.flags |= ENDED;
                break;
            }
            run.take_cancels(&mut driven.conn);
            if driven.host.exits_pending() {
                // A terminal exited: answer the waits for it.
                if let Err(failure) = crate::host::answer_waits(py, driven) {
                    let error = run.host_failure(driven, failure);
                    self.aio_error(py, &run, driven, error, &mut report);
                    break;
                }
            }
            if driven.conn.poll_timeout().is_some() {
                driven.conn.handle_timeout(run.now_ms());
            }
            if handled >= budget {
                report.flags |= MORE;
                break;
            }
            match run.next(driven) {
                Err(error) => {
                    if self.aio_error(py, &run, driven, error, &mut report) {
                        break;
                    }
                }
                Ok(Flow::NeedInput) => {
                    if driven.conn.output_ended() || (read && !exited) || driven.conn.backlogged() {
                        break;
                    }
                    read = true;
                    match self.aio_read(driven) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(error) => {
                            self.aio_error(py, &run, driven, error, &mut report);
                            break;
                        }
                    }
                }
                Ok(Flow::Handled { pause }) => {
                    handled += 1;
                    if pause {
                        report.flags |= PAUSED;
                        break;
                    }
                }
                Ok(Flow::Host(request)) => {
                    handled += 1;
                    if let Err(failure) = crate::host::serve(py, driven, *request) {
                        let error = run.host_failure(driven, failure);
                        if self.aio_error(py, &run, driven, error, &mut report) {
                            break;
                        }
                    }
                }
                Ok(Flow::Done(call, outcome)) => {
                    handled += 1;
                    let aio = driven.aio.as_mut().expect("attached");
                    self.complete(py, aio, call, outcome, &mut report);
                }
                Ok(Flow::Permission(ask, cancelled)) => {
                    handled += 1;
                    let stop = match run.ask(driven, ask, cancelled) {
                        Ok(Asked::Reply(reply)) => {
                            self.settle_flow(&mut run, driven, ask, reply, &mut report)
                        }
                        Ok(Asked::Deferred(awaitable)) => {
                            let session = driven.conn.ask_session(ask).unwrap_or("").to_owned();
                            let aio = driven.aio.as_mut().expect("attached");
                            let token = aio.next_token;
                            aio.next_token += 1;
                            aio.deferred.insert(token, (ask, session));
                            report.asks.push((token, awaitable));
                            false
                        }
                        Err(error) => self.aio_error(py, &run, driven, error, &mut report),
                    };
                    if stop {
                        break;
                    }
                }
            }
            // Answers leave as they are decided, not at the end of a long pump.
            if driven.conn.poll_transmit().is_some() {
                if let Err(error) = run.write_queued(driven, false) {
                    self.aio_error(py, &run, driven, error, &mut report);
                    break;
                }
            }
        }
        self.finish_step(&mut run, driven, report)
    }

    /// Decides a permission request whose awaitable resolved (`reply` None: abstained, or
    /// cancelled), records it, and queues its answer. `error`: the awaitable raised (or gave
    /// something that is not a reply), which stops the client as a raising callback does.
    #[pyo3(signature = (token, reply, error=None))]
    fn aio_decide(
        &self,
        py: Python<'_>,
        token: u64,
        reply: Option<Bound<'_, PyAny>>,
        error: Option<Bound<'_, PyAny>>,
    ) -> ReportTuple {
        let mut guard = self.aio_guard();
        let driven = &mut *guard;
        let mut run = Run::new(py, self);
        let mut report = Report::default();
        let ask = driven.aio.as_mut().and_then(|aio| {
            aio.told.remove(&token);
            aio.deferred.remove(&token)
        });
        if let Some((ask, session)) = ask {
            if let Some(error) = error.filter(|_| driven.conn.stopped().is_none()) {
                run.failed_session = Some(session);
                let error = run.callback_failed(driven, "on_permission", PyErr::from_value(error));
                self.aio_error(py, &run, driven, error, &mut report);
            } else if driven.conn.stopped().is_none() {
                run.take_cancels(&mut driven.conn);
                match reply.map(|r| crate::host::observer_answer(&r)).transpose() {
                    Ok(reply) => {
                        self.settle_flow(&mut run, driven, ask, reply.flatten(), &mut report);
                    }
                    Err(error) => {
                        run.failed_session = Some(session);
                        let error = run.callback_failed(driven, "on_permission", error);
                        self.aio_error(py, &run, driven, error, &mut report);
                    }
                }
            }
        }
        self.finish_step(&mut run, driven, report)
    }

    /// Gives up on a call whose task was cancelled: a prompt's id is tombstoned; any other
    /// call's too, and the agent is told with `$/cancel_request`.
    fn aio_abandon(&self, py: Python<'_>, call: i64) -> ReportTuple {
        let mut guard = self.aio_guard();
        let driven = &mut *guard;
        let mut run = Run::new(py, self);
        let call = CallId(call);
        driven.conn.cancel_request(call);
        if let Some(aio) = driven.aio.as_mut() {
            if let Some(prepared) = aio.pending.remove(&call) {
                if let Some(session) = prepared.turn_session() {
                    aio.replies.remove(session);
                }
            }
        }
        self.finish_step(&mut run, driven, Report::default())
    }

    /// Sets (or clears) the callback that runs after `on_update` for updates routed to an open
    /// session: the fold and the `updates()` queues. Cleared when nobody needs it, so the
    /// undecoded path makes no extra Python call.
    fn aio_set_fold(&self, fold: Option<Py<PyAny>>) {
        self.aio_guard().callbacks.fold = fold;
    }

    /// Writes what waits for the agent's stdin (it became writable).
    fn aio_write(&self, py: Python<'_>) -> ReportTuple {
        let mut guard = self.aio_guard();
        let driven = &mut *guard;
        let mut run = Run::new(py, self);
        self.finish_step(&mut run, driven, Report::default())
    }

    fn aio_begin_initialize(&self, py: Python<'_>) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::Initialize))
    }

    #[pyo3(signature = (cwd, mcp_servers, additional_directories))]
    fn aio_begin_new_session(
        &self,
        py: Python<'_>,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
    ) -> PyResult<i64> {
        let call = Prepared::new_session(cwd, mcp_servers, additional_directories)?;
        self.begin(py, call)
    }

    #[pyo3(signature = (session_id, cwd, mcp_servers, additional_directories, resume))]
    fn aio_begin_load_session(
        &self,
        py: Python<'_>,
        session_id: String,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
        resume: bool,
    ) -> PyResult<i64> {
        let call =
            Prepared::load_session(session_id, cwd, mcp_servers, additional_directories, resume)?;
        self.begin(py, call)
    }

    #[pyo3(signature = (cwd=None))]
    fn aio_begin_list_sessions(&self, py: Python<'_>, cwd: Option<String>) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::ListSessions(cwd)))
    }

    fn aio_begin_delete_session(&self, py: Python<'_>, session_id: String) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::DeleteSession(session_id)))
    }

    fn aio_begin_authenticate(&self, py: Python<'_>, method_id: String) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::Authenticate(method_id)))
    }

    fn aio_begin_logout(&self, py: Python<'_>) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::Logout))
    }

    fn aio_begin_set_mode(
        &self,
        py: Python<'_>,
        session_id: String,
        mode_id: String,
    ) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::SetMode(session_id, mode_id)))
    }

    fn aio_begin_set_model(
        &self,
        py: Python<'_>,
        session_id: String,
        model_id: String,
    ) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::SetModel(session_id, model_id)))
    }

    fn aio_begin_set_config_option(
        &self,
        py: Python<'_>,
        session_id: String,
        config_id: String,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        let call = Prepared::set_config_option(session_id, config_id, value)?;
        self.begin(py, call)
    }

    fn aio_begin_close_session(&self, py: Python<'_>, session_id: String) -> PyResult<i64> {
        self.begin(py, Prepared(Owned::CloseSession(session_id)))
    }

    #[pyo3(signature = (session_id, blocks, timeout=None, gated=true, meta=Vec::new()))]
    fn aio_begin_prompt(
        &self,
        py: Python<'_>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
        timeout: Option<f64>,
        gated: bool,
        meta: Vec<(String, String)>,
    ) -> PyResult<i64> {
        let call = Prepared::prompt(py, session_id, blocks, timeout, gated, meta)?;
        self.begin(py, call)
    }
}

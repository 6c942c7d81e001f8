//! The asyncio driver's entry points: the same pump as the blocking calls (`acp_client`), stepped
//! by `acp_fast._async` from the event loop's readiness callbacks. A call is started
//! (`Prepared.begin()` gives its id) and completed later by a step that handles what the agent
//! sent; the loop never waits inside the core.
//!
//! Every step returns a `Report`: what finished, what the loop must wait on or arrange, and
//! when the next timer is due.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use acp_client::call::Call;
use acp_client::controls::lock;
use acp_client::inflight::{Failure, InFlight, Settled};
use acp_client::{Error, Pump, Reads, Stop};
use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::{AskId, Outcome};

use crate::client::CoreClient;
use crate::edge::PyEdge;
use crate::errors::CallError;
use crate::prepared::Prepared;
use crate::reply::{Replies, ReplyBuilder};
use crate::state::{Aio, Locked};

type Done = (i64, bool, Py<PyAny>);

/// What a step of the asyncio driver asks of the event loop.
#[pyclass(module = "acp_fast._core", frozen, get_all)]
#[derive(Default)]
pub struct Report {
    /// Finished calls: `(id, ok, value or exception)`.
    done: Vec<Done>,
    /// Permission requests whose observer returned an awaitable: `(token, awaitable)`.
    asks: Vec<(u64, Py<PyAny>)>,
    /// Tokens of awaited permission requests whose session began cancelling (or stopped).
    cancelled: Vec<u64>,
    /// Lines are left buffered: step again soon (fairness between clients).
    more: bool,
    /// Bytes wait for the agent's stdin: watch it for writability.
    write: bool,
    /// An `updates()` queue is full: stop watching stdout until it drains.
    paused: bool,
    /// The agent's output has ended (or reading stopped): stop watching stdout.
    ended: bool,
    /// The client stopped (a callback raised): only `close()` is accepted.
    stopped: bool,
    /// The agent is not taking its stdin (`Connection::backlogged`): stop watching stdout
    /// until the queued lines are written, so answers to what it keeps sending cannot pile up.
    backlog: bool,
    /// Seconds to the next timer, if any.
    timeout: Option<f64>,
}

/// One pass over the locked state: the pump, its edge and the calls in flight.
struct Pass<'c, 'py, 'a> {
    client: &'c CoreClient,
    py: Python<'py>,
    pump: &'a mut Pump,
    edge: PyEdge<'py, 'a>,
    aio: Option<&'a mut Aio>,
    report: Report,
}

impl<'c, 'py, 'a> Pass<'c, 'py, 'a>
where
    'c: 'a,
{
    fn new(client: &'c CoreClient, py: Python<'py>, locked: &'a mut Locked) -> Self {
        let Locked {
            pump,
            callbacks,
            replies,
            aio,
        } = locked;
        Pass {
            client,
            py,
            pump,
            edge: client.edge(py, callbacks, replies),
            aio: aio.as_mut(),
            report: Report::default(),
        }
    }

    fn replies(&mut self) -> &mut Replies {
        self.edge.replies()
    }

    /// Completes a call with its outcome (unless it was `start()`'s step that has a next).
    fn complete(&mut self, call: CallId, outcome: Result<Outcome, AcpError>) {
        let conn = &mut self.pump.conn;
        let Some(settled) = self
            .aio
            .as_mut()
            .and_then(|aio| aio.calls.complete(conn, call, outcome))
        else {
            return;
        };
        let Settled {
            reported,
            call,
            result,
        } = settled;
        let reply = call
            .turn_session()
            .and_then(|s| self.replies().remove(s))
            .unwrap_or_default();
        let call = Prepared(call);
        let entry = match call.value(self.py, reply, result.map(Some)) {
            Ok(value) => (reported.0, true, value),
            Err(error) => (reported.0, false, self.exception(&call, error)),
        };
        self.report.done.push(entry);
    }

    /// A call's failure as its caller sees it: `start()`'s steps fail to connect.
    fn exception(&mut self, call: &Call, error: CallError) -> Py<PyAny> {
        let error = if call.handshake() {
            self.client
                .connect_error(self.py, &mut self.pump.conn, error)
        } else {
            self.client.call_error(self.py, error)
        };
        error.into_value(self.py).into_any()
    }

    /// Reports a call an error failed.
    fn failed(&mut self, failed: Settled<Failure<PyErr>>) {
        let Settled {
            reported,
            call,
            result,
        } = failed;
        if let Some(session) = call.turn_session() {
            self.replies().remove(session);
        }
        let error = match result {
            Failure::Error(error) => CallError::from(error),
            Failure::Stopped(reason) => {
                CallError::Python(self.client.stopped_error(self.py, &reason))
            }
        };
        let error = self.exception(&call, error);
        self.report.done.push((reported.0, false, error));
    }

    /// An error while handling: the calls it fails (`InFlight::route` says which, with what)
    /// are reported; with no call to take it, the next call raises it. Whether the pass should
    /// end.
    fn error(&mut self, error: Error<PyErr>) -> bool {
        let mut idle = InFlight::default(); // not attached: no call waits
        let calls = self.aio.as_mut().map_or(&mut idle, |aio| &mut aio.calls);
        let routed = calls.route(self.pump, error);
        self.report.ended |= routed.ended;
        self.report.stopped |= routed.stopped;
        let cancelled = routed.cancelled.iter().map(|ask| ask.0);
        self.report.cancelled.extend(cancelled);
        for failed in routed.failed {
            self.failed(failed);
        }
        if let Some(error) = routed.next {
            let error = self.client.call_error(self.py, error.into());
            if let Some(aio) = self.aio.as_mut() {
                aio.next_error = Some(error);
            }
        }
        routed.end_step
    }

    /// Steps the pump with `budget` events, completing calls as they finish.
    fn pump(&mut self, mut budget: usize) {
        loop {
            match self.pump.step(&mut self.edge, &mut budget, Reads::Once) {
                Ok(Stop::NeedInput) => break,
                Ok(Stop::Budget) => {
                    self.report.more = true;
                    break;
                }
                Ok(Stop::Paused) => {
                    self.report.paused = true;
                    break;
                }
                Ok(Stop::Done(call, outcome)) => self.complete(call, outcome),
                Ok(Stop::Deferred(ask, awaitable)) => self.report.asks.push((ask.0, awaitable)),
                Err(error) => {
                    if self.error(error) {
                        break;
                    }
                }
            }
        }
    }

    /// Writes what is queued (never waiting) and fills in what the loop must arrange.
    fn finish(mut self) -> Report {
        if self.pump.pipes.is_some() && self.pump.conn.stopped().is_none() {
            match self.pump.write(&mut self.edge, false) {
                Ok(true) => {}
                Ok(false) => self.report.write = true,
                Err(error) => {
                    self.error(error);
                }
            }
        }
        let mut report = self.report;
        let pump = self.pump;
        if pump.conn.backlogged() {
            report.backlog = true;
        }
        report
            .cancelled
            .extend(pump.newly_cancelled().into_iter().map(|ask| ask.0));
        report.ended |= pump.reading_ended();
        report.stopped |= pump.conn.stopped().is_some();
        report.timeout = pump.next_timer_secs();
        report
    }
}

impl CoreClient {
    /// Starts a call under the asyncio driver: its id, whose completion a later step reports
    /// (-1: it finished at once).
    pub(crate) fn begin(&self, py: Python<'_>, call: Prepared) -> PyResult<i64> {
        let mut guard = self.enter(py)?;
        let Locked {
            pump, replies, aio, ..
        } = &mut *guard;
        let Some(aio) = aio.as_mut() else {
            return Err(PyRuntimeError::new_err(
                "this client is not driven by an event loop",
            ));
        };
        if let Some(error) = aio.next_error.take() {
            return Err(error);
        }
        let started = aio
            .calls
            .begin(pump, call.0)
            .map_err(|e| self.call_error(py, e.into()))?;
        let Some((id, call)) = started else {
            return Ok(-1); // finished at once
        };
        if let Some(session) = call.turn_session() {
            replies.insert(session.to_owned(), ReplyBuilder::default());
        }
        Ok(id.0)
    }
}

#[pymethods]
impl CoreClient {
    /// Hands the client to an event loop: `(stdout, stdin, waker, exit)` fds to watch (stdin
    /// -1 once closed; exit a pidfd, -1 where there is none). From now on no call blocks.
    fn aio_attach(&self) -> PyResult<(i32, i32, i32, i32)> {
        let mut locked = lock(&self.call);
        let Some(pipes) = locked.pump.pipes.as_ref() else {
            return Err(PyRuntimeError::new_err(acp_client::pump::CLOSED));
        };
        let (stdout, stdin) = pipes.raw_fds();
        let controls = &self.shared.controls;
        let waker = lock(&controls.waker).as_ref().map(|w| w.fd()).unwrap_or(-1);
        controls.asynchronous.store(true, Ordering::SeqCst);
        let exit_fd = acp_os::io::pidfd(self.pid).ok();
        let exit = exit_fd.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        locked.aio.get_or_insert_with(Aio::default).exit_fd = exit_fd;
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
    fn aio_pump(&self, py: Python<'_>, budget: usize, woken: bool, exited: bool) -> Report {
        let mut guard = lock(&self.call);
        let locked = &mut *guard;
        if woken {
            self.shared.controls.drain_waker();
        }
        if exited {
            locked.pump.exited = true;
            if let Some(aio) = locked.aio.as_mut() {
                aio.exit_fd = None;
            }
        }
        let idle = locked.aio.is_none()
            || locked.pump.pipes.is_none()
            || locked.pump.conn.stopped().is_some();
        let mut pass = Pass::new(self, py, locked);
        if !idle {
            pass.pump(budget);
        }
        pass.finish()
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
    ) -> Report {
        let mut guard = lock(&self.call);
        let mut pass = Pass::new(self, py, &mut guard);
        let ask = AskId(token);
        if pass.pump.conn.is_elicitation(ask) {
            if pass.pump.is_deferred(ask) && pass.pump.conn.stopped().is_none() {
                let settled =
                    crate::elicitation::settle(pass.pump, &mut pass.edge, ask, reply, error);
                if let Err(error) = settled {
                    pass.error(error);
                }
            }
            return pass.finish();
        }
        let answer = || match error {
            Some(error) => Err(PyErr::from_value(error)),
            None => reply
                .map(|r| crate::policy::observer_answer(&r))
                .transpose()
                .map(Option::flatten),
        };
        if let Err(error) = pass.pump.settle(&mut pass.edge, ask, answer) {
            pass.error(error);
        }
        pass.finish()
    }

    /// Gives up on a call whose task was cancelled: a prompt's id is tombstoned; any other
    /// call's too, and the agent is told with `$/cancel_request`.
    fn aio_abandon(&self, py: Python<'_>, call: i64) -> Report {
        let mut guard = lock(&self.call);
        let mut pass = Pass::new(self, py, &mut guard);
        let conn = &mut pass.pump.conn;
        let abandoned = pass
            .aio
            .as_mut()
            .and_then(|aio| aio.calls.abandon(conn, CallId(call)));
        if let Some(session) = abandoned.as_ref().and_then(|call| call.turn_session()) {
            pass.replies().remove(session);
        }
        pass.finish()
    }

    /// Sets (or clears) the callback that runs after `on_update` for updates routed to an open
    /// session: the fold and the `updates()` queues. Cleared when nobody needs it, so the
    /// undecoded path makes no extra Python call.
    fn aio_set_fold(&self, fold: Option<Py<PyAny>>) {
        lock(&self.call).callbacks.fold = fold;
    }

    /// Writes what waits for the agent's stdin (it became writable).
    fn aio_write(&self, py: Python<'_>) -> Report {
        let mut guard = lock(&self.call);
        Pass::new(self, py, &mut guard).finish()
    }
}

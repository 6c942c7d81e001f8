//! The one driver loop, for both clients: stops → cancels → terminal waits → timers → next
//! event → dispatch, then what the event queued is written. `step` is bounded and never waits
//! (an event loop calls it from its readiness callbacks); `run_until` is the blocking driver:
//! `step` plus a waiting write and a waiting read, until a call finishes or a deadline passes.
//! No protocol rule lives here: the `Connection` decides, the `Edge` records.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_os::io::{ReadOutcome, Transport, WriteOutcome};
use acp_os::process::{PipeTransport, Room};
use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::permission::{missing_commit, ObserverAnswer};
use acp_proto::{AskId, Connection, Event, Outcome};

use crate::controls::Controls;
use crate::edge::{Asked, Edge, Error, Fail};
use crate::host::{self, Host, HostFailure, HostRequest};

mod elicit;

/// Whether `step` reads when no complete line is buffered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// Never: the caller reads (the blocking driver waits in its read).
    None,
    /// One non-blocking read per step (more once the agent has exited): an event loop said
    /// the pipe is readable.
    Once,
}

/// Why a step returned without an error.
#[derive(Debug)]
pub enum Stop<D> {
    /// No complete line is buffered (and the step's read, if any, is made).
    NeedInput,
    /// The budget is spent; lines may be left buffered (schedule another step soon).
    Budget,
    /// The edge asked reading to pause (a full queue).
    Paused,
    /// A call finished.
    Done(CallId, Result<Outcome, AcpError>),
    /// A permission request waits on what the edge deferred it to; `Pump::decide` settles it.
    Deferred(AskId, D),
}

/// What handling one event left to do.
enum Flow {
    NeedInput,
    Handled { pause: bool },
    Done(CallId, Result<Outcome, AcpError>),
    Permission(AskId, bool),
    Elicitation(AskId),
    Host(Box<HostRequest>),
}

/// The state behind a client's call lock: the connection, the pipes and the host state, and
/// what a step leaves for the next (deferred permission requests, why the client stopped).
pub struct Pump {
    pub conn: Connection,
    /// `None` once the client is closed.
    pub pipes: Option<PipeTransport>,
    /// Files and terminals served for the agent.
    pub host: Host,
    controls: Arc<Controls>,
    /// Permission requests waiting on a deferred answer, and whether their cancel was told.
    deferred: Vec<(AskId, bool)>,
    /// The agent has exited: an empty pipe means its output has ended (a process it started
    /// may hold the pipe open forever).
    pub exited: bool,
    /// The session of the message whose callback stopped the client, if it had one.
    pub failed_session: Option<String>,
}

impl Pump {
    pub fn new(
        conn: Connection,
        pipes: Option<PipeTransport>,
        host: Host,
        controls: Arc<Controls>,
    ) -> Pump {
        Pump {
            conn,
            pipes,
            host,
            controls,
            deferred: Vec::new(),
            exited: false,
            failed_session: None,
        }
    }

    pub fn controls(&self) -> &Arc<Controls> {
        &self.controls
    }

    /// Seconds from now to the connection's next timer, if any (an event loop's wait).
    pub fn next_timer_secs(&self) -> Option<f64> {
        let now = self.controls.now_ms();
        self.conn
            .poll_timeout()
            .map(|deadline| deadline.saturating_sub(now) as f64 / 1000.0)
    }

    /// Whether nothing more will be read: the output ended, or the pipes are gone (closed).
    pub fn reading_ended(&self) -> bool {
        self.conn.output_ended() || self.pipes.is_none()
    }

    /// Passes the clock in before a call is queued (its timeout counts from now).
    pub fn set_now(&mut self) {
        self.conn.set_now(self.controls.now_ms());
    }

    /// Handles up to `budget` events (the budget is decremented per event); never waits.
    pub fn step<E: Edge>(
        &mut self,
        edge: &mut E,
        budget: &mut usize,
        reads: Reads,
    ) -> Result<Stop<E::Deferred>, Error<E::Error>> {
        let mut read = false;
        loop {
            self.controls.check_stops().map_err(Error::Halted)?;
            self.controls.take_cancels(&mut self.conn);
            self.controls.take_steers(&mut self.conn);
            if self.host.exits_pending() {
                // A terminal exited or a long read finished: answer the waits for it.
                if let Err(failure) = host::answer_waits(edge, &mut self.conn, &mut self.host) {
                    return Err(self.host_failure(edge, failure));
                }
            }
            // Only calls with a timeout have deadlines; most lines read no clock.
            if self.conn.poll_timeout().is_some() {
                self.conn.handle_timeout(self.controls.now_ms());
            }
            if *budget == 0 {
                return Ok(Stop::Budget);
            }
            let stop = match self.next(edge)? {
                Flow::NeedInput => {
                    let done = reads == Reads::None
                        || self.conn.output_ended()
                        || (read && !self.exited)
                        || self.conn.backlogged();
                    if done {
                        return Ok(Stop::NeedInput);
                    }
                    read = true;
                    if !self.read_now(edge)? {
                        return Ok(Stop::NeedInput);
                    }
                    continue;
                }
                Flow::Handled { pause } => pause.then_some(Stop::Paused),
                Flow::Done(call, outcome) => Some(Stop::Done(call, outcome)),
                Flow::Host(request) => {
                    if let Err(failure) =
                        host::serve(edge, &mut self.conn, &mut self.host, *request)
                    {
                        return Err(self.host_failure(edge, failure));
                    }
                    None
                }
                Flow::Permission(ask, cancelled) => self.permission(edge, ask, cancelled)?,
                Flow::Elicitation(ask) => self.elicitation(edge, ask)?,
            };
            *budget -= 1;
            // Answers leave as they are decided, not at the end of a long step.
            if self.conn.poll_transmit().is_some() && self.conn.stopped().is_none() {
                self.write(edge, false)?;
            }
            if let Some(stop) = stop {
                return Ok(stop);
            }
        }
    }

    /// The blocking driver: runs until `call` finishes (or, with `call` None, until `until`
    /// passes), handling every event in arrival order. `Ok(None)`: the deadline passed or the
    /// output ended first (the call is abandoned: a late answer is dropped).
    pub fn run_until<E: Edge>(
        &mut self,
        edge: &mut E,
        call: Option<CallId>,
        until: Option<Instant>,
    ) -> Result<Option<Outcome>, Error<E::Error>> {
        let result = self.run_inner(edge, call, until);
        if result.is_err() || matches!(result, Ok(None)) {
            if let Some(call) = call {
                self.conn.abandon(call);
            }
        }
        result
    }

    fn run_inner<E: Edge>(
        &mut self,
        edge: &mut E,
        call: Option<CallId>,
        until: Option<Instant>,
    ) -> Result<Option<Outcome>, Error<E::Error>> {
        loop {
            // What is queued is written first (waiting for room, reading on meanwhile): an
            // agent gone before the request is written fails the write, not a later read.
            if self.conn.poll_transmit().is_some() {
                self.write(edge, true)?;
            }
            let mut budget = usize::MAX;
            match self.step(edge, &mut budget, Reads::None)? {
                Stop::Done(done, outcome) if Some(done) == call => {
                    return outcome.map(Some).map_err(Error::Acp)
                }
                Stop::Deferred(..) => {
                    return Err(Error::Acp(AcpError::Misuse(
                        "a blocking call cannot wait on a deferred permission answer".into(),
                    )))
                }
                Stop::Done(done, outcome) => {
                    // Another thread's steering request into this turn.
                    self.controls.steer_done(done, &outcome);
                    continue;
                }
                Stop::Budget | Stop::Paused => continue,
                Stop::NeedInput => {}
            }
            if self.conn.poll_transmit().is_some() {
                continue; // the agent wrote meanwhile, or a deadline passed: handle it first
            }
            if (call.is_none() && until.is_none()) || self.conn.output_ended() {
                return Ok(None);
            }
            // Past `until` (drain, the start() timeout): one last look at what is already
            // readable, without waiting, then return.
            if until.is_some_and(|t| Instant::now() >= t) {
                if !self.read_now(edge)? {
                    return Ok(None);
                }
                continue;
            }
            self.read_wait(edge, until)?;
        }
    }

    /// Takes the next event and handles what needs no decision of the caller's: an update
    /// (edge, published state, fold) or another line (the edge's `received`).
    fn next<E: Edge>(&mut self, edge: &mut E) -> Result<Flow, Error<E::Error>> {
        let (tapped, flow) = match self.conn.poll_event() {
            Err(error) => return Err(error.into()),
            Ok(None) => return Ok(Flow::NeedInput),
            // By reference: the event stays where the Connection built it.
            Ok(Some(Event::Update {
                ref update,
                joined,
                routed,
            })) => match edge.update(update, joined, routed) {
                Ok(fold) => {
                    let publish = update.kind.publishes();
                    if !(publish || fold) {
                        return Ok(Flow::Handled { pause: false });
                    }
                    let session = update.session_id.to_string();
                    return self.after_update(edge, session, publish, fold);
                }
                Err(fail) => {
                    self.failed_session = Some(update.session_id.to_string());
                    return Err(self.fail(edge, fail));
                }
            },
            Ok(Some(Event::Permission { ask, cancelled })) => {
                return Ok(Flow::Permission(ask, cancelled))
            }
            Ok(Some(Event::Done {
                call,
                outcome,
                line,
            })) => (tap(edge, line), Flow::Done(call, outcome)),
            Ok(Some(Event::Host {
                host,
                method,
                session_id,
                op,
                line,
            })) => (
                tap(edge, line),
                Flow::Host(Box::new((host, method, session_id, op))),
            ),
            Ok(Some(Event::Other { line })) => (tap(edge, line), Flow::Handled { pause: false }),
            Ok(Some(Event::Elicitation { ask, line })) => (tap(edge, line), Flow::Elicitation(ask)),
        };
        match tapped {
            Ok(()) => Ok(flow),
            Err(error) => Err(self.fail(edge, Fail::Callback("on_received", error))),
        }
    }

    fn after_update<E: Edge>(
        &mut self,
        edge: &mut E,
        session: String,
        publish: bool,
        fold: bool,
    ) -> Result<Flow, Error<E::Error>> {
        match edge.after_update(&self.conn, &session, publish, fold) {
            Ok(pause) => Ok(Flow::Handled { pause }),
            Err(fail) => {
                self.failed_session = Some(session);
                Err(self.fail(edge, fail))
            }
        }
    }

    /// A permission request: the edge is asked (unless it is decided already), then the
    /// decision is committed and answered, or the step stops at a deferred answer.
    fn permission<E: Edge>(
        &mut self,
        edge: &mut E,
        ask: AskId,
        cancelled: bool,
    ) -> Result<Option<Stop<E::Deferred>>, Error<E::Error>> {
        if cancelled {
            self.decide(edge, ask, None)?;
            return Ok(None);
        }
        match edge.ask(&self.conn, ask) {
            Ok(Asked::Reply(reply)) => {
                self.look_ahead(edge, ask);
                self.decide(edge, ask, reply)?;
                Ok(None)
            }
            Ok(Asked::NotAsked) => {
                self.decide(edge, ask, None)?;
                Ok(None)
            }
            Ok(Asked::Deferred(deferred)) => {
                self.deferred.push((ask, false));
                Ok(Some(Stop::Deferred(ask, deferred)))
            }
            Err(fail) => {
                self.failed_session = self.conn.ask_session(ask).map(str::to_owned);
                Err(self.fail(edge, fail))
            }
        }
    }

    /// Nothing was read while a synchronous `ask` ran: read what the agent sent meanwhile
    /// (never waiting; nothing is handled) and see whether it withdrew the request.
    fn look_ahead<E: Edge>(&mut self, edge: &mut E, ask: AskId) {
        if let Some(pipes) = self
            .pipes
            .as_mut()
            .filter(|_| self.conn.room_to_look_ahead())
        {
            let buf = self.conn.read_buf();
            if !buf.is_empty() {
                // The end of input or an error is seen again by the loop's next read.
                if let Ok(ReadOutcome::Data(count)) = pipes.read_now(buf) {
                    self.conn.received(count);
                    edge.bytes_read(count);
                }
            }
        }
        self.conn.withdrawn_ahead(ask);
    }

    /// Decides a request (cancel latch, the reply, the policy), has the edge commit it, then
    /// queues the answer: commit before answer. Also settles a deferred request
    /// (`reply` None: abstained, or cancelled).
    pub fn decide<E: Edge>(
        &mut self,
        edge: &mut E,
        ask: AskId,
        reply: Option<ObserverAnswer>,
    ) -> Result<(), Error<E::Error>> {
        self.deferred.retain(|(a, _)| *a != ask);
        // A cancel() from inside the observer replaces its reply.
        self.controls.take_cancels(&mut self.conn);
        let decided = self.conn.decide(ask, reply)?;
        let committed = match edge.commit(&decided.record) {
            Ok(true) => Ok(()),
            Ok(false) if !edge.durable() => Ok(()),
            Ok(false) => Err(Fail::Missing(missing_commit(&decided.record))),
            Err(fail) => Err(fail),
        };
        if let Err(fail) = committed {
            // Dropping `decided` writes nothing: the decision was not recorded.
            self.failed_session = Some(decided.record.session_id.clone());
            return Err(self.fail(edge, fail));
        }
        self.conn.send(decided);
        Ok(())
    }

    /// What a deferred request waited on gave its answer (`answer` reads it: a reply, `None`
    /// to abstain, or the error it raised): decided as by `decide`; an error (it raised, or
    /// gave something that is not an answer) stops the client as a failing callback does.
    /// Nothing happens once the request no longer waits (settled, or the client stopped).
    pub fn settle<E: Edge>(
        &mut self,
        edge: &mut E,
        ask: AskId,
        answer: impl FnOnce() -> Result<Option<ObserverAnswer>, E::Error>,
    ) -> Result<(), Error<E::Error>> {
        if !self.is_deferred(ask) || self.conn.stopped().is_some() {
            return Ok(());
        }
        match answer() {
            Ok(reply) => self.decide(edge, ask, reply),
            Err(error) => {
                self.failed_session = self.conn.ask_session(ask).map(str::to_owned);
                self.deferred.retain(|(a, _)| *a != ask);
                Err(self.fail(edge, Fail::Callback("on_permission", error)))
            }
        }
    }

    /// Whether `ask` waits on a deferred answer.
    pub fn is_deferred(&self, ask: AskId) -> bool {
        self.deferred.iter().any(|(a, _)| *a == ask)
    }

    /// Deferred requests whose session began cancelling since the last look (each told once).
    pub fn newly_cancelled(&mut self) -> Vec<AskId> {
        let conn = &self.conn;
        let mut cancelled = Vec::new();
        for (ask, told) in &mut self.deferred {
            if !*told && conn.ask_cancelled(*ask) {
                *told = true;
                cancelled.push(*ask);
            }
        }
        cancelled
    }

    /// Forgets every deferred request (the client stopped); their asks.
    pub fn take_deferred(&mut self) -> Vec<AskId> {
        std::mem::take(&mut self.deferred)
            .into_iter()
            .map(|(ask, _)| ask)
            .collect()
    }

    /// Stops the client after a callback failed (or the observer lacks one).
    fn fail<E: Edge>(&mut self, edge: &mut E, fail: Fail<E::Error>) -> Error<E::Error> {
        match fail {
            Fail::Callback(callback, error) => {
                let reason = edge.stop_reason(callback, &error);
                self.conn.stop(reason);
                Error::Edge(error)
            }
            Fail::Missing(error) => {
                self.conn.stop(format!(
                    "the client stopped after {}; only close() is accepted (and request_cancel())",
                    error.description()
                ));
                Error::Edge(edge.missing(error))
            }
            Fail::Other(error) => Error::Edge(error),
        }
    }

    fn host_failure<E: Edge>(
        &mut self,
        edge: &mut E,
        failure: HostFailure<E::Error>,
    ) -> Error<E::Error> {
        match failure {
            HostFailure::Activity(error) => self.fail(edge, Fail::Callback("on_activity", error)),
            HostFailure::Call(error) => Error::Acp(error),
        }
    }

    /// Writes queued lines in order (each shown to the edge's `sent` once, first); with `wait`
    /// false, stops at a full pipe instead of waiting. Whether everything was written.
    pub fn write<E: Edge>(&mut self, edge: &mut E, wait: bool) -> Result<bool, Error<E::Error>> {
        loop {
            let Some((bytes, fresh)) = self.conn.poll_transmit() else {
                return Ok(true);
            };
            if fresh {
                let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
                if let Err(error) = edge.sent(line) {
                    return Err(self.fail(edge, Fail::Callback("on_sent", error)));
                }
                // Once per line, however many writes a full pipe makes it take.
                self.conn.announce_transmit();
                continue;
            }
            // A pipe with room takes the line at once: no need to detach for it.
            let first = match self.pipes.as_mut() {
                Some(pipes) => pipes.try_write(bytes),
                None => return Err(AcpError::Misuse(CLOSED.into()).into()),
            };
            let mut readable = false;
            let written = match first {
                Ok(WriteOutcome::Idle) if !wait => return Ok(false),
                Ok(WriteOutcome::Idle) => {
                    // While the agent's stdin is full its output is read on (bounded: not
                    // while backlogged), or an agent that writes before it reads deadlocks
                    // with us.
                    let read_too = !self.conn.backlogged()
                        && !self.conn.output_ended()
                        && !self.conn.read_buf().is_empty();
                    let (Some((bytes, _)), Some(pipes)) =
                        (self.conn.poll_transmit(), self.pipes.as_mut())
                    else {
                        return Ok(true);
                    };
                    let waited = {
                        let pipes = &*pipes;
                        edge.detach(|| pipes.wait_room(read_too))
                    };
                    match waited {
                        Ok(Room::Writable) => pipes.try_write(bytes),
                        Ok(Room::Readable) => {
                            readable = true;
                            Ok(WriteOutcome::Idle)
                        }
                        Ok(Room::Idle) => Ok(WriteOutcome::Idle),
                        Err(e) => Err(e),
                    }
                }
                other => other,
            };
            if readable {
                // Take what the agent wrote; the loop handles it, then writes on.
                self.check_signals(edge)?;
                self.read_now(edge)?;
                return Ok(false);
            }
            match written {
                Ok(WriteOutcome::Wrote(count)) => {
                    if let Some(pipes) = self.pipes.as_mut() {
                        pipes.expect_answer();
                    }
                    self.conn.transmitted(count);
                }
                Ok(WriteOutcome::Idle) => {
                    self.check_signals(edge)?;
                    // The agent is not taking its stdin (it may be blocked writing to us): a
                    // call's deadline still passes, and the loop goes on to act on it.
                    if self
                        .conn
                        .poll_timeout()
                        .is_some_and(|at| at <= self.controls.now_ms())
                    {
                        return Ok(false);
                    }
                }
                Err(e) => {
                    self.conn.discard_transmit();
                    let text = if e.kind() == std::io::ErrorKind::BrokenPipe {
                        "its stdin is closed (the agent has exited or closed it)".to_owned()
                    } else {
                        e.to_string()
                    };
                    return Err(AcpError::AgentTransportFailed(format!(
                        "could not send a message to the agent: {text}"
                    ))
                    .into());
                }
            }
        }
    }

    /// One non-blocking read; whether anything came. Once the agent has exited, an empty pipe
    /// means its output has ended.
    pub fn read_now<E: Edge>(&mut self, edge: &mut E) -> Result<bool, Error<E::Error>> {
        let Some(pipes) = self.pipes.as_mut() else {
            return Ok(false);
        };
        let buf = self.conn.read_buf();
        if buf.is_empty() {
            return Ok(false);
        }
        match pipes.read_now(buf) {
            Ok(ReadOutcome::Data(count)) => {
                self.conn.received(count);
                edge.bytes_read(count);
            }
            Ok(ReadOutcome::Eof) => self.conn.input_ended(),
            Ok(_) => {
                if !(self.exited && pipes.agent_exited()) {
                    return Ok(false);
                }
                self.conn.input_ended();
            }
            Err(e) => return Err(read_failed(e).into()),
        }
        Ok(true)
    }

    /// One read that waits (detached) for the agent's output, the waker, room for queued
    /// lines, the next timer or `until` (at most 100 ms, so signals are seen), then the
    /// signal check.
    fn read_wait<E: Edge>(
        &mut self,
        edge: &mut E,
        until: Option<Instant>,
    ) -> Result<(), Error<E::Error>> {
        let mut wait = Duration::from_millis(100);
        if let Some(deadline) = self.conn.poll_timeout() {
            wait = wait.min(Duration::from_millis(
                deadline.saturating_sub(self.controls.now_ms()),
            ));
        }
        if let Some(until) = until {
            wait = wait.min(until.saturating_duration_since(Instant::now()));
        }
        let Some(pipes) = self.pipes.as_mut() else {
            return Err(AcpError::Misuse(CLOSED.into()).into());
        };
        pipes.set_wait(wait);
        pipes.set_write_pending(self.conn.queued_bytes() > 0);
        let conn = &mut self.conn;
        let outcome = edge.detach(|| {
            let buf = conn.read_buf();
            if buf.is_empty() {
                return Ok(ReadOutcome::Idle);
            }
            pipes.read(buf)
        });
        match outcome {
            Ok(ReadOutcome::Data(count)) => {
                self.conn.received(count);
                edge.bytes_read(count);
            }
            Ok(ReadOutcome::Eof) => self.conn.input_ended(),
            Ok(ReadOutcome::Idle) => {}
            Ok(ReadOutcome::Woken) => self.controls.drain_waker(),
            Err(e) => return Err(read_failed(e).into()),
        }
        self.check_signals(edge)
    }

    /// The edge's signal check (a raising handler stops the client), then the stops another
    /// thread requested.
    fn check_signals<E: Edge>(&mut self, edge: &mut E) -> Result<(), Error<E::Error>> {
        if let Err(error) = edge.check_signals() {
            return Err(self.fail(edge, Fail::Callback("a signal handler", error)));
        }
        self.controls.check_stops().map_err(Error::Halted)
    }
}

/// A line that is neither an update nor a permission request, to the edge (not a timer's empty
/// line).
fn tap<E: Edge>(edge: &mut E, line: &str) -> Result<(), E::Error> {
    if line.is_empty() {
        return Ok(());
    }
    edge.received(line)
}

/// The one text of a call on a closed client (`Error::Acp(AcpError::Misuse)`).
pub const CLOSED: &str = "the client is closed: close() was called; make a new client";

fn read_failed(error: std::io::Error) -> AcpError {
    AcpError::AgentTransportFailed(format!("reading the agent's stdout failed: {error}"))
}

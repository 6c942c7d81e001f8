//! The blocking driver: a short loop over the `Connection`. It writes what the connection
//! queued, hands events to the observer's callbacks, reads with the GIL released (poll(2) on
//! the agent's stdout and the waker), and passes time in. No protocol rule lives here.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyString;

use acp_os::io::{ReadOutcome, Transport, WriteOutcome};
use acp_os::process::{PipeTransport, Room};
use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::permission::ObserverAnswer;
use acp_proto::update::{UpdateEvent, UpdateKind};
use acp_proto::{AskId, Connection, Event, Outcome};

use crate::client::{CoreClient, Shared};
use crate::errors::{kind_names, CallError};
use crate::host::{HostFailure, HostRequest};
use crate::journal::{Envelope, Hook, UpdateRecord};
use crate::reply::{text_object, ReplyBuilder};
use crate::update::Update;

/// The observer's callbacks (each optional).
#[derive(Default)]
pub(crate) struct Callbacks {
    pub on_update: Option<Py<PyAny>>,
    /// The journal `on_update` belonged to (`on_update` is then the observer it wraps): each
    /// update is recorded into it without a Python call, before `on_update`.
    pub journal: Option<Hook>,
    pub permission_preview: Option<Py<PyAny>>,
    pub permission_commit: Option<Py<PyAny>>,
    /// Every line the client writes, before it is written (journals).
    pub on_sent: Option<Py<PyAny>>,
    /// Every line the agent sent that is neither an update nor a permission request.
    pub on_received: Option<Py<PyAny>>,
    /// The session fold, after the update was admitted (`session_state` on).
    pub fold: Option<Py<PyAny>>,
    /// `observer.on_activity`: one record per host request (design/host.md §4).
    pub on_activity: Option<Py<PyAny>>,
    /// `durable=True`: a missing `on_update` or `on_permission_commit` fails the call
    /// (`MissingDurableObserver`); otherwise what no callback takes is not recorded outside.
    pub durable: bool,
}

impl Callbacks {
    pub fn all(&self) -> impl Iterator<Item = &Py<PyAny>> {
        [
            &self.on_update,
            &self.permission_preview,
            &self.permission_commit,
            &self.on_sent,
            &self.on_received,
            &self.fold,
            &self.on_activity,
        ]
        .into_iter()
        .flatten()
        .chain(self.journal.iter().map(Hook::object))
    }
}

/// What a call owns while it runs: the connection and the pipes, behind the call lock.
pub(crate) struct Driven {
    pub conn: Connection,
    pub pipes: Option<PipeTransport>,
    pub callbacks: Callbacks,
    /// The asyncio driver's state (`None` for a blocking client).
    pub aio: Option<crate::aio::AsyncState>,
    /// Files and terminals served for the agent (host.rs).
    pub host: crate::host::Host,
}

impl Driven {
    /// `count` bytes were read from the agent into the Connection's buffer.
    pub fn received(&mut self, count: usize) {
        self.conn.received(count);
        if let Some(journal) = &self.callbacks.journal {
            journal.read();
        }
    }
}

/// Nothing was read while a synchronous `on_permission` ran: read what the agent sent
/// meanwhile (never waiting; nothing is handled) and see whether it withdrew the request.
fn look_ahead(driven: &mut Driven, ask: AskId) {
    if let Some(pipes) = driven
        .pipes
        .as_mut()
        .filter(|_| driven.conn.room_to_look_ahead())
    {
        let buf = driven.conn.read_buf();
        if !buf.is_empty() {
            // The end of input or an error is seen again by the loop's next read.
            if let Ok(ReadOutcome::Data(count)) = pipes.read_now(buf) {
                driven.received(count);
            }
        }
    }
    driven.conn.withdrawn_ahead(ask);
}

/// Why a call stopped the client: the callback and what it raised.
fn stop_reason(py: Python<'_>, callback: &str, error: &PyErr) -> String {
    let repr = error
        .value(py)
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "an exception".into());
    format!(
        "the client stopped after {callback} raised {repr}; the record of updates has a gap from there, so only close() is accepted (and request_cancel())"
    )
}

/// What handling one event left for the driver to do.
pub(crate) enum Flow {
    /// No complete line is buffered: read more.
    NeedInput,
    /// An update or another line was handled; `pause`: the fold asked the reader to pause
    /// (an asyncio `updates()` queue is full).
    Handled { pause: bool },
    /// A call finished.
    Done(CallId, Result<Outcome, AcpError>),
    /// A permission request: ask the observer (unless `cancelled`), then decide.
    Permission(AskId, bool),
    /// A file or terminal request of the agent's, to serve (host.rs).
    Host(Box<HostRequest>),
}

/// What the observer's `on_permission` gave: a reply (or abstention), or an awaitable the
/// asyncio driver waits on while reading goes on.
pub(crate) enum Asked {
    Reply(Option<ObserverAnswer>),
    Deferred(Py<PyAny>),
}

/// An update handled while the connection was borrowed, finished after. (A value on the
/// stack for one event, so the size difference of its variants costs nothing.)
#[allow(clippy::large_enum_variant)]
enum Handled<'py> {
    Update(Option<Bound<'py, Update>>, Option<String>, Option<String>),
    Flow(Flow),
}

/// A failure that stops the client (a callback raised, the observer lacks one), or another.
enum Fail {
    Callback(&'static str, PyErr),
    Missing(AcpError),
    Other(CallError),
}

impl Fail {
    fn py(error: PyErr) -> Fail {
        Fail::Other(CallError::Python(error))
    }
}

pub(crate) struct Run<'py, 'c> {
    pub py: Python<'py>,
    pub shared: &'c Shared,
    pub client: &'c CoreClient,
    /// The reply of the turn this call runs, built as its chunks are admitted.
    pub reply: ReplyBuilder,
    session_cache: Option<(String, Py<PyString>)>,
    pub delivered: u64,
    /// The session of the message whose callback stopped the client, if it had one.
    pub failed_session: Option<String>,
    /// Driven by an asyncio loop.
    asynchronous: bool,
}

impl<'py, 'c> Run<'py, 'c> {
    pub fn new(py: Python<'py>, client: &'c CoreClient) -> Run<'py, 'c> {
        Run {
            py,
            shared: &client.shared,
            client,
            reply: ReplyBuilder::default(),
            session_cache: None,
            delivered: 0,
            failed_session: None,
            asynchronous: client.shared.asynchronous.load(Ordering::Relaxed),
        }
    }

    fn session_object(&mut self, id: &str) -> Py<PyString> {
        match &self.session_cache {
            Some((text, object)) if text == id => object.clone_ref(self.py),
            _ => {
                let object = PyString::new(self.py, id).unbind();
                self.session_cache = Some((id.to_owned(), object.clone_ref(self.py)));
                object
            }
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.shared.epoch.elapsed().as_millis() as u64
    }

    /// Runs until `call` finishes (or, with `call` None, until `until` passes), handling every
    /// event in arrival order.
    pub fn drive(
        &mut self,
        driven: &mut Driven,
        call: Option<CallId>,
        until: Option<Instant>,
    ) -> Result<Option<Outcome>, CallError> {
        let result = self.drive_inner(driven, call, until);
        if result.is_err() || matches!(result, Ok(None)) {
            if let Some(call) = call {
                driven.conn.abandon(call);
            }
        }
        result
    }

    fn drive_inner(
        &mut self,
        driven: &mut Driven,
        call: Option<CallId>,
        until: Option<Instant>,
    ) -> Result<Option<Outcome>, CallError> {
        loop {
            self.check_stops()?;
            self.take_cancels(&mut driven.conn);
            if driven.host.exits_pending() {
                if let Err(failure) = crate::host::answer_waits(self.py, driven) {
                    return Err(self.host_failure(driven, failure));
                }
            }
            if driven.conn.poll_transmit().is_some() {
                self.flush(driven)?;
            }
            // Only turns with a timeout have deadlines; most lines read no clock.
            if driven.conn.poll_timeout().is_some() {
                driven.conn.handle_timeout(self.now_ms());
            }
            match self.next(driven)? {
                Flow::Handled { .. } => {}
                Flow::Done(done, outcome) => {
                    if Some(done) == call {
                        return outcome.map(Some).map_err(CallError::from);
                    }
                }
                Flow::Host(request) => {
                    if let Err(failure) = crate::host::serve(self.py, driven, *request) {
                        return Err(self.host_failure(driven, failure));
                    }
                }
                Flow::Permission(ask, cancelled) => match self.ask(driven, ask, cancelled)? {
                    Asked::Reply(reply) => self.settle(driven, ask, reply)?,
                    Asked::Deferred(_) => unreachable!("only the asyncio driver defers"),
                },
                Flow::NeedInput => {
                    if call.is_none() && until.is_none() {
                        return Ok(None);
                    }
                    if driven.conn.output_ended() {
                        // Everything was read and nothing waits (drain only).
                        return Ok(None);
                    }
                    // Past `until` (drain, the start() timeout): one last look at what is
                    // already readable, without waiting, then return.
                    if until.is_some_and(|t| Instant::now() >= t) {
                        if !self.read_ready(driven)? {
                            return Ok(None);
                        }
                        continue;
                    }
                    self.read(driven, until)?;
                }
            }
        }
    }

    /// Takes the next event and handles what needs no decision from the driver: an update
    /// (observer, reply, published state, fold) or another line (the tap). Callbacks run here,
    /// in arrival order; one that raises stops the client.
    pub fn next(&mut self, driven: &mut Driven) -> Result<Flow, CallError> {
        let handled = match driven.conn.poll_event() {
            Err(error) => return Err(error.into()),
            Ok(None) => Handled::Flow(Flow::NeedInput),
            // By reference: the event stays where the Connection built it.
            Ok(Some(Event::Update {
                ref update,
                joined,
                routed,
            })) => match self.on_update(&driven.callbacks, update) {
                Ok(object) => {
                    // The fold takes the Update object even when no observer made one.
                    let object = match object {
                        None if routed && driven.callbacks.fold.is_some() => {
                            match self.update_object(update) {
                                Ok(object) => Some(object),
                                Err(fail) => return Err(self.fail(driven, fail)),
                            }
                        }
                        object => object,
                    };
                    if joined {
                        match driven.aio.as_mut() {
                            None => self.reply.push(self.py, &update.text, update.ascii),
                            Some(aio) => aio.push_reply(self.py, update),
                        }
                    }
                    let publish = matches!(
                        update.kind,
                        UpdateKind::CurrentModeUpdate
                            | UpdateKind::ConfigOptionUpdate
                            | UpdateKind::AvailableCommandsUpdate
                    )
                    .then(|| update.session_id.to_string());
                    let fold = (routed && driven.callbacks.fold.is_some())
                        .then(|| update.session_id.to_string());
                    Handled::Update(object, publish, fold)
                }
                Err(fail) => {
                    self.failed_session = Some(update.session_id.to_string());
                    return Err(self.fail(driven, fail));
                }
            },
            Ok(Some(Event::Permission { ask, cancelled })) => {
                Handled::Flow(Flow::Permission(ask, cancelled))
            }
            Ok(Some(Event::Done {
                call,
                outcome,
                line,
            })) => match self.tap(&driven.callbacks, line) {
                Err(fail) => return Err(self.fail(driven, fail)),
                Ok(()) => Handled::Flow(Flow::Done(call, outcome)),
            },
            Ok(Some(Event::Host {
                host,
                method,
                session_id,
                op,
                line,
            })) => match self.tap(&driven.callbacks, line) {
                Err(fail) => return Err(self.fail(driven, fail)),
                Ok(()) => Handled::Flow(Flow::Host(Box::new((host, method, session_id, op)))),
            },
            Ok(Some(Event::Other { line })) => match self.tap(&driven.callbacks, line) {
                Err(fail) => return Err(self.fail(driven, fail)),
                Ok(()) => Handled::Flow(Flow::Handled { pause: false }),
            },
        };
        let (object, publish, fold_session) = match handled {
            Handled::Flow(flow) => return Ok(flow),
            Handled::Update(object, publish, fold_session) => (object, publish, fold_session),
        };
        if let Some(session) = publish {
            self.client.publish_session(&driven.conn, &session);
        }
        let mut pause = false;
        if let (Some(fold), Some(session)) = (&driven.callbacks.fold, fold_session) {
            // A new state starts from the session's modes (its known mode ids).
            let modes: Vec<String> = driven
                .conn
                .session(&session)
                .map(|s| s.modes.available.iter().map(|m| m.id.clone()).collect())
                .unwrap_or_default();
            match fold.bind(self.py).call1((object.as_ref(), modes)) {
                Ok(answer) => pause = answer.is_truthy().unwrap_or(false),
                Err(error) => {
                    self.failed_session = Some(session);
                    return Err(self.fail(driven, Fail::Callback("the session fold", error)));
                }
            }
        }
        Ok(Flow::Handled { pause })
    }

    /// Asks the observer's `on_permission` about a request (not when its session is being
    /// cancelled: the answer is `cancelled` whatever it says).
    pub fn ask(
        &mut self,
        driven: &mut Driven,
        ask: AskId,
        cancelled: bool,
    ) -> Result<Asked, CallError> {
        let Some(callback) = driven
            .callbacks
            .permission_preview
            .as_ref()
            .filter(|_| !cancelled)
        else {
            return Ok(Asked::Reply(None));
        };
        let Some(preview) = driven.conn.preview(ask) else {
            return Err(
                AcpError::Misuse("this permission request was already decided".into()).into(),
            );
        };
        let session = self.session_object(&preview.session_id).into_bound(self.py);
        let record = crate::records::permission_request(self.py, &preview, Some(session))?;
        if let Some(line) = driven.conn.ask_line(ask) {
            crate::records::set_preview_line(&record, line)?;
        }
        let answer = callback.bind(self.py).call1((record,)).and_then(|answer| {
            if answer.is_none() {
                return Ok(Asked::Reply(None));
            }
            // The asyncio facade passes an awaitable through; the blocking one never does.
            if driven.aio.is_some() && answer.hasattr("__await__")? {
                return Ok(Asked::Deferred(answer.unbind()));
            }
            crate::host::observer_answer(&answer).map(Asked::Reply)
        });
        if matches!(answer, Ok(Asked::Reply(_))) {
            look_ahead(driven, ask);
        }
        answer.map_err(|error| {
            self.failed_session = Some(preview.session_id.clone());
            self.fail(driven, Fail::Callback("on_permission", error))
        })
    }

    /// Decides a request (cancel latch, the observer's reply, the policy), records it with
    /// `on_permission_commit`, then queues the answer: commit before answer.
    pub fn settle(
        &mut self,
        driven: &mut Driven,
        ask: AskId,
        reply: Option<ObserverAnswer>,
    ) -> Result<(), CallError> {
        // A cancel() from inside on_permission replaces its reply.
        self.take_cancels(&mut driven.conn);
        let decided = driven.conn.decide(ask, reply)?;
        self.failed_session = Some(decided.record.session_id.clone());
        let Some(commit) = &driven.callbacks.permission_commit else {
            if !driven.callbacks.durable {
                self.failed_session = None;
                driven.conn.send(decided);
                return Ok(());
            }
            let error = AcpError::MissingDurableObserver(format!(
                "a permission request ({:?}) arrived but the observer has no on_permission_commit to record the decision",
                decided.record.title
            ));
            return Err(self.fail(driven, Fail::Missing(error)));
        };
        let session = self
            .session_object(&decided.record.session_id)
            .into_bound(self.py);
        let record =
            match crate::records::permission_request(self.py, &decided.record, Some(session)) {
                Ok(record) => record,
                Err(error) => return Err(self.fail(driven, Fail::py(error))),
            };
        let committed = commit
            .bind(self.py)
            .call1((record,))
            .map_err(|error| Fail::Callback("on_permission_commit", error))
            .and_then(|answer| self.not_awaitable("on_permission_commit", &answer));
        if let Err(fail) = committed {
            // Dropping `decided` writes nothing: the decision was not recorded.
            return Err(self.fail(driven, fail));
        }
        self.failed_session = None;
        driven.conn.send(decided);
        Ok(())
    }

    /// Under asyncio, `on_update` and `on_permission_commit` must finish before the next line
    /// is handled, so an awaitable from them is a mistake that would silently drop its work.
    #[inline]
    fn not_awaitable(
        &self,
        callback: &'static str,
        answer: &Bound<'py, PyAny>,
    ) -> Result<(), Fail> {
        if !self.asynchronous || answer.is_none() {
            return Ok(());
        }
        self.refuse_awaitable(callback, answer)
    }

    #[cold]
    fn refuse_awaitable(
        &self,
        callback: &'static str,
        answer: &Bound<'py, PyAny>,
    ) -> Result<(), Fail> {
        if !answer.hasattr("__await__").unwrap_or(false) {
            return Ok(());
        }
        if let Ok(close) = answer.getattr("close") {
            let _ = close.call0(); // a coroutine never awaited: no "never awaited" warning
        }
        Err(Fail::Callback(
            callback,
            pyo3::exceptions::PyTypeError::new_err(format!(
                "{callback} must not return an awaitable under AsyncClient (it runs on the loop before the next line is handled; only on_permission may be awaited)"
            )),
        ))
    }

    /// A callback that ran outside the loop (an awaited `on_permission`) raised: stop.
    pub fn callback_failed(
        &self,
        driven: &mut Driven,
        callback: &'static str,
        error: PyErr,
    ) -> CallError {
        self.fail(driven, Fail::Callback(callback, error))
    }

    /// A host request failed: `on_activity` raised (stop), or the call failed.
    pub fn host_failure(&self, driven: &mut Driven, failure: HostFailure) -> CallError {
        match failure {
            HostFailure::Activity(error) => self.fail(driven, Fail::Callback("on_activity", error)),
            HostFailure::Call(error) => error,
        }
    }

    /// Stops the client after a callback failed (or the observer lacks one).
    fn fail(&self, driven: &mut Driven, fail: Fail) -> CallError {
        match fail {
            Fail::Callback(callback, error) => self.stop(driven, callback, error),
            Fail::Missing(error) => {
                driven.conn.stop(format!(
                    "the client stopped after {}; only close() is accepted (and request_cancel())",
                    error.description()
                ));
                // The cause of every later "the client stopped" error (async.md §3).
                let error = crate::errors::to_pyerr(self.py, error);
                *crate::client::lock(&self.shared.stop_cause) =
                    Some(error.value(self.py).clone().into_any().unbind());
                CallError::Python(error)
            }
            Fail::Other(error) => error,
        }
    }

    fn tap(&self, callbacks: &Callbacks, line: &str) -> Result<(), Fail> {
        if line.is_empty() {
            return Ok(());
        }
        if let Some(tap) = &callbacks.on_received {
            if let Err(error) = tap.bind(self.py).call1((line,)) {
                return Err(Fail::Callback("on_received", error));
            }
        }
        Ok(())
    }

    /// Per line, not per read: a stop requested from another thread is seen before the next
    /// line is handled, whatever is still buffered.
    #[inline]
    pub fn check_stops(&self) -> Result<(), CallError> {
        let flags = &self.shared.flags;
        if flags.closed.load(Ordering::SeqCst) {
            return Err(AcpError::protocol(
                "close() from another thread stopped the agent while waiting for the agent's answer",
            )
            .into());
        }
        if flags.cancel_requested.load(Ordering::SeqCst) {
            return Err(AcpError::protocol(
                "request_cancel() stopped the agent while waiting for the agent's answer",
            )
            .into());
        }
        Ok(())
    }

    #[inline]
    pub fn take_cancels(&self, conn: &mut Connection) {
        // The common case: one plain load per line, no locked instruction and no lock.
        if self.shared.cancel_pending.load(Ordering::SeqCst) {
            self.take_pending_cancels(conn);
        }
    }

    #[cold]
    fn take_pending_cancels(&self, conn: &mut Connection) {
        if !self.shared.cancel_pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let pending: Vec<String> = std::mem::take(&mut *crate::client::lock(&self.shared.cancels));
        for session in pending {
            conn.cancel(&session);
        }
    }

    fn stop(&self, driven: &mut Driven, callback: &str, error: PyErr) -> CallError {
        let reason = stop_reason(self.py, callback, &error);
        driven.conn.stop(reason);
        *crate::client::lock(&self.shared.stop_cause) =
            Some(error.value(self.py).clone().into_any().unbind());
        CallError::Python(error)
    }

    /// Delivers an update: into the journal (if any), then to the observer's `on_update`
    /// with the `Update` object it returns (None: only a journal took it, no object made).
    fn on_update(
        &mut self,
        callbacks: &Callbacks,
        update: &UpdateEvent<'_>,
    ) -> Result<Option<Bound<'py, Update>>, Fail> {
        let py = self.py;
        self.shared
            .flags
            .next_update_sequence
            .store(update.update_sequence + 1, Ordering::Relaxed);
        self.delivered += 1;
        if let Some(journal) = &callbacks.journal {
            let record = UpdateRecord {
                epoch: update.transport_epoch,
                sequence: update.update_sequence,
                session: &update.session_id,
                // One line (the reader splits at newlines) the core parsed as a JSON object.
                envelope: Envelope::Verbatim(update.envelope.as_bytes()),
            };
            if let Err(error) = journal.record(py, record) {
                return Err(Fail::Callback("on_update", error));
            }
        }
        let Some(callback) = &callbacks.on_update else {
            if callbacks.journal.is_some() || !callbacks.durable {
                return Ok(None);
            }
            let error = AcpError::MissingDurableObserver(format!(
                "update {} ({}) arrived but the observer has no on_update to record it",
                update.update_sequence, update.session_update
            ));
            return Err(Fail::Missing(error));
        };
        let object = self.update_object(update)?;
        match callback.bind(py).call1((&object,)) {
            Err(error) => return Err(Fail::Callback("on_update", error)),
            Ok(answer) => self.not_awaitable("on_update", &answer)?,
        }
        Ok(Some(object))
    }

    /// The `Update` object observers and the fold are given.
    fn update_object(&mut self, update: &UpdateEvent<'_>) -> Result<Bound<'py, Update>, Fail> {
        let py = self.py;
        let session_update = if update.kind == UpdateKind::Unknown {
            PyString::new(py, &update.session_update).unbind()
        } else {
            kind_names(py)[update.kind.index()].clone_ref(py)
        };
        let object = Update {
            kind: update.kind,
            session_update,
            transport_epoch: update.transport_epoch,
            update_sequence: update.update_sequence,
            session_id: self.session_object(&update.session_id),
            envelope: text_object(py, update.envelope, update.ascii).map_err(Fail::py)?,
            text: text_object(py, &update.text, update.ascii).map_err(Fail::py)?,
            message_id: update
                .message_id
                .as_ref()
                .map(|v| PyString::new(py, v).unbind()),
            tool_call_id: update
                .tool_call_id
                .as_ref()
                .map(|v| PyString::new(py, v).unbind()),
        };
        Bound::new(py, object).map_err(Fail::py)
    }

    /// Writes every queued line, whole and in order, with the GIL released while it waits.
    pub fn flush(&mut self, driven: &mut Driven) -> Result<(), CallError> {
        self.write_queued(driven, true).map(drop)
    }

    /// Writes queued lines in order; with `wait` false, stops at a full pipe instead of
    /// waiting (the asyncio driver then waits for writability). Whether everything was written.
    pub fn write_queued(&mut self, driven: &mut Driven, wait: bool) -> Result<bool, CallError> {
        loop {
            let Some((bytes, fresh)) = driven.conn.poll_transmit() else {
                return Ok(true);
            };
            if fresh {
                if let Some(tap) = &driven.callbacks.on_sent {
                    let line = String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(bytes))
                        .into_owned();
                    if let Err(error) = tap.bind(self.py).call1((line,)) {
                        return Err(self.fail(driven, Fail::Callback("on_sent", error)));
                    }
                }
                // Once per line, however many writes a full pipe makes it take.
                driven.conn.announce_transmit();
                continue;
            }
            // A pipe with room takes the line at once: no need to release the GIL for it.
            let first = match driven.pipes.as_mut() {
                Some(pipes) => pipes.try_write(bytes),
                None => return Err(AcpError::protocol("the client is closed").into()),
            };
            let mut readable = false;
            let written = match first {
                Ok(WriteOutcome::Idle) if !wait => return Ok(false),
                Ok(WriteOutcome::Idle) => {
                    // While the agent's stdin is full its output is read on (bounded: not
                    // while backlogged), or an agent that writes before it reads deadlocks
                    // with us.
                    let read_too = !driven.conn.backlogged()
                        && !driven.conn.output_ended()
                        && !driven.conn.read_buf().is_empty();
                    let (Some((bytes, _)), Some(pipes)) =
                        (driven.conn.poll_transmit(), driven.pipes.as_mut())
                    else {
                        return Ok(true);
                    };
                    match self.py.detach(|| pipes.wait_room(read_too)) {
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
                self.tick(driven)?;
                self.read_ready(driven)?;
                return Ok(false);
            }
            if let (Ok(WriteOutcome::Wrote(_)), Some(pipes)) = (&written, driven.pipes.as_mut()) {
                pipes.expect_answer();
            }
            match written {
                Ok(WriteOutcome::Wrote(count)) => driven.conn.transmitted(count),
                Ok(WriteOutcome::Idle) => {
                    self.tick(driven)?;
                    // The agent is not taking its stdin (it may be blocked writing to us): a
                    // call's deadline still passes, and the loop goes on to act on it.
                    if driven
                        .conn
                        .poll_timeout()
                        .is_some_and(|at| at <= self.now_ms())
                    {
                        return Ok(false);
                    }
                }
                Err(e) => {
                    driven.conn.discard_transmit();
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

    /// Reads what is readable now, without waiting; whether anything came.
    fn read_ready(&mut self, driven: &mut Driven) -> Result<bool, CallError> {
        let Some(pipes) = driven.pipes.as_mut() else {
            return Ok(false);
        };
        pipes.set_wait(Duration::ZERO);
        let buf = driven.conn.read_buf();
        if buf.is_empty() {
            return Ok(false);
        }
        match pipes.read(buf) {
            Ok(ReadOutcome::Data(count)) => {
                driven.received(count);
                Ok(true)
            }
            Ok(ReadOutcome::Eof) => {
                driven.conn.input_ended();
                Ok(true)
            }
            Ok(_) => Ok(false),
            Err(e) => Err(AcpError::AgentTransportFailed(format!(
                "reading the agent's stdout failed: {e}"
            ))
            .into()),
        }
    }

    fn read(&mut self, driven: &mut Driven, until: Option<Instant>) -> Result<(), CallError> {
        let mut wait = Duration::from_millis(100);
        if let Some(deadline) = driven.conn.poll_timeout() {
            wait = wait.min(Duration::from_millis(
                deadline.saturating_sub(self.now_ms()),
            ));
        }
        if let Some(until) = until {
            wait = wait.min(until.saturating_duration_since(Instant::now()));
        }
        let Some(pipes) = driven.pipes.as_mut() else {
            return Err(AcpError::protocol("the client is closed").into());
        };
        pipes.set_wait(wait);
        pipes.set_write_pending(driven.conn.queued_bytes() > 0);
        let conn = &mut driven.conn;
        let outcome = self.py.detach(|| {
            let buf = conn.read_buf();
            if buf.is_empty() {
                return Ok(ReadOutcome::Idle);
            }
            pipes.read(buf)
        });
        match outcome {
            Ok(ReadOutcome::Data(count)) => driven.received(count),
            Ok(ReadOutcome::Eof) => driven.conn.input_ended(),
            Ok(ReadOutcome::Idle) => {}
            Ok(ReadOutcome::Woken) => {
                if let Some(waker) = crate::client::lock(&self.shared.waker).as_ref() {
                    waker.drain();
                }
            }
            Err(e) => {
                return Err(AcpError::AgentTransportFailed(format!(
                    "reading the agent's stdout failed: {e}"
                ))
                .into())
            }
        }
        self.tick(driven)
    }

    fn tick(&self, driven: &mut Driven) -> Result<(), CallError> {
        if let Err(error) = self.py.check_signals() {
            self.shared.flags.interrupted.store(true, Ordering::SeqCst);
            return Err(self.stop(driven, "a signal handler", error));
        }
        self.check_stops()
    }
}

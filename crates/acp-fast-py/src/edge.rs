//! The Python `Edge` of the pump (`acp_client`): updates into the journal and `Update` objects
//! for the observer, the reply of each running turn, `PermissionRequest` records for
//! `on_permission` / `on_permission_commit`, the taps, `on_activity`, and the GIL released
//! while the pump waits. Callbacks run in arrival order; one that raises stops the client.

use std::sync::atomic::Ordering;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use acp_client::controls::lock;
use acp_client::{Asked, Edge, Fail};
use acp_proto::error::AcpError;
use acp_proto::host::Activity;
use acp_proto::permission::PermissionRecord;
use acp_proto::update::{Joined, UpdateEvent, UpdateKind};
use acp_proto::{AskId, Connection};

use crate::errors::{kind_names, to_pyerr};
use crate::journal::{Envelope, UpdateRecord};
use crate::reply::{text_object, Replies};
use crate::state::{Callbacks, Published, Shared};
use crate::update::Update;

/// A call's handler context: the callbacks and the replies behind the call lock, what is
/// shared with other threads, and what one pass of the pump made.
pub(crate) struct PyEdge<'py, 'a> {
    pub py: Python<'py>,
    callbacks: &'a Callbacks,
    replies: &'a mut Replies,
    shared: &'a Shared,
    published: &'a Published,
    session_cache: Option<(String, Py<PyString>)>,
    /// v2's chunks of one message come in a row with the same `messageId`: made once.
    message_cache: Option<(String, Py<PyString>)>,
    /// The `Update` object the last update made, for the fold.
    made: Option<Bound<'py, Update>>,
    /// Updates delivered (`drain()` returns it).
    pub delivered: u64,
    /// Driven by an event loop: `on_permission` may return an awaitable (deferred), the other
    /// callbacks must not.
    asynchronous: bool,
}

impl<'py, 'a> PyEdge<'py, 'a> {
    pub fn new(
        py: Python<'py>,
        callbacks: &'a Callbacks,
        replies: &'a mut Replies,
        shared: &'a Shared,
        published: &'a Published,
    ) -> PyEdge<'py, 'a> {
        PyEdge {
            py,
            callbacks,
            replies,
            shared,
            published,
            session_cache: None,
            message_cache: None,
            made: None,
            delivered: 0,
            asynchronous: shared.controls.asynchronous.load(Ordering::Relaxed),
        }
    }

    /// The reply of each session's running turn.
    pub fn replies(&mut self) -> &mut Replies {
        self.replies
    }

    fn session_object(&mut self, id: &str) -> Py<PyString> {
        cached(self.py, &mut self.session_cache, id)
    }

    /// The `Update` object observers and the fold are given.
    fn update_object(&mut self, update: &UpdateEvent<'_>) -> PyResult<Bound<'py, Update>> {
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
            envelope: text_object(py, update.envelope, update.ascii)?,
            text: text_object(py, &update.text, update.ascii)?,
            message_id: update
                .message_id
                .as_ref()
                .map(|v| cached(py, &mut self.message_cache, v)),
            tool_call_id: update
                .tool_call_id
                .as_ref()
                .map(|v| PyString::new(py, v).unbind()),
        };
        Bound::new(py, object)
    }

    /// Delivers an update: into the journal (if any), then to `on_update` with the `Update`
    /// object it returns (None: only a journal took it, no object made).
    fn deliver(
        &mut self,
        update: &UpdateEvent<'_>,
    ) -> Result<Option<Bound<'py, Update>>, Fail<PyErr>> {
        let py = self.py;
        let callbacks = self.callbacks;
        self.shared
            .controls
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
            return Err(Fail::Missing(acp_proto::update::missing_observer(update)));
        };
        let object = self.update_object(update).map_err(Fail::Other)?;
        match callback.bind(py).call1((&object,)) {
            Err(error) => return Err(Fail::Callback("on_update", error)),
            Ok(answer) => self.not_awaitable("on_update", &answer)?,
        }
        Ok(Some(object))
    }

    /// Under asyncio, `on_update` and `on_permission_commit` must finish before the next line
    /// is handled, so an awaitable from them is a mistake that would silently drop its work.
    #[inline]
    fn not_awaitable(
        &self,
        callback: &'static str,
        answer: &Bound<'py, PyAny>,
    ) -> Result<(), Fail<PyErr>> {
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
    ) -> Result<(), Fail<PyErr>> {
        if !answer.hasattr("__await__").unwrap_or(false) {
            return Ok(());
        }
        if let Ok(close) = answer.getattr("close") {
            let _ = close.call0(); // a coroutine never awaited: no "never awaited" warning
        }
        Err(Fail::Callback(
            callback,
            PyTypeError::new_err(format!(
                "{callback} must not return an awaitable under AsyncClient (it runs on the loop before the next line is handled; only on_permission may be awaited)"
            )),
        ))
    }

    fn record(&mut self, record: &PermissionRecord) -> PyResult<Bound<'py, PyAny>> {
        let session = self.session_object(&record.session_id).into_bound(self.py);
        crate::records::permission_request(self.py, record, Some(session))
    }

    fn call1(
        &self,
        callback: &Option<Py<PyAny>>,
        args: impl pyo3::call::PyCallArgs<'py>,
    ) -> PyResult<()> {
        match callback {
            Some(callback) => callback.bind(self.py).call1(args).map(drop),
            None => Ok(()),
        }
    }
}

impl<'py> Edge for PyEdge<'py, '_> {
    type Error = PyErr;
    type Deferred = Py<PyAny>;

    fn update(
        &mut self,
        update: &UpdateEvent<'_>,
        joined: Joined,
        routed: bool,
    ) -> Result<bool, Fail<PyErr>> {
        let object = self.deliver(update)?;
        let fold = routed && self.callbacks.fold.is_some();
        // The fold takes the Update object even when no observer made one.
        self.made = match object {
            None if fold => Some(self.update_object(update).map_err(Fail::Other)?),
            object => object,
        };
        match joined {
            Joined::No => {}
            Joined::Append => {
                if let Some(reply) = self.replies.get_mut(update.session_id.as_ref()) {
                    reply.push(self.py, &update.text, update.ascii);
                }
            }
            // v2: a message replaced, or a chunk of an earlier message (rare).
            Joined::Splice { at, remove } => {
                if let Some(reply) = self.replies.get_mut(update.session_id.as_ref()) {
                    reply.splice(self.py, at, remove, &update.text, update.ascii);
                }
            }
        }
        Ok(fold)
    }

    fn after_update(
        &mut self,
        conn: &Connection,
        session_id: &str,
        publish: bool,
        fold: bool,
    ) -> Result<bool, Fail<PyErr>> {
        if publish {
            self.published.session(conn, session_id);
        }
        let (true, Some(callback)) = (fold, &self.callbacks.fold) else {
            return Ok(false);
        };
        // A new state starts from the session's modes (its known mode ids).
        let modes: Vec<String> = conn
            .session(session_id)
            .map(|s| {
                let modes = s.offered_modes();
                modes.available.into_iter().map(|m| m.id).collect()
            })
            .unwrap_or_default();
        match callback.bind(self.py).call1((self.made.take(), modes)) {
            Ok(answer) => Ok(answer.is_truthy().unwrap_or(false)),
            Err(error) => Err(Fail::Callback("the session fold", error)),
        }
    }

    fn ask(&mut self, conn: &Connection, ask: AskId) -> Result<Asked<Py<PyAny>>, Fail<PyErr>> {
        let Some(callback) = self.callbacks.permission_preview.as_ref() else {
            return Ok(Asked::NotAsked);
        };
        let Some(preview) = conn.preview(ask) else {
            return Err(Fail::Other(to_pyerr(
                self.py,
                AcpError::Misuse("this permission request was already decided".into()),
            )));
        };
        let asked = self.record(&preview).and_then(|record| {
            if let Some(line) = conn.ask_line(ask) {
                crate::records::set_preview_line(&record, line)?;
            }
            let answer = callback.bind(self.py).call1((record,))?;
            if answer.is_none() {
                return Ok(Asked::Reply(None));
            }
            // An event loop's observer may answer with an awaitable: the request waits on it.
            if self.asynchronous && answer.hasattr("__await__")? {
                return Ok(Asked::Deferred(answer.unbind()));
            }
            crate::policy::observer_answer(&answer).map(Asked::Reply)
        });
        asked.map_err(|error| Fail::Callback("on_permission", error))
    }

    fn elicit(
        &mut self,
        conn: &Connection,
        ask: AskId,
    ) -> Result<acp_client::Elicited<Py<PyAny>>, Fail<PyErr>> {
        let callback = self.callbacks.elicitation.as_ref();
        crate::elicitation::ask(self.py, callback, conn, ask, self.asynchronous)
    }

    fn commit(&mut self, record: &PermissionRecord) -> Result<bool, Fail<PyErr>> {
        let Some(commit) = self.callbacks.permission_commit.as_ref() else {
            return Ok(false);
        };
        let record = self.record(record).map_err(Fail::Other)?;
        let answer = commit
            .bind(self.py)
            .call1((record,))
            .map_err(|error| Fail::Callback("on_permission_commit", error))?;
        self.not_awaitable("on_permission_commit", &answer)?;
        Ok(true)
    }

    fn durable(&self) -> bool {
        self.callbacks.durable
    }

    fn activity(&mut self, a: &Activity) -> PyResult<()> {
        let record = (
            a.method,
            a.allowed,
            a.path.as_deref(),
            a.command.as_deref(),
            a.terminal_id.as_deref(),
            a.reason.as_deref(),
            a.session_id.as_str(),
            a.error_code,
        );
        self.call1(&self.callbacks.on_activity, (record,))
    }

    fn sent(&mut self, line: &[u8]) -> PyResult<()> {
        if self.callbacks.on_sent.is_none() {
            return Ok(());
        }
        let line = String::from_utf8_lossy(line).into_owned();
        self.call1(&self.callbacks.on_sent, (line,))
    }

    fn received(&mut self, line: &str) -> PyResult<()> {
        self.call1(&self.callbacks.on_received, (line,))
    }

    fn bytes_read(&mut self, _count: usize) {
        if let Some(journal) = &self.callbacks.journal {
            journal.read();
        }
    }

    fn detach<R: Send, F: FnOnce() -> R + Send>(&mut self, work: F) -> R {
        self.py.detach(work)
    }

    fn check_signals(&mut self) -> PyResult<()> {
        self.py.check_signals()
    }

    fn stop_reason(&mut self, callback: &'static str, error: &PyErr) -> String {
        *lock(&self.shared.stop_cause) = Some(error.value(self.py).clone().into_any().unbind());
        let repr = error
            .value(self.py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "an exception".into());
        format!(
            "the client stopped after {callback} raised {repr}; the record of updates has a gap from there, so only close() is accepted (and request_cancel())"
        )
    }

    fn missing(&mut self, error: AcpError) -> PyErr {
        // The cause of every later "the client stopped" error (async.md §3).
        let error = to_pyerr(self.py, error);
        *lock(&self.shared.stop_cause) = Some(error.value(self.py).clone().into_any().unbind());
        error
    }
}

/// The `str` of `text`, reused while the same text comes again (a session id, a message id).
#[inline]
fn cached(py: Python<'_>, cache: &mut Option<(String, Py<PyString>)>, text: &str) -> Py<PyString> {
    match cache {
        Some((kept, object)) if kept == text => object.clone_ref(py),
        _ => {
            let object = PyString::new(py, text).unbind();
            *cache = Some((text.to_owned(), object.clone_ref(py)));
            object
        }
    }
}

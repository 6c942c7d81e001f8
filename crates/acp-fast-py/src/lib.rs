//! The PyO3 bindings, thin: convert arguments, release the GIL while waiting on the agent, build
//! `Update` objects for the observer, and map errors to the exceptions of `acp_fast._errors`.
//! Everything else lives in the pure-Rust modules.

use std::borrow::Cow;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use pyo3::{intern, PyTraverseError, PyVisit};

use acp_os::process::{self, Agent, PipeTransport, SpawnOptions, StderrMode};
use acp_proto::driver::{Conversation, Host, ReadOutcome, Transport, WriteOutcome};
use acp_proto::encode::{ClientInfo, ContentBlock, McpServer};
use acp_proto::engine::{
    Config, Engine, InitializeInfo, ModesInfo, PermissionPolicy, PermissionRecord, Selection,
    TransferLimits, UpdateEvent, UpdateKind,
};
use acp_proto::error::AcpError;
use acp_proto::reader::{self, Storage};

mod guard;

// --- the Python-side classes this module hands out ------------------------------------------

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static UPDATE_KINDS: PyOnceLock<Vec<Py<PyAny>>> = PyOnceLock::new();
static KIND_NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || py.import("acp_fast._errors").map(Bound::unbind))
        .map(|m| m.bind(py))
}

fn update_kinds(py: Python<'_>) -> PyResult<&Vec<Py<PyAny>>> {
    UPDATE_KINDS.get_or_try_init(py, || {
        let enum_class = py.import("acp_fast._types")?.getattr("UpdateKind")?;
        UpdateKind::ALL
            .iter()
            .map(|kind| enum_class.call1((kind.as_str(),)).map(Bound::unbind))
            .collect()
    })
}

fn kind_names(py: Python<'_>) -> &Vec<Py<PyString>> {
    KIND_NAMES.get_or_init(py, || {
        UpdateKind::ALL
            .iter()
            .map(|kind| PyString::intern(py, kind.as_str()).unbind())
            .collect()
    })
}

fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let loads = JSON_LOADS.get_or_try_init(py, || {
        py.import("json")?.getattr("loads").map(Bound::unbind)
    })?;
    loads.bind(py).call1((text,))
}

fn to_pyerr(py: Python<'_>, error: AcpError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = errors_module(py)?.getattr(error.class_name())?;
        let instance = match &error {
            AcpError::AgentProtocol(protocol) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("code", protocol.code)?;
                kwargs.set_item("message", protocol.message.as_deref())?;
                let data = match &protocol.data {
                    Some(raw) => json_loads(py, raw)?,
                    None => py.None().into_bound(py),
                };
                kwargs.set_item("data", data)?;
                class.call((protocol.description.as_str(),), Some(&kwargs))?
            }
            other => class.call1((other.description(),))?,
        };
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| e)
}

/// Errors cross into Python either as an `AcpError` (mapped late, when the GIL is known to be
/// held) or as an exception a callback raised, which must propagate unchanged.
enum CallError {
    Acp(AcpError),
    Python(PyErr),
}

impl From<AcpError> for CallError {
    fn from(error: AcpError) -> Self {
        CallError::Acp(error)
    }
}

impl From<PyErr> for CallError {
    fn from(error: PyErr) -> Self {
        CallError::Python(error)
    }
}

impl CallError {
    fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self {
            CallError::Acp(error) => to_pyerr(py, error),
            CallError::Python(error) => error,
        }
    }
}

// --- Update -----------------------------------------------------------------------------------

/// One numbered update from the agent (frozen; equality, hash and repr as a data class has).
#[pyclass(frozen, module = "acp_fast", name = "Update")]
pub struct Update {
    kind: UpdateKind,
    #[pyo3(get)]
    session_update: Py<PyString>,
    #[pyo3(get)]
    transport_epoch: u64,
    #[pyo3(get)]
    update_sequence: u64,
    #[pyo3(get)]
    session_id: Py<PyString>,
    #[pyo3(get)]
    envelope: Py<PyString>,
    #[pyo3(get)]
    text: Py<PyString>,
    #[pyo3(get)]
    message_id: Option<Py<PyString>>,
    #[pyo3(get)]
    tool_call_id: Option<Py<PyString>>,
}

impl Update {
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let kind = self.kind_member(py)?;
        PyTuple::new(
            py,
            [
                kind,
                self.session_update.clone_ref(py).into_any(),
                self.transport_epoch.into_pyobject(py)?.into_any().unbind(),
                self.update_sequence.into_pyobject(py)?.into_any().unbind(),
                self.session_id.clone_ref(py).into_any(),
                self.envelope.clone_ref(py).into_any(),
                self.text.clone_ref(py).into_any(),
                optional(py, &self.message_id),
                optional(py, &self.tool_call_id),
            ],
        )
    }

    fn kind_member(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(update_kinds(py)?[self.kind.index()].clone_ref(py))
    }
}

fn optional(py: Python<'_>, value: &Option<Py<PyString>>) -> Py<PyAny> {
    match value {
        Some(value) => value.clone_ref(py).into_any(),
        None => py.None(),
    }
}

const UPDATE_FIELDS: [&str; 9] = [
    "kind",
    "session_update",
    "transport_epoch",
    "update_sequence",
    "session_id",
    "envelope",
    "text",
    "message_id",
    "tool_call_id",
];

#[pymethods]
impl Update {
    #[new]
    #[pyo3(signature = (*, kind, session_update, transport_epoch, update_sequence, session_id, envelope, text, message_id=None, tool_call_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &Bound<'_, PyAny>,
        session_update: Bound<'_, PyString>,
        transport_epoch: u64,
        update_sequence: u64,
        session_id: Bound<'_, PyString>,
        envelope: Bound<'_, PyString>,
        text: Bound<'_, PyString>,
        message_id: Option<Bound<'_, PyString>>,
        tool_call_id: Option<Bound<'_, PyString>>,
    ) -> PyResult<Update> {
        let name: String = match kind.getattr("value") {
            Ok(value) => value.extract()?,
            Err(_) => kind.extract()?,
        };
        let parsed = UpdateKind::from_wire(&name);
        if parsed == UpdateKind::Unknown && name != "unknown" {
            return Err(PyTypeError::new_err(format!(
                "kind must be an UpdateKind (got {name:?})"
            )));
        }
        Ok(Update {
            kind: parsed,
            session_update: session_update.unbind(),
            transport_epoch,
            update_sequence,
            session_id: session_id.unbind(),
            envelope: envelope.unbind(),
            text: text.unbind(),
            message_id: message_id.map(Bound::unbind),
            tool_call_id: tool_call_id.map(Bound::unbind),
        })
    }

    #[getter]
    fn kind(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.kind_member(py)
    }

    /// The parsed `params.update` object of the envelope.
    fn json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let message = json_loads(py, self.envelope.bind(py).to_str()?)?;
        message
            .get_item(intern!(py, "params"))?
            .get_item(intern!(py, "update"))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Update>() else {
            return Ok(py.NotImplemented());
        };
        let equal = self.fields(py)?.eq(other.get().fields(py)?)?;
        Ok(pyo3::types::PyBool::new(py, equal)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.fields(py)?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let values = self.fields(py)?;
        let mut parts = Vec::with_capacity(UPDATE_FIELDS.len());
        for (name, value) in UPDATE_FIELDS.iter().zip(values.iter()) {
            parts.push(format!("{name}={}", value.repr()?));
        }
        Ok(format!("Update({})", parts.join(", ")))
    }

    #[classattr]
    fn __match_args__() -> (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ) {
        (
            "kind",
            "session_update",
            "transport_epoch",
            "update_sequence",
            "session_id",
            "envelope",
            "text",
            "message_id",
            "tool_call_id",
        )
    }
}

// --- the host: observer callbacks, signals, cancellation -------------------------------------

#[derive(Default)]
struct Callbacks {
    on_update: Option<Py<PyAny>>,
    permission_preview: Option<Py<PyAny>>,
    permission_commit: Option<Py<PyAny>>,
}

/// Flags other threads set while a call runs.
#[derive(Default)]
struct Flags {
    closed: AtomicBool,
    cancel_requested: AtomicBool,
    interrupted: AtomicBool,
    next_update_sequence: AtomicU64,
}

struct PyHost<'py, 'c> {
    py: Python<'py>,
    callbacks: &'c Callbacks,
    flags: &'c Flags,
    /// The latest session id as a Python string: updates of one session share it.
    session_id: Option<(String, Py<PyString>)>,
    /// The reply of the prompt in flight, built as the chunks are admitted.
    reply: ReplyBuilder,
}

impl<'py> PyHost<'py, '_> {
    fn session_id(&mut self, id: &str) -> Py<PyString> {
        match &self.session_id {
            Some((text, object)) if text == id => object.clone_ref(self.py),
            _ => {
                let object = PyString::new(self.py, id).unbind();
                self.session_id = Some((id.to_owned(), object.clone_ref(self.py)));
                object
            }
        }
    }

    fn string(&self, text: &str) -> Py<PyString> {
        PyString::new(self.py, text).unbind()
    }

    fn record(&self, record: &PermissionRecord) -> PyResult<Bound<'py, PyTuple>> {
        let py = self.py;
        let options = PyList::empty(py);
        for (id, name, kind) in &record.options {
            options.append((id, name, kind))?;
        }
        (
            &record.session_id,
            &record.tool_call_id,
            &record.title,
            &record.tool_kind,
            &record.status,
            &record.outcome,
            &record.option_id,
            &record.option_kind,
            options,
            &record.envelope,
            json_id(py, &record.request_id)?,
        )
            .into_pyobject(py)
    }
}

/// The agent's JSON-RPC id as a Python value: strings and integers directly (the usual ids),
/// anything else through `json.loads`.
fn json_id<'py>(py: Python<'py>, raw: &str) -> PyResult<Bound<'py, PyAny>> {
    if raw.starts_with('"') {
        if let Ok(text) = serde_json::from_str::<Cow<'_, str>>(raw) {
            return Ok(PyString::new(py, &text).into_any());
        }
    } else if let Ok(number) = raw.parse::<i64>() {
        return Ok(number.into_pyobject(py)?.into_any());
    }
    json_loads(py, raw)
}

impl Host for PyHost<'_, '_> {
    type Error = CallError;

    fn on_update(&mut self, update: &UpdateEvent<'_>) -> Result<(), CallError> {
        self.flags
            .next_update_sequence
            .store(update.update_sequence + 1, Ordering::Relaxed);
        let Some(callback) = &self.callbacks.on_update else {
            return Err(AcpError::MissingDurableObserver(format!(
                "update {} ({}) arrived but the observer has no on_update to record it",
                update.update_sequence, update.session_update
            ))
            .into());
        };
        let py = self.py;
        let session_update = if update.kind == UpdateKind::Unknown {
            self.string(&update.session_update)
        } else {
            kind_names(py)[update.kind.index()].clone_ref(py)
        };
        let object = Update {
            kind: update.kind,
            session_update,
            transport_epoch: update.transport_epoch,
            update_sequence: update.update_sequence,
            session_id: self.session_id(&update.session_id),
            envelope: text_object(py, update.envelope, update.ascii)?,
            text: text_object(py, &update.text, update.ascii)?,
            message_id: update.message_id.as_ref().map(|v| self.string(v)),
            tool_call_id: update.tool_call_id.as_ref().map(|v| self.string(v)),
        };
        let object = Bound::new(py, object)?;
        callback.bind(py).call1((object,))?;
        Ok(())
    }

    fn on_reply_text(&mut self, update: &UpdateEvent<'_>) {
        self.reply.push(self.py, &update.text, update.ascii);
    }

    fn asks_permission(&self) -> bool {
        self.callbacks.permission_preview.is_some()
    }

    fn on_permission(
        &mut self,
        preview: &PermissionRecord,
    ) -> Result<Option<Selection>, CallError> {
        let Some(callback) = &self.callbacks.permission_preview else {
            return Ok(None);
        };
        let record = self.record(preview)?;
        let reply = callback.bind(self.py).call1((record,))?;
        if reply.is_none() {
            return Ok(None);
        }
        let (outcome, option_id, option_kind): (String, String, String) = reply.extract()?;
        Ok(Some(Selection {
            outcome,
            option_id,
            option_kind,
        }))
    }

    fn on_permission_commit(&mut self, record: &PermissionRecord) -> Result<(), CallError> {
        let Some(callback) = &self.callbacks.permission_commit else {
            return Err(AcpError::MissingDurableObserver(format!(
                "a permission request ({:?}) arrived but the observer has no on_permission_commit to record the decision",
                record.title
            ))
            .into());
        };
        let record = self.record(record)?;
        callback.bind(self.py).call1((record,))?;
        Ok(())
    }

    fn tick(&mut self) -> Result<(), CallError> {
        if let Err(error) = self.py.check_signals() {
            self.flags.interrupted.store(true, Ordering::SeqCst);
            return Err(error.into());
        }
        if self.flags.closed.load(Ordering::SeqCst) {
            return Err(AcpError::protocol(
                "the client was closed (close() from another thread) while a call was waiting for the agent",
            )
            .into());
        }
        Ok(())
    }
}

/// A `str` of `text`; when the caller knows it is ASCII, made by one copy into a new compact
/// ASCII object instead of a UTF-8 decode.
fn text_object(py: Python<'_>, text: &str, known_ascii: bool) -> PyResult<Py<PyString>> {
    use pyo3::ffi;
    if !known_ascii || text.len() < 64 {
        return Ok(PyString::new(py, text).unbind());
    }
    // SAFETY: the GIL is held; PyUnicode_New gives a new str of `len` 1-byte characters (or
    // NULL with an exception set), which we fill completely before anyone sees it.
    unsafe {
        let object = ffi::PyUnicode_New(text.len() as ffi::Py_ssize_t, 127);
        if object.is_null() {
            return Err(PyErr::fetch(py));
        }
        std::ptr::copy_nonoverlapping(text.as_ptr(), ffi::PyUnicode_1BYTE_DATA(object), text.len());
        Ok(Bound::from_owned_ptr(py, object)
            .cast_into_unchecked::<PyString>()
            .unbind())
    }
}

/// An owned reference to a `str` being written (released on drop, e.g. after an error).
struct OwnedStr(*mut pyo3::ffi::PyObject);

impl OwnedStr {
    fn into_raw(self) -> *mut pyo3::ffi::PyObject {
        let pointer = self.0;
        std::mem::forget(self);
        pointer
    }
}

impl Drop for OwnedStr {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: an owned reference; builders live only inside calls that hold the GIL.
            unsafe { pyo3::ffi::Py_DECREF(self.0) };
        }
    }
}

/// The reply text, written straight into the `str` that will be returned while it is ASCII
/// (grown by doubling; `PyUnicode_Resize` reallocates in place where it can), so a long reply is
/// copied once and never re-decoded. The first non-ASCII chunk moves it to a byte buffer that is
/// decoded once at the end.
#[derive(Default)]
enum ReplyBuilder {
    #[default]
    Empty,
    Ascii {
        /// A compact ASCII `str` of `capacity` characters, `len` of them written.
        text: OwnedStr,
        len: usize,
        capacity: usize,
    },
    Utf8(Vec<u8>),
    /// Python could not allocate; reported at `finish`.
    Failed,
}

impl ReplyBuilder {
    /// Appends a chunk; `known_ascii` saves the ASCII scan when the caller already knows.
    fn push(&mut self, _py: Python<'_>, chunk: &str, known_ascii: bool) {
        use pyo3::ffi;
        if chunk.is_empty() {
            return;
        }
        let is_ascii = known_ascii || chunk.is_ascii();
        if let ReplyBuilder::Empty = self {
            *self = if is_ascii {
                let capacity = chunk.len().max(4096);
                // SAFETY: the GIL is held (the `_py` token); a new object or NULL comes back.
                let object = unsafe { ffi::PyUnicode_New(capacity as ffi::Py_ssize_t, 127) };
                if object.is_null() {
                    ReplyBuilder::Failed
                } else {
                    ReplyBuilder::Ascii {
                        text: OwnedStr(object),
                        len: 0,
                        capacity,
                    }
                }
            } else {
                ReplyBuilder::Utf8(Vec::new())
            };
        }
        match self {
            ReplyBuilder::Ascii {
                text,
                len,
                capacity,
            } => {
                if !is_ascii {
                    // SAFETY: `text` is a live compact ASCII str with `len` bytes written.
                    let written = unsafe {
                        std::slice::from_raw_parts(ffi::PyUnicode_1BYTE_DATA(text.0), *len)
                    };
                    let mut bytes = Vec::with_capacity(*len + chunk.len());
                    bytes.extend_from_slice(written);
                    bytes.extend_from_slice(chunk.as_bytes());
                    *self = ReplyBuilder::Utf8(bytes);
                    return;
                }
                let needed = *len + chunk.len();
                if needed > *capacity {
                    let grown = needed.max(capacity.saturating_mul(2));
                    // SAFETY: the str is ours alone (refcount 1, never shared or hashed), as
                    // PyUnicode_Resize requires; on failure it releases it and writes NULL.
                    let status =
                        unsafe { ffi::PyUnicode_Resize(&mut text.0, grown as ffi::Py_ssize_t) };
                    if status != 0 || text.0.is_null() {
                        *self = ReplyBuilder::Failed;
                        return;
                    }
                    *capacity = grown;
                }
                // SAFETY: capacity >= needed, and the data is 1 byte per character.
                unsafe {
                    let data = ffi::PyUnicode_1BYTE_DATA(text.0).add(*len);
                    std::ptr::copy_nonoverlapping(chunk.as_ptr(), data, chunk.len());
                }
                *len = needed;
            }
            ReplyBuilder::Utf8(bytes) => bytes.extend_from_slice(chunk.as_bytes()),
            ReplyBuilder::Empty | ReplyBuilder::Failed => {}
        }
    }

    fn finish(self, py: Python<'_>) -> PyResult<Py<PyString>> {
        use pyo3::ffi;
        match self {
            ReplyBuilder::Empty => Ok(PyString::new(py, "").unbind()),
            ReplyBuilder::Ascii { text, len, .. } => {
                let mut object = text.into_raw();
                // SAFETY: as in `push`; shrinking to the written length also writes the NUL.
                if unsafe { ffi::PyUnicode_Resize(&mut object, len as ffi::Py_ssize_t) } != 0 {
                    return Err(PyErr::fetch(py));
                }
                // SAFETY: `object` is an owned reference to a str.
                Ok(unsafe { Bound::from_owned_ptr(py, object) }
                    .cast_into::<PyString>()?
                    .unbind())
            }
            ReplyBuilder::Utf8(bytes) => {
                let text = std::str::from_utf8(&bytes).expect("chunks are valid UTF-8");
                Ok(PyString::new(py, text).unbind())
            }
            ReplyBuilder::Failed => Err(PyErr::fetch(py)),
        }
    }
}

/// The pipe transport with the GIL released for every wait.
struct Unlocked<'py, 'a> {
    py: Python<'py>,
    pipes: &'a mut PipeTransport,
}

impl Transport for Unlocked<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<ReadOutcome> {
        let pipes = &mut *self.pipes;
        self.py.detach(|| pipes.read(buf))
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<WriteOutcome> {
        let pipes = &mut *self.pipes;
        self.py.detach(|| pipes.write(bytes))
    }
}

// --- the client -------------------------------------------------------------------------------

struct CallState {
    conversation: Conversation,
    pipes: Option<PipeTransport>,
    callbacks: Callbacks,
}

/// What properties read while a call may be running (they must not need the call's lock).
#[derive(Default)]
struct Published {
    session_id: Option<String>,
    initialize: Option<InitializeInfo>,
    modes: ModesInfo,
    agent_error: Option<String>,
    reader: Option<reader::Status>,
}

/// The core of `acp_fast.Client`; the Python facade validates options and wraps results.
#[pyclass(module = "acp_fast._core", name = "CoreClient")]
pub struct CoreClient {
    call: Mutex<CallState>,
    agent: Mutex<Option<Agent>>,
    published: Mutex<Published>,
    flags: Flags,
    pid: u32,
    /// The process that made this client; after fork() the child may not use it.
    owner: u32,
    stderr_tail: Option<std::sync::Arc<process::StderrTail>>,
}

/// (response, stop_reason, (overflow kind, admitted bytes, admitted segments, withheld seq)).
type PromptTuple = (
    Py<PyString>,
    String,
    Option<(&'static str, usize, usize, u64)>,
);

type McpServerArg = (String, String, Vec<String>, Vec<(String, String)>);

fn content_block(item: &Bound<'_, PyAny>) -> PyResult<ContentBlock> {
    let tuple = item.cast::<PyTuple>()?;
    let tag: String = tuple.get_item(0)?.extract()?;
    let s = |i: usize| -> PyResult<String> { tuple.get_item(i)?.extract() };
    Ok(match tag.as_str() {
        "text" => ContentBlock::Text(s(1)?),
        "image" => ContentBlock::Image {
            mime_type: s(1)?,
            data: s(2)?,
            uri: s(3)?,
        },
        "audio" => ContentBlock::Audio {
            mime_type: s(1)?,
            data: s(2)?,
            uri: s(3)?,
        },
        "resource_text" => ContentBlock::TextResource {
            uri: s(1)?,
            text: s(2)?,
            mime_type: s(3)?,
        },
        "resource_blob" => ContentBlock::BlobResource {
            uri: s(1)?,
            blob: s(2)?,
            mime_type: s(3)?,
        },
        "resource_link" => ContentBlock::ResourceLink {
            uri: s(1)?,
            name: s(2)?,
            mime_type: s(3)?,
            title: s(4)?,
            description: s(5)?,
            size: tuple.get_item(6)?.extract()?,
        },
        other => {
            return Err(PyTypeError::new_err(format!(
                "unknown content block {other:?}"
            )))
        }
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl CoreClient {
    /// Takes the call lock, or explains why no call can run now.
    fn enter(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, CallState>> {
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
        if self.flags.closed.load(Ordering::SeqCst) {
            return Err(to_pyerr(py, AcpError::protocol("the client is closed")));
        }
        if self.flags.interrupted.load(Ordering::SeqCst) {
            return Err(to_pyerr(
                py,
                AcpError::protocol(
                    "an earlier call was interrupted (KeyboardInterrupt) while waiting for the agent, so the conversation's state is unknown; only close() is accepted",
                ),
            ));
        }
        match self.call.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
                "another call is running on this client (calls run one at a time; only request_cancel() and close() may be called meanwhile)",
            )),
        }
    }

    fn publish(&self, state: &CallState) {
        let engine = &state.conversation.engine;
        let mut published = lock(&self.published);
        published.session_id = engine.session_id().map(str::to_owned);
        if engine.initialize().protocol_version != 0 {
            published.initialize = Some(engine.initialize().clone());
        }
        published.modes = engine.modes().clone();
        published.agent_error = engine.agent_error().map(str::to_owned);
        published.reader = Some(state.conversation.storage.status());
        self.flags
            .next_update_sequence
            .store(engine.next_update_sequence(), Ordering::Relaxed);
    }

    /// Runs one call with the observer, then publishes the state and settles errors.
    fn run<T>(
        &self,
        py: Python<'_>,
        body: impl FnOnce(
            &mut Conversation,
            &mut Unlocked<'_, '_>,
            &mut PyHost<'_, '_>,
        ) -> Result<T, CallError>,
    ) -> PyResult<T> {
        let mut guard = self.enter(py)?;
        let state = &mut *guard;
        let Some(pipes) = state.pipes.as_mut() else {
            return Err(to_pyerr(py, AcpError::protocol("the client is closed")));
        };
        let mut transport = Unlocked { py, pipes };
        let mut host = PyHost {
            py,
            callbacks: &state.callbacks,
            flags: &self.flags,
            session_id: None,
            reply: ReplyBuilder::default(),
        };
        let result = body(&mut state.conversation, &mut transport, &mut host);
        self.publish(state);
        if self.flags.closed.load(Ordering::SeqCst) {
            state.pipes = None;
        }
        result.map_err(|error| match error {
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
            other => other.into_pyerr(py),
        })
    }

    fn owned_here(&self) -> bool {
        self.owner == std::process::id()
    }

    /// Adds what is known about why the agent's output ended: who stopped it, its exit
    /// status, and the tail of its stderr.
    fn explain_end(&self, py: Python<'_>, description: &mut String) {
        if self.flags.cancel_requested.load(Ordering::SeqCst) {
            description.push_str(" (request_cancel() had stopped the agent)");
        } else if self.flags.closed.load(Ordering::SeqCst) {
            description.push_str(" (close() had stopped the agent)");
        } else {
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
        }
        if let Some(tail) = &self.stderr_tail {
            let bytes = py.detach(|| tail.snapshot(Duration::from_millis(200)));
            if !bytes.is_empty() {
                description.push_str(&format!(
                    "\nagent stderr (last {} bytes):\n{}",
                    bytes.len(),
                    String::from_utf8_lossy(&bytes)
                ));
            }
        }
    }

    fn stop_agent(&self, py: Python<'_>, reap: bool) {
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
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("ended ({status})"),
    }
}

fn named(py: Python<'_>, entries: &[acp_proto::engine::NamedEntry]) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for e in entries {
        list.append((&e.id, &e.name, &e.description))?;
    }
    Ok(list.into_any().unbind())
}

#[pymethods]
impl CoreClient {
    #[new]
    #[pyo3(signature = (command, args, message_bytes, request_bytes, response_bytes, update_bytes, update_count, response_segment_count, transport_epoch, cwd, env, client_info, mcp_servers, allowed_tool_kinds, allowed_title_prefixes, on_update, permission_preview, permission_commit, stderr="discard", stderr_tail_bytes=65536))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        command: OsString,
        args: Vec<OsString>,
        message_bytes: usize,
        request_bytes: usize,
        response_bytes: usize,
        update_bytes: usize,
        update_count: u64,
        response_segment_count: usize,
        transport_epoch: u64,
        cwd: Option<OsString>,
        env: Option<Vec<(OsString, OsString)>>,
        client_info: (String, String, String),
        mcp_servers: Vec<McpServerArg>,
        allowed_tool_kinds: Vec<String>,
        allowed_title_prefixes: Vec<String>,
        on_update: Option<Py<PyAny>>,
        permission_preview: Option<Py<PyAny>>,
        permission_commit: Option<Py<PyAny>>,
        stderr: &str,
        stderr_tail_bytes: usize,
    ) -> PyResult<CoreClient> {
        let stderr = match stderr {
            "discard" => StderrMode::Discard,
            "inherit" => StderrMode::Inherit,
            "tail" if stderr_tail_bytes > 0 => StderrMode::Tail(stderr_tail_bytes),
            "tail" => {
                return Err(to_pyerr(
                    py,
                    AcpError::InvalidLimits(format!(
                        "stderr_tail_bytes must be above zero (got {stderr_tail_bytes})"
                    )),
                ))
            }
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "stderr must be \"discard\", \"inherit\" or \"tail\" (got {other:?})"
                )))
            }
        };
        let config = Config {
            limits: TransferLimits {
                request_bytes,
                response_bytes,
                update_bytes,
                update_count,
                response_segment_count,
            },
            transport_epoch,
            client_info: ClientInfo {
                name: client_info.0,
                title: client_info.1,
                version: client_info.2,
            },
            mcp_servers: mcp_servers
                .into_iter()
                .map(|(name, command, args, env)| McpServer {
                    name,
                    command,
                    args,
                    env,
                })
                .collect(),
            policy: PermissionPolicy {
                allowed_tool_kinds,
                allowed_title_prefixes,
            },
            // The host joins the chunk strings it already made for the observer, once.
            collect_reply: false,
        };
        // The reference's order: limits, then the reader's storage, then the process.
        let engine = Engine::new(config).map_err(|e| to_pyerr(py, e))?;
        let mut storage = Storage::new(reader::Limits { message_bytes }).map_err(|e| {
            to_pyerr(
                py,
                AcpError::CapacityOverflow(format!(
                    "the reader's buffer of reader_limits.message_bytes + 1 ({} + 1) bytes cannot be allocated; nothing was started",
                    e.message_bytes
                )),
            )
        })?;
        let options = SpawnOptions {
            command: command.clone(),
            args,
            cwd: cwd.clone(),
            env,
            stderr,
        };
        let (agent, pipes) = py.detach(|| process::spawn(&options)).map_err(|e| {
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
        storage.activate();
        let pid = agent.pid();
        let stderr_tail = agent.stderr_tail().cloned();
        let published = Published {
            reader: Some(storage.status()),
            ..Published::default()
        };
        let flags = Flags::default();
        flags.next_update_sequence.store(1, Ordering::Relaxed);
        Ok(CoreClient {
            call: Mutex::new(CallState {
                conversation: Conversation::new(engine, storage),
                pipes: Some(pipes),
                callbacks: Callbacks {
                    on_update,
                    permission_preview,
                    permission_commit,
                },
            }),
            agent: Mutex::new(Some(agent)),
            published: Mutex::new(published),
            flags,
            pid,
            owner: std::process::id(),
            stderr_tail,
        })
    }

    /// The last bytes of the agent's stderr ("" unless stderr="tail").
    fn stderr_tail(&self, py: Python<'_>) -> String {
        match &self.stderr_tail {
            Some(tail) => {
                let bytes = py.detach(|| tail.snapshot(Duration::ZERO));
                String::from_utf8_lossy(&bytes).into_owned()
            }
            None => String::new(),
        }
    }

    /// `initialize` then `session/new` in `cwd` (the caller's directory when None).
    #[pyo3(signature = (cwd=None))]
    fn start(&self, py: Python<'_>, cwd: Option<String>) -> PyResult<()> {
        let cwd = match cwd {
            Some(cwd) => cwd,
            None => std::env::current_dir()?.to_string_lossy().into_owned(),
        };
        self.run(py, |conversation, transport, host| {
            conversation.start(transport, host, &cwd)
        })
    }

    /// One prompt of content-block tuples; returns (response, stop_reason, overflow or None).
    fn prompt(&self, py: Python<'_>, blocks: &Bound<'_, PyList>) -> PyResult<PromptTuple> {
        let content = blocks
            .iter()
            .map(|item| content_block(&item))
            .collect::<PyResult<Vec<_>>>()?;
        let (reply, outcome) = self.run(py, |conversation, transport, host| {
            let outcome = conversation.prompt(transport, host, &content)?;
            let reply = std::mem::take(&mut host.reply).finish(py)?;
            Ok((reply, outcome))
        })?;
        let overflow = outcome.overflow.map(|o| {
            (
                o.kind.as_str(),
                o.admitted_bytes,
                o.admitted_segments,
                o.withheld_update_sequence,
            )
        });
        Ok((reply, outcome.stop_reason, overflow))
    }

    /// SIGTERM then SIGKILL to the agent's group; returns without waiting. Any thread.
    fn request_cancel(&self, py: Python<'_>) {
        self.flags.cancel_requested.store(true, Ordering::SeqCst);
        self.stop_agent(py, false);
    }

    /// Stops the agent's group, reaps the agent and releases the pipes. Idempotent; any thread.
    fn close(&self, py: Python<'_>) {
        if !self.owned_here() {
            return; // the agent belongs to the process that forked us
        }
        self.flags.closed.store(true, Ordering::SeqCst);
        self.stop_agent(py, true);
        if let Ok(mut state) = self.call.try_lock() {
            state.pipes = None;
            state.conversation.storage.close();
            self.publish(&state);
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.flags.closed.load(Ordering::SeqCst)
    }

    /// The agent's process id; None once the client is closed.
    #[getter]
    fn pid(&self) -> Option<u32> {
        (!self.flags.closed.load(Ordering::SeqCst)).then_some(self.pid)
    }

    #[getter]
    fn next_update_sequence(&self) -> u64 {
        self.flags.next_update_sequence.load(Ordering::Relaxed)
    }

    #[getter]
    fn session_id(&self) -> Option<String> {
        self.refresh();
        lock(&self.published).session_id.clone()
    }

    #[getter]
    fn agent_error(&self) -> Option<String> {
        self.refresh();
        lock(&self.published).agent_error.clone()
    }

    /// (protocol_version, load_session, image, audio, embedded, [(id, name, description)],
    /// agent_info JSON or None, raw JSON) or None before `start`.
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
        Ok(Some((
            info.protocol_version,
            info.load_session,
            info.prompt_image,
            info.prompt_audio,
            info.prompt_embedded_content,
            named(py, &info.auth_methods)?,
            info.agent_info.clone(),
            info.raw.clone(),
        )))
    }

    /// (current, [(id, name, description)]).
    fn modes_info(&self, py: Python<'_>) -> PyResult<(String, Py<PyAny>)> {
        self.refresh();
        let published = lock(&self.published);
        Ok((
            published.modes.current.clone(),
            named(py, &published.modes.available)?,
        ))
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
        if let Ok(state) = self.call.try_lock() {
            let callbacks = &state.callbacks;
            for callback in [
                &callbacks.on_update,
                &callbacks.permission_preview,
                &callbacks.permission_commit,
            ]
            .into_iter()
            .flatten()
            {
                visit.call(callback)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        if let Ok(mut state) = self.call.try_lock() {
            state.callbacks = Callbacks::default();
        }
    }
}

impl CoreClient {
    /// Re-publishes from the live state when no call holds it (a call publishes when it ends).
    fn refresh(&self) {
        if let Ok(state) = self.call.try_lock() {
            self.publish(&state);
        }
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Update>()?;
    m.add_class::<CoreClient>()?;
    guard::register(m)?;
    m.add(
        "DEFAULT_MESSAGE_BYTES",
        reader::DEFAULT_LIMITS.message_bytes,
    )?;
    Ok(())
}

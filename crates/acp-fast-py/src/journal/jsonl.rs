//! The JSONL journal's store: records formatted as the Python side reads them, appended to a
//! duplicate of the journal's descriptor (the Python side opened it: header, torn tail, last
//! record), synced per batch unless fsync is "never".

use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::batch::{now_ns, Core, Store};
use super::fsync_mode;
use super::lines::{
    looks_like_an_object, record_other, record_update, Envelope, Lines, Session, UpdateRecord,
};
use super::sync::Fsync;
use crate::update::Update;

pub(crate) struct JsonlStore {
    /// None once closed: close() closes the descriptor (not the writer's collection).
    file: Option<File>,
    /// Bytes of whole records in the file: a failed write is cut back to this.
    size: u64,
    sync: bool,
}

impl Store for JsonlStore {
    type Batch = Lines;
    type Hot = Session;

    fn bytes(batch: &Lines) -> usize {
        batch.bytes()
    }

    fn store(&mut self, batch: &mut Lines) -> Result<(), String> {
        batch.make_lines();
        let sync = self.sync;
        let Some(file) = self.file.as_mut() else {
            return Err("the journal is closed".to_owned());
        };
        let result =
            file.write_all(&batch.text)
                .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        match result {
            Ok(()) => {
                self.size += batch.text.len() as u64;
                batch.clear();
                Ok(())
            }
            Err(error) => {
                // No torn record and no gap: cut the partial write off.
                let _ = file.set_len(self.size);
                Err(strerror(&error))
            }
        }
    }

    fn discard(batch: &mut Lines) {
        batch.clear();
    }

    fn sync_file(&self) -> Result<File, String> {
        match &self.file {
            Some(file) => file.try_clone().map_err(|error| strerror(&error)),
            None => Err("the journal is closed".to_owned()),
        }
    }

    fn close(&mut self) {
        self.file = None;
    }
}

fn strerror(error: &std::io::Error) -> String {
    // "No space left on device", as Python's strerror says it (without Rust's "(os error N)").
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

/// The writer of a JSONL journal (`acp_fast.journal.JsonlJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "JournalWriter")]
pub struct JournalWriter {
    /// The driver's direct hook records updates into it (`Hook`), without a Python call.
    pub(crate) core: Core<JsonlStore>,
    /// The wrapped observer's `on_update`, called after the record is made.
    observer: Option<Py<PyAny>>,
}

#[pymethods]
impl JournalWriter {
    /// `fd`: the journal, open for appending (the writer keeps a duplicate). `size`: its
    /// length, all whole records. `last_record`, `last_epoch`: what it ends with.
    #[new]
    #[pyo3(signature = (path, fd, fsync, size, last_record, last_epoch, observer=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: String,
        fd: i32,
        fsync: &str,
        size: u64,
        last_record: u64,
        last_epoch: u64,
        observer: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        if fd < 0 {
            return Err(PyValueError::new_err("fd must be an open descriptor"));
        }
        let fsync = fsync_mode(fsync)?;
        // SAFETY: `fd` is open for the length of this call (the caller's); ManuallyDrop leaves
        // it to the caller, and the writer keeps a duplicate of its own.
        let borrowed = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        let file = borrowed
            .try_clone()
            .map_err(|error| PyRuntimeError::new_err(format!("cannot duplicate fd: {error}")))?;
        // Only fsync "every" syncs in the store; "batch" syncs on a thread of its own.
        let sync = fsync == Fsync::Every;
        let store = JsonlStore {
            file: Some(file),
            size,
            sync,
        };
        Ok(JournalWriter {
            core: Core::new(path, store, fsync, last_record, last_epoch)?,
            observer,
        })
    }

    /// Records an update (the observer's `on_update`), then calls the wrapped observer's.
    fn update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
        record_python_update(&self.core, py, update)?;
        if let Some(observer) = &self.observer {
            observer.bind(py).call1((update,))?;
        }
        Ok(())
    }

    /// Records anything that is not an update and writes it (and what is pending) at once.
    /// `rest`: the record's text after its time (``"i":…`` up to the closing brace);
    /// `epoch`: None stamps the latest update's epoch.
    #[pyo3(signature = (kind, epoch, rest))]
    fn other(
        &self,
        py: Python<'_>,
        kind: &str,
        epoch: Option<u64>,
        rest: &Bound<'_, PyBytes>,
    ) -> PyResult<()> {
        record_other(&self.core, py, kind, epoch, rest.as_bytes())
    }

    /// The number of the last record made (written or pending).
    #[getter]
    fn last_record(&self) -> u64 {
        self.core.last_record()
    }

    /// The epoch of the latest update (before any: the one the journal was opened with).
    #[getter]
    fn last_epoch(&self) -> u64 {
        self.core.last_epoch()
    }

    /// Writes (and, unless fsync is "never", syncs) every pending record now (nothing once
    /// closed).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.core.flush(py)
    }

    /// Writes what is pending and stops the batch thread. Idempotent; raises once when
    /// records were lost to a failed write.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.core.close(py)
    }

    /// Marks the writer as its parent's in a child made by fork().
    fn forked(&self) {
        self.core.forked();
    }
}

impl JournalWriter {
    /// The wrapped observer's `on_update`.
    pub(crate) fn observer(&self) -> Option<&Py<PyAny>> {
        self.observer.as_ref()
    }
}

/// Records an `Update` object (a Python call of a writer's `update`). Its envelope is
/// embedded verbatim when it looks like one line holding a JSON object (the core's always
/// are: it parsed them); anything else (a made-up Update) is stored as a JSON string, as
/// Python would encode it. Not a full parse: that would cost about what the rest does.
pub(crate) fn record_python_update<S: Store<Batch = Lines, Hot = Session>>(
    core: &Core<S>,
    py: Python<'_>,
    update: &Bound<'_, Update>,
) -> PyResult<()> {
    let fields = update.get();
    let envelope = fields.envelope.bind(py);
    let session = fields.session_id.bind(py).to_str()?;
    let quoted;
    let envelope = match envelope.to_str() {
        Ok(text) if looks_like_an_object(text.as_bytes()) => Envelope::Verbatim(text.as_bytes()),
        _ => {
            quoted = json_dumps(py, envelope)?;
            Envelope::Quoted(&quoted)
        }
    };
    let record = UpdateRecord {
        epoch: fields.transport_epoch,
        sequence: fields.update_sequence,
        session,
        envelope,
    };
    record_update(core, py, record, now_ns())
}

fn json_dumps(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    let dumped = py.import("json")?.getattr("dumps")?.call1((text,))?;
    Ok(dumped.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
}

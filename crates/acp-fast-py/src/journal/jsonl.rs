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

use super::batch::{Core, Pending, Store, MAX_PENDING_BYTES};
use super::fsync_mode;
use crate::update::Update;

pub(crate) struct JsonlStore {
    file: File,
    /// Bytes of whole records in the file: a failed write is cut back to this.
    size: u64,
    sync: bool,
}

/// The latest update's session and its JSON string (one session in practice: no re-encode).
#[derive(Default)]
pub(crate) struct Session {
    id: String,
    json: Vec<u8>,
}

impl Store for JsonlStore {
    type Batch = Vec<u8>;
    type Hot = Session;

    fn bytes(batch: &Vec<u8>) -> usize {
        batch.len()
    }

    fn store(&mut self, batch: &mut Vec<u8>) -> Result<(), String> {
        let sync = self.sync;
        let result =
            self.file.write_all(batch).and_then(
                |()| {
                    if sync {
                        self.file.sync_data()
                    } else {
                        Ok(())
                    }
                },
            );
        match result {
            Ok(()) => {
                self.size += batch.len() as u64;
                batch.clear();
                Ok(())
            }
            Err(error) => {
                // No torn record and no gap: cut the partial write off.
                let _ = self.file.set_len(self.size);
                Err(strerror(&error))
            }
        }
    }

    fn discard(batch: &mut Vec<u8>) {
        batch.clear();
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

/// Appends `text` as a JSON string the way Python's `json.dumps` writes it (ASCII only).
pub(crate) fn push_json_string(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for unit in text.encode_utf16() {
        match unit {
            0x22 => out.extend_from_slice(b"\\\""),
            0x5c => out.extend_from_slice(b"\\\\"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0d => out.extend_from_slice(b"\\r"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x20..=0x7e => out.push(unit as u8),
            _ => {
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[usize::from((unit >> shift) & 0xf)]);
                }
            }
        }
    }
    out.push(b'"');
}

/// `{…}` on one line: what a record can embed as its `"m"` without a line break in the file.
fn looks_like_an_object(text: &[u8]) -> bool {
    text.first() == Some(&b'{')
        && text.last() == Some(&b'}')
        && memchr::memchr(b'\n', text).is_none()
}

fn push_number(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// `{"n":…,"k":"…","e":…,"s":…,"t":…` — a record up to its time.
fn push_head(out: &mut Vec<u8>, number: u64, kind: &str, epoch: u64, sequence: u64, time: u64) {
    out.extend_from_slice(b"{\"n\":");
    push_number(out, number);
    out.extend_from_slice(b",\"k\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"e\":");
    push_number(out, epoch);
    out.extend_from_slice(b",\"s\":");
    push_number(out, sequence);
    out.extend_from_slice(b",\"t\":");
    push_number(out, time);
}

/// The writer of a JSONL journal (`acp_fast.journal.JsonlJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "JournalWriter")]
pub struct JournalWriter {
    core: Core<JsonlStore>,
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
        let (every, sync) = fsync_mode(fsync)?;
        // SAFETY: `fd` is open for the length of this call (the caller's); ManuallyDrop leaves
        // it to the caller, and the writer keeps a duplicate of its own.
        let borrowed = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        let file = borrowed
            .try_clone()
            .map_err(|error| PyRuntimeError::new_err(format!("cannot duplicate fd: {error}")))?;
        let store = JsonlStore { file, size, sync };
        Ok(JournalWriter {
            core: Core::new(path, store, every, last_record, last_epoch)?,
            observer,
        })
    }

    /// Records an update (the observer's `on_update`), then calls the wrapped observer's.
    fn update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
        let fields = update.get();
        let envelope = fields.envelope.bind(py);
        let session = fields.session_id.bind(py).to_str()?;
        // The envelope is embedded verbatim when it looks like one line holding a JSON object
        // (the core's always are: it parsed them); anything else (a made-up Update) is stored
        // as a JSON string, as Python would encode it. Not a full parse: that would cost about
        // what the rest of the record does.
        let verbatim = match envelope.to_str() {
            Ok(text) if looks_like_an_object(text.as_bytes()) => Some(text.as_bytes()),
            _ => None,
        };
        let quoted = match verbatim {
            Some(_) => None,
            None => Some(json_dumps(py, envelope)?),
        };
        let epoch = fields.transport_epoch;
        let sequence = fields.update_sequence;
        self.core.append(
            py,
            true,
            |pending: &mut Pending<JsonlStore>, number, time| {
                pending.last_epoch = epoch;
                let Pending { batch, hot, .. } = pending;
                if hot.id != session {
                    hot.id.clear();
                    hot.id.push_str(session);
                    hot.json.clear();
                    push_json_string(&mut hot.json, session);
                }
                if batch.capacity() == 0 {
                    batch.reserve(MAX_PENDING_BYTES + (64 << 10));
                }
                push_head(batch, number, "update", epoch, sequence, time);
                batch.extend_from_slice(b",\"i\":");
                batch.extend_from_slice(&hot.json);
                match (verbatim, &quoted) {
                    (Some(text), _) => {
                        batch.extend_from_slice(b",\"m\":");
                        batch.extend_from_slice(text);
                    }
                    (None, Some(quoted)) => {
                        batch.extend_from_slice(b",\"x\":");
                        batch.extend_from_slice(quoted);
                    }
                    (None, None) => unreachable!("an envelope is either verbatim or quoted"),
                }
                batch.extend_from_slice(b"}\n");
                Ok(())
            },
        )?;
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
        let rest = rest.as_bytes();
        self.core.append(py, false, |pending, number, time| {
            let epoch = epoch.unwrap_or(pending.last_epoch);
            push_head(&mut pending.batch, number, kind, epoch, 0, time);
            pending.batch.push(b',');
            pending.batch.extend_from_slice(rest);
            pending.batch.push(b'\n');
            Ok(())
        })
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

fn json_dumps(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    let dumped = py.import("json")?.getattr("dumps")?.call1((text,))?;
    Ok(dumped.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
}

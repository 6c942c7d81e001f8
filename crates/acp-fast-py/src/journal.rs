//! The hot path of `acp_fast.journal`: `JournalWriter` formats each record of a JSONL journal in
//! Rust and writes the records in batches, so an update costs the reader one lock and a few
//! copies instead of Python string work and a write.
//!
//! The Python side opens the file (header, torn tail, last record); this writer appends to a
//! duplicate of its descriptor. Records go to a pending buffer; with fsync "batch" or "never" a
//! thread of the writer's own writes a batch once it reaches 1 MiB or has waited 50 ms (and
//! syncs it unless "never"), so neither the write nor the sync is paid by the reader. With
//! "every", and for every record that is not an update, the caller writes (and syncs) the whole
//! pending buffer itself before returning. Batches are taken from the buffer while the sink is
//! locked, so they reach the file whole and in order.

use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::update::Update;

/// A batch ends at this many bytes of pending records ...
const BATCH_BYTES: usize = 1 << 20;
/// ... or when its oldest record has waited this long.
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// A disk slower than the reader: past this many pending bytes the reader writes them itself,
/// so memory stays bounded (the reader then waits for the disk).
const MAX_PENDING_BYTES: usize = 16 << 20;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a lock was held leaves plain bytes and counters: still usable.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

/// What the reader appends to, under one short lock.
struct Pending {
    buf: Vec<u8>,
    /// When the oldest pending record was made (meaningless while `buf` is empty).
    first_ns: u64,
    last_record: u64,
    /// The epoch of the latest update; before any, the last one found when the file was opened.
    last_epoch: u64,
    /// The latest update's session and its JSON string (one session in practice: no re-encode).
    session: String,
    session_json: Vec<u8>,
    /// The batch thread ends once the buffer is written.
    stop: bool,
}

/// The file, through a descriptor of its own (a dup: the Python side closes its own).
struct Sink {
    file: File,
    /// Bytes of whole records in the file: a failed write is cut back to this.
    size: u64,
    sync: bool,
    failed: Option<String>,
    /// The previous batch's buffer, swapped in as the next pending buffer (no reallocation).
    spare: Vec<u8>,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    sink: Mutex<Sink>,
    /// Set with `Sink::failed`, read without the lock on the hot path.
    failed: AtomicBool,
}

enum WriteError {
    Earlier(String),
    Now(String),
}

impl Shared {
    /// Writes (and syncs, unless "never") every pending record. Lock order: sink, then pending.
    fn write_pending(&self) -> Result<(), WriteError> {
        let mut sink = lock(&self.sink);
        if let Some(failed) = &sink.failed {
            return Err(WriteError::Earlier(failed.clone()));
        }
        let mut batch = std::mem::take(&mut sink.spare);
        std::mem::swap(&mut lock(&self.pending).buf, &mut batch);
        if batch.is_empty() {
            sink.spare = batch;
            return Ok(());
        }
        let sync = sink.sync;
        let result =
            sink.file.write_all(&batch).and_then(
                |()| {
                    if sync {
                        sink.file.sync_data()
                    } else {
                        Ok(())
                    }
                },
            );
        match result {
            Ok(()) => {
                sink.size += batch.len() as u64;
                batch.clear();
                sink.spare = batch;
                Ok(())
            }
            Err(error) => {
                // No torn record and no gap: cut the partial write off, refuse further records.
                let message = strerror(&error);
                let size = sink.size;
                let _ = sink.file.set_len(size);
                sink.failed = Some(message.clone());
                self.failed.store(true, Ordering::Release);
                Err(WriteError::Now(message))
            }
        }
    }

    /// The batch thread: writes a batch once it is big enough or old enough.
    fn run(&self) {
        let mut pending = lock(&self.pending);
        loop {
            if pending.buf.is_empty() {
                if pending.stop {
                    return;
                }
                pending = self
                    .wake
                    .wait_timeout(pending, BATCH_WAIT)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
                continue;
            }
            let waited = Duration::from_nanos(now_ns().saturating_sub(pending.first_ns));
            if pending.buf.len() < BATCH_BYTES && waited < BATCH_WAIT && !pending.stop {
                pending = self
                    .wake
                    .wait_timeout(pending, BATCH_WAIT - waited)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
                continue;
            }
            drop(pending);
            // A failure is kept in the sink: the next record, flush() or close() raises it.
            let failed = self.write_pending().is_err();
            pending = lock(&self.pending);
            if failed {
                pending.buf.clear();
                if pending.stop {
                    return;
                }
            }
        }
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
fn push_json_string(out: &mut Vec<u8>, text: &str) {
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

fn push_number(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// The writer of one JSONL journal (see the module).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "JournalWriter")]
pub struct JournalWriter {
    shared: Arc<Shared>,
    path: String,
    every: bool,
    /// The wrapped observer's `on_update`, called after the record is made.
    observer: Option<Py<PyAny>>,
    closed: AtomicBool,
    /// Set in a child made by fork(): the records belong to the parent.
    foreign: AtomicBool,
    owner: u32,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl JournalWriter {
    fn error(&self, py: Python<'_>, what: String) -> PyErr {
        let made = py
            .import("acp_fast.journal")
            .and_then(|module| module.getattr("JournalError"))
            .and_then(|class| class.call1((self.path.as_str(), what.as_str())));
        match made {
            Ok(error) => PyErr::from_value(error),
            Err(error) => error,
        }
    }

    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        if self.foreign.load(Ordering::Relaxed) {
            return Err(self.error(py, format!("the journal belongs to process {}", self.owner)));
        }
        if self.closed.load(Ordering::Relaxed) {
            return Err(self.error(py, "the journal is closed".to_owned()));
        }
        if self.shared.failed.load(Ordering::Acquire) {
            let failed = lock(&self.shared.sink).failed.clone().unwrap_or_default();
            return Err(self.error(py, format!("an earlier write failed ({failed})")));
        }
        Ok(())
    }

    /// Writes the pending records now, the GIL released while the disk works.
    fn write_now(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        match py.detach(|| shared.write_pending()) {
            Ok(()) => Ok(()),
            Err(WriteError::Earlier(failed)) => {
                Err(self.error(py, format!("an earlier write failed ({failed})")))
            }
            Err(WriteError::Now(failed)) => Err(self.error(py, format!("cannot write: {failed}"))),
        }
    }

    /// Appends one record made by `format` (given the buffer, the record's number and time), then
    /// writes it at once (`now`), or wakes the batch thread when a batch is due.
    fn append(
        &self,
        py: Python<'_>,
        now: bool,
        format: impl FnOnce(&mut Pending, u64, u64),
    ) -> PyResult<()> {
        // One clock read a record (a vDSO call, ~35 ns here): its time and the batch's age.
        let time = now_ns();
        let (due, full) = {
            let mut pending = lock(&self.shared.pending);
            let before = pending.buf.len();
            if before == 0 {
                pending.first_ns = time;
            }
            pending.last_record += 1;
            let number = pending.last_record;
            format(&mut pending, number, time);
            let after = pending.buf.len();
            (
                before < BATCH_BYTES && after >= BATCH_BYTES,
                after >= MAX_PENDING_BYTES,
            )
        };
        if now || full {
            self.write_now(py)
        } else {
            if due {
                self.shared.wake.notify_one();
            }
            Ok(())
        }
    }
}

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

#[pymethods]
impl JournalWriter {
    /// `fd`: the journal, open for appending, owned by the caller (closed after `close()`).
    /// `size`: its length, all whole records. `last_record`, `last_epoch`: what it ends with.
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
        let (every, sync) = match fsync {
            "every" => (true, true),
            "batch" => (false, true),
            "never" => (false, false),
            other => {
                return Err(PyValueError::new_err(format!(
                    "fsync must be one of every, batch, never, not {other:?}"
                )))
            }
        };
        // SAFETY: `fd` is open for the length of this call (the caller's); ManuallyDrop leaves
        // it to the caller, and the writer keeps a duplicate of its own.
        let borrowed = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        let file = borrowed
            .try_clone()
            .map_err(|error| PyRuntimeError::new_err(format!("cannot duplicate fd: {error}")))?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                buf: Vec::with_capacity(BATCH_BYTES + (64 << 10)),
                first_ns: 0,
                last_record,
                last_epoch,
                session: String::new(),
                session_json: b"\"\"".to_vec(),
                stop: false,
            }),
            wake: Condvar::new(),
            sink: Mutex::new(Sink {
                file,
                size,
                sync,
                failed: None,
                spare: Vec::with_capacity(BATCH_BYTES + (64 << 10)),
            }),
            failed: AtomicBool::new(false),
        });
        let thread = if every {
            None
        } else {
            let shared = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("acp-fast-journal".to_owned())
                .spawn(move || shared.run())
                .map_err(|error| PyRuntimeError::new_err(format!("cannot start: {error}")))?;
            Some(spawned)
        };
        Ok(JournalWriter {
            shared,
            path,
            every,
            observer,
            closed: AtomicBool::new(false),
            foreign: AtomicBool::new(false),
            owner: std::process::id(),
            thread: Mutex::new(thread),
        })
    }

    /// Records an update (the observer's `on_update`), then calls the wrapped observer's.
    fn update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
        self.check_open(py)?;
        let fields = update.get();
        let envelope = fields.envelope.bind(py);
        let session = fields.session_id.bind(py).to_str()?;
        // The envelope is embedded verbatim when it is one line of text; anything else (a
        // made-up Update) is stored as a JSON string, as Python would encode it.
        let verbatim = match envelope.to_str() {
            Ok(text) if !text.as_bytes().contains(&b'\n') => Some(text),
            _ => None,
        };
        let quoted = match verbatim {
            Some(_) => None,
            None => Some(json_dumps(py, envelope)?),
        };
        let epoch = fields.transport_epoch;
        let sequence = fields.update_sequence;
        self.append(py, self.every, |pending, number, time| {
            pending.last_epoch = epoch;
            if pending.session != session {
                pending.session.clear();
                pending.session.push_str(session);
                pending.session_json.clear();
                push_json_string(&mut pending.session_json, session);
            }
            let Pending {
                buf, session_json, ..
            } = pending;
            push_head(buf, number, "update", epoch, sequence, time);
            buf.extend_from_slice(b",\"i\":");
            buf.extend_from_slice(session_json);
            match (verbatim, &quoted) {
                (Some(text), _) => {
                    buf.extend_from_slice(b",\"m\":");
                    buf.extend_from_slice(text.as_bytes());
                }
                (None, Some(quoted)) => {
                    buf.extend_from_slice(b",\"x\":");
                    buf.extend_from_slice(quoted);
                }
                (None, None) => unreachable!("an envelope is either verbatim or quoted"),
            }
            buf.extend_from_slice(b"}\n");
        })?;
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
        self.check_open(py)?;
        let rest = rest.as_bytes();
        self.append(py, true, |pending, number, time| {
            let epoch = epoch.unwrap_or(pending.last_epoch);
            push_head(&mut pending.buf, number, kind, epoch, 0, time);
            pending.buf.push(b',');
            pending.buf.extend_from_slice(rest);
            pending.buf.push(b'\n');
        })
    }

    /// The number of the last record made (written or pending).
    #[getter]
    fn last_record(&self) -> u64 {
        lock(&self.shared.pending).last_record
    }

    /// The epoch of the latest update (before any: the one the journal was opened with).
    #[getter]
    fn last_epoch(&self) -> u64 {
        lock(&self.shared.pending).last_epoch
    }

    /// Writes (and, unless fsync is "never", syncs) every pending record now (nothing once
    /// closed).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        if self.closed.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.check_open(py)?;
        self.write_now(py)
    }

    /// Writes what is pending and stops the batch thread. Idempotent; raises once when
    /// records were lost to a failed write.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.foreign.load(Ordering::Relaxed) || self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        lock(&self.shared.pending).stop = true;
        self.shared.wake.notify_one();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            py.detach(|| {
                let _ = thread.join();
            });
        }
        let shared = &self.shared;
        let _ = py.detach(|| shared.write_pending());
        let failed = lock(&self.shared.sink).failed.clone();
        match failed {
            Some(failed) => {
                Err(self.error(py, format!("records were lost: a write failed ({failed})")))
            }
            None => Ok(()),
        }
    }

    /// Marks the writer as its parent's in a child made by fork(): nothing is written here,
    /// and no lock is touched (the parent's batch thread may have held one).
    fn forked(&self) {
        self.foreign.store(true, Ordering::Relaxed);
    }
}

impl Drop for JournalWriter {
    fn drop(&mut self) {
        // Not closed (close() joins): let the batch thread write what is pending and end. In a
        // child made by fork() there is no thread, and a lock may be held for good.
        if self.foreign.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut pending) = self.shared.pending.try_lock() {
            pending.stop = true;
        }
        self.shared.wake.notify_one();
    }
}

fn json_dumps(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    let dumped = py.import("json")?.getattr("dumps")?.call1((text,))?;
    Ok(dumped.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
}

//! `JournalWriter`: the JSONL journal's writer (`acp_fast.journal.JsonlJournal`), over the
//! crate's JSONL store on a duplicate of the descriptor the Python side opened.

use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;

use acp_journal::{Core, JsonlStore};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::writer::{fsync_mode, raise, writer_methods, Journal};
use crate::update::Update;

/// The writer of a JSONL journal (`acp_fast.journal.JsonlJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "JournalWriter")]
pub struct JournalWriter {
    /// The driver's direct hook records updates into it (`Hook`), without a Python call.
    pub(super) journal: Journal<JsonlStore>,
    /// The wrapped observer's `on_update`, called after the record is made.
    observer: Option<Py<PyAny>>,
}

writer_methods!(
    JournalWriter,
    new: {
        /// `fd`: the journal, open for appending (the writer keeps a duplicate). `size`: its
        /// length, all whole records. `last_record`, `last_epoch`: what it ends with.
        #[new]
        #[pyo3(signature = (path, fd, fsync, size, last_record, last_epoch, observer=None))]
        #[allow(clippy::too_many_arguments)]
        fn new(
            py: Python<'_>,
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
            let store = JsonlStore::new(file, size, fsync);
            let core = Core::new(store, fsync, last_record, last_epoch)
                .map_err(|error| raise(py, &path, error))?;
            Ok(JournalWriter {
                journal: Journal { core, path },
                observer,
            })
        }
    },
    other: [
        " Records anything that is not an update and writes it (and what is pending) at once.",
        " `rest`: the record's text after its time (``\"i\":…`` up to the closing brace);",
        " `epoch`: None stamps the latest update's epoch.",
    ],
    last_record: " The number of the last record made (written or pending).",
    flush: [
        " Writes (and, unless fsync is \"never\", syncs) every pending record now (nothing once",
        " closed).",
    ],
    close: [
        " Writes what is pending and stops the batch thread. Idempotent; raises once when",
        " records were lost to a failed write.",
    ],
);

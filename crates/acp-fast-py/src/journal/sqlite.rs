//! `SqliteWriter`: the SQLite journal's writer (`acp_fast.journal.SqliteJournal`), over the
//! crate's SQLite store on the very SQLite library Python's `sqlite3` calls.

use std::ffi::c_int;

use acp_journal::{Api, Core, SqliteStore};
use pyo3::exceptions::{PyLookupError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::writer::{fsync_mode, raise, Journal};
use crate::update::Update;

/// The writer of a SQLite journal (`acp_fast.journal.SqliteJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "SqliteWriter")]
pub struct SqliteWriter {
    /// The driver's direct hook records updates into it (`Hook`), without a Python call.
    pub(super) journal: Journal<SqliteStore>,
    /// The wrapped observer's `on_update`, called after the record is made.
    observer: Option<Py<PyAny>>,
}

#[pymethods]
impl SqliteWriter {
    /// `library`: the file of the loaded `_sqlite3` module, whose SQLite (of version number
    /// `version`) the writer calls (LookupError when it cannot: write through `sqlite3` then).
    /// `path`: a journal database the caller created and checked; `last_record`,
    /// `last_epoch`: what it ends with.
    #[new]
    /// `packed`: store each batch LZ4-packed (format version 3; false for a version 2 journal).
    #[pyo3(signature = (library, version, path, fsync, last_record, last_epoch, observer=None, *, packed=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        library: &str,
        version: c_int,
        path: String,
        fsync: &str,
        last_record: u64,
        last_epoch: u64,
        observer: Option<Py<PyAny>>,
        packed: bool,
    ) -> PyResult<Self> {
        let fsync = fsync_mode(fsync)?;
        // Never a second SQLite: the one `_sqlite3` (already loaded) calls, or none.
        let api = Api::bind(library, version).map_err(PyLookupError::new_err)?;
        let store =
            SqliteStore::open(api, &path, fsync, packed).map_err(PyRuntimeError::new_err)?;
        let core = Core::new(store, fsync, last_record, last_epoch)
            .map_err(|error| raise(py, &path, error))?;
        Ok(SqliteWriter {
            journal: Journal { core, path },
            observer,
        })
    }

    /// Records an update (the observer's `on_update`), then calls the wrapped observer's.
    fn update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
        self.journal.python_update(py, update)?;
        if let Some(observer) = &self.observer {
            observer.bind(py).call1((update,))?;
        }
        Ok(())
    }

    /// Records anything that is not an update and commits it (and what is pending) at once.
    /// `rest`: the record's text after its time (``"i":…`` up to the closing brace, as in
    /// JSONL); `epoch`: None stamps the latest update's epoch.
    #[pyo3(signature = (kind, epoch, rest))]
    fn other(
        &self,
        py: Python<'_>,
        kind: &str,
        epoch: Option<u64>,
        rest: &Bound<'_, PyBytes>,
    ) -> PyResult<()> {
        self.journal.other(py, kind, epoch, rest.as_bytes())
    }

    /// The number of the last record made (committed or pending).
    #[getter]
    fn last_record(&self) -> u64 {
        self.journal.core.last_record()
    }

    /// The epoch of the latest update (before any: the one the journal was opened with).
    #[getter]
    fn last_epoch(&self) -> u64 {
        self.journal.core.last_epoch()
    }

    /// Commits (and, unless fsync is "never", syncs) every pending record now (nothing once
    /// closed).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.journal.flush(py)
    }

    /// Commits what is pending, stops the batch thread and closes the connection. Idempotent;
    /// raises once when records were lost to a failed write.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.journal.close(py)
    }

    /// Marks the writer as its parent's in a child made by fork().
    fn forked(&self) {
        self.journal.core.forked();
    }
}

impl SqliteWriter {
    /// The wrapped observer's `on_update`.
    pub(crate) fn observer(&self) -> Option<&Py<PyAny>> {
        self.observer.as_ref()
    }
}

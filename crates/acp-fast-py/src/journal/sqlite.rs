//! `SqliteWriter`: the SQLite journal's writer (`acp_fast.journal.SqliteJournal`), over the
//! crate's SQLite store on the very SQLite library Python's `sqlite3` calls.

use std::ffi::c_int;

use acp_journal::{Api, Core, SqliteStore};
use pyo3::exceptions::{PyLookupError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::writer::{fsync_mode, raise, writer_methods, Journal};
use crate::update::Update;

/// The writer of a SQLite journal (`acp_fast.journal.SqliteJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "SqliteWriter")]
pub struct SqliteWriter {
    /// The driver's direct hook records updates into it (`Hook`), without a Python call.
    pub(super) journal: Journal<SqliteStore>,
    /// The wrapped observer's `on_update`, called after the record is made.
    observer: Option<Py<PyAny>>,
}

writer_methods!(
    SqliteWriter,
    new: {
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
    },
    other: [
        " Records anything that is not an update and commits it (and what is pending) at once.",
        " `rest`: the record's text after its time (``\"i\":…`` up to the closing brace, as in",
        " JSONL); `epoch`: None stamps the latest update's epoch.",
    ],
    last_record: " The number of the last record made (committed or pending).",
    flush: [
        " Commits (and, unless fsync is \"never\", syncs) every pending record now (nothing once",
        " closed).",
    ],
    close: [
        " Commits what is pending, stops the batch thread and closes the connection. Idempotent;",
        " raises once when records were lost to a failed write.",
    ],
);

//! The SQLite journal's store: a batch of records (the JSONL journal's lines, LZ4-packed) as
//! one row of `batches`, one transaction a batch, through a connection of the writer's own on
//! the SQLite `sqlite3` calls (`sqlite_api`), so neither the reader nor the GIL waits for SQLite and an
//! update costs its line, not an INSERT. The Python side created the database (schema, WAL,
//! format row) and read its last record. `synchronous=FULL` syncs each commit (fsync "every",
//! "batch"); "never": OFF.

use std::ffi::{c_int, CStr};

use pyo3::exceptions::{PyLookupError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::batch::{Core, Store};
use super::fsync_mode;
use super::jsonl::record_python_update;
use super::lines::{record_other, Lines, Session};
use super::pack::pack_into;
use super::sqlite_api::{Api, Db, Stmt, SQLITE_DONE};
use super::sync::Fsync;
use crate::update::Update;

/// Python's `sqlite3` waits this long for a lock by default; so does the writer.
const BUSY_TIMEOUT_MS: c_int = 5000;
const INSERT: &CStr = c"INSERT INTO batches (first_record, last_record, first_epoch, \
first_sequence, last_epoch, last_sequence, records) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

pub(crate) struct SqliteStore {
    api: Api,
    db: *mut Db,
    insert: *mut Stmt,
    /// Format version 3: each batch stored LZ4-packed (`pack`), in `packed`'s reused memory;
    /// version 2 journals are appended to as they are, the lines plain.
    pack: bool,
    packed: Vec<u8>,
    /// The database's path: fsync "batch" syncs its WAL (`<path>-wal`).
    path: String,
}

// SAFETY: the connection is used by one thread at a time (the batch core's store lock), and the
// library is built thread-safe (checked by `Api::bind`).
unsafe impl Send for SqliteStore {}

fn signed(value: u64) -> i64 {
    // SQLite integers are signed 64-bit; numbers, epochs and sequences stay far below.
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl SqliteStore {
    fn open(api: Api, path: &str, fsync: Fsync, pack: bool) -> Result<SqliteStore, String> {
        let db = api.open(path, BUSY_TIMEOUT_MS)?;
        let mut store = SqliteStore {
            api,
            db,
            insert: std::ptr::null_mut(),
            pack,
            packed: Vec::new(),
            // As SQLite names its WAL: from the resolved path, whatever the directory later.
            path: std::fs::canonicalize(path).map_or_else(
                |_| path.to_owned(),
                |real| real.to_string_lossy().into_owned(),
            ),
        };
        // WAL with NORMAL: a commit is written to the WAL, not synced (a killed host loses
        // none of it); SQLite syncs the WAL before each checkpoint and the database after it.
        // fsync "batch" syncs the WAL itself, on the sync thread (`sync`): what FULL gives,
        // one sync for all the commits made while the last one ran.
        let synchronous = match fsync {
            Fsync::Every => c"PRAGMA synchronous=FULL",
            Fsync::Batch => c"PRAGMA synchronous=NORMAL",
            Fsync::Never => c"PRAGMA synchronous=OFF",
        };
        store.api.exec(db, synchronous)?;
        store.insert = store.api.prepare(db, INSERT)?;
        Ok(store)
    }

    fn status(&self, status: c_int) -> Result<(), String> {
        if status == 0 {
            Ok(())
        } else {
            Err(self.api.error(self.db))
        }
    }

    fn int(&self, index: c_int, value: Option<u64>) -> Result<(), String> {
        // SAFETY: the statement is live.
        self.status(unsafe {
            match value {
                Some(value) => (self.api.bind_int64)(self.insert, index, signed(value)),
                None => (self.api.bind_null)(self.insert, index),
            }
        })
    }

    /// Inserts the batch as one row (an implicit transaction: the row is whole or absent).
    fn insert(&mut self, batch: &Lines) -> Result<(), String> {
        if self.db.is_null() {
            return Err("the connection is closed".to_owned());
        }
        let first = batch.first_update;
        let last = batch.last_update;
        self.int(1, Some(batch.first_record))?;
        self.int(2, Some(batch.last_record))?;
        self.int(3, first.map(|(epoch, _)| epoch))?;
        self.int(4, first.map(|(_, sequence)| sequence))?;
        self.int(5, last.map(|(epoch, _)| epoch))?;
        self.int(6, last.map(|(_, sequence)| sequence))?;
        let text = if self.pack {
            let length = pack_into(&batch.text, &mut self.packed)?;
            &self.packed[..length]
        } else {
            &batch.text
        };
        let length = c_int::try_from(text.len()).map_err(|_| "a batch over 2 GiB".to_owned())?;
        // SAFETY: `text` outlives the step that reads it (SQLITE_STATIC); the statement is live.
        self.status(unsafe {
            (self.api.bind_blob)(
                self.insert,
                7,
                text.as_ptr().cast(),
                length,
                std::ptr::null(),
            )
        })?;
        // SAFETY: the statement is live and bound.
        let status = unsafe { (self.api.step)(self.insert) };
        let outcome = if status == SQLITE_DONE {
            Ok(())
        } else {
            Err(self.api.error(self.db))
        };
        // SAFETY: the statement is live; reset keeps its error for the outcome above.
        unsafe { (self.api.reset)(self.insert) };
        outcome
    }
}

impl SqliteStore {
    /// Closes the connection (the last one checkpoints the WAL into the database). Idempotent.
    fn shut(&mut self) {
        // SAFETY: the statement and the connection are this store's, nulled once closed;
        // finalize(null) and close_v2(null) are no-ops.
        unsafe {
            (self.api.finalize)(self.insert);
            (self.api.close_v2)(self.db);
        }
        self.insert = std::ptr::null_mut();
        self.db = std::ptr::null_mut();
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.shut();
    }
}

impl Store for SqliteStore {
    type Batch = Lines;
    type Hot = Session;

    fn bytes(batch: &Lines) -> usize {
        batch.bytes()
    }

    fn store(&mut self, batch: &mut Lines) -> Result<(), String> {
        batch.make_lines();
        let result = self.insert(batch);
        batch.clear();
        result.map_err(|error| format!("cannot write the journal: {error}"))
    }

    fn discard(batch: &mut Lines) {
        batch.clear();
    }

    fn sync_file(&self) -> Result<std::fs::File, String> {
        // The WAL exists while this connection is open: it has just committed into it.
        let wal = format!("{}-wal", self.path);
        std::fs::File::open(&wal).map_err(|error| format!("cannot open {wal} to sync it: {error}"))
    }

    fn close(&mut self) {
        self.shut();
    }
}

/// The writer of a SQLite journal (`acp_fast.journal.SqliteJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "SqliteWriter")]
pub struct SqliteWriter {
    /// The driver's direct hook records updates into it (`Hook`), without a Python call.
    pub(crate) core: Core<SqliteStore>,
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
        let api = Api::bind(library, version).map_err(PyLookupError::new_err)?;
        let store =
            SqliteStore::open(api, &path, fsync, packed).map_err(PyRuntimeError::new_err)?;
        Ok(SqliteWriter {
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
        record_other(&self.core, py, kind, epoch, rest.as_bytes())
    }

    /// The number of the last record made (committed or pending).
    #[getter]
    fn last_record(&self) -> u64 {
        self.core.last_record()
    }

    /// The epoch of the latest update (before any: the one the journal was opened with).
    #[getter]
    fn last_epoch(&self) -> u64 {
        self.core.last_epoch()
    }

    /// Commits (and, unless fsync is "never", syncs) every pending record now (nothing once
    /// closed).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.core.flush(py)
    }

    /// Commits what is pending, stops the batch thread and closes the connection. Idempotent;
    /// raises once when records were lost to a failed write.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.core.close(py)
    }

    /// Marks the writer as its parent's in a child made by fork().
    fn forked(&self) {
        self.core.forked();
    }
}

impl SqliteWriter {
    /// The wrapped observer's `on_update`.
    pub(crate) fn observer(&self) -> Option<&Py<PyAny>> {
        self.observer.as_ref()
    }
}

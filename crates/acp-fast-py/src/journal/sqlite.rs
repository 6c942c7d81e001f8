//! The SQLite journal's store: rows inserted in one transaction a batch, through a connection
//! of the writer's own on the SQLite `sqlite3` calls (`sqlite_api`), so neither the
//! reader nor the GIL waits for SQLite. The Python side created the database (schema, WAL,
//! format row) and read its last record. `synchronous=FULL` syncs each commit (fsync "every",
//! "batch"); "never": OFF.

use std::ffi::{c_int, CStr};
use std::sync::Arc;

use pyo3::exceptions::{PyLookupError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::batch::{Core, Pending, Store};
use super::fsync_mode;
use super::sqlite_api::{Api, Db, Stmt, SQLITE_DONE};
use crate::update::Update;

/// Python's `sqlite3` waits this long for a lock by default; so does the writer.
const BUSY_TIMEOUT_MS: c_int = 5000;
const INSERT: &CStr = c"INSERT INTO records VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
/// An update's constant columns are in the statement: fewer values to bind a row.
const INSERT_UPDATE: &CStr = c"INSERT INTO records VALUES (?1, 'update', ?2, ?3, ?4, ?5, ?6, NULL)";

/// One row of `records`. `kind` None: an update (its `fields` are NULL).
pub(crate) struct Row {
    number: u64,
    kind: Option<String>,
    epoch: u64,
    sequence: u64,
    session: Arc<str>,
    time: u64,
    envelope: String,
    fields: Option<String>,
}

#[derive(Default)]
pub(crate) struct Rows {
    rows: Vec<Row>,
    /// About what the rows take (a batch ends at 1 MiB, as in JSONL).
    bytes: usize,
}

pub(crate) struct SqliteStore {
    api: Api,
    db: *mut Db,
    update: *mut Stmt,
    other: *mut Stmt,
}

// SAFETY: the connection is used by one thread at a time (the batch core's store lock), and the
// library is built thread-safe (checked by `Api::bind`).
unsafe impl Send for SqliteStore {}

fn signed(value: u64) -> i64 {
    // SQLite integers are signed 64-bit; numbers, epochs and nanoseconds stay far below.
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl SqliteStore {
    fn open(api: Api, path: &str, sync: bool) -> Result<SqliteStore, String> {
        let db = api.open(path, BUSY_TIMEOUT_MS)?;
        let mut store = SqliteStore {
            api,
            db,
            update: std::ptr::null_mut(),
            other: std::ptr::null_mut(),
        };
        let synchronous = if sync {
            c"PRAGMA synchronous=FULL"
        } else {
            c"PRAGMA synchronous=OFF"
        };
        store.api.exec(db, synchronous)?;
        store.update = store.api.prepare(db, INSERT_UPDATE)?;
        store.other = store.api.prepare(db, INSERT)?;
        Ok(store)
    }

    fn text(&self, statement: *mut Stmt, index: c_int, text: &str) -> Result<(), String> {
        let length = c_int::try_from(text.len()).map_err(|_| "a record over 2 GiB".to_owned())?;
        // SAFETY: `text` outlives the step that reads it (SQLITE_STATIC); the statement is live.
        let status = unsafe {
            (self.api.bind_text)(
                statement,
                index,
                text.as_ptr().cast(),
                length,
                std::ptr::null(),
            )
        };
        self.status(status)
    }

    fn int(&self, statement: *mut Stmt, index: c_int, value: u64) -> Result<(), String> {
        // SAFETY: the statement is live.
        self.status(unsafe { (self.api.bind_int64)(statement, index, signed(value)) })
    }

    fn status(&self, status: c_int) -> Result<(), String> {
        if status == 0 {
            Ok(())
        } else {
            Err(self.api.error(self.db))
        }
    }

    fn insert(&self, row: &Row) -> Result<(), String> {
        let statement = match &row.kind {
            None => {
                let s = self.update;
                self.int(s, 1, row.number)?;
                self.int(s, 2, row.epoch)?;
                self.int(s, 3, row.sequence)?;
                self.text(s, 4, &row.session)?;
                self.int(s, 5, row.time)?;
                self.text(s, 6, &row.envelope)?;
                s
            }
            Some(kind) => {
                let s = self.other;
                self.int(s, 1, row.number)?;
                self.text(s, 2, kind)?;
                self.int(s, 3, row.epoch)?;
                self.int(s, 4, row.sequence)?;
                self.text(s, 5, &row.session)?;
                self.int(s, 6, row.time)?;
                self.text(s, 7, &row.envelope)?;
                match &row.fields {
                    Some(fields) => self.text(s, 8, fields)?,
                    // SAFETY: the statement is live.
                    None => self.status(unsafe { (self.api.bind_null)(s, 8) })?,
                }
                s
            }
        };
        // SAFETY: the statement is live and bound; reset makes it ready for the next row.
        let status = unsafe { (self.api.step)(statement) };
        let outcome = if status == SQLITE_DONE {
            Ok(())
        } else {
            Err(self.api.error(self.db))
        };
        // SAFETY: the statement is live; reset keeps its error for the outcome above.
        unsafe { (self.api.reset)(statement) };
        outcome
    }

    fn insert_all(&self, rows: &[Row]) -> Result<(), String> {
        self.api.exec(self.db, c"BEGIN IMMEDIATE")?;
        let inserted = rows.iter().try_for_each(|row| self.insert(row));
        match inserted.and_then(|()| self.api.exec(self.db, c"COMMIT")) {
            Ok(()) => Ok(()),
            Err(error) => {
                // Nothing of the batch stays: no gap.
                let _ = self.api.exec(self.db, c"ROLLBACK");
                Err(error)
            }
        }
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // SAFETY: the statements and the connection are this store's; finalize(null) is a no-op.
        unsafe {
            (self.api.finalize)(self.update);
            (self.api.finalize)(self.other);
            (self.api.close_v2)(self.db);
        }
    }
}

impl Store for SqliteStore {
    type Batch = Rows;
    /// The latest update's session, shared by its rows.
    type Hot = Option<Arc<str>>;

    fn bytes(batch: &Rows) -> usize {
        batch.bytes
    }

    fn store(&mut self, batch: &mut Rows) -> Result<(), String> {
        let result = self.insert_all(&batch.rows);
        Self::discard(batch);
        result.map_err(|error| format!("cannot write the journal: {error}"))
    }

    fn discard(batch: &mut Rows) {
        batch.rows.clear();
        batch.bytes = 0;
    }
}

/// The writer of a SQLite journal (`acp_fast.journal.SqliteJournal`).
#[pyclass(frozen, weakref, module = "acp_fast._core", name = "SqliteWriter")]
pub struct SqliteWriter {
    core: Core<SqliteStore>,
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
    #[pyo3(signature = (library, version, path, fsync, last_record, last_epoch, observer=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        library: &str,
        version: c_int,
        path: String,
        fsync: &str,
        last_record: u64,
        last_epoch: u64,
        observer: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let (every, sync) = fsync_mode(fsync)?;
        let api = Api::bind(library, version).map_err(PyLookupError::new_err)?;
        let store = SqliteStore::open(api, &path, sync).map_err(PyRuntimeError::new_err)?;
        Ok(SqliteWriter {
            core: Core::new(path, store, every, last_record, last_epoch)?,
            observer,
        })
    }

    /// Records an update (the observer's `on_update`), then calls the wrapped observer's.
    fn update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
        let fields = update.get();
        let envelope = fields.envelope.bind(py).to_str()?;
        let session = fields.session_id.bind(py).to_str()?;
        let (epoch, sequence) = (fields.transport_epoch, fields.update_sequence);
        self.core.append(
            py,
            true,
            |pending: &mut Pending<SqliteStore>, number, time| {
                pending.last_epoch = epoch;
                let Pending { batch, hot, .. } = pending;
                let shared = match hot {
                    Some(known) if &**known == session => Arc::clone(known),
                    _ => Arc::clone(hot.insert(Arc::from(session))),
                };
                batch.bytes += envelope.len() + 64;
                batch.rows.push(Row {
                    number,
                    kind: None,
                    epoch,
                    sequence,
                    session: shared,
                    time,
                    envelope: envelope.to_owned(),
                    fields: None,
                });
                Ok(())
            },
        )?;
        if let Some(observer) = &self.observer {
            observer.bind(py).call1((update,))?;
        }
        Ok(())
    }

    /// Records anything that is not an update and commits it (and what is pending) at once.
    /// `epoch`: None stamps the latest update's epoch; `fields`: JSON, or None.
    #[pyo3(signature = (kind, epoch, session_id, envelope, fields))]
    fn other(
        &self,
        py: Python<'_>,
        kind: String,
        epoch: Option<u64>,
        session_id: &Bound<'_, PyString>,
        envelope: &Bound<'_, PyString>,
        fields: Option<String>,
    ) -> PyResult<()> {
        let session: Arc<str> = Arc::from(session_id.to_str()?);
        let envelope = envelope.to_str()?.to_owned();
        self.core.append(py, false, |pending, number, time| {
            let epoch = epoch.unwrap_or(pending.last_epoch);
            pending.batch.bytes += envelope.len() + 64;
            pending.batch.rows.push(Row {
                number,
                kind: Some(kind),
                epoch,
                sequence: 0,
                session,
                time,
                envelope,
                fields,
            });
            Ok(())
        })
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

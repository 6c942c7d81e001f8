//! The hot path of `acp_fast.journal`: each record is made in Rust on the reader's thread (a
//! lock and a few copies, no Python string work) and stored in batches by a thread of the
//! writer's own, so an update costs the reader a small part of what reading it does.
//!
//! - `batch`: pending records, the batch thread, flush, close, fork (over any `Store`).
//! - `jsonl`: `JournalWriter`, the JSONL record format and file.
//! - `sqlite`: `SqliteWriter`, rows through the very SQLite `sqlite3` calls (`sqlite_api`).
//!
//! The Python side opens and checks a journal (header or schema, torn tail, last record), and
//! makes the rare records' text (permission and activity fields, wire lines).

mod batch;
mod jsonl;
mod sqlite;
mod sqlite_api;

pub(crate) use jsonl::JournalWriter;
pub(crate) use sqlite::SqliteWriter;

use pyo3::exceptions::PyValueError;
use pyo3::PyResult;

/// (store each update before returning, sync what is stored) for an fsync mode.
fn fsync_mode(fsync: &str) -> PyResult<(bool, bool)> {
    match fsync {
        "every" => Ok((true, true)),
        "batch" => Ok((false, true)),
        "never" => Ok((false, false)),
        other => Err(PyValueError::new_err(format!(
            "fsync must be one of every, batch, never, not {other:?}"
        ))),
    }
}

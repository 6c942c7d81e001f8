//! The hot path of the JSONL journal (`acp_fast.journal.JsonlJournal`): each record is made in
//! Rust on the reader's thread (a lock and a few copies, no Python string work) and written in
//! batches by a thread of the writer's own, so an update costs the reader a small part of what
//! reading it does.
//!
//! - `batch`: pending records, the batch thread, flush, close, fork (over any `Store`).
//! - `jsonl`: `JournalWriter`, the JSONL record format and file.
//!
//! The Python side opens and checks a journal (header, torn tail, last record), and makes the
//! rare records' text (permission and activity fields, wire lines).
//!
//! The SQLite journal stays with Python's `sqlite3`: a second SQLite library in the process
//! (one compiled in here) would not see the first one's POSIX locks, so a `sqlite3` connection
//! to the same journal closing in this process removes the WAL under the writer (records
//! lost; measured, see the module doc of `acp_fast.journal`).

mod batch;
mod jsonl;

pub(crate) use jsonl::JournalWriter;

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

//! The hot path of `acp_fast.journal`: on the reader's thread a record is its fields and a copy
//! of its bytes (a lock, no JSON, no Python string work); a thread of the writer's own makes
//! the lines and stores them in batches, so the reader pays for keeping the record, not for
//! making or storing it.
//!
//! - `lines`: the record format (one JSON object a line) both kinds store, and the pending
//!   records it is made from.
//! - `batch`: pending records, the batch thread, flush, close, fork (over any `Store`).
//! - `sync`: fsync "batch" as a group commit, on a thread of its own.
//! - `jsonl`: `JournalWriter`, the lines appended to a file.
//! - `sqlite`: `SqliteWriter`, a batch of lines a row (LZ4-packed: `pack`), through the very
//!   SQLite `sqlite3` calls (`sqlite_api`).
//!
//! The Python side opens and checks a journal (header or schema, torn tail, last record), and
//! makes the rare records' text (permission and activity fields, wire lines). When the
//! observer is a journal, the driver hands it each update directly (`Hook`): no Python call for
//! the journal's part.

mod batch;
mod jsonl;
mod lines;
mod pack;
mod sqlite;
mod sqlite_api;
mod sync;

pub(crate) use jsonl::JournalWriter;
pub(crate) use lines::{Envelope, UpdateRecord};
pub(crate) use pack::{pack_records, unpack_records};
pub(crate) use sqlite::SqliteWriter;

use std::cell::Cell;

use batch::now_ns;
use lines::record_update;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sync::Fsync;

fn fsync_mode(fsync: &str) -> PyResult<Fsync> {
    match fsync {
        "every" => Ok(Fsync::Every),
        "batch" => Ok(Fsync::Batch),
        "never" => Ok(Fsync::Never),
        other => Err(PyValueError::new_err(format!(
            "fsync must be one of every, batch, never, not {other:?}"
        ))),
    }
}

/// A core journal writer the driver records updates into directly.
pub(crate) struct Hook {
    writer: Writer,
    /// The time of the driver's latest read (0: not read from the clock since): the time of
    /// every update that read delivered, so the clock is read once a read, not once a line.
    read_ns: Cell<u64>,
}

enum Writer {
    Jsonl(Py<JournalWriter>),
    Sqlite(Py<SqliteWriter>),
}

impl Hook {
    /// The writer behind an observer's `on_update` when it is a journal writer's own `update`
    /// (what `acp_fast.journal` sets), with the wrapped observer's `on_update`.
    pub fn find(on_update: &Bound<'_, PyAny>) -> Option<(Hook, Option<Py<PyAny>>)> {
        let owner = on_update.getattr("__self__").ok()?;
        let name = on_update.getattr("__name__").ok()?;
        if name.extract::<&str>().ok()? != "update" {
            return None;
        }
        let (writer, inner) = if let Ok(writer) = owner.cast::<JournalWriter>() {
            let inner = writer.get().observer().map(|o| o.clone_ref(owner.py()));
            (Writer::Jsonl(writer.clone().unbind()), inner)
        } else if let Ok(writer) = owner.cast::<SqliteWriter>() {
            let inner = writer.get().observer().map(|o| o.clone_ref(owner.py()));
            (Writer::Sqlite(writer.clone().unbind()), inner)
        } else {
            return None;
        };
        let read_ns = Cell::new(0);
        Some((Hook { writer, read_ns }, inner))
    }

    /// The driver read from the agent: the next update takes a fresh time.
    pub fn read(&self) {
        self.read_ns.set(0);
    }

    /// Records an update the driver's latest read delivered.
    pub fn record(&self, py: Python<'_>, update: UpdateRecord<'_>) -> PyResult<()> {
        let mut time = self.read_ns.get();
        if time == 0 {
            time = now_ns();
            self.read_ns.set(time);
        }
        match &self.writer {
            Writer::Jsonl(writer) => record_update(&writer.get().core, py, update, time),
            Writer::Sqlite(writer) => record_update(&writer.get().core, py, update, time),
        }
    }

    pub fn object(&self) -> &Py<PyAny> {
        match &self.writer {
            Writer::Jsonl(writer) => writer.as_any(),
            Writer::Sqlite(writer) => writer.as_any(),
        }
    }
}

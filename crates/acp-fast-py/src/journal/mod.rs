//! The journal writers' Python face over `acp-journal` (which makes the records, batches and
//! syncs them, and stores them in a JSONL file or a SQLite database, with no Python): this
//! layer converts Python values, releases the GIL while the journal waits, and raises the
//! journal's failures as `acp_fast.journal.JournalError`.
//!
//! - `writer`: what both writers share: a `Core` and the path its errors name, the GIL released
//!   while the journal waits, errors raised by kind, an `Update` object made a record.
//! - `jsonl`: `JournalWriter` over the crate's JSONL store.
//! - `sqlite`: `SqliteWriter` over its SQLite store.
//! - `pack`: `pack_records` / `unpack_records`, a SQLite batch's packing for the Python side.
//!
//! When the observer is a journal, the driver hands it each update directly (`Hook`): no
//! Python call for the journal's part.

mod jsonl;
mod pack;
mod sqlite;
mod writer;

pub(crate) use acp_journal::{Envelope, UpdateRecord};
pub(crate) use jsonl::JournalWriter;
pub(crate) use pack::{pack_records, unpack_records};
pub(crate) use sqlite::SqliteWriter;

use std::cell::Cell;

use acp_journal::now_ns;
use pyo3::prelude::*;

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
            Writer::Jsonl(writer) => writer.get().journal.update(py, update, time),
            Writer::Sqlite(writer) => writer.get().journal.update(py, update, time),
        }
    }

    pub fn object(&self) -> &Py<PyAny> {
        match &self.writer {
            Writer::Jsonl(writer) => writer.as_any(),
            Writer::Sqlite(writer) => writer.as_any(),
        }
    }
}

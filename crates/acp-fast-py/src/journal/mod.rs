//! The journal writers' Python face over `acp-journal` (which makes the records, batches and
//! syncs them, and stores them in a JSONL file or a SQLite database, with no Python): this
//! layer converts Python values, releases the GIL while the journal waits, and raises the
//! journal's failures as `acp_fast.journal.JournalError`.
//!
//! - `jsonl`: `JournalWriter` over the crate's JSONL store.
//! - `sqlite`: `SqliteWriter` over its SQLite store.
//! - `pack`: `pack_records` / `unpack_records`, a SQLite batch's packing for the Python side.
//!
//! When the observer is a journal, the driver hands it each update directly (`Hook`): no
//! Python call for the journal's part.

mod jsonl;
mod pack;
mod sqlite;

pub(crate) use acp_journal::{Envelope, UpdateRecord};
pub(crate) use jsonl::JournalWriter;
pub(crate) use pack::{pack_records, unpack_records};
pub(crate) use sqlite::SqliteWriter;

use std::cell::Cell;

use acp_journal::{
    looks_like_an_object, now_ns, record_update, Core, Error, Fsync, Lines, Session, Store, Waiting,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::update::Update;

/// The journal waits (for the disk, its threads) with the GIL released.
struct Gil<'py>(Python<'py>);

impl Waiting for Gil<'_> {
    fn wait<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        self.0.detach(work)
    }
}

fn fsync_mode(fsync: &str) -> PyResult<Fsync> {
    fsync.parse().map_err(PyValueError::new_err)
}

/// A journal failure as Python sees it: `acp_fast.journal.JournalError(path, what)`, or the
/// caller's mistake (a record kind too long: ValueError), or no thread (RuntimeError).
fn raise(py: Python<'_>, path: &str, error: Error) -> PyErr {
    let what = error.to_string();
    match error {
        Error::Kind { .. } => return PyValueError::new_err(what),
        Error::Start(_) => return PyRuntimeError::new_err(what),
        _ => {}
    }
    let made = py
        .import("acp_fast.journal")
        .and_then(|module| module.getattr("JournalError"))
        .and_then(|class| class.call1((path, what.as_str())));
    match made {
        Ok(error) => PyErr::from_value(error),
        Err(error) => error,
    }
}

/// A writer's core and the path its errors name.
struct Journal<S: Store<Batch = Lines, Hot = Session>> {
    core: Core<S>,
    path: String,
}

impl<S: Store<Batch = Lines, Hot = Session>> Journal<S> {
    fn check(&self, py: Python<'_>, done: Result<(), Error>) -> PyResult<()> {
        done.map_err(|error| raise(py, &self.path, error))
    }

    fn update(&self, py: Python<'_>, record: UpdateRecord<'_>, time: u64) -> PyResult<()> {
        self.check(py, record_update(&self.core, &Gil(py), record, time))
    }

    /// Records an `Update` object (a Python call of a writer's `update`). Its envelope is
    /// embedded verbatim when it looks like one line holding a JSON object (the core's always
    /// are: it parsed them); anything else (a made-up Update) is stored as a JSON string, as
    /// Python would encode it. Not a full parse: that would cost about what the rest does.
    fn python_update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
        let fields = update.get();
        let envelope = fields.envelope.bind(py);
        let session = fields.session_id.bind(py).to_str()?;
        let quoted;
        let envelope = match envelope.to_str() {
            Ok(text) if looks_like_an_object(text.as_bytes()) => {
                Envelope::Verbatim(text.as_bytes())
            }
            _ => {
                quoted = json_dumps(py, envelope)?;
                Envelope::Quoted(&quoted)
            }
        };
        let record = UpdateRecord {
            epoch: fields.transport_epoch,
            sequence: fields.update_sequence,
            session,
            envelope,
        };
        self.update(py, record, now_ns())
    }

    fn other(&self, py: Python<'_>, kind: &str, epoch: Option<u64>, rest: &[u8]) -> PyResult<()> {
        let done = acp_journal::record_other(&self.core, &Gil(py), kind, epoch, rest);
        self.check(py, done)
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.check(py, self.core.flush(&Gil(py)))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check(py, self.core.close(&Gil(py)))
    }
}

fn json_dumps(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    let dumped = py.import("json")?.getattr("dumps")?.call1((text,))?;
    Ok(dumped.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
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

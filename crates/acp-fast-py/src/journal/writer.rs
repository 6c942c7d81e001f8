//! What both journal writers share: the crate's `Core` and the path its errors name, the GIL
//! released while the journal waits, its errors raised by kind, and an `Update` object made a
//! record.

use acp_journal::{
    looks_like_an_object, now_ns, record_update, Core, Envelope, Error, Fsync, Lines, Session,
    Store, UpdateRecord, Waiting,
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

pub(super) fn fsync_mode(fsync: &str) -> PyResult<Fsync> {
    fsync.parse().map_err(PyValueError::new_err)
}

/// A journal failure as Python sees it: `acp_fast.journal.JournalError(path, what)`, or the
/// caller's mistake (a record kind too long: ValueError), or no thread (RuntimeError).
pub(super) fn raise(py: Python<'_>, path: &str, error: Error) -> PyErr {
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
pub(super) struct Journal<S: Store<Batch = Lines, Hot = Session>> {
    pub(super) core: Core<S>,
    pub(super) path: String,
}

impl<S: Store<Batch = Lines, Hot = Session>> Journal<S> {
    fn check(&self, py: Python<'_>, done: Result<(), Error>) -> PyResult<()> {
        done.map_err(|error| raise(py, &self.path, error))
    }

    pub(super) fn update(
        &self,
        py: Python<'_>,
        record: UpdateRecord<'_>,
        time: u64,
    ) -> PyResult<()> {
        self.check(py, record_update(&self.core, &Gil(py), record, time))
    }

    /// Records an `Update` object (a Python call of a writer's `update`). Its envelope is
    /// embedded verbatim when it looks like one line holding a JSON object (the core's always
    /// are: it parsed them); anything else (a made-up Update) is stored as a JSON string, as
    /// Python would encode it. Not a full parse: that would cost about what the rest does.
    pub(super) fn python_update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
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

    pub(super) fn other(
        &self,
        py: Python<'_>,
        kind: &str,
        epoch: Option<u64>,
        rest: &[u8],
    ) -> PyResult<()> {
        let done = acp_journal::record_other(&self.core, &Gil(py), kind, epoch, rest);
        self.check(py, done)
    }

    pub(super) fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.check(py, self.core.flush(&Gil(py)))
    }

    pub(super) fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check(py, self.core.close(&Gil(py)))
    }
}

fn json_dumps(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    let dumped = py.import("json")?.getattr("dumps")?.call1((text,))?;
    Ok(dumped.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
}

/// The methods both writers share, written once: `$writer` has a `journal: Journal<_>` and an
/// `observer`; `new` (which differs) is passed in whole, and the docstrings that differ (the
/// stub and stubtest read them) are given line by line.
macro_rules! writer_methods {
    (
        $writer:ident,
        new: { $($new:tt)* },
        other: [$($other_doc:literal),* $(,)?],
        last_record: $last_record_doc:literal,
        flush: [$($flush_doc:literal),* $(,)?],
        close: [$($close_doc:literal),* $(,)?] $(,)?
    ) => {
        #[pymethods]
        impl $writer {
            $($new)*

            /// Records an update (the observer's `on_update`), then calls the wrapped observer's.
            fn update(&self, py: Python<'_>, update: &Bound<'_, Update>) -> PyResult<()> {
                self.journal.python_update(py, update)?;
                if let Some(observer) = &self.observer {
                    observer.bind(py).call1((update,))?;
                }
                Ok(())
            }

            $(#[doc = $other_doc])*
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

            #[doc = $last_record_doc]
            #[getter]
            fn last_record(&self) -> u64 {
                self.journal.core.last_record()
            }

            /// The epoch of the latest update (before any: the one the journal was opened with).
            #[getter]
            fn last_epoch(&self) -> u64 {
                self.journal.core.last_epoch()
            }

            $(#[doc = $flush_doc])*
            fn flush(&self, py: Python<'_>) -> PyResult<()> {
                self.journal.flush(py)
            }

            $(#[doc = $close_doc])*
            fn close(&self, py: Python<'_>) -> PyResult<()> {
                self.journal.close(py)
            }

            /// Marks the writer as its parent's in a child made by fork().
            fn forked(&self) {
                self.journal.core.forked();
            }
        }

        impl $writer {
            /// The wrapped observer's `on_update`.
            pub(crate) fn observer(&self) -> Option<&Py<PyAny>> {
                self.observer.as_ref()
            }
        }
    };
}

pub(super) use writer_methods;

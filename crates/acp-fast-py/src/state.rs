//! What a `CoreClient` keeps: the state behind the call lock (`Locked`: the pump, the
//! observer's callbacks, the replies being built, the calls in flight), what other threads
//! share with a running call (`Shared`); the views published for properties are
//! `acp_client::published`.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use acp_client::inflight::InFlight;
pub(crate) use acp_client::published::{Published, Views};
use acp_client::{Controls, Pump};

use crate::journal::Hook;
use crate::reply::Replies;

/// The observer's callbacks (each optional).
#[derive(Default)]
pub(crate) struct Callbacks {
    pub on_update: Option<Py<PyAny>>,
    /// The journal `on_update` belonged to (`on_update` is then the observer it wraps): each
    /// update is recorded into it without a Python call, before `on_update`.
    pub journal: Option<Hook>,
    pub permission_preview: Option<Py<PyAny>>,
    pub permission_commit: Option<Py<PyAny>>,
    /// Every line the client writes, before it is written (journals).
    pub on_sent: Option<Py<PyAny>>,
    /// Every line the agent sent that is neither an update nor a permission request.
    pub on_received: Option<Py<PyAny>>,
    /// The session fold, after the update was admitted (`session_state` on).
    pub fold: Option<Py<PyAny>>,
    /// `observer.on_activity`: one record per host request (design/host.md §4).
    pub on_activity: Option<Py<PyAny>>,
    /// `observer.on_elicitation`, wrapped by `acp_fast._elicitation.preview`.
    pub elicitation: Option<Py<PyAny>>,
    /// `durable=True`: a missing `on_update` or `on_permission_commit` fails the call
    /// (`MissingDurableObserver`); otherwise what no callback takes is not recorded outside.
    pub durable: bool,
}

impl Callbacks {
    pub fn all(&self) -> impl Iterator<Item = &Py<PyAny>> {
        [
            &self.on_update,
            &self.permission_preview,
            &self.permission_commit,
            &self.on_sent,
            &self.on_received,
            &self.fold,
            &self.on_activity,
            &self.elicitation,
        ]
        .into_iter()
        .flatten()
        .chain(self.journal.iter().map(Hook::object))
    }
}

/// The asyncio driver's calls in flight and what it watches.
#[derive(Default)]
pub(crate) struct Aio {
    pub calls: InFlight,
    /// An error no call was waiting for: the next call raises it.
    pub next_error: Option<PyErr>,
    /// Readable once the agent exits (pidfd).
    pub exit_fd: Option<OwnedFd>,
}

/// The state behind the call lock: one call (or the asyncio driver's step) at a time.
pub(crate) struct Locked {
    pub pump: Pump,
    pub callbacks: Callbacks,
    /// The reply of each session's running turn, built as its chunks are admitted.
    pub replies: Replies,
    /// `Some` once an event loop drives the client (`aio_attach`).
    pub aio: Option<Aio>,
}

/// What other threads share with the running call.
pub(crate) struct Shared {
    pub controls: Arc<Controls>,
    /// The exception that stopped the client, set as `__cause__` of later calls' errors.
    pub stop_cause: Mutex<Option<Py<PyAny>>>,
}

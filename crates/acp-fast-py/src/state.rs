//! What a `CoreClient` keeps: the state behind the call lock (`Locked`: the pump, the
//! observer's callbacks, the replies being built, the calls in flight), what other threads
//! share with a running call (`Shared`), and the views published for properties (`Published`).

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use acp_client::controls::lock;
use acp_client::{Controls, Pump};
use acp_proto::calls::CallId;
use acp_proto::reader;
use acp_proto::results::{InitializeInfo, NamedEntry};
use acp_proto::Connection;

use crate::journal::Hook;
use crate::prepared::Prepared;
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
        ]
        .into_iter()
        .flatten()
        .chain(self.journal.iter().map(Hook::object))
    }
}

/// The asyncio driver's calls in flight and what it watches.
#[derive(Default)]
pub(crate) struct InFlight {
    /// Calls in flight by id (ids grow, so the first is the oldest).
    pub pending: BTreeMap<CallId, Prepared>,
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
    pub aio: Option<InFlight>,
}

/// What other threads share with the running call.
pub(crate) struct Shared {
    pub controls: Arc<Controls>,
    /// The exception that stopped the client, set as `__cause__` of later calls' errors.
    pub stop_cause: Mutex<Option<Py<PyAny>>>,
}

#[derive(Clone, Default)]
pub(crate) struct SessionView {
    pub modes: (String, Vec<NamedEntry>),
    pub models: (String, Vec<NamedEntry>),
    pub config_options: Option<String>,
    pub commands: Option<String>,
}

/// What properties read while a call may be running (they must not need the call's lock).
#[derive(Default)]
pub(crate) struct Views {
    pub initialize: Option<InitializeInfo>,
    pub agent_error: Option<String>,
    pub reader: Option<reader::Status>,
    pub sessions: HashMap<String, SessionView>,
    pub open: Vec<String>,
}

/// The published views, behind their own lock.
#[derive(Default)]
pub(crate) struct Published(pub Mutex<Views>);

impl Published {
    /// Everything, after a call (with the call lock held).
    pub fn all(&self, conn: &Connection) {
        let mut views = lock(&self.0);
        views.initialize = conn.initialize().cloned();
        views.agent_error = conn.agent_error().map(str::to_owned);
        views.reader = Some(conn.reader_status());
        views.open = conn.session_ids().map(str::to_owned).collect();
        let mut sessions = HashMap::new();
        for id in &views.open {
            sessions.insert(id.clone(), view(conn, id));
        }
        views.sessions = sessions;
    }

    /// One session's view (an update changed its mode, config options or commands).
    pub fn session(&self, conn: &Connection, session_id: &str) {
        lock(&self.0)
            .sessions
            .insert(session_id.to_owned(), view(conn, session_id));
    }
}

fn view(conn: &Connection, session_id: &str) -> SessionView {
    match conn.session(session_id) {
        Some(session) => {
            let models = session.models();
            let modes = session.offered_modes();
            SessionView {
                modes: (modes.current, modes.available),
                models: (models.current, models.available),
                config_options: session.config_options.as_ref().map(|v| v.to_string()),
                commands: session.commands.as_ref().map(|v| v.to_string()),
            }
        }
        None => SessionView::default(),
    }
}

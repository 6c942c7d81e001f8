//! What a client publishes for its properties: the views other threads read while a call may
//! be running (they must not need the call's lock), refreshed from the `Connection` after a
//! call and, for one session, when an update changed its mode, config options or commands.

use std::collections::HashMap;
use std::sync::Mutex;

use acp_proto::reader;
use acp_proto::results::{InitializeInfo, NamedEntry};
use acp_proto::Connection;

use crate::controls::lock;

/// An open session's published state.
#[derive(Clone, Default, Debug, PartialEq)]
pub struct SessionView {
    /// `(current mode id, modes offered)`.
    pub modes: (String, Vec<NamedEntry>),
    /// `(current model id, models offered)`.
    pub models: (String, Vec<NamedEntry>),
    /// JSON texts, when the agent sent them.
    pub config_options: Option<String>,
    pub commands: Option<String>,
}

/// What properties read while a call may be running.
#[derive(Default)]
pub struct Views {
    pub initialize: Option<InitializeInfo>,
    pub agent_error: Option<String>,
    pub reader: Option<reader::Status>,
    pub sessions: HashMap<String, SessionView>,
    pub open: Vec<String>,
}

/// The published views, behind their own lock.
#[derive(Default)]
pub struct Published(pub Mutex<Views>);

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

/// A session's view as the connection has it (the default when it is not open).
pub fn view(conn: &Connection, session_id: &str) -> SessionView {
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

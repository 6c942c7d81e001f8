//! The published views of a `CoreClient` as small frozen records: the line reader, an open
//! session's modes, models, config options and commands, and the agent's `initialize`
//! answer. They read what the last call published, never the call lock.

use pyo3::prelude::*;

use acp_proto::results::NamedEntry;

use crate::client::CoreClient;

/// A snapshot of the line reader (the facade's `ReaderStatus` has the same fields).
#[pyclass(module = "acp_fast._core", frozen, get_all)]
pub struct ReaderState {
    phase: &'static str,
    message_bytes: usize,
    storage_bytes: usize,
    buffered_bytes: usize,
    high_water_message_bytes: usize,
    rejected_message_count: u64,
    terminal: bool,
}

type Named = (String, String, String);

/// An open session's published state: `(current, [(id, name, description)])` for its modes and
/// models, and the JSON texts of its config options and commands.
#[pyclass(module = "acp_fast._core", frozen, get_all)]
pub struct SessionState {
    modes: (String, Vec<Named>),
    models: (String, Vec<Named>),
    config_options: Option<String>,
    commands: Option<String>,
}

/// The agent's `initialize` answer: what the facade's `Initialize` is made of.
#[pyclass(module = "acp_fast._core", frozen, get_all)]
pub struct InitializeState {
    protocol_version: i64,
    load_session: bool,
    prompt_image: bool,
    prompt_audio: bool,
    prompt_embedded_content: bool,
    /// `(id, name, description, type)` each.
    auth_methods: Vec<(String, String, String, String)>,
    /// JSON text, when the agent sent it.
    agent_info: Option<String>,
    /// The whole result, JSON text.
    raw: String,
}

fn named(entries: &[NamedEntry]) -> Vec<Named> {
    entries
        .iter()
        .map(|e| (e.id.clone(), e.name.clone(), e.description.clone()))
        .collect()
}

#[pymethods]
impl CoreClient {
    /// A snapshot of the line reader.
    fn reader_status(&self) -> ReaderState {
        let status = self
            .views()
            .reader
            .expect("published at construction or after a call");
        ReaderState {
            phase: status.phase.as_str(),
            message_bytes: status.message_bytes,
            storage_bytes: status.storage_bytes,
            buffered_bytes: status.buffered_bytes,
            high_water_message_bytes: status.high_water_message_bytes,
            rejected_message_count: status.rejected_message_count,
            terminal: status.terminal,
        }
    }

    /// The session's published state, or None when it is not open.
    fn session_info(&self, session_id: &str) -> Option<SessionState> {
        let views = self.views();
        let view = views.sessions.get(session_id)?;
        Some(SessionState {
            modes: (view.modes.0.clone(), named(&view.modes.1)),
            models: (view.models.0.clone(), named(&view.models.1)),
            config_options: view.config_options.clone(),
            commands: view.commands.clone(),
        })
    }

    /// The agent's `initialize` answer, or None before `start`.
    fn initialize_info(&self) -> Option<InitializeState> {
        let views = self.views();
        let info = views.initialize.as_ref()?;
        let caps = &info.capabilities;
        Some(InitializeState {
            protocol_version: info.protocol_version,
            load_session: caps.load_session,
            prompt_image: caps.prompt_image,
            prompt_audio: caps.prompt_audio,
            prompt_embedded_content: caps.prompt_embedded_context,
            auth_methods: info
                .auth_methods
                .iter()
                .map(|m| {
                    let kind = m.kind.clone();
                    (m.id.clone(), m.name.clone(), m.description.clone(), kind)
                })
                .collect(),
            agent_info: info.agent_info.clone(),
            raw: info.raw.clone(),
        })
    }
}

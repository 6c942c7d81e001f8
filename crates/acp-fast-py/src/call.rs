//! One entry per call of `CoreClient`, each giving a `Prepared`: the call read from its
//! arguments once, which `run()` runs to its end on the blocking driver and `begin()` starts on
//! the asyncio driver (its id; a later step reports its value). The value is the same either
//! way: `None`, a session id, the listed sessions' JSON texts, the config options' JSON text,
//! or a prompt's `("ok" | "late", turn tuple)` / `("timeout", None)`.

use std::sync::Mutex;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList};
use pyo3::IntoPyObjectExt;

use acp_client::controls::lock;

use acp_proto::encode::{McpServer, SystemPrompt};

use crate::client::CoreClient;
use crate::options;
use crate::prepared::{Owned, Prepared as Call};

/// The facade's `(mode, text)` as the core's system prompt.
fn prompt((mode, text): (String, String)) -> SystemPrompt {
    SystemPrompt { mode, text }
}

fn servers(list: Option<Bound<'_, PyAny>>) -> PyResult<Option<Vec<McpServer>>> {
    list.map(|s| options::mcp_servers(&s)).transpose()
}

/// A call of a `CoreClient`, read once; `run()` or `begin()` it once.
#[pyclass(module = "acp_fast._core", name = "Prepared", frozen)]
pub struct Prepared {
    client: Py<CoreClient>,
    call: Mutex<Option<Call>>,
}

impl Prepared {
    fn new(client: &Bound<'_, CoreClient>, call: Call) -> Prepared {
        Prepared {
            client: client.clone().unbind(),
            call: Mutex::new(Some(call)),
        }
    }

    fn take(&self) -> PyResult<Call> {
        lock(&self.call)
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this call was already run or begun"))
    }
}

#[pymethods]
impl Prepared {
    /// Runs the call to its end (blocking driver); its value.
    fn run(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let call = self.take()?;
        let client = self.client.bind(py).borrow();
        if matches!(call.0, Owned::Start { .. }) {
            return client.start_blocking(py, call)?.into_py_any(py);
        }
        client.blocking(py, &call)
    }

    /// Starts the call on the asyncio driver: its id (-1: it finished at once).
    fn begin(&self, py: Python<'_>) -> PyResult<i64> {
        self.client.bind(py).borrow().begin(py, self.take()?)
    }
}

#[pymethods]
impl CoreClient {
    /// `initialize`, then (with `new_session`) `session/new` in `cwd`; the new session's id.
    /// Handshake failures raise `ConnectError`; on expiry of `timeout` (the connection's start
    /// deadline) the agent's group is signalled and the client stopped.
    #[pyo3(signature = (cwd, new_session, timeout=None))]
    fn start(
        slf: &Bound<'_, Self>,
        cwd: String,
        new_session: bool,
        timeout: Option<f64>,
    ) -> PyResult<Prepared> {
        crate::options::deadline(timeout, "timeout")?;
        let call = Call(Owned::Start {
            cwd,
            new_session,
            timeout,
        });
        Ok(Prepared::new(slf, call))
    }

    /// `system_prompt`: `(mode, text)`, written as `systemPrompt` only when given.
    #[pyo3(signature = (cwd, mcp_servers, additional_directories, system_prompt=None))]
    fn new_session(
        slf: &Bound<'_, Self>,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
        system_prompt: Option<(String, String)>,
    ) -> PyResult<Prepared> {
        let call = Owned::NewSession {
            cwd,
            directories: additional_directories,
            servers: servers(mcp_servers)?,
            system_prompt: system_prompt.map(prompt),
        };
        Ok(Prepared::new(slf, Call(call)))
    }

    #[pyo3(signature = (session_id, cwd, mcp_servers, additional_directories, resume, system_prompt=None, replay_from_start=false))]
    #[allow(clippy::too_many_arguments)]
    fn load_session(
        slf: &Bound<'_, Self>,
        session_id: String,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
        resume: bool,
        system_prompt: Option<(String, String)>,
        replay_from_start: bool,
    ) -> PyResult<Prepared> {
        let call = Owned::LoadSession {
            session_id,
            cwd,
            directories: additional_directories,
            servers: servers(mcp_servers)?,
            resume,
            system_prompt: system_prompt.map(prompt),
            replay_from_start,
        };
        Ok(Prepared::new(slf, Call(call)))
    }

    /// Unstable `session/fork` of `session_id`: the new session's id.
    #[pyo3(signature = (session_id, cwd, mcp_servers, additional_directories, system_prompt=None))]
    fn fork_session(
        slf: &Bound<'_, Self>,
        session_id: String,
        cwd: String,
        mcp_servers: Option<Bound<'_, PyAny>>,
        additional_directories: Vec<String>,
        system_prompt: Option<(String, String)>,
    ) -> PyResult<Prepared> {
        let call = Owned::ForkSession {
            session_id,
            cwd,
            directories: additional_directories,
            servers: servers(mcp_servers)?,
            system_prompt: system_prompt.map(prompt),
        };
        Ok(Prepared::new(slf, Call(call)))
    }

    /// Unstable `session/set_title`: the result's JSON text.
    fn set_title(slf: &Bound<'_, Self>, session_id: String, title: String) -> Prepared {
        Prepared::new(slf, Call(Owned::SetTitle(session_id, title)))
    }

    /// Unstable `session/status`: the result's JSON text.
    fn session_status(slf: &Bound<'_, Self>, session_id: String) -> Prepared {
        Prepared::new(slf, Call(Owned::SessionStatus(session_id)))
    }

    /// The `_session/steering` extension: the answer's JSON text.
    fn steer(
        slf: &Bound<'_, Self>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
    ) -> PyResult<Prepared> {
        let content = crate::options::content(blocks)?;
        Ok(Prepared::new(slf, Call(Owned::Steer(session_id, content))))
    }

    /// Every page's sessions, as JSON object texts.
    #[pyo3(signature = (cwd=None))]
    fn list_sessions(slf: &Bound<'_, Self>, cwd: Option<String>) -> Prepared {
        Prepared::new(slf, Call(Owned::ListSessions(cwd)))
    }

    fn delete_session(slf: &Bound<'_, Self>, session_id: String) -> Prepared {
        Prepared::new(slf, Call(Owned::DeleteSession(session_id)))
    }

    fn authenticate(slf: &Bound<'_, Self>, method_id: String) -> Prepared {
        Prepared::new(slf, Call(Owned::Authenticate(method_id)))
    }

    fn logout(slf: &Bound<'_, Self>) -> Prepared {
        Prepared::new(slf, Call(Owned::Logout))
    }

    fn set_mode(slf: &Bound<'_, Self>, session_id: String, mode_id: String) -> Prepared {
        Prepared::new(slf, Call(Owned::SetMode(session_id, mode_id)))
    }

    fn set_model(slf: &Bound<'_, Self>, session_id: String, model_id: String) -> Prepared {
        Prepared::new(slf, Call(Owned::SetModel(session_id, model_id)))
    }

    /// The session's config options after the call (JSON array text), if any.
    fn set_config_option(
        slf: &Bound<'_, Self>,
        session_id: String,
        config_id: String,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Prepared> {
        let (text, flag) = if value.is_instance_of::<PyBool>() {
            (String::new(), Some(value.extract::<bool>()?))
        } else if let Ok(text) = value.extract::<String>() {
            (text, None)
        } else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a config option's value is a str (select) or a bool (boolean)",
            ));
        };
        let call = Owned::SetConfigOption {
            session_id,
            config_id,
            text,
            flag,
        };
        Ok(Prepared::new(slf, Call(call)))
    }

    /// Closes a session (writing `session/close` only when the agent advertises it).
    fn close_session(slf: &Bound<'_, Self>, session_id: String) -> Prepared {
        Prepared::new(slf, Call(Owned::CloseSession(session_id)))
    }

    /// One turn of content-block tuples on `session_id`.
    #[pyo3(signature = (session_id, blocks, timeout=None, gated=true, meta=Vec::new()))]
    fn prompt(
        slf: &Bound<'_, Self>,
        session_id: String,
        blocks: &Bound<'_, PyList>,
        timeout: Option<f64>,
        gated: bool,
        meta: Vec<(String, String)>,
    ) -> PyResult<Prepared> {
        let timeout_ms =
            options::deadline(timeout, "timeout")?.map(|d| d.as_millis().max(1) as u64);
        let call = Owned::Prompt {
            session_id,
            content: options::content(blocks)?,
            timeout_ms,
            gated,
            meta,
        };
        Ok(Prepared::new(slf, Call(call)))
    }
}

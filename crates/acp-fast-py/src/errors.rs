//! Errors into Python: each `AcpError` becomes the exception of the same name in
//! `acp_fast._errors`; an exception a callback raised propagates unchanged.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use acp_proto::error::AcpError;
use acp_proto::update::UpdateKind;

pub(crate) static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static UPDATE_KINDS: PyOnceLock<Vec<Py<PyAny>>> = PyOnceLock::new();
static KIND_NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

pub(crate) fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || py.import("acp_fast._errors").map(Bound::unbind))
        .map(|m| m.bind(py))
}

pub(crate) fn update_kinds(py: Python<'_>) -> PyResult<&Vec<Py<PyAny>>> {
    UPDATE_KINDS.get_or_try_init(py, || {
        let enum_class = py.import("acp_fast._types")?.getattr("UpdateKind")?;
        UpdateKind::ALL
            .iter()
            .map(|kind| enum_class.call1((kind.as_str(),)).map(Bound::unbind))
            .collect()
    })
}

pub(crate) fn kind_names(py: Python<'_>) -> &Vec<Py<PyString>> {
    KIND_NAMES.get_or_init(py, || {
        UpdateKind::ALL
            .iter()
            .map(|kind| PyString::intern(py, kind.as_str()).unbind())
            .collect()
    })
}

pub(crate) fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let loads = JSON_LOADS.get_or_try_init(py, || {
        py.import("json")?.getattr("loads").map(Bound::unbind)
    })?;
    loads.bind(py).call1((text,))
}

pub(crate) fn to_pyerr(py: Python<'_>, error: AcpError) -> PyErr {
    match &error {
        AcpError::InvalidArgument(m) => return pyo3::exceptions::PyValueError::new_err(m.clone()),
        AcpError::Misuse(m) => return pyo3::exceptions::PyRuntimeError::new_err(m.clone()),
        _ => {}
    }
    let build = || -> PyResult<PyErr> {
        let class = errors_module(py)?.getattr(error.class_name())?;
        let instance = match &error {
            AcpError::AgentProtocol(protocol) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("code", protocol.code)?;
                kwargs.set_item("message", protocol.message.as_deref())?;
                let data = match &protocol.data {
                    Some(raw) => json_loads(py, raw)?,
                    None => py.None().into_bound(py),
                };
                kwargs.set_item("data", data)?;
                kwargs.set_item("output_ended", protocol.output_ended)?;
                class.call((protocol.description.as_str(),), Some(&kwargs))?
            }
            AcpError::Capability {
                capability,
                agent_id,
                message,
            } => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("capability", capability)?;
                kwargs.set_item("agent_id", agent_id)?;
                class.call((message.as_str(),), Some(&kwargs))?
            }
            other => class.call1((other.description(),))?,
        };
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| e)
}

/// Errors cross into Python either as an `AcpError` (mapped late, when the GIL is known to be
/// held) or as an exception a callback raised, which must propagate unchanged.
pub(crate) enum CallError {
    Acp(AcpError),
    Python(PyErr),
}

impl From<AcpError> for CallError {
    fn from(error: AcpError) -> Self {
        CallError::Acp(error)
    }
}

impl From<acp_client::Error<PyErr>> for CallError {
    fn from(error: acp_client::Error<PyErr>) -> Self {
        match error {
            acp_client::Error::Halted(error) | acp_client::Error::Acp(error) => {
                CallError::Acp(error)
            }
            acp_client::Error::Edge(error) => CallError::Python(error),
        }
    }
}

impl From<PyErr> for CallError {
    fn from(error: PyErr) -> Self {
        CallError::Python(error)
    }
}

impl CallError {
    pub(crate) fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self {
            CallError::Acp(error) => to_pyerr(py, error),
            CallError::Python(error) => error,
        }
    }
}

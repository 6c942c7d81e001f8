//! `acp_fast.Update`: one numbered update, a frozen class built in Rust for the hot path.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use acp_proto::update::UpdateKind;

use crate::errors::{json_loads, update_kinds};

// --- Update -----------------------------------------------------------------------------------

/// One numbered update from the agent (frozen; equality, hash and repr as a data class has).
#[pyclass(frozen, module = "acp_fast", name = "Update")]
pub struct Update {
    pub(crate) kind: UpdateKind,
    #[pyo3(get)]
    pub(crate) session_update: Py<PyString>,
    #[pyo3(get)]
    pub(crate) transport_epoch: u64,
    #[pyo3(get)]
    pub(crate) update_sequence: u64,
    #[pyo3(get)]
    pub(crate) session_id: Py<PyString>,
    #[pyo3(get)]
    pub(crate) envelope: Py<PyString>,
    #[pyo3(get)]
    pub(crate) text: Py<PyString>,
    #[pyo3(get)]
    pub(crate) message_id: Option<Py<PyString>>,
    #[pyo3(get)]
    pub(crate) tool_call_id: Option<Py<PyString>>,
}

impl Update {
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let kind = self.kind_member(py)?;
        PyTuple::new(
            py,
            [
                kind,
                self.session_update.clone_ref(py).into_any(),
                self.transport_epoch.into_pyobject(py)?.into_any().unbind(),
                self.update_sequence.into_pyobject(py)?.into_any().unbind(),
                self.session_id.clone_ref(py).into_any(),
                self.envelope.clone_ref(py).into_any(),
                self.text.clone_ref(py).into_any(),
                optional(py, &self.message_id),
                optional(py, &self.tool_call_id),
            ],
        )
    }

    fn kind_member(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(update_kinds(py)?[self.kind.index()].clone_ref(py))
    }
}

fn optional(py: Python<'_>, value: &Option<Py<PyString>>) -> Py<PyAny> {
    match value {
        Some(value) => value.clone_ref(py).into_any(),
        None => py.None(),
    }
}

const UPDATE_FIELDS: [&str; 9] = [
    "kind",
    "session_update",
    "transport_epoch",
    "update_sequence",
    "session_id",
    "envelope",
    "text",
    "message_id",
    "tool_call_id",
];

#[pymethods]
impl Update {
    #[new]
    #[pyo3(signature = (*, kind, session_update, transport_epoch, update_sequence, session_id, envelope, text, message_id=None, tool_call_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &Bound<'_, PyAny>,
        session_update: Bound<'_, PyString>,
        transport_epoch: u64,
        update_sequence: u64,
        session_id: Bound<'_, PyString>,
        envelope: Bound<'_, PyString>,
        text: Bound<'_, PyString>,
        message_id: Option<Bound<'_, PyString>>,
        tool_call_id: Option<Bound<'_, PyString>>,
    ) -> PyResult<Update> {
        let name: String = match kind.getattr("value") {
            Ok(value) => value.extract()?,
            Err(_) => kind.extract()?,
        };
        let parsed = UpdateKind::from_wire(&name);
        if parsed == UpdateKind::Unknown && name != "unknown" {
            return Err(PyTypeError::new_err(format!(
                "kind must be an UpdateKind (got {name:?})"
            )));
        }
        Ok(Update {
            kind: parsed,
            session_update: session_update.unbind(),
            transport_epoch,
            update_sequence,
            session_id: session_id.unbind(),
            envelope: envelope.unbind(),
            text: text.unbind(),
            message_id: message_id.map(Bound::unbind),
            tool_call_id: tool_call_id.map(Bound::unbind),
        })
    }

    #[getter]
    fn kind(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.kind_member(py)
    }

    /// The parsed `params.update` object of the envelope.
    fn json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let message = json_loads(py, self.envelope.bind(py).to_str()?)?;
        message
            .get_item(intern!(py, "params"))?
            .get_item(intern!(py, "update"))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Update>() else {
            return Ok(py.NotImplemented());
        };
        let equal = self.fields(py)?.eq(other.get().fields(py)?)?;
        Ok(pyo3::types::PyBool::new(py, equal)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.fields(py)?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let values = self.fields(py)?;
        let mut parts = Vec::with_capacity(UPDATE_FIELDS.len());
        for (name, value) in UPDATE_FIELDS.iter().zip(values.iter()) {
            parts.push(format!("{name}={}", value.repr()?));
        }
        Ok(format!("Update({})", parts.join(", ")))
    }

    /// The update as a typed `acp_fast.model` object (strict or lenient decoding of its
    /// envelope; `ProtocolDecodeError` names the path of what is wrong).
    #[pyo3(signature = (*, strict=true))]
    fn decode<'py>(&self, py: Python<'py>, strict: bool) -> PyResult<Bound<'py, PyAny>> {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("strict", strict)?;
        py.import("acp_fast.model")?
            .getattr("decode_update")?
            .call((self.envelope.bind(py),), Some(&kwargs))
    }

    /// Updates pickle and copy like the other records (they are immutable: a copy is itself).
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let rebuild = py.import("acp_fast._core")?.getattr("_rebuild_update")?;
        Ok((rebuild, slf.get().fields(py)?))
    }

    fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __deepcopy__<'py>(slf: Bound<'py, Self>, _memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
        slf
    }

    #[classattr]
    fn __match_args__(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        PyTuple::new(py, UPDATE_FIELDS)
    }
}

/// Rebuilds an `Update` from its fields in `__match_args__` order (pickle's constructor).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _rebuild_update(
    kind: &Bound<'_, PyAny>,
    session_update: Bound<'_, PyString>,
    transport_epoch: u64,
    update_sequence: u64,
    session_id: Bound<'_, PyString>,
    envelope: Bound<'_, PyString>,
    text: Bound<'_, PyString>,
    message_id: Option<Bound<'_, PyString>>,
    tool_call_id: Option<Bound<'_, PyString>>,
) -> PyResult<Update> {
    Update::new(
        kind,
        session_update,
        transport_epoch,
        update_sequence,
        session_id,
        envelope,
        text,
        message_id,
        tool_call_id,
    )
}

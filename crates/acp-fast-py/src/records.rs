//! Permission records into Python: `acp_fast.PermissionRequest` (a frozen dataclass) built
//! here, once per record, and handed straight to `on_permission` / `on_permission_commit`.
//!
//! The instance is made as `object.__new__` makes it and its `__dict__` filled with interned
//! keys: the same object the dataclass's `__init__` gives (frozen dataclasses have no
//! `__post_init__` here), without a Python frame, a tuple of fields or per-field
//! `object.__setattr__` calls in the way (a third of a permission round trip's host CPU went
//! to building it in Python).

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use pyo3::{intern, PyTypeInfo};

use acp_proto::permission::PermissionRecord;

use crate::errors::json_loads;

struct Classes {
    request: Py<PyType>,
    option: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let types = py.import("acp_fast._types")?;
        Ok(Classes {
            request: types.getattr("PermissionRequest")?.cast_into()?.unbind(),
            option: types.getattr("PermissionOption")?.cast_into()?.unbind(),
        })
    })
}

/// A new instance of a plain (no `__new__` of its own) class, and its empty `__dict__`.
fn blank<'py>(class: &Bound<'py, PyType>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyDict>)> {
    let py = class.py();
    let object =
        pyo3::types::PyAny::type_object(py).call_method1(intern!(py, "__new__"), (class,))?;
    let fields = object
        .getattr(intern!(py, "__dict__"))?
        .cast_into::<PyDict>()?;
    Ok((object, fields))
}

/// The record as `acp_fast.PermissionRequest`. `session_id`: the session's id as a Python
/// string already made for this session's updates, if the caller has one.
pub(crate) fn permission_request<'py>(
    py: Python<'py>,
    record: &PermissionRecord,
    session_id: Option<Bound<'py, PyString>>,
) -> PyResult<Bound<'py, PyAny>> {
    let classes = classes(py)?;
    let option_class = classes.option.bind(py);
    let mut options = Vec::with_capacity(record.options.len());
    for (id, name, kind) in &record.options {
        let (option, fields) = blank(option_class)?;
        fields.set_item(intern!(py, "option_id"), id)?;
        fields.set_item(intern!(py, "name"), name)?;
        fields.set_item(intern!(py, "kind"), kind)?;
        options.push(option);
    }
    let (request, fields) = blank(classes.request.bind(py))?;
    let session_id = match session_id {
        Some(text) => text,
        None => PyString::new(py, &record.session_id),
    };
    // In the dataclass's field order, so instances share one key table as `__init__`'s do.
    fields.set_item(intern!(py, "session_id"), session_id)?;
    fields.set_item(intern!(py, "tool_call_id"), &record.tool_call_id)?;
    fields.set_item(intern!(py, "title"), &record.title)?;
    fields.set_item(intern!(py, "tool_kind"), &record.tool_kind)?;
    fields.set_item(intern!(py, "status"), &record.status)?;
    fields.set_item(intern!(py, "outcome"), &record.outcome)?;
    fields.set_item(intern!(py, "option_id"), &record.option_id)?;
    fields.set_item(intern!(py, "option_kind"), &record.option_kind)?;
    fields.set_item(intern!(py, "options"), PyTuple::new(py, options)?)?;
    fields.set_item(intern!(py, "envelope"), &record.envelope)?;
    fields.set_item(intern!(py, "request_id"), json_id(py, &record.request_id)?)?;
    fields.set_item(intern!(py, "decision"), &record.decision)?;
    fields.set_item(intern!(py, "reason"), &record.reason)?;
    Ok(request)
}

/// The agent's JSON-RPC id as a Python value: strings and integers directly (the usual ids),
/// anything else through `json.loads`.
fn json_id<'py>(py: Python<'py>, raw: &str) -> PyResult<Bound<'py, PyAny>> {
    if raw.starts_with('"') {
        if let Ok(text) = serde_json::from_str::<Cow<'_, str>>(raw) {
            return Ok(PyString::new(py, &text).into_any());
        }
    } else if let Ok(number) = raw.parse::<i64>() {
        return Ok(number.into_pyobject(py)?.into_any());
    }
    json_loads(py, raw)
}

//! Permission records into Python: `acp_fast.PermissionRequest` (a frozen dataclass) built
//! here, once per record, and handed straight to `on_permission` / `on_permission_commit`.
//!
//! The instance is allocated as `object.__new__` does and its fields set as the dataclass's
//! `__init__` sets them (`object.__setattr__`, in field order; these classes have no
//! `__post_init__`): the same object, without a Python frame or a tuple of fields in the way
//! (building it in Python was a third of a permission round trip's host CPU).

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::{ffi, intern};

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

/// A new, empty instance of a plain class (no `__new__` or `__init__` run), as
/// `object.__new__(class)` makes it.
fn blank<'py>(class: &Bound<'py, PyType>) -> PyResult<Bound<'py, PyAny>> {
    let py = class.py();
    // SAFETY: `tp_alloc` of a heap type (`PyType_GenericAlloc`) returns a new reference to a
    // zeroed, GC-tracked instance with its dict slot ready, or NULL with an exception set.
    unsafe {
        let tp = class.as_type_ptr();
        let alloc = (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
        Bound::from_owned_ptr_or_err(py, alloc(tp, 0))
    }
}

/// Sets a field as `object.__setattr__` does (a frozen dataclass's own `__setattr__` refuses):
/// straight into the instance's attribute values, which share one key table per class.
fn set<'py>(
    object: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
    value: &Bound<'py, PyAny>,
) -> PyResult<()> {
    // SAFETY: all three are valid references held for the call.
    let status =
        unsafe { ffi::PyObject_GenericSetAttr(object.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if status == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(object.py()))
    }
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
        let option = blank(option_class)?;
        set(&option, intern!(py, "option_id"), &text(py, id))?;
        set(&option, intern!(py, "name"), &text(py, name))?;
        set(&option, intern!(py, "kind"), &text(py, kind))?;
        options.push(option);
    }
    let request = blank(classes.request.bind(py))?;
    let session_id = match session_id {
        Some(text) => text,
        None => PyString::new(py, &record.session_id),
    };
    // In the dataclass's field order, so instances share one key table as `__init__`'s do.
    let fields = [
        (intern!(py, "session_id"), session_id.into_any()),
        (intern!(py, "tool_call_id"), text(py, &record.tool_call_id)),
        (intern!(py, "title"), text(py, &record.title)),
        (intern!(py, "tool_kind"), text(py, &record.tool_kind)),
        (intern!(py, "status"), text(py, &record.status)),
        (intern!(py, "outcome"), text(py, &record.outcome)),
        (intern!(py, "option_id"), text(py, &record.option_id)),
        (intern!(py, "option_kind"), text(py, &record.option_kind)),
        (
            intern!(py, "options"),
            PyTuple::new(py, options)?.into_any(),
        ),
        (intern!(py, "envelope"), text(py, &record.envelope)),
        (intern!(py, "request_id"), json_id(py, &record.request_id)?),
        (intern!(py, "decision"), text(py, &record.decision)),
        (intern!(py, "reason"), text(py, &record.reason)),
        (intern!(py, "tool_name"), text(py, &record.tool_name)),
    ];
    for (name, value) in &fields {
        set(&request, name, value)?;
    }
    Ok(request)
}

/// The request's line on a preview (whose `envelope` stays "": the decision is not made), as
/// the private `_line` that `PermissionRequest.decode()` reads (model.md §4).
pub(crate) fn set_preview_line(record: &Bound<'_, PyAny>, line: &str) -> PyResult<()> {
    let py = record.py();
    set(record, intern!(py, "_line"), &text(py, line))
}

fn text<'py>(py: Python<'py>, value: &str) -> Bound<'py, PyAny> {
    PyString::new(py, value).into_any()
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

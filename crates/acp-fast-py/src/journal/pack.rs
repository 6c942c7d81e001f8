//! A SQLite journal's batch packing (format version 3) for the Python side, which reads rows
//! and writes them where the core cannot reach SQLite: the crate's `pack_into` and `unpack`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `_core.pack_records(lines)`: a batch's lines as a version 3 SQLite journal stores them.
#[pyfunction]
pub(crate) fn pack_records<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyBytes>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    let length =
        acp_journal::pack_into(lines.as_bytes(), &mut out).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out[..length]))
}

/// `_core.unpack_records(packed)`: the lines of a stored batch (ValueError when it is not
/// one whole packed batch).
#[pyfunction]
pub(crate) fn unpack_records<'py>(
    py: Python<'py>,
    packed: &Bound<'py, PyBytes>,
) -> PyResult<Bound<'py, PyBytes>> {
    let text = acp_journal::unpack(packed.as_bytes()).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &text))
}

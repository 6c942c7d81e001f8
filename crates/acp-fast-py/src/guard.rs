//! The Python side of the host-death guard (`acp_os::supervisor`): `acp_fast._shutdown` sets the
//! command that starts it, the guard process runs `_serve_guard`, and `_guard_pid` tells whether
//! this process's agents are guarded.

use std::ffi::OsString;

use pyo3::prelude::*;

use acp_os::supervisor;

/// Sets the argv that starts a guard process (None: agents are not guarded).
#[pyfunction]
fn _set_guard_launcher(argv: Option<Vec<OsString>>) {
    supervisor::set_launcher(argv);
}

/// The pid of this process's guard, or None (not started yet, or unavailable).
#[pyfunction]
fn _guard_pid() -> Option<u32> {
    supervisor::guard_pid()
}

/// Registers the process group led by `leader` (a terminal, say) with this process's guard,
/// starting the guard if needed; False when no guard could be told.
#[pyfunction]
fn _guard_watch(leader: u32) -> bool {
    supervisor::watch(leader)
}

/// Tells the guard that the group led by `leader` was reaped.
#[pyfunction]
fn _guard_forget(leader: u32) {
    supervisor::forget(leader)
}

/// Runs the guard's loop in this process; never returns.
#[pyfunction]
fn _serve_guard(py: Python<'_>) {
    py.detach(|| supervisor::serve())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_guard_launcher, m)?)?;
    m.add_function(wrap_pyfunction!(_guard_pid, m)?)?;
    m.add_function(wrap_pyfunction!(_guard_watch, m)?)?;
    m.add_function(wrap_pyfunction!(_guard_forget, m)?)?;
    m.add_function(wrap_pyfunction!(_serve_guard, m)?)?;
    Ok(())
}

//! The PyO3 binding of acp-fast, thin: option objects in, the blocking driver over the
//! `Connection` of `acp-proto` and the processes of `acp-os`, and Python objects out.
//!
//! - `options`: the client's option object read and validated once.
//! - `client`: `CoreClient`, one agent and its connection: construction, the call lock, state.
//! - `calls`: the calls that talk to the agent (handshake, sessions, turns, control).
//! - `driver`: the blocking loop and the observer callbacks; `aio`: the asyncio driver's
//!   non-blocking steps; `prepared`: a call read once, for either driver.
//! - `records`: `PermissionRequest` built for the observer.
//! - `update`: the `Update` class; `reply`: strings for the hot path; `errors`: exceptions.
//! - `journal`: the journal writers (`JournalWriter` for JSONL, `SqliteWriter`): records made
//!   on the reader's thread, stored in batches by a thread of their own.
//! - `guard`: the functions of the guard process that outlives a dying host (acp-os).
//! - `host`: the host side (host.md): the permission policy compiled, the observer's answer.

mod aio;
mod call;
mod calls;
mod client;
mod edge;
mod elicitation;
mod errors;
mod guard;
mod journal;
mod options;
mod policy;
mod prepared;
mod records;
mod reply;
mod state;
mod update;
mod views;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<update::Update>()?;
    m.add_class::<client::CoreClient>()?;
    m.add_class::<call::Prepared>()?;
    m.add_class::<aio::Report>()?;
    m.add_class::<prepared::Turn>()?;
    m.add_class::<views::ReaderState>()?;
    m.add_class::<views::SessionState>()?;
    m.add_class::<views::InitializeState>()?;
    m.add_class::<journal::JournalWriter>()?;
    m.add_class::<journal::SqliteWriter>()?;
    m.add_function(wrap_pyfunction!(journal::pack_records, m)?)?;
    m.add_function(wrap_pyfunction!(journal::unpack_records, m)?)?;
    m.add_function(wrap_pyfunction!(update::_rebuild_update, m)?)?;
    guard::register(m)?;
    // The one version of the project: the cargo workspace's.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The one text of a call on a closed client (the facade raises it too, before any call).
    m.add("CLIENT_CLOSED", acp_client::pump::CLOSED)?;
    m.add(
        "DEFAULT_MESSAGE_BYTES",
        acp_proto::reader::DEFAULT_LIMITS.message_bytes,
    )?;
    Ok(())
}

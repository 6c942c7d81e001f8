//! The journal writer of acp-fast, with no Python: on the reader's thread a record is its
//! fields and a copy of its bytes (a lock, no JSON); a thread of the writer's own makes the
//! lines and stores them in batches, so the reader pays for keeping the record, not for making
//! or storing it. The binding (`acp-fast-py`) wraps a `Core` over each store in a Python class
//! and converts Python values; `cargo test -p acp-journal` checks the rest without Python.
//!
//! Modules, lowest first (a module uses only those above it):
//! - `error`: why a call failed (`Error`), its text what Python raises.
//! - `locks`: a mutex lock that survives a panicking holder.
//! - `pack`: a SQLite batch's LZ4 packing, and its bounded unpacking.
//! - `sqlite_api`: the SQLite C calls as a struct of function pointers, bound at run time.
//! - `sync`: the fsync modes, and fsync "batch" as a group commit on a thread of its own.
//! - `batch`: pending records, the batch thread, flush, close, fork (over any `Store`).
//! - `lines`: the record format (one JSON object a line) both stores write, and the pending
//!   records it is made from.
//! - `jsonl`: the JSONL store, the lines appended to a file.
//! - `sqlite`: the SQLite store, a batch of lines a row (LZ4-packed).
//!
//! The Python side opens and checks a journal (header or schema, torn tail, last record), and
//! makes the rare records' text (permission and activity fields, wire lines).

mod batch;
mod error;
mod jsonl;
mod lines;
mod locks;
mod pack;
mod sqlite;
mod sqlite_api;
mod sync;

pub use batch::{now_ns, Core, Pending, Plain, Store, Waiting, BATCH_BYTES, MAX_PENDING_BYTES};
pub use error::Error;
pub use jsonl::JsonlStore;
pub use lines::{
    looks_like_an_object, push_json_string, record_other, record_update, Envelope, Lines, Session,
    UpdateRecord, MAX_KIND,
};
pub use pack::{pack_into, unpack, MAX_RATIO};
pub use sqlite::SqliteStore;
pub use sqlite_api::Api;
pub use sync::Fsync;

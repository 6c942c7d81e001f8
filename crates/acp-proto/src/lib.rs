//! acp-fast's protocol engine, sans I/O: no libc, threads, clocks or pyo3. Every module is
//! tested with `cargo test` alone.
//!
//! - `reader`: the bounded line reader (one fixed buffer, `message_bytes + 1` bytes).
//! - `wire`: classification of incoming lines and borrowed field extraction.
//! - `encode`: outgoing messages, byte-exact.
//! - `engine`: the conversation rules (ids, numbering, caps, reply capture, permissions).
//! - `driver`: the call loop over any `Transport` and `Host`.

pub mod driver;
pub mod encode;
pub mod engine;
pub mod error;
pub mod reader;
pub mod wire;

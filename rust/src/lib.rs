//! acp-fast's core: an Agent Client Protocol host. Pure-Rust modules by concern, each tested with
//! `cargo test` and no Python; the PyO3 bindings (feature `python`) are thin and last.
//!
//! - `reader`: the bounded line reader (one fixed buffer, `message_bytes + 1` bytes).
//! - `wire`: classification of incoming lines and borrowed field extraction.
//! - `encode`: outgoing messages, byte-exact.
//! - `process`: spawning the agent in its own session, group signalling, the pipe transport.
//! - `engine`: the conversation rules (ids, numbering, caps, reply capture, permissions).
//! - `driver`: the call loop over any `Transport` and `Host`.

pub mod driver;
pub mod encode;
pub mod engine;
pub mod error;
pub mod process;
pub mod reader;
pub mod wire;

#[cfg(feature = "python")]
mod python;

//! acp-fast's protocol engine, sans I/O: no libc, threads, clocks or pyo3. Every module is
//! tested with `cargo test` alone.
//!
//! - `reader`: the bounded line reader (one fixed buffer, `message_bytes + 1` bytes).
//! - `wire`: classification of incoming lines and borrowed field extraction.
//! - `encode`: outgoing messages, byte-exact.
//! - `limits`: the settings (transfer caps, permission policy) and their validation.
//! - `update`, `permission`: one update; one permission request and the policy's choice.
//! - `elicitation`: an `elicitation/create` read within its bounds, and its answer.
//! - `host`: host requests (files, terminals): checks, answers, activity records.
//! - `rules`: permission rules, the resolution tiers and the option choice.
//! - `calls`, `session`, `results`: the calls table with its tombstones, the sessions table with
//!   each turn's capture and record, and what the agent's answers say.
//! - `connection`: the `Connection` that owns every ordering rule (bytes in; events and bytes
//!   out; time passed in), driven by the blocking and the asyncio drivers alike.

pub mod calls;
pub mod connection;
pub mod elicitation;
pub mod encode;
pub mod error;
pub mod host;
pub mod limits;
pub mod permission;
pub mod reader;
pub mod results;
pub mod rules;
pub mod session;
pub mod update;
pub mod wire;

pub use connection::{AskId, Connection, Decided, Event, HostAnswer, HostId, Outcome, Request};

//! acp-fast's driver: ONE loop over the sans-I/O `Connection` of `acp-proto` and the pipes of
//! `acp-os`, written once for both clients (as quinn writes its driver once over quinn-proto).
//!
//! - `pump`: `Pump`, what a client owns while a call runs (the connection, the pipes, the host
//!   state), with `step` (bounded, never waits: an event loop's readiness callback) and
//!   `run_until` (blocking: `step` plus a waiting read).
//! - `edge`: `trait Edge`, the callbacks the pump hands events to (the Python binding implements
//!   it; tests implement it in Rust), and the errors a pump step ends with.
//! - `blocking`: a blocking call's steps around `run_until`, and `start()`'s steps.
//! - `agent`: why an agent's output ended; the grace its group gets at close.
//! - `call`: a call of the client, owned: what it asks the connection for, its value, and what
//!   a failure to connect means.
//! - `inflight`: the asyncio driver's calls in flight, and which of them an answer or an error
//!   settles.
//! - `controls`: the flags and queues other threads reach a running call through.
//! - `published`: the views a client publishes for its properties (read without the call lock).
//! - `settings`: plain option values checked once (timeouts, the cancel grace, the host's
//!   directories and environment, a spawn failure's text).
//! - `host`: host requests served for the agent (files, terminals), design/host.md.
//! - `elicited`: what the edge answers an elicitation with (`pump::elicit` settles it).
//!
//! No Python here: `cargo test -p acp-client` runs the loop's rules against a Rust `Edge`.

pub mod agent;
pub mod blocking;
pub mod call;
pub mod controls;
pub mod edge;
pub mod elicited;
pub mod host;
pub mod inflight;
pub mod published;
pub mod pump;
pub mod settings;

pub use controls::Controls;
pub use edge::{Asked, Edge, Error, Fail};
pub use elicited::Elicited;
pub use pump::{Pump, Reads, Stop};

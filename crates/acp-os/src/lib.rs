//! acp-fast's operating-system side: the agent process in a session of its own, signals to its
//! group and descendants, the pipe transport with bounded waits, the waker that reaches a
//! blocked read from another thread, and the guard process that kills every agent's group when
//! the host dies; `fs`: files read and written for the agent, confined to a session's roots;
//! `terminal`: the agent's terminals, drained by one thread per client.
//!
//! The modules in layers, each using only those below it (tests/test_module_graph.py checks
//! there is no circle):
//! - `sync` (the lock helper), `fd` (close-on-exec pipes, `O_NONBLOCK`, pidfds, the fork lock),
//!   `darwin` (macOS's libproc), `exit` (a child's exit, unreaped);
//! - `proc_table` (the one /proc | libproc reader and descendant walk), `io` (the transport
//!   vocabulary, the waker);
//! - `kill` (freeze, then kill, a family of processes);
//! - `supervisor` (the guard), `transport` (the agent's pipes);
//! - `process` (the agent), `terminal` (the agent's terminals); `fs` stands apart.

#[cfg(target_os = "macos")]
mod darwin;
mod exit;
mod fd;
pub mod fs;
pub mod io;
pub mod kill;
pub mod proc_table;
pub mod process;
pub mod supervisor;
mod sync;
pub mod terminal;
pub mod transport;

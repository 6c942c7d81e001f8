//! acp-fast's operating-system side: the agent process in a session of its own, signals to its
//! group and descendants, the pipe transport with bounded waits, the waker that reaches a
//! blocked read from another thread, and the guard process that kills every agent's group when
//! the host dies; `fs`: files read and written for the agent, confined to a session's roots;
//! `terminal`: the agent's terminals, drained by one thread per client.

#[cfg(target_os = "macos")]
mod darwin;
pub mod fs;
pub mod io;
pub mod process;
pub mod supervisor;
pub mod terminal;

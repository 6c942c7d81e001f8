//! acp-fast's operating-system side: the agent process in a session of its own, signals to its
//! group and descendants, the pipe transport with bounded waits, and the waker that reaches a
//! blocked read from another thread.

pub mod io;
pub mod process;

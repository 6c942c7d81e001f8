//! acp-fast's operating-system side: the agent process in a session of its own, signals to its
//! group and descendants, and the pipe transport with bounded waits.

pub mod process;

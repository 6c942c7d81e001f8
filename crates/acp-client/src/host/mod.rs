//! The host side (design/host.md): host requests served for the agent, files through
//! `acp_os::fs` and terminals through `acp_os::terminal` (`serve`), long reads finished off the
//! pump's thread (`reads`); each answered after the edge's `activity`.

mod reads;
mod serve;

pub use serve::{answer_waits, serve, Host, HostConfig, HostFailure, HostRequest, KillSwitch};

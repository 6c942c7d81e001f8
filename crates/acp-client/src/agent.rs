//! The agent process as the client sees it when things end: why its output ended (its exit
//! status, the tail of its stderr), and the grace `close()` gives its group. These wait (at
//! most a few hundred milliseconds, or the grace): callers run them detached.

use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use acp_os::process::{Agent, StderrTail};

use crate::controls::lock;

/// Why the agent's output ended, as far as the client knows when an error is raised.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The agent's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub exit_signal: Option<i32>,
    /// What to add to the error's message: the exit status, then the stderr tail.
    pub told: String,
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("ended ({status})"),
    }
}

/// What is known about why the agent's output ended: its exit status (a dying agent gets
/// 100 ms to become reapable) and the last words of its stderr. The status is given apart
/// from the text too, so a host (the fleet's retry) need not read it back out of a message.
pub fn why_ended(agent: &Mutex<Option<Agent>>, tail: Option<&StderrTail>) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    let deadline = Instant::now() + Duration::from_millis(100);
    let status = loop {
        let status = lock(agent).as_ref().and_then(Agent::exit_status);
        if status.is_some() || Instant::now() >= deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut ended = Ended::default();
    if let Some(status) = status {
        ended.exit_code = status.code();
        ended.exit_signal = status.signal();
        ended
            .told
            .push_str(&format!("; the agent {}", describe_exit(status)));
    }
    if let Some(tail) = tail {
        let bytes = tail.last_words(Duration::from_millis(200));
        if !bytes.is_empty() {
            ended.told.push_str(&format!(
                "\nagent stderr (last {} bytes):\n{}",
                bytes.len(),
                String::from_utf8_lossy(&bytes)
            ));
        }
    }
    ended
}

/// Waits until the agent has exited and nothing else of its group runs, or `until` passes:
/// what the agent started may still be finishing (persisting a session) after it exited.
pub fn wait_for_group(agent: &Mutex<Option<Agent>>, until: Instant) {
    loop {
        let (exited, busy) = match lock(agent).as_ref() {
            None => (true, false),
            Some(agent) if agent.exit_status().is_some() => (true, agent.group_busy()),
            Some(_) => (false, true),
        };
        if (exited && !busy) || Instant::now() >= until {
            return;
        }
        // After the agent's exit each look walks /proc: look less often.
        std::thread::sleep(Duration::from_millis(if exited { 20 } else { 5 }));
    }
}

//! The agent process as the client sees it when things end: why its output ended (its exit
//! status, the tail of its stderr), and the grace `close()` gives its group. These wait (at
//! most a few hundred milliseconds, or the grace): callers run them detached.

use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use acp_os::process::{Agent, StderrTail};

use crate::controls::lock;

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("ended ({status})"),
    }
}

/// What is known about why the agent's output ended, to add to an error's message: its exit
/// status (a dying agent gets 100 ms to become reapable) and the last words of its stderr.
pub fn why_ended(agent: &Mutex<Option<Agent>>, tail: Option<&StderrTail>) -> String {
    let deadline = Instant::now() + Duration::from_millis(100);
    let status = loop {
        let status = lock(agent).as_ref().and_then(Agent::exit_status);
        if status.is_some() || Instant::now() >= deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut told = String::new();
    if let Some(status) = status {
        told.push_str(&format!("; the agent {}", describe_exit(status)));
    }
    if let Some(tail) = tail {
        let bytes = tail.last_words(Duration::from_millis(200));
        if !bytes.is_empty() {
            told.push_str(&format!(
                "\nagent stderr (last {} bytes):\n{}",
                bytes.len(),
                String::from_utf8_lossy(&bytes)
            ));
        }
    }
    told
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

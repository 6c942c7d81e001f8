//! The agent process: started in a session of its own (so it leads its own process group), with
//! pipes on stdin/stdout and stderr discarded; stopped by SIGTERM then SIGKILL to the whole group
//! (falling back to the child alone); reaped. `PipeTransport` reads and writes its pipes with
//! waits bounded to a short interval, so the caller can check signals between them.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::driver::{ReadOutcome, Transport, WriteOutcome};

#[derive(Clone, Debug, Default)]
pub struct SpawnOptions {
    pub command: String,
    pub args: Vec<String>,
    pub cwd: Option<String>,
    /// `None` inherits the caller's environment; `Some` replaces it.
    pub env: Option<Vec<(String, String)>>,
}

/// A running (or exited, not yet reaped) agent.
pub struct Agent {
    child: Child,
    reaped: bool,
}

pub fn spawn(options: &SpawnOptions) -> io::Result<(Agent, PipeTransport)> {
    let mut command = Command::new(&options.command);
    command
        .args(&options.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(cwd) = &options.cwd {
        command.current_dir(cwd);
    }
    if let Some(env) = &options.env {
        command.env_clear();
        command.envs(env.iter().map(|(k, v)| (k, v)));
    }
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setsid, signal).
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // Python ignores SIGPIPE and ignored signals survive exec: give the agent defaults.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let stdin: OwnedFd = child
        .stdin
        .take()
        .expect("stdin was configured as a pipe")
        .into();
    let stdout: OwnedFd = child
        .stdout
        .take()
        .expect("stdout was configured as a pipe")
        .into();
    set_nonblocking(&stdin)?;
    set_nonblocking(&stdout)?;
    Ok((
        Agent {
            child,
            reaped: false,
        },
        PipeTransport {
            stdin,
            stdout,
            wait: Duration::from_millis(100),
        },
    ))
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags < 0 || libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn signal_group(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: plain kill(2). The group id is the agent's pid (it called setsid), and that pid
    // cannot be reused while the agent is unreaped, so the group is still ours.
    unsafe {
        if libc::kill(-pid, signal) != 0 {
            libc::kill(pid, signal);
        }
    }
}

impl Agent {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_reaped(&self) -> bool {
        self.reaped
    }

    /// SIGTERM, then SIGKILL, to the whole group; returns without waiting.
    pub fn stop(&mut self) {
        if self.reaped {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        signal_group(pid, libc::SIGTERM);
        signal_group(pid, libc::SIGKILL);
    }

    /// Stops the group and waits for the agent to exit.
    pub fn stop_and_reap(&mut self) {
        self.stop();
        if !self.reaped {
            let _ = self.child.wait();
            self.reaped = true;
        }
    }

    /// Reaps the agent if it has exited, without waiting.
    pub fn try_reap(&mut self) -> bool {
        if !self.reaped && matches!(self.child.try_wait(), Ok(Some(_))) {
            self.reaped = true;
        }
        self.reaped
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop_and_reap();
    }
}

/// The agent's stdin and stdout, both non-blocking, waited on with poll(2).
pub struct PipeTransport {
    stdin: OwnedFd,
    stdout: OwnedFd,
    wait: Duration,
}

fn wait_for(fd: &OwnedFd, events: libc::c_short, wait: Duration) -> io::Result<bool> {
    let mut pollfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pollfd, 1, wait.as_millis() as libc::c_int) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(error);
    }
    Ok(ready > 0)
}

impl Transport for PipeTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
        loop {
            // SAFETY: reading into a valid, exclusively borrowed buffer.
            let count =
                unsafe { libc::read(self.stdout.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if count > 0 {
                return Ok(ReadOutcome::Data(count as usize));
            }
            if count == 0 {
                return Ok(ReadOutcome::Eof);
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::Interrupted => return Ok(ReadOutcome::Idle),
                io::ErrorKind::WouldBlock => {
                    if !wait_for(&self.stdout, libc::POLLIN, self.wait)? {
                        return Ok(ReadOutcome::Idle);
                    }
                }
                _ => return Err(error),
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<WriteOutcome> {
        loop {
            // SAFETY: writing from a valid buffer.
            let count =
                unsafe { libc::write(self.stdin.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
            if count >= 0 {
                return Ok(WriteOutcome::Wrote(count as usize));
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::Interrupted => return Ok(WriteOutcome::Idle),
                io::ErrorKind::WouldBlock => {
                    if !wait_for(&self.stdin, libc::POLLOUT, self.wait)? {
                        return Ok(WriteOutcome::Idle);
                    }
                }
                _ => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn sh(script: &str) -> SpawnOptions {
        SpawnOptions {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            ..SpawnOptions::default()
        }
    }

    fn alive(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z')
            }
            Err(_) => false,
        }
    }

    #[test]
    fn the_agent_leads_its_own_session() {
        let (mut agent, _pipes) = spawn(&sh("sleep 10")).unwrap();
        let pid = agent.pid() as i32;
        unsafe {
            assert_eq!(libc::getpgid(pid), pid);
            assert_eq!(libc::getsid(pid), pid);
        }
        agent.stop_and_reap();
        assert!(!alive(pid));
    }

    #[test]
    fn stop_kills_a_term_ignoring_group() {
        let (mut agent, mut pipes) = spawn(&sh(
            "trap '' TERM; sleep 100 & echo $!; while true; do sleep 5 & wait; done",
        ))
        .unwrap();
        let mut buf = [0u8; 64];
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while !got.contains(&b'\n') && Instant::now() < deadline {
            if let ReadOutcome::Data(n) = pipes.read(&mut buf).unwrap() {
                got.extend_from_slice(&buf[..n]);
            }
        }
        let grandchild: i32 = String::from_utf8(got).unwrap().trim().parse().unwrap();
        assert!(alive(grandchild));
        let started = Instant::now();
        agent.stop_and_reap();
        while alive(grandchild) && started.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(grandchild), "the grandchild outlived stop_and_reap");
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let error = spawn(&SpawnOptions {
            command: "/does/not/exist".into(),
            ..SpawnOptions::default()
        })
        .err()
        .unwrap();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn reads_end_with_eof_and_writes_to_a_dead_agent_fail() {
        let (mut agent, mut pipes) = spawn(&sh("exec 0<&-; echo hi")).unwrap();
        let mut buf = [0u8; 16];
        let mut seen = Vec::new();
        loop {
            match pipes.read(&mut buf).unwrap() {
                ReadOutcome::Data(n) => seen.extend_from_slice(&buf[..n]),
                ReadOutcome::Eof => break,
                ReadOutcome::Idle => {}
            }
        }
        assert_eq!(seen, b"hi\n");
        agent.stop_and_reap();
        let error = loop {
            match pipes.write(b"x\n") {
                Err(e) => break e,
                Ok(_) => continue,
            }
        };
        assert_eq!(error.kind(), io::ErrorKind::BrokenPipe);
    }
}

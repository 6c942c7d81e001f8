//! The agent process: started in a session of its own (so it leads its own process group), with
//! pipes on stdin/stdout and stderr discarded, inherited or drained into a ring buffer; stopped by
//! freezing, then SIGKILLing, the whole group and session and every descendant found under /proc
//! (libproc on macOS), even one that left the group (`kill`); reaped.
//! `PipeTransport` reads and writes its pipes with waits bounded to a short interval, so the
//! caller can check signals between them, and reports the end of output once the agent itself
//! has exited even when a process it started still holds the pipe.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

mod stderr;

pub use crate::proc_table::descendants;
pub use crate::transport::{PipeTransport, Room};
pub use stderr::{StderrTail, STDERR_READ_BUDGET};

use crate::fd;
use crate::kill;
use crate::supervisor;

/// What happens to the agent's stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StderrMode {
    /// Sent to /dev/null (the reference's behaviour).
    #[default]
    Discard,
    /// Shared with the host's own stderr.
    Inherit,
    /// Drained into a ring buffer of this many bytes: by a thread under the blocking driver
    /// (`Agent::drain_stderr_in_thread`), by the event loop's callbacks under asyncio
    /// (`StderrTail::read_available`), so an asyncio client starts no thread.
    Tail(usize),
}

#[derive(Clone, Debug, Default)]
pub struct SpawnOptions {
    pub command: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<OsString>,
    /// `None` inherits the caller's environment; `Some` replaces it.
    pub env: Option<Vec<(OsString, OsString)>>,
    pub stderr: StderrMode,
}

/// A running (or exited, not yet reaped) agent.
pub struct Agent {
    child: Child,
    reaped: bool,
    /// The process that started the agent: after fork(), a child process must not stop or reap
    /// its parent's agent.
    owner: u32,
    stderr_tail: Option<Arc<StderrTail>>,
    /// The drain thread and the write end that tells it to finish, joined by `stop_and_reap`
    /// so that close() leaves no thread or descriptor behind.
    drain: Option<(std::thread::JoinHandle<()>, OwnedFd)>,
}

/// The agent's command: a session of its own, default signal dispositions and mask.
fn command(options: &SpawnOptions) -> Command {
    let mut command = Command::new(&options.command);
    command
        .args(&options.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(match options.stderr {
            StderrMode::Discard => Stdio::null(),
            StderrMode::Inherit => Stdio::inherit(),
            StderrMode::Tail(_) => Stdio::piped(),
        });
    if let Some(cwd) = &options.cwd {
        command.current_dir(cwd);
    }
    if let Some(env) = &options.env {
        command.env_clear();
        command.envs(env.iter().map(|(k, v)| (k, v)));
    }
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setsid, signal, sigprocmask).
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // Ignored signals and the mask survive exec: a host started in a shell's background
            // ignores SIGINT/SIGQUIT, Python ignores SIGPIPE. The agent starts with defaults.
            // (32 and 33 are the C library's own and refuse; the error is harmless.)
            for signal in 1..65 {
                if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    command
}

pub fn spawn(options: &SpawnOptions) -> io::Result<(Agent, PipeTransport)> {
    let mut child = fd::spawn(&mut command(options))?;
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
    let pid = child.id() as libc::pid_t;
    // From here the agent is guarded: if this process dies, the guard kills its group. And if
    // what follows fails, dropping the `Agent` stops and reaps it.
    supervisor::watch(pid as u32);
    let mut agent = Agent {
        child,
        reaped: false,
        owner: std::process::id(),
        stderr_tail: None,
        drain: None,
    };
    fd::set_nonblocking(&stdin)?;
    fd::set_nonblocking(&stdout)?;
    grow_pipe(&stdout);
    if let (StderrMode::Tail(capacity), Some(pipe)) = (options.stderr, agent.child.stderr.take()) {
        // No thread yet: the driver decides who reads it (a thread, or the event loop).
        let pipe: OwnedFd = pipe.into();
        fd::set_nonblocking(&pipe)?;
        agent.stderr_tail = Some(Arc::new(StderrTail::new(capacity, pipe)));
    }
    Ok((agent, PipeTransport::new(stdin, stdout, pid)))
}

/// Asks for a 1 MiB pipe buffer on the agent's stdout (the default is 64 KiB): a streaming agent
/// then blocks less often, and each of our reads takes more at once. Best effort: the kernel may
/// cap it (`/proc/sys/fs/pipe-max-size`), and a smaller pipe only costs speed. macOS has no such
/// knob (its pipes grow by themselves up to 64 KiB).
#[cfg(target_os = "linux")]
fn grow_pipe(pipe: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

#[cfg(not(target_os = "linux"))]
fn grow_pipe(_: &OwnedFd) {}

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

    /// Whether this process started the agent (false in a child made by fork()).
    pub fn owned_here(&self) -> bool {
        self.owner == std::process::id()
    }

    pub fn stderr_tail(&self) -> Option<&Arc<StderrTail>> {
        self.stderr_tail.as_ref()
    }

    /// Hands the stderr pipe to a drain thread (the blocking driver), once; nothing when there
    /// is no tail, a thread already drains it, or the agent was reaped.
    pub fn drain_stderr_in_thread(&mut self) -> io::Result<()> {
        let Some(tail) = &self.stderr_tail else {
            return Ok(());
        };
        if self.drain.is_some() || self.reaped {
            return Ok(());
        }
        let Some(pipe) = tail.take_pipe() else {
            return Ok(());
        };
        let (stop_read, stop_write) = fd::pipe_cloexec()?;
        let drain = Arc::clone(tail);
        let spawned = std::thread::Builder::new()
            .name("acp-fast-stderr".into())
            .spawn(move || drain.drain(pipe, stop_read));
        match spawned {
            Ok(thread) => {
                self.drain = Some((thread, stop_write));
                Ok(())
            }
            Err(error) => {
                tail.end(); // the pipe went with the closure: the tail has what it has
                Err(error)
            }
        }
    }

    /// Freezes the agent, its group, its session and every descendant, then SIGKILLs them all
    /// (`kill::freeze_then_kill`: none forks away meanwhile); returns without waiting.
    pub fn stop(&mut self) {
        if self.reaped || !self.owned_here() {
            return;
        }
        // Unreaped, so the pid (and the group and session it leads) is still the agent's.
        let pid = self.child.id() as libc::pid_t;
        kill::freeze_then_kill(&[pid]);
        // Should the table not be readable (no /proc), the group still goes.
        signal_group(pid, libc::SIGKILL);
    }

    /// Stops everything and waits for the agent to exit.
    pub fn stop_and_reap(&mut self) {
        self.stop();
        if !self.reaped && self.owned_here() {
            let _ = self.child.wait();
            self.reaped = true;
            supervisor::forget(self.child.id());
            if let Some((thread, stop)) = self.drain.take() {
                drop(stop); // EOF on the stop pipe: the drain takes what is buffered and ends
                let _ = thread.join();
            }
            if let Some(tail) = &self.stderr_tail {
                tail.finish(); // a pipe no thread owns: its last words, then it is closed
            }
        }
    }

    /// Whether a process other than the agent itself is still running in the agent's group:
    /// what it started and has not waited for (claude-agent-acp's `claude` child persisting a
    /// session after the agent answered end of input). Linux only (a walk of /proc); false
    /// elsewhere, and once the agent is reaped.
    pub fn group_busy(&self) -> bool {
        if self.reaped || !self.owned_here() {
            return false;
        }
        group_has_others(self.child.id() as libc::pid_t)
    }

    /// The agent's exit status if it has exited; never waits, and leaves it unreaped so its
    /// pid (the group id) stays ours until `stop_and_reap` has signalled the whole group.
    pub fn exit_status(&self) -> Option<std::process::ExitStatus> {
        if !self.owned_here() || self.reaped {
            return None;
        }
        crate::exit::peek_exit(self.child.id() as libc::pid_t)
    }
}
impl Drop for Agent {
    fn drop(&mut self) {
        self.stop_and_reap();
    }
}

/// Whether a live process other than `pgid` itself is in group `pgid` (Linux only, as before
/// the process table was shared: macOS agents have not been seen to need it).
#[cfg(target_os = "linux")]
fn group_has_others(pgid: libc::pid_t) -> bool {
    crate::proc_table::group_has_others(pgid)
}

#[cfg(not(target_os = "linux"))]
fn group_has_others(_pgid: libc::pid_t) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{ReadOutcome, Transport};
    use std::time::{Duration, Instant};

    fn sh(script: &str) -> SpawnOptions {
        SpawnOptions {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            ..SpawnOptions::default()
        }
    }

    fn alive(pid: i32) -> bool {
        crate::proc_table::process(pid).is_some_and(|p| !p.exited)
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

    /// The first line the agent prints, as a pid.
    fn read_pid(pipes: &mut PipeTransport) -> i32 {
        let mut buf = [0u8; 64];
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while !got.contains(&b'\n') && Instant::now() < deadline {
            if let ReadOutcome::Data(n) = pipes.read(&mut buf).unwrap() {
                got.extend_from_slice(&buf[..n]);
            }
        }
        String::from_utf8(got).unwrap().trim().parse().unwrap()
    }

    /// Stops and reaps the agent; `pid` (a descendant) must be gone soon after.
    fn stop_reaches(mut agent: Agent, pid: i32) {
        assert!(alive(pid));
        let started = Instant::now();
        agent.stop_and_reap();
        while alive(pid) && started.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(pid), "the descendant outlived stop_and_reap");
    }

    /// Attack: the agent forks children that call setsid() as fast as it can while it is
    /// stopped; none may outlive `stop_and_reap` (`kill::freeze_then_kill`).
    #[cfg(target_os = "linux")]
    #[test]
    fn stop_loses_no_child_forked_meanwhile() {
        use crate::kill::flood;
        let tag = flood::fork_race_tag();
        let (mut agent, mut pipes) = spawn(&sh(&flood::fork_race_script(&tag))).unwrap();
        read_pid(&mut pipes); // the flood is on
        agent.stop_and_reap();
        flood::assert_none_left(&tag);
    }

    #[test]
    fn stop_kills_a_term_ignoring_group() {
        let (agent, mut pipes) = spawn(&sh(
            "trap '' TERM; sleep 100 & echo $!; while true; do sleep 5 & wait; done",
        ))
        .unwrap();
        let grandchild = read_pid(&mut pipes);
        stop_reaches(agent, grandchild);
    }

    /// Attack: the agent starts, in a session of its own, a program whose name is not UTF-8
    /// and holds `)` (a file name may hold any byte but '/' and NUL), which starts a child. Out
    /// of the agent's group, both are reached only by the walk of parent links through the
    /// oddly named one: a table that skipped it (a /proc reader wanting UTF-8) lost both.
    #[cfg(target_os = "linux")]
    #[test]
    fn stop_reaches_through_a_process_whose_name_is_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("acp-os-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let odd = dir.join(std::ffi::OsStr::from_bytes(b"\xff) S 1 1 \xfe"));
        std::fs::copy("/bin/sh", &odd).unwrap();
        let mut options = sh(r#"setsid "$0" -c 'sleep 100 & echo $!; wait' & wait"#);
        options.args.push(odd.clone().into_os_string());
        let (agent, mut pipes) = spawn(&options).unwrap();
        let grandchild = read_pid(&mut pipes);
        // SAFETY: getsid(2) only reads.
        assert_ne!(
            unsafe { libc::getsid(grandchild) },
            agent.pid() as i32,
            "left the session"
        );
        stop_reaches(agent, grandchild);
        std::fs::remove_dir_all(&dir).unwrap();
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
                ReadOutcome::Idle | ReadOutcome::Woken => {}
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

    #[test]
    fn a_waker_reaches_a_blocked_read_at_once() {
        let (mut agent, mut pipes) = spawn(&sh("sleep 10")).unwrap();
        let waker = crate::io::Waker::new().unwrap();
        pipes.set_waker(waker.fd());
        pipes.set_wait(Duration::from_secs(5));
        let began = Instant::now();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                waker.wake();
            });
            let mut buf = [0u8; 16];
            assert!(matches!(pipes.read(&mut buf).unwrap(), ReadOutcome::Woken));
        });
        assert!(
            began.elapsed() < Duration::from_secs(4),
            "the wait ended on the waker, not the timeout"
        );
        waker.drain();
        agent.stop_and_reap();
    }

    #[test]
    fn a_stderr_tail_is_read_without_a_thread_until_one_is_asked_for() {
        let mut options = sh("echo first >&2; read line; echo second >&2; sleep 5");
        options.stderr = StderrMode::Tail(4096);
        let (mut agent, mut pipes) = spawn(&options).unwrap();
        let tail = Arc::clone(agent.stderr_tail().unwrap());
        assert!(agent.drain.is_none(), "no thread at spawn");
        assert!(tail.raw_fd().is_some());
        let deadline = Instant::now() + Duration::from_secs(10);
        while tail.now() != b"first\n" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(tail.now(), b"first\n"); // read by the caller (an event loop) alone
        agent.drain_stderr_in_thread().unwrap();
        assert!(agent.drain.is_some() && tail.raw_fd().is_none());
        pipes.try_write(b"go\n").unwrap();
        while tail.snapshot(Duration::ZERO) != b"first\nsecond\n" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(tail.snapshot(Duration::ZERO), b"first\nsecond\n"); // now by the thread
        agent.stop_and_reap();
        assert!(agent.drain.is_none(), "joined");
    }

    #[test]
    fn reaping_closes_a_stderr_pipe_no_thread_owns() {
        let mut options = sh("echo last words >&2");
        options.stderr = StderrMode::Tail(4096);
        let (mut agent, _pipes) = spawn(&options).unwrap();
        let tail = Arc::clone(agent.stderr_tail().unwrap());
        agent.stop_and_reap();
        assert!(tail.raw_fd().is_none(), "closed");
        assert!(tail.read_available(STDERR_READ_BUDGET), "ended");
    }
}

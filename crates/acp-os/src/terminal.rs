//! Terminals for the agent (design/host.md §3): each command runs without a shell in a session
//! of its own (so it leads its own process group), stdout and stderr merged into one pipe that
//! one thread per client drains for all its terminals, keeping only the longest suffix within
//! the byte limit that starts on a UTF-8 boundary. Exits are seen through pidfds (Linux; a short
//! poll elsewhere). Killing reaches the group and every descendant, as for the agent.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use acp_proto::host::ExitStatus;

use crate::fd;
use crate::io::{Notifier, Waker};
use crate::kill;
use crate::supervisor;
use crate::sync::lock;

/// The retained output: the last `limit` bytes in a ring; a snapshot drops leading UTF-8
/// continuation bytes, so it is the longest suffix within `limit` that starts on a boundary.
#[derive(Debug)]
pub struct Retained {
    ring: VecDeque<u8>,
    limit: usize,
    dropped: u64,
}

impl Retained {
    pub fn new(limit: usize) -> Retained {
        Retained {
            ring: VecDeque::with_capacity(limit.min(1 << 16)),
            limit,
            dropped: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.limit {
            self.dropped += (self.ring.len() + bytes.len() - self.limit) as u64;
            self.ring.clear();
            self.ring.extend(&bytes[bytes.len() - self.limit..]);
            return;
        }
        let over = (self.ring.len() + bytes.len()).saturating_sub(self.limit);
        self.ring.drain(..over);
        self.dropped += over as u64;
        self.ring.extend(bytes);
    }

    /// The kept bytes and whether any byte of the output was dropped.
    pub fn snapshot(&self) -> (Vec<u8>, bool) {
        let skip = self
            .ring
            .iter()
            .take(3)
            .take_while(|b| **b & 0xC0 == 0x80)
            .count();
        // A fourth continuation byte cannot start a character either; keep skipping then.
        let skip = if skip == 3 {
            self.ring.iter().take_while(|b| **b & 0xC0 == 0x80).count()
        } else {
            skip
        };
        let bytes: Vec<u8> = self.ring.iter().skip(skip).copied().collect();
        (bytes, self.dropped > 0 || skip > 0)
    }
}

/// The name of signal `n` as Python's `signal.Signals` has it.
pub fn signal_name(n: i32) -> String {
    let name = match n {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGSYS => "SIGSYS",
        other => return format!("SIG{other}"),
    };
    name.into()
}

fn exit_of(status: libc::c_int) -> ExitStatus {
    if libc::WIFSIGNALED(status) {
        ExitStatus {
            exit_code: None,
            signal: Some(signal_name(libc::WTERMSIG(status))),
        }
    } else {
        ExitStatus {
            exit_code: Some(libc::WEXITSTATUS(status) as u32),
            signal: None,
        }
    }
}

/// What a terminal runs.
pub struct Spawn {
    pub command: String,
    pub args: Vec<String>,
    /// The whole environment (the client's plus the request's).
    pub env: Vec<(OsString, OsString)>,
    /// The working directory, already opened (race-free) by the confinement walk.
    pub cwd: OwnedFd,
    pub limit: usize,
}

struct Term {
    session: String,
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    out: Option<OwnedFd>,
    retained: Retained,
    exit: Option<ExitStatus>,
    /// Forgotten by the agent (release): unknown to requests, dropped once it has ended.
    released: bool,
}

impl Term {
    /// Freezes, then SIGKILLs, the group and every descendant (`kill::freeze_then_kill`), without
    /// waiting.
    fn kill(&self) {
        if self.exit.is_some() {
            // The leader is reaped; what is left of its group still goes.
            // SAFETY: kill(2) of the group: its id cannot be reused while a member lives.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            return;
        }
        // The leader is unreaped, so its pid, group and session are still ours.
        kill::freeze_then_kill(&[self.pid]);
        // SAFETY: plain kill(2), as above; for when the table could not be read.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
    }

    /// Reaps the leader if it has exited.
    fn reap(&mut self, block: bool) -> bool {
        if self.exit.is_some() {
            return true;
        }
        let mut status = 0;
        let flags = if block { 0 } else { libc::WNOHANG };
        // SAFETY: waitpid on our own child.
        let got = unsafe { libc::waitpid(self.pid, &mut status, flags) };
        if got == self.pid {
            self.exit = Some(exit_of(status));
            self.pidfd = None;
            supervisor::forget(self.pid as u32);
            return true;
        }
        if got < 0 {
            // Not our child any more (reaped elsewhere): report it as killed.
            self.exit = Some(ExitStatus {
                exit_code: None,
                signal: Some("SIGKILL".into()),
            });
            self.pidfd = None;
            return true;
        }
        false
    }
}

/// How many ended, released terminals keep their exit status for pending waits.
const ENDED: usize = 1024;

#[derive(Default)]
struct Inner {
    terms: HashMap<String, Term>,
    /// Exit statuses of released terminals already dropped, oldest first.
    ended: VecDeque<(String, ExitStatus)>,
    next: u64,
    thread: Option<JoinHandle<()>>,
}

/// Every terminal of one client and the thread that drains them.
pub struct Terminals {
    inner: Mutex<Inner>,
    waker: Waker,
    closed: AtomicBool,
    /// A terminal exited since `take_exits` last looked.
    exited: AtomicBool,
    /// Wakes the client's driver when a terminal exits (a pending wait can be answered).
    notifier: Mutex<Option<Arc<Notifier>>>,
}

/// The output pipe (read end, write end): close-on-exec from birth, so a child another thread
/// forks meanwhile cannot inherit the write end and hold the terminal's output open forever;
/// the read end non-blocking for the drain thread.
fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = fd::pipe_cloexec()?;
    fd::set_nonblocking(&read)?;
    Ok((read, write))
}

impl Terminals {
    pub fn new() -> io::Result<Arc<Terminals>> {
        Ok(Arc::new(Terminals {
            inner: Mutex::new(Inner::default()),
            waker: Waker::new()?,
            closed: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            notifier: Mutex::new(None),
        }))
    }

    /// Who to wake when a terminal exits.
    pub fn set_notifier(&self, notifier: Arc<Notifier>) {
        *lock(&self.notifier) = Some(notifier);
    }

    /// Starts a terminal; its id is `term-<n>`, n counting from 1.
    pub fn create(self: &Arc<Self>, session: &str, spawn: Spawn) -> io::Result<String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(io::Error::other("the client is closed"));
        }
        let (read, write) = output_pipe()?;
        let mut command = Command::new(&spawn.command);
        command
            .args(&spawn.args)
            .env_clear()
            .envs(spawn.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(write.try_clone()?))
            .stderr(Stdio::from(write));
        let cwd = spawn.cwd.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 || libc::fchdir(cwd) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = fd::spawn(&mut command)?;
        drop(command); // closes our copies of the write end
        let pid = child.id() as libc::pid_t;
        supervisor::watch(pid as u32);
        let mut inner = lock(&self.inner);
        inner.next += 1;
        let id = format!("term-{}", inner.next);
        inner.terms.insert(
            id.clone(),
            Term {
                session: session.to_owned(),
                pid,
                pidfd: fd::pidfd(pid as u32).ok(),
                out: Some(read),
                retained: Retained::new(spawn.limit),
                exit: None,
                released: false,
            },
        );
        if inner.thread.is_none() {
            let me = Arc::clone(self);
            inner.thread = Some(std::thread::spawn(move || me.drain()));
        }
        drop(inner);
        self.waker.wake();
        Ok(id)
    }

    fn with<T>(&self, id: &str, session: &str, f: impl FnOnce(&mut Term) -> T) -> Option<T> {
        let mut inner = lock(&self.inner);
        let term = inner.terms.get_mut(id)?;
        (term.session == session && !term.released).then(|| f(term))
    }

    /// How many terminals of `session` the agent has not released (the cap counts these).
    pub fn live(&self, session: &str) -> usize {
        lock(&self.inner)
            .terms
            .values()
            .filter(|t| t.session == session && !t.released)
            .count()
    }

    /// (kept bytes, truncated, exit status); None for an id unknown to this session.
    pub fn output(&self, id: &str, session: &str) -> Option<(Vec<u8>, bool, Option<ExitStatus>)> {
        self.with(id, session, |t| {
            let (bytes, truncated) = t.retained.snapshot();
            (bytes, truncated, t.exit.clone())
        })
    }

    /// Whether the id is known to this session, and its exit status if it has exited.
    pub fn exit_status(&self, id: &str, session: &str) -> Option<Option<ExitStatus>> {
        self.with(id, session, |t| t.exit.clone())
    }

    /// The exit status of a terminal by id, released or not (pending waits).
    pub fn exit_of(&self, id: &str) -> Option<ExitStatus> {
        let inner = lock(&self.inner);
        match inner.terms.get(id) {
            Some(term) => term.exit.clone(),
            None => inner
                .ended
                .iter()
                .find(|(ended, _)| ended == id)
                .map(|(_, status)| status.clone()),
        }
    }

    pub fn kill(&self, id: &str, session: &str) -> bool {
        self.with(id, session, |t| t.kill()).is_some()
    }

    /// Kills it if running and forgets the id (its exit is still recorded for pending waits).
    pub fn release(&self, id: &str, session: &str) -> bool {
        let known = self
            .with(id, session, |t| {
                t.kill();
                t.released = true;
            })
            .is_some();
        self.waker.wake();
        known
    }

    /// Releases every terminal of a closed session.
    pub fn release_session(&self, session: &str) {
        let mut inner = lock(&self.inner);
        for term in inner.terms.values_mut().filter(|t| t.session == session) {
            term.kill();
            term.released = true;
        }
        drop(inner);
        self.waker.wake();
    }

    /// Whether a terminal exited since the last look (a cheap check per loop of the driver).
    pub fn take_exits(&self) -> bool {
        self.exited.swap(false, Ordering::SeqCst)
    }

    /// Kills and reaps every terminal and stops the drain thread (close, GC, exit).
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let thread = {
            let mut inner = lock(&self.inner);
            for term in inner.terms.values_mut() {
                term.kill();
            }
            for term in inner.terms.values_mut() {
                term.reap(true);
            }
            inner.thread.take()
        };
        self.waker.wake();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }

    /// The drain thread: poll every output pipe and pidfd, keep what is printed, note exits.
    fn drain(self: Arc<Self>) {
        let mut buf = vec![0u8; 64 * 1024];
        while !self.closed.load(Ordering::SeqCst) {
            let (mut fds, timeout) = self.poll_set();
            // SAFETY: a valid array of pollfds. The fds stay open: only this thread closes them.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if fds[0].revents != 0 {
                self.waker.drain();
            }
            let ready: Vec<RawFd> = fds[1..]
                .iter()
                .filter(|p| p.revents != 0)
                .map(|p| p.fd)
                .collect();
            let mut inner = lock(&self.inner);
            let mut any_exit = false;
            for term in inner.terms.values_mut() {
                any_exit |= term.take_output(&ready, &mut buf);
            }
            inner.drop_ended();
            drop(inner);
            if any_exit {
                self.exited.store(true, Ordering::SeqCst);
                if let Some(notifier) = &*lock(&self.notifier) {
                    notifier.wake();
                }
            }
        }
    }

    /// The waker, every output pipe and every pidfd, and how long to wait (ms): short where an
    /// exit can only be seen by looking (no pidfd).
    fn poll_set(&self) -> (Vec<libc::pollfd>, libc::c_int) {
        let pollfd = |fd: RawFd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = vec![pollfd(self.waker.fd())];
        let mut polling_exits = !cfg!(target_os = "linux");
        let inner = lock(&self.inner);
        for term in inner.terms.values() {
            for fd in [&term.out, &term.pidfd].into_iter().flatten() {
                fds.push(pollfd(fd.as_raw_fd()));
            }
            polling_exits |= term.exit.is_none() && term.pidfd.is_none();
        }
        (fds, if polling_exits { 50 } else { 1000 })
    }
}

impl Term {
    /// One read of its output if `ready` has its pipe (one per wake: a flooding terminal cannot
    /// starve the others), and a reap if it may have exited; true if it exited just now.
    fn take_output(&mut self, ready: &[RawFd], buf: &mut [u8]) -> bool {
        if let Some(out) = &self.out {
            if ready.contains(&out.as_raw_fd()) {
                // SAFETY: reading into our buffer from our non-blocking fd.
                let n = unsafe { libc::read(out.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n > 0 {
                    self.retained.push(&buf[..n as usize]);
                } else if n == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
                {
                    self.out = None; // end of output (every writer closed it)
                }
            }
        }
        let check = match &self.pidfd {
            Some(fd) => ready.contains(&fd.as_raw_fd()),
            None => self.exit.is_none(),
        };
        check && self.exit.is_none() && self.reap(false)
    }
}

impl Inner {
    /// A released terminal is dropped once it has ended and its pipe is closed; its exit status
    /// is kept (the last `ENDED`) for waits still pending.
    fn drop_ended(&mut self) {
        let gone: Vec<String> = self
            .terms
            .iter()
            .filter(|(_, t)| t.released && t.exit.is_some() && t.out.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(term) = self.terms.remove(&id) {
                if self.ended.len() >= ENDED {
                    self.ended.pop_front();
                }
                self.ended.push_back((id, term.exit.expect("ended")));
            }
        }
    }
}

impl Drop for Terminals {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Attack: the terminal's command forks children that call setsid() as fast as it can
    /// while it is killed; none may outlive the kill (`kill::freeze_then_kill`).
    #[test]
    fn kill_loses_no_child_forked_meanwhile() {
        use crate::kill::flood;
        use std::time::{Duration, Instant};
        let tag = flood::fork_race_tag();
        let terminals = Terminals::new().unwrap();
        let spawn = Spawn {
            command: "sh".into(),
            args: vec!["-c".into(), flood::fork_race_script(&tag)],
            env: std::env::vars_os().collect(),
            cwd: std::fs::File::open("/").unwrap().into(),
            limit: 1024,
        };
        let id = terminals.create("s", spawn).unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while !terminals.output(&id, "s").unwrap().0.starts_with(b"0") {
            assert!(Instant::now() < until, "the flood never began");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(terminals.kill(&id, "s"));
        flood::assert_none_left(&tag);
        terminals.close();
    }
}

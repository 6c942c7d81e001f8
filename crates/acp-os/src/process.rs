//! The agent process: started in a session of its own (so it leads its own process group), with
//! pipes on stdin/stdout and stderr discarded, inherited or drained into a ring buffer; stopped by
//! SIGTERM then SIGKILL to the whole group (falling back to the child alone) and to every
//! descendant found under /proc (libproc on macOS), even one that left the group; reaped.
//! `PipeTransport` reads and writes its pipes with waits bounded to a short interval, so the
//! caller can check signals between them, and reports the end of output once the agent itself
//! has exited even when a process it started still holds the pipe.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::io::{AnswerSpin, ReadOutcome, Transport, WriteOutcome};

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

/// The last bytes of the agent's stderr, filled by a drain thread (blocking driver) or by the
/// event loop's readable callbacks (asyncio driver).
pub struct StderrTail {
    state: Mutex<(VecDeque<u8>, bool)>,
    ended: Condvar,
    capacity: usize,
    /// The pipe's read end while no thread owns it: the event loop reads it here, or the
    /// blocking driver hands it to a thread. Closed by `finish` (the agent is reaped).
    pipe: Mutex<Option<OwnedFd>>,
}

/// At most this much is read in one `read_available` call (the loop's other callbacks wait
/// meanwhile), and after close() asks the drain to finish (a holder that writes without pause
/// must not keep close() waiting).
pub const STDERR_READ_BUDGET: usize = 1 << 20;

impl StderrTail {
    fn new(capacity: usize, pipe: OwnedFd) -> StderrTail {
        StderrTail {
            state: Mutex::new((VecDeque::with_capacity(capacity.min(1 << 16)), false)),
            ended: Condvar::new(),
            capacity,
            pipe: Mutex::new(Some(pipe)),
        }
    }

    fn keep(&self, bytes: &[u8]) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let keep = bytes.len().min(self.capacity);
        let overflow = (state.0.len() + keep).saturating_sub(self.capacity);
        state.0.drain(..overflow);
        state.0.extend(&bytes[bytes.len() - keep..]);
    }

    fn end(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.ended.notify_all();
    }

    fn is_ended(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// The pipe's fd while no thread drains it (the event loop watches it).
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.pipe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(AsRawFd::as_raw_fd)
    }

    /// Reads what the pipe holds now, never waiting, up to `budget` bytes; true once the
    /// agent's stderr has ended (the fd stays open, so a loop can stop watching it first, until
    /// `finish`). Nothing to read when a thread owns the pipe.
    pub fn read_available(&self, budget: usize) -> bool {
        let pipe = self.pipe.lock().unwrap_or_else(|p| p.into_inner());
        let Some(fd) = pipe.as_ref() else {
            return self.is_ended();
        };
        if self.is_ended() {
            return true;
        }
        let mut chunk = [0u8; 8192];
        let mut left = budget;
        while left > 0 {
            let want = chunk.len().min(left);
            // SAFETY: reading into a valid buffer; the pipe is non-blocking.
            let count = unsafe { libc::read(fd.as_raw_fd(), chunk.as_mut_ptr().cast(), want) };
            if count > 0 {
                self.keep(&chunk[..count as usize]);
                left -= count as usize;
                continue;
            }
            if count < 0 && interrupted() {
                continue;
            }
            if count < 0 && interrupted_or_empty() {
                return false; // empty for now
            }
            self.end(); // end of file, or the pipe failed
            return true;
        }
        false
    }

    /// The agent was reaped: takes its last words (bounded) and closes a pipe no thread owns.
    fn finish(&self) {
        if self.raw_fd().is_none() {
            return; // a thread owns it and ends the tail itself
        }
        self.read_available(STDERR_READ_BUDGET);
        *self.pipe.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.end();
    }

    /// Reads the agent's stderr until it ends or `stop` becomes readable (close(): a process
    /// that escaped the group may hold the pipe open forever), then takes what is buffered.
    fn drain(&self, pipe: OwnedFd, stop: OwnedFd) {
        let mut chunk = [0u8; 8192];
        let mut fds = [
            libc::pollfd {
                fd: pipe.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let mut stopping = false;
        let mut last_words = STDERR_READ_BUDGET;
        loop {
            if !stopping {
                // SAFETY: two valid pollfds.
                if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                    continue; // EINTR
                }
                stopping = fds[1].revents != 0;
            }
            // SAFETY: reading into a valid buffer; the pipe is non-blocking.
            let count =
                unsafe { libc::read(pipe.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
            if count == 0 || (count < 0 && (stopping || !interrupted_or_empty())) {
                break;
            }
            if count < 0 {
                continue;
            }
            self.keep(&chunk[..count as usize]);
            if stopping {
                last_words = last_words.saturating_sub(count as usize);
                if last_words == 0 {
                    break;
                }
            }
        }
        self.end();
    }

    /// The tail as it is now, after reading what the pipe holds when no thread drains it
    /// (never waiting: the event loop may be the caller).
    pub fn now(&self) -> Vec<u8> {
        if self.raw_fd().is_some() {
            self.read_available(STDERR_READ_BUDGET);
        }
        self.snapshot(Duration::ZERO)
    }

    /// For an error message: with a thread draining, waits up to `timeout` for the stderr to
    /// end (so a dying agent's last words are in); otherwise reads what is there, never waiting.
    pub fn last_words(&self, timeout: Duration) -> Vec<u8> {
        if self.raw_fd().is_some() {
            return self.now();
        }
        self.snapshot(timeout)
    }

    /// Waits up to `timeout` for the agent's stderr to end (so a dying agent's last words are
    /// in), then returns the tail.
    pub fn snapshot(&self, timeout: Duration) -> Vec<u8> {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !state.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .ended
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        state.0.iter().copied().collect()
    }
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

fn interrupted() -> bool {
    io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
}

fn interrupted_or_empty() -> bool {
    matches!(
        io::Error::last_os_error().raw_os_error(),
        Some(libc::EINTR | libc::EAGAIN)
    )
}

#[cfg(target_os = "macos")]
pub(crate) use crate::darwin::pipe_cloexec;

#[cfg(not(target_os = "macos"))]
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    use std::os::fd::{FromRawFd, RawFd};
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills two new descriptors, close-on-exec so no agent inherits them.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub fn spawn(options: &SpawnOptions) -> io::Result<(Agent, PipeTransport)> {
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
    grow_pipe(&stdout);
    let pid = child.id() as libc::pid_t;
    // From here the agent is guarded: if this process dies, the guard kills its group.
    crate::supervisor::watch(pid as u32);
    let mut agent = Agent {
        child,
        reaped: false,
        owner: std::process::id(),
        stderr_tail: None,
        drain: None,
    };
    if let (StderrMode::Tail(capacity), Some(pipe)) = (options.stderr, agent.child.stderr.take()) {
        // No thread yet: the driver decides who reads it (a thread, or the event loop).
        let pipe: OwnedFd = pipe.into();
        set_nonblocking(&pipe)?;
        agent.stderr_tail = Some(Arc::new(StderrTail::new(capacity, pipe)));
    }
    Ok((
        agent,
        PipeTransport {
            stdin: Some(stdin),
            stdout,
            pid,
            wait: Duration::from_millis(100),
            waker: None,
            wait_first: false,
            write_pending: false,
            spin: AnswerSpin::default(),
        },
    ))
}

/// Every process descended from `root`, found by walking /proc (parent links), so that a
/// descendant which left the agent's group (setsid) is still reached. One that was re-parented
/// away before the walk (its parent already exited) cannot be found: Linux keeps no such link.
#[cfg(target_os = "macos")]
pub fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    crate::darwin::descendants(root)
}

#[cfg(not(target_os = "macos"))]
pub fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut children: std::collections::HashMap<libc::pid_t, Vec<libc::pid_t>> =
        std::collections::HashMap::new();
    for process in proc_stats() {
        children
            .entry(process.parent)
            .or_default()
            .push(process.pid);
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            found.push(child);
            queue.push(child);
        }
    }
    found
}

/// A process as its /proc/PID/stat shows it.
#[cfg(not(target_os = "macos"))]
struct ProcStat {
    pid: libc::pid_t,
    /// `R`, `S`, …; `Z` a zombie, `X` dead.
    state: char,
    parent: libc::pid_t,
    group: libc::pid_t,
}

/// Every process /proc lists (none where there is no /proc); one that exits during the walk
/// is skipped.
#[cfg(not(target_os = "macos"))]
fn proc_stats() -> impl Iterator<Item = ProcStat> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries.filter_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<libc::pid_t>().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let (_, fields) = stat.rsplit_once(')')?;
        let mut fields = fields.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let parent = fields.next()?.parse().ok()?;
        let group = fields.next()?.parse().ok()?;
        Some(ProcStat {
            pid,
            state,
            parent,
            group,
        })
    })
}

/// Asks for a 1 MiB pipe buffer on the agent's stdout (the default is 64 KiB): a streaming agent
/// then blocks less often, and each of our reads takes more at once. Best effort: the kernel may
/// cap it (`/proc/sys/fs/pipe-max-size`), and a smaller pipe only costs speed. macOS has no such
/// knob (its pipes grow by themselves up to 64 KiB).
#[cfg(target_os = "linux")]
fn grow_pipe(fd: &OwnedFd) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

#[cfg(not(target_os = "linux"))]
fn grow_pipe(_: &OwnedFd) {}

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
        let Some(pipe) = tail.pipe.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(());
        };
        let (stop_read, stop_write) = pipe_cloexec()?;
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

    /// SIGTERM, then SIGKILL, to the whole group and to every descendant; returns without
    /// waiting.
    pub fn stop(&mut self) {
        if self.reaped || !self.owned_here() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        // Walk first: once the agent dies its children are re-parented and cannot be traced.
        let descendants = descendants(pid);
        signal_group(pid, libc::SIGTERM);
        signal_group(pid, libc::SIGKILL);
        for descendant in descendants {
            // SAFETY: plain kill(2) of a pid seen as a descendant a moment ago.
            unsafe { libc::kill(descendant, libc::SIGKILL) };
        }
    }

    /// Stops everything and waits for the agent to exit.
    pub fn stop_and_reap(&mut self) {
        self.stop();
        if !self.reaped && self.owned_here() {
            let _ = self.child.wait();
            self.reaped = true;
            crate::supervisor::forget(self.child.id());
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
        peek_exit(self.child.id() as libc::pid_t)
    }
}

/// Whether /proc shows a live process (not a zombie) in group `pgid` other than `pgid` itself.
#[cfg(target_os = "linux")]
fn group_has_others(pgid: libc::pid_t) -> bool {
    proc_stats().any(|process| {
        process.pid != pgid && process.group == pgid && !matches!(process.state, 'Z' | 'X')
    })
}

#[cfg(not(target_os = "linux"))]
fn group_has_others(_pgid: libc::pid_t) -> bool {
    false
}

/// The exit status of our child `pid` if it has exited, without reaping it.
fn peek_exit(pid: libc::pid_t) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let info = waitid_nowait(pid).ok()??;
    // SAFETY: the siginfo was filled by waitid for a child that exited.
    let status = unsafe { info.si_status() };
    // Rebuild the wait(2) status word std understands from the siginfo.
    Some(match info.si_code {
        libc::CLD_EXITED => std::process::ExitStatus::from_raw((status & 0xff) << 8),
        libc::CLD_DUMPED => std::process::ExitStatus::from_raw((status & 0x7f) | 0x80),
        _ => std::process::ExitStatus::from_raw(status & 0x7f),
    })
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop_and_reap();
    }
}

/// Whether `pid` (our child) has exited, without reaping it. A pid that is no longer our
/// child (already reaped, by `close()` on another thread) has exited too.
fn has_exited(pid: libc::pid_t) -> bool {
    !matches!(waitid_nowait(pid), Ok(None))
}

/// `waitid(WEXITED | WNOHANG | WNOWAIT)`: the exit record of our child `pid`, left in place.
fn waitid_nowait(pid: libc::pid_t) -> io::Result<Option<libc::siginfo_t>> {
    // SAFETY: waitid with WNOWAIT only inspects; the siginfo is ours to fill.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((info.si_pid() != 0).then_some(info))
    }
}

/// The agent's stdin and stdout, both non-blocking, waited on with poll(2).
pub struct PipeTransport {
    /// `None` once `close_stdin` let the agent see end of input.
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    pid: libc::pid_t,
    wait: Duration,
    /// A `Waker`'s fd, polled with stdout so another thread reaches a blocked read at once.
    waker: Option<std::os::fd::RawFd>,
    /// The next read waits before it reads (see `expect_answer`).
    wait_first: bool,
    spin: AnswerSpin,
    /// Lines wait for room in the agent's stdin: a read's wait ends when it has some.
    write_pending: bool,
}

impl PipeTransport {
    /// The caller just sent something the agent will answer: the next read spins for it while a
    /// CPU is idle (`AnswerSpin`), else polls first instead of paying for a read that fails
    /// with EAGAIN.
    pub fn expect_answer(&mut self) {
        self.wait_first = true;
    }

    /// Whether lines wait for room in the agent's stdin (then a read's wait ends when there
    /// is room, so the caller can write them).
    pub fn set_write_pending(&mut self, pending: bool) {
        self.write_pending = pending;
    }

    /// Waits (at most 100 ms) for room in the agent's stdin, or, with
    /// `read_too`, for bytes on its stdout: an agent that writes before it reads may be
    /// blocked on its full stdout while its stdin is full of our lines.
    pub fn wait_room(&self, read_too: bool) -> io::Result<Room> {
        let Some(stdin) = &self.stdin else {
            return Err(io::Error::from(io::ErrorKind::BrokenPipe));
        };
        let stdout = read_too.then(|| (self.stdout.as_raw_fd(), libc::POLLIN));
        // Not `self.wait`, which a read that must not wait sets to zero.
        let wait = Duration::from_millis(100);
        Ok(match wait_for(stdin, libc::POLLOUT, wait, None, stdout)? {
            Wait::Ready => Room::Writable,
            Wait::Also => Room::Readable,
            Wait::Idle | Wait::Woken => Room::Idle,
        })
    }

    /// One non-blocking write attempt (`Idle` when the pipe is full): cheap enough to make
    /// without releasing the GIL.
    pub fn try_write(&mut self, bytes: &[u8]) -> io::Result<WriteOutcome> {
        let Some(stdin) = &self.stdin else {
            return Err(io::Error::from(io::ErrorKind::BrokenPipe));
        };
        // SAFETY: writing from a valid buffer.
        let count = unsafe { libc::write(stdin.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if count >= 0 {
            return Ok(WriteOutcome::Wrote(count as usize));
        }
        let error = io::Error::last_os_error();
        match error.kind() {
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Ok(WriteOutcome::Idle),
            _ => Err(error),
        }
    }

    /// Polls `fd` (a `Waker`'s read end, which must outlive this transport) with stdout.
    pub fn set_waker(&mut self, fd: std::os::fd::RawFd) {
        self.waker = Some(fd);
    }

    /// Closes the agent's stdin (it sees end of input) and keeps reading its stdout, so an agent
    /// shutting down by itself is not killed by SIGPIPE.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The longest a read or write waits before returning `Idle`.
    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// The agent's stdout and (until `close_stdin`) stdin, both `O_NONBLOCK`, for an event
    /// loop to watch; they stay owned here.
    pub fn raw_fds(&self) -> (std::os::fd::RawFd, Option<std::os::fd::RawFd>) {
        (
            self.stdout.as_raw_fd(),
            self.stdin.as_ref().map(AsRawFd::as_raw_fd),
        )
    }

    /// One read(2) and nothing else (an event loop said the pipe is readable): `Idle` on EAGAIN.
    pub fn read_now(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
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
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Ok(ReadOutcome::Idle),
            _ => Err(error),
        }
    }

    /// Whether the agent process has exited (not reaped).
    pub fn agent_exited(&self) -> bool {
        has_exited(self.pid)
    }
}

/// Whether `fd` became ready within `wait`; `Woken` when the waker fired first.
enum Wait {
    Ready,
    /// The other descriptor (`also`) is ready.
    Also,
    Idle,
    Woken,
}

fn wait_for(
    fd: &OwnedFd,
    events: libc::c_short,
    wait: Duration,
    waker: Option<std::os::fd::RawFd>,
    also: Option<(std::os::fd::RawFd, libc::c_short)>,
) -> io::Result<Wait> {
    let (also_fd, also_events) = also.unwrap_or((-1, 0));
    // A negative fd is ignored by poll(2): one array serves every combination.
    let mut pollfds = [
        libc::pollfd {
            fd: fd.as_raw_fd(),
            events,
            revents: 0,
        },
        libc::pollfd {
            fd: waker.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: also_fd,
            events: also_events,
            revents: 0,
        },
    ];
    // SAFETY: three valid pollfds.
    let ready = unsafe { libc::poll(pollfds.as_mut_ptr(), 3, wait.as_millis() as libc::c_int) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(Wait::Idle);
        }
        return Err(error);
    }
    Ok(if pollfds[0].revents != 0 {
        Wait::Ready
    } else if pollfds[1].revents != 0 {
        Wait::Woken
    } else if pollfds[2].revents != 0 {
        Wait::Also
    } else {
        Wait::Idle
    })
}

/// What `PipeTransport::wait_room` found.
pub enum Room {
    /// The agent's stdin has room.
    Writable,
    /// Its stdin is still full, and its stdout has bytes: read them (it may be blocked
    /// writing them, waiting for us to read, while we wait for it to read).
    Readable,
    Idle,
}

impl Transport for PipeTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
        let mut wait_first = std::mem::take(&mut self.wait_first);
        if wait_first && !self.wait.is_zero() {
            if let Some(outcome) = self.spin.read(self.stdout.as_raw_fd(), buf) {
                return outcome;
            }
        }
        loop {
            let kind = if std::mem::take(&mut wait_first) {
                io::ErrorKind::WouldBlock
            } else {
                // SAFETY: reading into a valid, exclusively borrowed buffer.
                let count = unsafe {
                    libc::read(self.stdout.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                };
                if count > 0 {
                    return Ok(ReadOutcome::Data(count as usize));
                }
                if count == 0 {
                    return Ok(ReadOutcome::Eof);
                }
                let error = io::Error::last_os_error();
                match error.kind() {
                    kind @ (io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock) => kind,
                    _ => return Err(error),
                }
            };
            match kind {
                io::ErrorKind::Interrupted => return Ok(ReadOutcome::Idle),
                io::ErrorKind::WouldBlock => {
                    // Lines wait for the agent's stdin: its room ends the wait too.
                    let stdin_room = self
                        .stdin
                        .as_ref()
                        .filter(|_| self.write_pending)
                        .map(|fd| (fd.as_raw_fd(), libc::POLLOUT));
                    let ready = wait_for(
                        &self.stdout,
                        libc::POLLIN,
                        self.wait,
                        self.waker,
                        stdin_room,
                    )?;
                    if let Wait::Also = ready {
                        return Ok(ReadOutcome::Idle);
                    }
                    if let Wait::Woken = ready {
                        return Ok(ReadOutcome::Woken);
                    }
                    if let Wait::Idle = ready {
                        // Nothing is buffered. If the agent itself is gone, a process it
                        // started may hold the pipe open forever: its output has ended.
                        if !has_exited(self.pid) {
                            return Ok(ReadOutcome::Idle);
                        }
                        // One last look: a line may have landed just before the agent went.
                        // SAFETY: as above.
                        let count = unsafe {
                            libc::read(self.stdout.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                        };
                        return Ok(if count > 0 {
                            ReadOutcome::Data(count as usize)
                        } else {
                            ReadOutcome::Eof
                        });
                    }
                }
                _ => unreachable!("other errors returned above"),
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<WriteOutcome> {
        match self.try_write(bytes)? {
            WriteOutcome::Idle => match self.wait_room(false)? {
                Room::Writable => self.try_write(bytes),
                Room::Readable | Room::Idle => Ok(WriteOutcome::Idle),
            },
            wrote => Ok(wrote),
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

    #[cfg(target_os = "macos")]
    fn alive(pid: i32) -> bool {
        crate::darwin::info(pid).is_some_and(|info| !info.zombie)
    }

    #[cfg(not(target_os = "macos"))]
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

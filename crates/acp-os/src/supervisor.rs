//! The guard: one small process per host process that kills every registered process group,
//! and everything descended from or belonging to it, when the host dies by any means.
//!
//! The host keeps the write end of a pipe whose read end is the guard's stdin; the kernel
//! closes it when the host dies (SIGKILL, the OOM killer, an abort in native code included), so
//! EOF on the guard's stdin means "the host is gone". The host tells the guard of each group as
//! it is started (`watch`) and reaped (`forget`) in 8-byte records, one write(2) each (atomic on
//! a pipe). On EOF the guard freezes every target with SIGSTOP until a pass over /proc finds no
//! new one (a stopped process cannot fork, so none escapes between passes), then SIGKILLs them.
//!
//! Targets of a registered group leader `g`: every process whose process group or session is
//! `g`, and every descendant of any of those by parent links. A process that both left the
//! session (`setsid`) and lost its parent chain (its parent exited, so it was re-parented to
//! init) cannot be found; Linux keeps no other link without cgroups.
//!
//! The guard is exec'd, not forked: a fork of a multithreaded host may only call
//! async-signal-safe functions, and a long-lived fork would pin a copy-on-write image of the
//! whole host. The program to exec is configured once (`set_launcher`); it must call `serve`.
//! Without a launcher, or when the guard cannot be started, agents run unguarded (`guard_pid`
//! returns None); nothing else changes.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{IntoRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use crate::fd;
use crate::kill;
use crate::proc_table;
use crate::sync::lock;

const WATCH: u8 = b'+';
const FORGET: u8 = b'-';
const RECORD: usize = 8;

/// The argv that starts a guard (program first), set by the embedding (the Python binding).
static LAUNCHER: Mutex<Option<Vec<OsString>>> = Mutex::new(None);
/// Serialises starting a guard; never taken in a forked child (see `forget_after_fork`).
static STARTING: Mutex<()> = Mutex::new(());
/// The write end of the guard's pipe (-1: none), and the pid that opened it. Plain atomics, so
/// the fork handler may clear them without a lock.
static PIPE: AtomicI32 = AtomicI32::new(-1);
static PIPE_OWNER: AtomicU32 = AtomicU32::new(0);
static GUARD_PID: AtomicI32 = AtomicI32::new(0);
/// The pipe's inode: a host that closed the descriptor behind our back (closerange) may have
/// reused its number for a file or socket, which must never receive our records.
static PIPE_INODE: AtomicU64 = AtomicU64::new(0);
static ATFORK: Once = Once::new();

/// Sets the command that starts a guard; its process must call `serve()`. `None` disables it.
pub fn set_launcher(argv: Option<Vec<OsString>>) {
    *lock(&LAUNCHER) = argv.filter(|a| !a.is_empty());
}

/// The pid of this process's guard, if one is running (started on the first `watch`).
pub fn guard_pid() -> Option<u32> {
    if PIPE_OWNER.load(Ordering::SeqCst) != std::process::id() || PIPE.load(Ordering::SeqCst) < 0 {
        return None;
    }
    let pid = GUARD_PID.load(Ordering::SeqCst);
    (pid > 0).then_some(pid as u32)
}

/// Asks the guard (starting it on first use) to kill group `leader` if this process dies.
/// Best effort: false when no guard could be told.
pub fn watch(leader: u32) -> bool {
    send(WATCH, leader, true)
}

/// Tells the guard that group `leader` was reaped; it forgets it.
pub fn forget(leader: u32) {
    send(FORGET, leader, false);
}

fn send(kind: u8, leader: u32, start: bool) -> bool {
    let mut record = [0u8; RECORD];
    record[0] = kind;
    record[4..].copy_from_slice(&leader.to_le_bytes());
    for _ in 0..2 {
        let fd = current_pipe();
        let fd = match fd {
            Some(fd) => fd,
            None if start => match start_guard() {
                Ok(fd) => fd,
                Err(_) => return false,
            },
            None => return false,
        };
        match write_record(fd, &record) {
            Ok(()) => return true,
            // The guard died (someone killed it): reap it and start another for this record.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                drop_guard(fd);
                if !start {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    false
}

fn current_pipe() -> Option<RawFd> {
    let fd = PIPE.load(Ordering::SeqCst);
    if fd < 0 || PIPE_OWNER.load(Ordering::SeqCst) != std::process::id() {
        return None;
    }
    if inode(fd) != Some(PIPE_INODE.load(Ordering::SeqCst)) {
        // Closed by someone else: forget it (not ours to close any more); start another guard.
        let _ = PIPE.compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst);
        return None;
    }
    Some(fd)
}

fn inode(fd: RawFd) -> Option<u64> {
    // SAFETY: fstat fills a stat buffer we own.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFIFO {
            return None;
        }
        Some(stat.st_ino)
    }
}

/// One 8-byte write; the pipe is non-blocking so a stopped guard cannot wedge the host: a full
/// pipe is waited on for at most a second, then the record is given up.
fn write_record(fd: RawFd, record: &[u8; RECORD]) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        // SAFETY: writing 8 bytes from a valid buffer to a descriptor we own.
        let written = unsafe { libc::write(fd, record.as_ptr().cast(), RECORD) };
        if written == RECORD as isize {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) if Instant::now() < deadline => {
                let mut pollfd = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pollfd, 1, 50) };
            }
            _ => return Err(error),
        }
    }
}

fn drop_guard(fd: RawFd) {
    let _guard = lock(&STARTING);
    if PIPE
        .compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        // SAFETY: the descriptor was ours and is no longer published.
        unsafe { libc::close(fd) };
        let pid = GUARD_PID.swap(0, Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: reaping our own exited child; WNOHANG never blocks.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        }
    }
}

/// In a child made by fork(): the parent's guard must see EOF when the parent dies, so the
/// child drops its copy of the pipe at once (async-signal-safe: atomics and close only).
extern "C" fn forget_after_fork() {
    let fd = PIPE.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: close(2) of the inherited copy of our pipe.
        unsafe { libc::close(fd) };
    }
    GUARD_PID.store(0, Ordering::SeqCst);
}

fn start_guard() -> io::Result<RawFd> {
    let _guard = lock(&STARTING);
    if let Some(fd) = current_pipe() {
        return Ok(fd);
    }
    let argv = lock(&LAUNCHER)
        .clone()
        .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "no guard launcher"))?;
    ATFORK.call_once(|| {
        // SAFETY: registering a handler that only touches atomics and calls close(2).
        unsafe { libc::pthread_atfork(None, None, Some(forget_after_fork)) };
    });
    // Both close-on-exec, so no agent inherits them.
    let (read, write) = fd::pipe_cloexec()?;
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::from(read))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: Ctrl-C or a kill of the host's group must leave it to clean up.
        .process_group(0)
        // It must not pin the host's directory (which may be deleted or unmounted).
        .current_dir("/");
    let child = fd::spawn(&mut command)?;
    // Non-blocking: a stopped guard must not wedge the host (`write_record`). Should it fail,
    // a write to a full pipe waits for the guard: no record is lost either way.
    let _ = fd::set_nonblocking(&write);
    let fd = write.into_raw_fd();
    PIPE_INODE.store(inode(fd).unwrap_or(0), Ordering::SeqCst);
    GUARD_PID.store(child.id() as i32, Ordering::SeqCst);
    PIPE_OWNER.store(std::process::id(), Ordering::SeqCst);
    PIPE.store(fd, Ordering::SeqCst);
    // Dropping `Child` neither kills nor waits; `drop_guard` reaps it if it dies first.
    drop(child);
    Ok(fd)
}

// --- the guard process -----------------------------------------------------------------------

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}

/// The guard's main loop: reads records from stdin until EOF (the host died or exited), or
/// SIGTERM, then kills every group still registered and exits. Never returns.
pub fn serve() -> ! {
    // SAFETY: signal setup in a single-threaded process of our own.
    let wait_mask = unsafe {
        for signal in [
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        let handler: extern "C" fn(libc::c_int) = on_terminate;
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
        // SIGTERM is blocked except inside ppoll, so it cannot slip in between check and wait.
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        libc::sigaddset(&mut blocked, libc::SIGTERM);
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &blocked, &mut previous);
        libc::sigdelset(&mut previous, libc::SIGTERM);
        previous
    };
    let mut registry = Registry::default();
    registry.show();
    let mut pending: Vec<u8> = Vec::with_capacity(RECORD);
    let mut buf = [0u8; 4096];
    while !TERMINATED.load(Ordering::SeqCst) {
        #[cfg(not(target_os = "macos"))]
        let ready = {
            let mut pollfd = libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; the mask lets SIGTERM in only while waiting.
            unsafe { libc::ppoll(&mut pollfd, 1, std::ptr::null(), &wait_mask) }
        };
        #[cfg(target_os = "macos")]
        let ready = crate::darwin::wait_stdin(&wait_mask);
        if ready < 0 {
            continue; // EINTR: the loop condition looks at TERMINATED
        }
        // SAFETY: reading into a valid buffer from our stdin.
        let count = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if count == 0
            || (count < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
        {
            break;
        }
        if count > 0 {
            pending.extend_from_slice(&buf[..count as usize]);
            let whole = pending.len() / RECORD * RECORD;
            for record in pending[..whole].chunks_exact(RECORD) {
                registry.apply(record);
            }
            pending.drain(..whole);
            registry.show();
        }
    }
    kill::freeze_then_kill(&registry.leaders());
    std::process::exit(0)
}

/// The guard's state: each registered leader and the start time it had when registered, so a
/// pid reused by an unrelated process after the host's death is not mistaken for ours.
#[derive(Default)]
pub struct Registry {
    leaders: HashMap<libc::pid_t, Option<u64>>,
}

impl Registry {
    pub fn apply(&mut self, record: &[u8]) {
        let pid = i32::from_le_bytes([record[4], record[5], record[6], record[7]]);
        if pid <= 0 {
            return;
        }
        match record[0] {
            WATCH => {
                self.leaders.insert(pid, start_time(pid));
            }
            FORGET => {
                self.leaders.remove(&pid);
            }
            _ => {}
        }
    }

    pub fn len(&self) -> usize {
        self.leaders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leaders.is_empty()
    }

    /// The leaders whose pid still names the process registered (or no process at all: its
    /// group may outlive it).
    pub fn leaders(&self) -> Vec<libc::pid_t> {
        self.leaders
            .iter()
            .filter(|(pid, started)| match (start_time(**pid), started) {
                (Some(now), Some(then)) => now == *then,
                _ => true,
            })
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// The process name shows how many groups are watched (`ps`: "acp-guard 3"), so a user
    /// can tell the guard is there and holds no state for closed clients.
    #[cfg(target_os = "linux")]
    fn show(&self) {
        let mut name = format!("acp-guard {}", self.leaders.len()).into_bytes();
        name.truncate(15);
        name.push(0);
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    }

    /// macOS cannot rename a process (only a thread): `ps` shows the guard's command line.
    #[cfg(not(target_os = "linux"))]
    fn show(&self) {}
}

fn start_time(pid: libc::pid_t) -> Option<u64> {
    proc_table::process(pid).map(|p| p.start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, pid: i32) -> [u8; RECORD] {
        let mut r = [0u8; RECORD];
        r[0] = kind;
        r[4..].copy_from_slice(&pid.to_le_bytes());
        r
    }

    #[test]
    fn the_registry_forgets_what_was_reaped() {
        let mut registry = Registry::default();
        for pid in 1..=1000 {
            registry.apply(&record(WATCH, pid));
            registry.apply(&record(FORGET, pid));
        }
        assert!(registry.is_empty());
        registry.apply(&record(WATCH, std::process::id() as i32));
        assert_eq!(registry.len(), 1);
        assert_eq!(registry.leaders(), vec![std::process::id() as i32]);
    }

    #[test]
    fn a_reused_pid_is_not_a_target() {
        let mut registry = Registry::default();
        let me = std::process::id() as i32;
        registry.apply(&record(WATCH, me));
        registry.leaders.insert(me, Some(0)); // as if registered when another process had it
        assert!(registry.leaders().is_empty());
    }
}

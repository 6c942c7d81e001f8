//! File-descriptor primitives, one copy each: a close-on-exec pipe, `O_NONBLOCK`, a pidfd, and
//! the fork lock that every spawn of this crate holds.
//!
//! A descriptor that is not close-on-exec from the moment it exists can leak into any child
//! another thread forks and execs meanwhile: an agent or terminal started on another thread
//! would then hold a terminal's pipe open, and its output would never end. Linux creates the
//! pipe close-on-exec atomically (`pipe2(O_CLOEXEC)`); macOS has no pipe2 (see `pipe_cloexec`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command};
#[cfg(target_os = "macos")]
use std::sync::RwLock;

/// macOS: held for reading while a descriptor is not yet close-on-exec (pipe, then fcntl), and
/// for writing across every fork+exec this crate makes (`spawn`), so none of our children can
/// inherit a descriptor in that window (Go's `syscall.ForkLock` is the same idea). Linux
/// creates every descriptor close-on-exec atomically and needs no lock: spawns stay concurrent.
#[cfg(target_os = "macos")]
static FORK_LOCK: RwLock<()> = RwLock::new(());

/// `command.spawn()`, with the fork lock held on macOS (see `FORK_LOCK`). std's spawn returns
/// once the child has exec'd (or failed to), so every close-on-exec descriptor is closed in it
/// by then.
pub(crate) fn spawn(command: &mut Command) -> io::Result<Child> {
    #[cfg(target_os = "macos")]
    let _forking = FORK_LOCK.write().unwrap_or_else(|p| p.into_inner());
    command.spawn()
}

/// A pipe (read end, write end), both close-on-exec from birth: `pipe2(O_CLOEXEC)`.
#[cfg(not(target_os = "macos"))]
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills two new descriptors, close-on-exec so no child inherits them.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// macOS has no pipe2: pipe(), then FD_CLOEXEC on both ends. A fork+exec on another thread in
/// between would inherit them; the fork lock (read side here, write side in `spawn`) shuts out
/// every fork this crate makes. A fork by other code of the host (not Python's `subprocess`,
/// which closes every other descriptor in its child by default) can still inherit them in that
/// window, as it can std's own pipes on macOS.
#[cfg(target_os = "macos")]
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let _not_forking = FORK_LOCK.read().unwrap_or_else(|p| p.into_inner());
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe fills two new descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&read, &write] {
        // SAFETY: fcntl on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((read, write))
}

/// Sets `O_NONBLOCK` on a descriptor we own.
pub(crate) fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe {
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags < 0 || libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A pidfd for `pid` (Linux >= 5.3): readable once the process exits, so an event loop or a
/// poll sees an exit without a thread or a timer. Close-on-exec (the kernel always sets it).
#[cfg(target_os = "linux")]
pub fn pidfd(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(not(target_os = "linux"))]
pub fn pidfd(_pid: u32) -> io::Result<OwnedFd> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Whether the last OS error was EINTR.
pub(crate) fn interrupted() -> bool {
    io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
}

/// Whether the last OS error was EINTR or EAGAIN (try again later).
pub(crate) fn interrupted_or_empty() -> bool {
    matches!(
        io::Error::last_os_error().raw_os_error(),
        Some(libc::EINTR | libc::EAGAIN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd_flags(fd: &OwnedFd) -> libc::c_int {
        // SAFETY: F_GETFD on our own descriptor.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) }
    }

    #[test]
    fn a_pipe_is_close_on_exec_and_blocking_until_asked() {
        let (read, write) = pipe_cloexec().unwrap();
        for fd in [&read, &write] {
            assert_ne!(fd_flags(fd) & libc::FD_CLOEXEC, 0);
            // SAFETY: F_GETFL on our own descriptor.
            assert_eq!(
                unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) } & libc::O_NONBLOCK,
                0
            );
        }
        set_nonblocking(&read).unwrap();
        // SAFETY: as above.
        let flags = unsafe { libc::fcntl(read.as_raw_fd(), libc::F_GETFL) };
        assert_ne!(flags & libc::O_NONBLOCK, 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pidfd_of_this_process_is_close_on_exec() {
        let fd = pidfd(std::process::id()).unwrap();
        assert_ne!(fd_flags(&fd) & libc::FD_CLOEXEC, 0);
    }
}

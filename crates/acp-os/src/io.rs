//! The pipe I/O vocabulary the drivers use, and the `Waker`: a self-pipe in the read's poll set,
//! so another thread (`Session.cancel()`, `close()`) reaches a blocked read at once instead of at
//! the next signal-check tick.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub enum ReadOutcome {
    Data(usize),
    Eof,
    /// Nothing arrived within the transport's wait; the host gets a chance to check signals.
    Idle,
    /// The waker fired: the driver has queued work from another thread.
    Woken,
}

pub enum WriteOutcome {
    Wrote(usize),
    /// The peer is not taking bytes right now.
    Idle,
}

/// Bytes to and from the agent. Reads and writes may wait, but only briefly (the pipe transport
/// waits at most 100 ms), so the host can react to signals and cancellation.
pub trait Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome>;
    fn write(&mut self, bytes: &[u8]) -> io::Result<WriteOutcome>;
}

/// A self-pipe: `wake()` from any thread makes the read end readable until `drain()`.
pub struct Waker {
    read: OwnedFd,
    write: OwnedFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe() fills two fds on success.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds are new and ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        for fd in [&read, &write] {
            // SAFETY: fcntl on an fd we own.
            unsafe {
                let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        Ok(Waker { read, write })
    }

    /// Never blocks: a full pipe already means "woken".
    pub fn wake(&self) {
        // SAFETY: writing one byte from a valid buffer to our own non-blocking fd.
        unsafe { libc::write(self.write.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }

    pub fn drain(&self) {
        let mut sink = [0u8; 64];
        // SAFETY: reading into a valid buffer from our own non-blocking fd.
        while unsafe { libc::read(self.read.as_raw_fd(), sink.as_mut_ptr().cast(), sink.len()) } > 0
        {
        }
    }

    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}

/// A pidfd for `pid` (Linux >= 5.3): readable once the process exits, so an event loop sees an
/// agent's exit without a thread or a timer.
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

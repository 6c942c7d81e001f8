//! `PipeTransport`: the agent's stdin and stdout, read and written with waits bounded to a
//! short interval, so the caller can check signals between them; it reports the end of output
//! once the agent itself has exited even when a process it started still holds the pipe.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use crate::exit::has_exited;
use crate::io::{AnswerSpin, ReadOutcome, Transport, WriteOutcome};

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
    /// Over the agent's pipes (both already `O_NONBLOCK`); `pid` is the agent, our child.
    pub(crate) fn new(stdin: OwnedFd, stdout: OwnedFd, pid: libc::pid_t) -> PipeTransport {
        PipeTransport {
            stdin: Some(stdin),
            stdout,
            pid,
            wait: Duration::from_millis(100),
            waker: None,
            wait_first: false,
            write_pending: false,
            spin: AnswerSpin::default(),
        }
    }

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

//! The agent's stderr kept as a tail: the last bytes in a ring, filled by a drain thread under
//! the blocking driver or by the event loop's readable callbacks under asyncio (no thread).

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::fd::{interrupted, interrupted_or_empty};
use crate::sync::lock;

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
    pub(super) fn new(capacity: usize, pipe: OwnedFd) -> StderrTail {
        StderrTail {
            state: Mutex::new((VecDeque::with_capacity(capacity.min(1 << 16)), false)),
            ended: Condvar::new(),
            capacity,
            pipe: Mutex::new(Some(pipe)),
        }
    }

    fn keep(&self, bytes: &[u8]) {
        let mut state = lock(&self.state);
        let keep = bytes.len().min(self.capacity);
        let overflow = (state.0.len() + keep).saturating_sub(self.capacity);
        state.0.drain(..overflow);
        state.0.extend(&bytes[bytes.len() - keep..]);
    }

    pub(super) fn end(&self) {
        lock(&self.state).1 = true;
        self.ended.notify_all();
    }

    fn is_ended(&self) -> bool {
        lock(&self.state).1
    }

    /// The pipe, for a drain thread to own from now on (None if one already does).
    pub(super) fn take_pipe(&self) -> Option<OwnedFd> {
        lock(&self.pipe).take()
    }

    /// The pipe's fd while no thread drains it (the event loop watches it).
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        lock(&self.pipe).as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what the pipe holds now, never waiting, up to `budget` bytes; true once the
    /// agent's stderr has ended (the fd stays open, so a loop can stop watching it first, until
    /// `finish`). Nothing to read when a thread owns the pipe.
    pub fn read_available(&self, budget: usize) -> bool {
        let pipe = lock(&self.pipe);
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
    pub(super) fn finish(&self) {
        if self.raw_fd().is_none() {
            return; // a thread owns it and ends the tail itself
        }
        self.read_available(STDERR_READ_BUDGET);
        *lock(&self.pipe) = None;
        self.end();
    }

    /// Reads the agent's stderr until it ends or `stop` becomes readable (close(): a process
    /// that escaped the group may hold the pipe open forever), then takes what is buffered.
    pub(super) fn drain(&self, pipe: OwnedFd, stop: OwnedFd) {
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
        let mut state = lock(&self.state);
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

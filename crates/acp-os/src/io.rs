//! The pipe I/O vocabulary the drivers use, and the `Waker`: a self-pipe in the read's poll set,
//! so another thread (`Session.cancel()`, `close()`) reaches a blocked read at once instead of at
//! the next signal-check tick.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::fd;
/// A pidfd for a pid: readable once the process exits (Linux; Unsupported elsewhere).
pub use crate::fd::pidfd;

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
        let (read, write) = fd::pipe_cloexec()?;
        fd::set_nonblocking(&read)?;
        fd::set_nonblocking(&write)?;
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

    /// Another handle on the write end, for a thread that must wake this waker's owner (a
    /// terminal's exit wakes the client's driver).
    pub fn notifier(&self) -> io::Result<Notifier> {
        // SAFETY: F_DUPFD_CLOEXEC duplicates our own fd; the new one is owned below.
        let fd = unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd we own.
        Ok(Notifier(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
}

/// The write end of a `Waker`, held elsewhere.
pub struct Notifier(OwnedFd);

impl Notifier {
    /// Never blocks: a full pipe already means "woken".
    pub fn wake(&self) {
        // SAFETY: writing one byte from a valid buffer to a non-blocking fd we own.
        unsafe { libc::write(self.0.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }
}

/// The wait for an answer the agent gives at once (a permission request after its answer, a
/// quick call's response), spun on read(2) instead of slept through.
///
/// On a VM whose idle vCPUs halt (this one's cpuidle does no guest polling), waking a halted
/// vCPU costs tens of microseconds (the agent's write → an IPI through the hypervisor → our
/// read), and a permission round trip on an otherwise idle machine pays two such wake-ups: ours
/// and the agent's. Spinning keeps our CPU awake through ours. It is bounded three ways, so it
/// only uses a CPU that would otherwise idle: it spins only while no task waits for a CPU (the
/// runnable count of `/proc/loadavg`, looked at every 10 ms, is at most the usable
/// CPUs); at most `BUDGET` at a time, stopping early once the thread was descheduled; and a
/// spin that ran out makes the next 2, 4 … 64 waits sleep at once, so a slow agent costs one
/// budget per 64 requests at worst. The waker is not looked at while spinning: a cancel waits
/// out the spin (at most `BUDGET`).
pub struct AnswerSpin {
    skip: u32,
    misses: u32,
    idle_cpu: bool,
    checked: Option<std::time::Instant>,
    cpus: usize,
}

impl Default for AnswerSpin {
    /// `ACP_FAST_SPIN=0` in the environment turns spinning off (every wait sleeps in poll(2)),
    /// for hosts that would rather save the CPU than the latency.
    fn default() -> Self {
        let cpus = if std::env::var_os("ACP_FAST_SPIN").is_some_and(|v| v == "0") {
            0
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        };
        AnswerSpin::with_cpus(cpus)
    }
}

impl AnswerSpin {
    /// `cpus`: how many tasks may be runnable for a spin to go ahead.
    fn with_cpus(cpus: usize) -> AnswerSpin {
        AnswerSpin {
            skip: 0,
            misses: 0,
            idle_cpu: false,
            checked: None,
            cpus,
        }
    }

    const BUDGET: std::time::Duration = std::time::Duration::from_micros(200);
    /// A gap this long between two reads means the thread was descheduled: the CPU is wanted.
    const PREEMPTED: std::time::Duration = std::time::Duration::from_micros(50);
    const CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

    /// Reads `fd` until something arrives, the budget runs out or spinning is not worth it;
    /// `None` when the caller should sleep in poll(2) (nothing was read).
    pub fn read(&mut self, fd: RawFd, buf: &mut [u8]) -> Option<io::Result<ReadOutcome>> {
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        if self.cpus == 0 || !self.idle_cpu() {
            return None;
        }
        let start = std::time::Instant::now();
        let mut last = start;
        loop {
            // SAFETY: reading into a valid, exclusively borrowed buffer.
            let count = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if count > 0 {
                self.misses = 0;
                return Some(Ok(ReadOutcome::Data(count as usize)));
            }
            if count == 0 {
                return Some(Ok(ReadOutcome::Eof));
            }
            let error = io::Error::last_os_error();
            if !matches!(
                error.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) {
                return Some(Err(error));
            }
            let now = std::time::Instant::now();
            if now - start >= Self::BUDGET || now - last >= Self::PREEMPTED {
                self.misses = (self.misses + 1).min(6);
                self.skip = 1 << self.misses;
                return None;
            }
            last = now;
            std::hint::spin_loop();
        }
    }

    fn idle_cpu(&mut self) -> bool {
        let now = std::time::Instant::now();
        if self
            .checked
            .is_none_or(|at| now.duration_since(at) >= Self::CHECK_EVERY)
        {
            self.checked = Some(now);
            self.idle_cpu = runnable_tasks().is_some_and(|running| running <= self.cpus);
        }
        self.idle_cpu
    }
}

/// Tasks running or waiting for a CPU, this one included (Linux: `/proc/loadavg`'s "R/T"),
/// read without allocating.
fn runnable_tasks() -> Option<usize> {
    use std::io::Read;
    let mut text = [0u8; 128];
    let count = std::fs::File::open("/proc/loadavg")
        .ok()?
        .read(&mut text)
        .ok()?;
    let text = std::str::from_utf8(&text[..count]).ok()?;
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

// Linux: /proc/loadavg.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A non-blocking pipe: (read end, write end).
    fn pipe() -> (OwnedFd, OwnedFd) {
        let (read, write) = fd::pipe_cloexec().unwrap();
        fd::set_nonblocking(&read).unwrap();
        fd::set_nonblocking(&write).unwrap();
        (read, write)
    }

    fn put(fd: &OwnedFd, bytes: &[u8]) {
        // SAFETY: writing from a valid buffer to our own pipe.
        let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        assert_eq!(n, bytes.len() as isize);
    }

    #[test]
    fn an_answer_already_there_is_read_by_the_spin() {
        let (read, write) = pipe();
        put(&write, b"answer\n");
        let mut spin = AnswerSpin::with_cpus(usize::MAX);
        let mut buf = [0u8; 16];
        assert!(matches!(
            spin.read(read.as_raw_fd(), &mut buf),
            Some(Ok(ReadOutcome::Data(7)))
        ));
        assert_eq!(&buf[..7], b"answer\n");
        drop(write);
        assert!(matches!(
            spin.read(read.as_raw_fd(), &mut buf),
            Some(Ok(ReadOutcome::Eof))
        ));
    }

    #[test]
    fn an_answer_written_during_the_spin_is_read() {
        let (read, write) = pipe();
        let mut spin = AnswerSpin::with_cpus(usize::MAX);
        let mut buf = [0u8; 16];
        // The writer goes on until the spin has taken a line (a spin may also run out first,
        // on a busy machine: then the next spin is skipped, and so on).
        let taken = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !taken.load(std::sync::atomic::Ordering::SeqCst) {
                    put(&write, b"x");
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            });
            loop {
                if let Some(outcome) = spin.read(read.as_raw_fd(), &mut buf) {
                    assert!(matches!(outcome, Ok(ReadOutcome::Data(n)) if n >= 1));
                    break;
                }
            }
            taken.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }

    #[test]
    fn a_spin_that_runs_out_makes_the_next_ones_sleep_at_once() {
        let (read, write) = pipe();
        let mut spin = AnswerSpin::with_cpus(usize::MAX);
        let mut buf = [0u8; 16];
        assert!(
            spin.read(read.as_raw_fd(), &mut buf).is_none(),
            "nothing came"
        );
        // Skipped spins do not read: the line stays for the caller's poll.
        put(&write, b"late\n");
        for _ in 0..2 {
            assert!(spin.read(read.as_raw_fd(), &mut buf).is_none());
        }
        assert!(matches!(
            spin.read(read.as_raw_fd(), &mut buf),
            Some(Ok(ReadOutcome::Data(5)))
        ));
    }

    #[test]
    fn no_spin_while_tasks_wait_for_a_cpu() {
        let (read, write) = pipe();
        put(&write, b"answer\n");
        // At least this test is runnable: with room for none, nothing is read.
        let mut spin = AnswerSpin::with_cpus(0);
        let mut buf = [0u8; 16];
        assert!(spin.read(read.as_raw_fd(), &mut buf).is_none());
        assert!(runnable_tasks().is_some_and(|n| n >= 1));
    }
}

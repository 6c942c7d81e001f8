//! What other threads share with the running call: `close()` and `request_cancel()` flags, the
//! sessions whose turn another thread cancelled, the waker that reaches a blocked read, and the
//! clock the pump's timers read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use acp_os::io::Waker;
use acp_proto::error::AcpError;
use acp_proto::Connection;

/// A lock that a panicking holder did not spoil (the state behind it stays usable).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Flags and queues another thread sets while a call runs; the pump looks at them per line.
pub struct Controls {
    pub closed: AtomicBool,
    pub cancel_requested: AtomicBool,
    /// The next update's sequence number, readable without the call lock.
    pub next_update_sequence: AtomicU64,
    /// Sessions whose turn another thread cancelled; the pump takes them per line.
    cancels: Mutex<Vec<String>>,
    /// Set with each push to `cancels`, so the pump takes the lock only when there is work.
    cancel_pending: AtomicBool,
    /// Released with the pipes when the client closes (its fds must not outlive `close()`).
    pub waker: Mutex<Option<Waker>>,
    /// The pump's clock starts here.
    pub epoch: Instant,
    /// Driven by an event loop: no call holds the lock while a turn runs.
    pub asynchronous: AtomicBool,
}

impl Controls {
    pub fn new(waker: Option<Waker>) -> Controls {
        Controls {
            closed: AtomicBool::new(false),
            cancel_requested: AtomicBool::new(false),
            next_update_sequence: AtomicU64::new(1),
            cancels: Mutex::new(Vec::new()),
            cancel_pending: AtomicBool::new(false),
            waker: Mutex::new(waker),
            epoch: Instant::now(),
            asynchronous: AtomicBool::new(false),
        }
    }

    /// Milliseconds since the client was made: the time the connection's timers read.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake();
        }
    }

    /// Drains the waker after it fired.
    pub fn drain_waker(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.drain();
        }
    }

    /// Queues a cancel of `session_id`'s turn for the pump (any thread), and wakes it.
    pub fn queue_cancel(&self, session_id: String) {
        lock(&self.cancels).push(session_id);
        self.cancel_pending.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Forgets queued cancels (no turn runs: they have nothing to cancel).
    pub fn clear_cancels(&self) {
        lock(&self.cancels).clear();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Per line, not per read: a stop requested from another thread is seen before the next
    /// line is handled, whatever is still buffered.
    #[inline]
    pub fn check_stops(&self) -> Result<(), AcpError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(AcpError::protocol(
                "close() from another thread stopped the agent while waiting for the agent's answer",
            ));
        }
        if self.cancel_requested.load(Ordering::SeqCst) {
            return Err(AcpError::protocol(
                "request_cancel() stopped the agent while waiting for the agent's answer",
            ));
        }
        Ok(())
    }

    /// Trips the cancel latch of each session another thread cancelled.
    #[inline]
    pub fn take_cancels(&self, conn: &mut Connection) {
        // The common case: one plain load per line, no locked instruction and no lock.
        if self.cancel_pending.load(Ordering::SeqCst) {
            self.take_pending_cancels(conn);
        }
    }

    #[cold]
    fn take_pending_cancels(&self, conn: &mut Connection) {
        if !self.cancel_pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let pending: Vec<String> = std::mem::take(&mut *lock(&self.cancels));
        for session in pending {
            conn.cancel(&session);
        }
    }
}

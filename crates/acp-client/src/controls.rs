//! What other threads share with the running call: `close()` and `request_cancel()` flags, the
//! sessions whose turn another thread cancelled, the waker that reaches a blocked read, and the
//! clock the pump's timers read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use acp_os::io::Waker;
use acp_proto::calls::CallId;
use acp_proto::encode::ContentBlock;
use acp_proto::error::AcpError;
use acp_proto::{Connection, Outcome, Request};

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
    /// Steering requests another thread queued for the blocking client's running turn.
    steering: Mutex<Steering>,
    steer_pending: AtomicBool,
    steer_answered: Condvar,
}

/// The blocking client's cross-thread steering: requests queued by `steer()` on another
/// thread (a ticket each), those the pump sent (by their call id), and the answers it handed
/// back for the waiting threads to take.
#[derive(Default)]
struct Steering {
    next_ticket: u64,
    queued: Vec<(u64, String, Vec<ContentBlock>)>,
    sent: Vec<(CallId, u64)>,
    answers: Vec<(u64, Result<String, AcpError>)>,
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
            steering: Mutex::new(Steering::default()),
            steer_pending: AtomicBool::new(false),
            steer_answered: Condvar::new(),
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

    /// Queues a steering request for the running turn's pump (another thread) and wakes it;
    /// the ticket `wait_steer` takes its answer by.
    pub fn queue_steer(&self, session_id: String, content: Vec<ContentBlock>) -> u64 {
        let mut steering = lock(&self.steering);
        steering.next_ticket += 1;
        let ticket = steering.next_ticket;
        steering.queued.push((ticket, session_id, content));
        drop(steering);
        self.steer_pending.store(true, Ordering::SeqCst);
        self.wake();
        ticket
    }

    /// Queues the steering requests another thread asked for (the pump, per line); one the
    /// connection refuses (capability, closed session) is answered with its error at once.
    #[inline]
    pub fn take_steers(&self, conn: &mut Connection) {
        if self.steer_pending.load(Ordering::SeqCst) {
            self.take_pending_steers(conn);
        }
    }

    #[cold]
    fn take_pending_steers(&self, conn: &mut Connection) {
        if !self.steer_pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut steering = lock(&self.steering);
        for (ticket, session_id, content) in std::mem::take(&mut steering.queued) {
            match conn.request(Request::Steer {
                session_id: &session_id,
                content: &content,
            }) {
                Ok(call) => steering.sent.push((call, ticket)),
                Err(error) => steering.answers.push((ticket, Err(error))),
            }
        }
        drop(steering);
        self.steer_answered.notify_all();
    }

    /// A finished call that is not the running one: when it is a steering request another
    /// thread waits on, its answer (the result's JSON text) is handed back. True if it was.
    pub fn steer_done(&self, call: CallId, outcome: &Result<Outcome, AcpError>) -> bool {
        let mut steering = lock(&self.steering);
        let Some(at) = steering.sent.iter().position(|(id, _)| *id == call) else {
            return false;
        };
        let (_, ticket) = steering.sent.swap_remove(at);
        let answer = match outcome {
            Ok(Outcome::Raw(raw)) => Ok(raw.clone()),
            Ok(_) => Err(AcpError::protocol(
                "the steering request ended without a result",
            )),
            Err(error) => Err(error.clone()),
        };
        steering.answers.push((ticket, answer));
        drop(steering);
        self.steer_answered.notify_all();
        true
    }

    /// The blocking call ended: steering requests not yet sent, or sent and not answered,
    /// fail (a late answer is dropped), so no thread waits on a turn that is over.
    pub fn end_steers(&self, conn: &mut Connection) {
        let mut steering = lock(&self.steering);
        for (ticket, ..) in std::mem::take(&mut steering.queued) {
            steering.answers.push((ticket, Err(AcpError::Misuse(
                "the turn ended before the steering request was sent (nothing was sent): call steer() again, or prompt()".into(),
            ))));
        }
        for (call, ticket) in std::mem::take(&mut steering.sent) {
            conn.abandon(call);
            steering.answers.push((
                ticket,
                Err(AcpError::protocol(
                    "the turn ended before the agent answered the steering request",
                )),
            ));
        }
        self.steer_pending.store(false, Ordering::SeqCst);
        drop(steering);
        self.steer_answered.notify_all();
    }

    /// Waits (another thread, without the call lock) for the answer to steering request
    /// `ticket` until `until`; a close, or no answer by then, is an error (the request is
    /// withdrawn if it was not sent yet).
    pub fn wait_steer(&self, ticket: u64, until: Instant) -> Result<String, AcpError> {
        let mut steering = lock(&self.steering);
        loop {
            if let Some(at) = steering.answers.iter().position(|(t, _)| *t == ticket) {
                return steering.answers.swap_remove(at).1;
            }
            let now = Instant::now();
            if self.is_closed() || now >= until {
                steering.queued.retain(|(t, ..)| *t != ticket);
                steering.sent.retain(|(_, t)| *t != ticket);
                return Err(AcpError::protocol(if self.is_closed() {
                    "the client was closed before the agent answered the steering request"
                } else {
                    "the agent did not answer the steering request in time (30 s)"
                }));
            }
            steering = self
                .steer_answered
                .wait_timeout(steering, until - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}

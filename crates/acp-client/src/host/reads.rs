//! Long reads finished off the pump's thread: a read that has examined `INLINE_SCAN` bytes
//! moves to a thread of its own (within the read's bound), which fills its slot and wakes the
//! pump; `serve::answer_waits` then answers it. `close()` stops and joins these threads
//! (`KillSwitch::kill_all`), so none outlives the client. (A leaf: serving uses it.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use acp_os::fs;
use acp_os::io::Notifier;
use acp_proto::host::{HostError, HostOk};
use acp_proto::HostId;

/// The bytes a read may examine on the pump's thread before it moves to a thread of its own
/// (a few milliseconds): every ordinary read is answered inline, in arrival order.
pub(super) const INLINE_SCAN: u64 = 8 << 20;

type Answer = Result<HostOk, HostError>;

/// A read finished off the pump's thread: its answer, once there.
type ReadSlot = Arc<Mutex<Option<Answer>>>;

fn take(slot: &ReadSlot) -> Option<Answer> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// The reads going on in threads of their own, and the flag they set when one is done.
#[derive(Default)]
pub(super) struct Reads {
    pending: Vec<(HostId, ReadSlot)>,
    done: Arc<AtomicBool>,
}

impl Reads {
    /// Continues a long read in a thread of its own (kept in `readers` for `close()` to join),
    /// which wakes the pump through `notifier` when its answer is there.
    pub fn start(
        &mut self,
        host: HostId,
        mut reading: Box<fs::Reading>,
        bound: fs::ReadBound,
        path: String,
        notifier: Option<Arc<Notifier>>,
        readers: &Mutex<Vec<JoinHandle<()>>>,
    ) -> std::io::Result<()> {
        let slot: ReadSlot = Arc::default();
        let (done, filled) = (Arc::clone(&self.done), Arc::clone(&slot));
        // Spawned and registered under the lock `close()` takes them by: a close either finds
        // this thread to join, or came first, set the closing flag (before its lock) and no
        // thread starts (one started after it would outlive it, unjoined).
        let mut readers = readers.lock().unwrap_or_else(|e| e.into_inner());
        if bound
            .stop
            .as_ref()
            .is_some_and(|stop| stop.load(Ordering::SeqCst))
        {
            return Err(std::io::Error::other("the client is closing"));
        }
        let reader = std::thread::Builder::new()
            .name("acp-fast read".into())
            .spawn(move || {
                let result = reading
                    .run(&bound, u64::MAX)
                    .expect("a read without a pause point ends");
                *filled.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(result.map(HostOk::Content).map_err(|e| e.host_error(&path)));
                done.store(true, Ordering::SeqCst);
                if let Some(notifier) = notifier {
                    notifier.wake();
                }
            })?;
        readers.retain(|r| !r.is_finished());
        readers.push(reader);
        drop(readers);
        self.pending.push((host, slot));
        Ok(())
    }

    /// Whether a read may have finished since the last look (one atomic swap).
    #[inline]
    pub fn any_done(&self) -> bool {
        !self.pending.is_empty() && self.done.swap(false, Ordering::SeqCst)
    }

    /// The finished reads' answers, in the order they started; the others go on.
    pub fn take_finished(&mut self) -> Vec<(HostId, Answer)> {
        let mut finished = Vec::new();
        self.pending.retain(|(host, slot)| match take(slot) {
            Some(answer) => {
                finished.push((*host, answer));
                false
            }
            None => true,
        });
        finished
    }

    /// A finished read put back for a later look (answering an earlier one failed).
    pub fn put_back(&mut self, host: HostId, answer: Answer) {
        self.pending
            .push((host, Arc::new(Mutex::new(Some(answer)))));
        self.done.store(true, Ordering::SeqCst);
    }
}

//! Long reads finished off the driver's thread: a read that has examined `INLINE_SCAN` bytes
//! moves to a thread of its own (within the read's bound), which fills its slot and wakes the
//! driver; `answer_reads` then answers it. `close()` stops and joins these threads
//! (`KillSwitch::kill_all`), so none outlives the client.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use acp_os::fs;
use acp_proto::host::{HostError, HostOk};
use acp_proto::{Connection, HostId};

use super::serve::{answer, Host, HostFailure};
use crate::edge::Edge;

/// The bytes a read may examine on the driver's thread before it moves to a thread of its
/// own (a few milliseconds): every ordinary read is answered inline, in arrival order.
pub(super) const INLINE_SCAN: u64 = 8 << 20;

/// A read finished off the driver's thread: its answer, once there.
pub(super) type ReadSlot = Arc<Mutex<Option<Result<HostOk, HostError>>>>;

impl Host {
    /// Continues a long read in a thread of its own; its answer is written by `answer_waits`
    /// when the thread wakes the driver.
    pub(super) fn read_elsewhere(
        &mut self,
        host: HostId,
        mut reading: Box<fs::Reading>,
        bound: fs::ReadBound,
        path: String,
    ) -> std::io::Result<()> {
        let slot: ReadSlot = Arc::default();
        let (done, notifier) = (Arc::clone(&self.reads_done), self.notifier.clone());
        let filled = Arc::clone(&slot);
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
        let mut readers = self
            .terminals
            .readers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        readers.retain(|r| !r.is_finished());
        readers.push(reader);
        drop(readers);
        self.reads.push((host, slot));
        Ok(())
    }
}

/// Answers the reads finished in threads of their own; drops those already answered
/// (`$/cancel_request`).
pub(super) fn answer_reads<E: Edge>(
    edge: &mut E,
    conn: &mut Connection,
    state: &mut Host,
) -> Result<(), HostFailure<E::Error>> {
    let reads = std::mem::take(&mut state.reads);
    let mut left = Vec::new();
    let mut failure = None;
    for (host, slot) in reads {
        let finished = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        match finished {
            None => left.push((host, slot)),
            Some(_) if conn.host_raw_id(host).is_none() => {} // cancelled meanwhile
            Some(result) if failure.is_none() => {
                if let Err(error) = answer(edge, conn, host, result, None) {
                    failure = Some(error);
                }
            }
            Some(result) => {
                // After a failure the rest are kept for a later look (their slot refilled).
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                left.push((host, slot));
            }
        }
    }
    state.reads.extend(left);
    failure.map_or(Ok(()), Err)
}

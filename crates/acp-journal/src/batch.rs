//! What both journal writers share: records made on the reader's thread into a pending batch
//! under one short lock, and a thread of the writer's own that stores a batch once it is big
//! enough or old enough; the caller stores the batch itself when a record must be durable
//! before it returns (fsync "every", records that are not updates, flush, close).
//!
//! Batches are taken from the pending records while the store is locked, so they reach the
//! store whole and in order. Lock order: store, then pending. Whatever waits (for the store,
//! the disk, the batch thread) runs inside the caller's `Waiting`, which the binding makes
//! release the GIL: no lock of the journal is held while the GIL is taken.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;
use crate::locks::lock;
use crate::sync::{Fsync, Syncs};

/// The batch thread stores a batch once this many bytes of records are pending ...
pub const BATCH_BYTES: usize = 512 << 10;
/// ... or when its oldest record has waited this long.
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// A store slower than the reader (the thread still busy with the last batch): at this many
/// pending bytes the reader waits, with the GIL released, until the thread takes them (it
/// neither stores them itself, which would put the store's CPU on the reader's thread, nor
/// lets them grow). So what a crash can lose before the OS has it stays under 1 MiB besides
/// the batch being stored.
pub const MAX_PENDING_BYTES: usize = 1 << 20;

/// Nanoseconds since the Unix epoch (0 before it): a record's time.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

/// How a caller waits while the journal works (stores, syncs, joins its threads): the binding
/// releases the GIL for the work (`Python::detach`); `Plain` just runs it. Generic, so the hot
/// path (which waits for nothing) costs no call through a pointer.
pub trait Waiting {
    fn wait<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T;
}

/// Waits on the calling thread with nothing to release.
pub struct Plain;

impl Waiting for Plain {
    fn wait<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        work()
    }
}

/// Where a journal's records go, a batch at a time.
pub trait Store: Send + 'static {
    /// Pending records, as the reader appends them.
    type Batch: Default + Send;
    /// What the reader keeps between records (say, the last session's encoding).
    type Hot: Default + Send;
    fn bytes(batch: &Self::Batch) -> usize;
    /// Stores the whole batch, durably as the fsync mode says, and empties it (keeping its
    /// memory). On failure nothing of it may be visible: no torn record, no gap.
    fn store(&mut self, batch: &mut Self::Batch) -> Result<(), String>;
    /// Empties a batch that will never be stored.
    fn discard(batch: &mut Self::Batch);
    /// fsync "batch": a file whose sync makes every batch stored so far durable (the JSONL
    /// file; SQLite's WAL), asked for once, after the first batch is stored.
    fn sync_file(&self) -> Result<std::fs::File, String>;
    /// After the last batch (at `close()`): releases what the store holds, so its final work
    /// (SQLite's last checkpoint) is done and paid for by `close()`, not whenever the writer
    /// happens to be freed.
    fn close(&mut self) {}
}

/// What the reader appends to.
pub struct Pending<S: Store> {
    pub batch: S::Batch,
    pub hot: S::Hot,
    /// When the oldest pending record was made (meaningless while the batch is empty).
    first_ns: u64,
    pub last_record: u64,
    /// The epoch of the latest update; before any, the last one found when opening.
    pub last_epoch: u64,
}

struct Sink<S: Store> {
    store: S,
    failed: Option<String>,
    /// The previous batch, swapped in as the next pending one (no reallocation).
    spare: S::Batch,
}

struct Shared<S: Store> {
    pending: Mutex<Pending<S>>,
    wake: Condvar,
    /// Told when the thread took the pending batch (or gave up on it): a reader waiting at
    /// `MAX_PENDING_BYTES` goes on.
    room: Condvar,
    sink: Mutex<Sink<S>>,
    /// Set with `Sink::failed`, read without the lock on the hot path.
    failed: AtomicBool,
    /// The batch thread ends once the batch is stored. Outside the pending lock, so a writer
    /// dropped while a thread holds that lock still stops its threads (the batch thread's
    /// waits are timed: a wake-up lost to the race costs one interval).
    stop: AtomicBool,
    /// fsync "batch": the syncs, off the batch thread.
    syncs: Option<Syncs>,
}

enum StoreError {
    Earlier(String),
    Now(String),
}

impl<S: Store> Shared<S> {
    fn store_pending(&self) -> Result<(), StoreError> {
        let mut sink = lock(&self.sink);
        if let Some(failed) = &sink.failed {
            return Err(StoreError::Earlier(failed.clone()));
        }
        let mut batch = std::mem::take(&mut sink.spare);
        std::mem::swap(&mut lock(&self.pending).batch, &mut batch);
        self.room.notify_all();
        if S::bytes(&batch) == 0 {
            sink.spare = batch;
            return Ok(());
        }
        let mut stored = sink.store.store(&mut batch);
        if let (Ok(()), Some(syncs)) = (&stored, &self.syncs) {
            let store = &sink.store;
            stored = syncs.written(|| store.sync_file());
        }
        match stored {
            Ok(()) => {
                sink.spare = batch;
                Ok(())
            }
            Err(failed) => {
                S::discard(&mut batch);
                sink.spare = batch;
                Err(StoreError::Now(self.fail(&mut sink, failed)))
            }
        }
    }

    fn fail(&self, sink: &mut Sink<S>, failed: String) -> String {
        let failed = sink.failed.get_or_insert(failed).clone();
        self.failed.store(true, Ordering::Release);
        failed
    }

    /// Stores what is pending, then (fsync "batch") syncs every batch written so far.
    fn store_durably(&self) -> Result<(), StoreError> {
        self.store_pending()?;
        match &self.syncs {
            Some(syncs) => syncs
                .now()
                .map_err(|failed| StoreError::Now(self.fail(&mut lock(&self.sink), failed))),
            None => Ok(()),
        }
    }

    /// The batch thread; once stopped, it syncs what it wrote (fsync "batch") and stops the
    /// sync thread (`close()` does both too: the thread may have ended on a failure, and a
    /// writer dropped without `close()` has only this).
    fn run(&self) {
        self.write_batches();
        if let Some(syncs) = &self.syncs {
            if let Err(failed) = syncs.now() {
                self.fail(&mut lock(&self.sink), failed);
            }
            syncs.stop();
        }
    }

    fn run_syncs(&self) {
        if let Some(syncs) = &self.syncs {
            syncs.run(|failed| {
                self.fail(&mut lock(&self.sink), failed);
            });
        }
    }

    /// Stores a batch once it is big enough or old enough, until stopped.
    fn write_batches(&self) {
        let mut pending = lock(&self.pending);
        loop {
            let bytes = S::bytes(&pending.batch);
            let waited = Duration::from_nanos(now_ns().saturating_sub(pending.first_ns));
            let wait = if bytes == 0 {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                BATCH_WAIT
            } else if bytes < BATCH_BYTES
                && waited < BATCH_WAIT
                && !self.stop.load(Ordering::Acquire)
            {
                BATCH_WAIT - waited
            } else {
                drop(pending);
                // A failure stays in the sink: the next record, flush() or close() raises it.
                if self.store_pending().is_err() {
                    let mut pending = lock(&self.pending);
                    S::discard(&mut pending.batch);
                    self.room.notify_all();
                    if self.stop.load(Ordering::Acquire) {
                        return;
                    }
                }
                pending = lock(&self.pending);
                continue;
            };
            pending = self
                .wake
                .wait_timeout(pending, wait)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}

/// A journal writer over a store: the hot path, the batch thread, flush and close.
pub struct Core<S: Store> {
    shared: Arc<Shared<S>>,
    /// fsync "every": each update is stored before `append` returns.
    every: bool,
    closed: AtomicBool,
    /// Set in a child made by fork(): the records belong to the parent.
    foreign: AtomicBool,
    owner: u32,
    /// The batch thread and (fsync "batch") the sync thread.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl<S: Store> Core<S> {
    /// A writer over `store`, whose last record and latest update's epoch are `last_record`
    /// and `last_epoch`; starts the batch thread (not for fsync "every") and the sync thread
    /// (fsync "batch").
    pub fn new(store: S, fsync: Fsync, last_record: u64, last_epoch: u64) -> Result<Self, Error> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                batch: S::Batch::default(),
                hot: S::Hot::default(),
                first_ns: 0,
                last_record,
                last_epoch,
            }),
            wake: Condvar::new(),
            room: Condvar::new(),
            sink: Mutex::new(Sink {
                store,
                failed: None,
                spare: S::Batch::default(),
            }),
            failed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            syncs: (fsync == Fsync::Batch).then(Syncs::default),
        });
        let spawn = |name: &str, run: fn(&Shared<S>)| {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || run(&shared))
                .map_err(|error| Error::Start(error.to_string()))
        };
        let mut threads = Vec::new();
        if fsync != Fsync::Every {
            threads.push(spawn("acp-fast-journal", Shared::run)?);
        }
        if fsync == Fsync::Batch {
            threads.push(spawn("acp-fast-journal-sync", Shared::run_syncs)?);
        }
        Ok(Core {
            shared,
            every: fsync == Fsync::Every,
            closed: AtomicBool::new(false),
            foreign: AtomicBool::new(false),
            owner: std::process::id(),
            threads: Mutex::new(threads),
        })
    }

    /// Whether records can be appended: not in a forked child, not closed, no failed write.
    pub fn check_open(&self) -> Result<(), Error> {
        if self.foreign.load(Ordering::Relaxed) {
            return Err(Error::Foreign { owner: self.owner });
        }
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        if self.shared.failed.load(Ordering::Acquire) {
            let failed = lock(&self.shared.sink).failed.clone().unwrap_or_default();
            return Err(Error::Earlier(failed));
        }
        Ok(())
    }

    /// Stores the pending records now and makes them durable (unless fsync is "never"),
    /// inside `waiting` while the disk works.
    fn store_now(&self, waiting: &impl Waiting) -> Result<(), Error> {
        let shared = &self.shared;
        match waiting.wait(|| shared.store_durably()) {
            Ok(()) => Ok(()),
            Err(StoreError::Earlier(failed)) => Err(Error::Earlier(failed)),
            Err(StoreError::Now(failed)) => Err(Error::Write(failed)),
        }
    }

    /// Appends one record made at `time` by `make` (given the pending records and the
    /// record's number), then stores it at once when it is not an update (`update` false) or
    /// fsync is "every", else wakes the batch thread when a batch is due.
    pub fn append(
        &self,
        waiting: &impl Waiting,
        update: bool,
        time: u64,
        make: impl FnOnce(&mut Pending<S>, u64),
    ) -> Result<(), Error> {
        self.check_open()?;
        let (due, full) = {
            let mut pending = lock(&self.shared.pending);
            let before = S::bytes(&pending.batch);
            if before == 0 {
                pending.first_ns = time;
            }
            let number = pending.last_record + 1;
            make(&mut pending, number);
            pending.last_record = number;
            let after = S::bytes(&pending.batch);
            (
                before < BATCH_BYTES && after >= BATCH_BYTES,
                after >= MAX_PENDING_BYTES,
            )
        };
        if !update || self.every {
            self.store_now(waiting)
        } else if full {
            self.wait_for_room(waiting);
            Ok(())
        } else {
            if due {
                self.shared.wake.notify_one();
            }
            Ok(())
        }
    }

    /// At `MAX_PENDING_BYTES`: wakes the batch thread and waits until it has taken the
    /// pending records (or a store failed: the next record, flush() or close() raises it).
    fn wait_for_room(&self, waiting: &impl Waiting) {
        let shared = &self.shared;
        shared.wake.notify_one();
        waiting.wait(|| {
            let mut pending = lock(&shared.pending);
            while S::bytes(&pending.batch) >= MAX_PENDING_BYTES
                && !shared.stop.load(Ordering::Acquire)
                && !shared.failed.load(Ordering::Acquire)
            {
                // Timed: a wake-up lost to a race costs one batch interval, never a hang.
                pending = shared
                    .room
                    .wait_timeout(pending, BATCH_WAIT)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
                shared.wake.notify_one();
            }
        });
    }

    pub fn last_record(&self) -> u64 {
        lock(&self.shared.pending).last_record
    }

    pub fn last_epoch(&self) -> u64 {
        lock(&self.shared.pending).last_epoch
    }

    /// Stores every pending record now (nothing once closed).
    pub fn flush(&self, waiting: &impl Waiting) -> Result<(), Error> {
        if self.closed.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.check_open()?;
        self.store_now(waiting)
    }

    /// Stores what is pending and stops the batch thread. Idempotent; raises once when
    /// records were lost to a failed write.
    pub fn close(&self, waiting: &impl Waiting) -> Result<(), Error> {
        if self.foreign.load(Ordering::Relaxed) || self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            // Under the lock: the batch thread is either waiting (and told) or yet to look.
            let _pending = lock(&self.shared.pending);
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_one();
        let mut threads = std::mem::take(&mut *lock(&self.threads)).into_iter();
        let shared = &self.shared;
        let _ = waiting.wait(|| {
            if let Some(batch_thread) = threads.next() {
                let _ = batch_thread.join();
            }
            if let Some(syncs) = &shared.syncs {
                syncs.stop();
            }
            for sync_thread in threads {
                let _ = sync_thread.join();
            }
            let stored = shared.store_durably();
            lock(&shared.sink).store.close();
            if let Some(syncs) = &shared.syncs {
                syncs.release();
            }
            stored
        });
        let failed = lock(&self.shared.sink).failed.clone();
        match failed {
            Some(failed) => Err(Error::Lost(failed)),
            None => Ok(()),
        }
    }

    /// In a child made by fork(): nothing is stored here, and no lock is touched (the
    /// parent's batch thread may have held one for good).
    pub fn forked(&self) {
        self.foreign.store(true, Ordering::Relaxed);
    }
}

impl<S: Store> Drop for Core<S> {
    fn drop(&mut self) {
        if self.foreign.load(Ordering::Relaxed) {
            // The store (a file, a database connection) is the parent's: never closed here.
            std::mem::forget(Arc::clone(&self.shared));
            return;
        }
        // Not closed (close() joins): let the batch thread store what is pending and end.
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

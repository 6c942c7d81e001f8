//! A mutex lock that outlives a panicking holder: the journal's locks guard plain records and
//! counters, still usable after a panic (a caller's code never runs under them).

use std::sync::{Mutex, MutexGuard};

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

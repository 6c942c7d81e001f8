//! The crate's one lock helper.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking over a poisoned one: every state behind our locks stays consistent
/// between statements (a panic elsewhere must not stop the agent from being stopped and reaped,
/// or a terminal's output from being read).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

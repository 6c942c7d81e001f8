//! `fs/read_text_file` and `fs/write_text_file` confined to a session's roots
//! (design/host.md §2).
//!
//! Each root is opened (a directory descriptor) when the session registers it and held; every
//! request is walked from those descriptors one component at a time (`walk.rs`), symlinks read
//! and checked rather than followed by the kernel, so neither a symlink inside a root pointing
//! out nor a root (or a directory on the way) swapped for a symlink reaches outside. Writes go
//! to a temporary file in the target's directory and are renamed over it, so a reader sees the
//! old file or the new one; a target the host's user could not open for writing, or that is not
//! a plain regular file, is refused, and the file's owner and mode are kept (`write.rs`).
//!
//! Files by layer, each using only those above it in this list: `sys.rs` (the `*at` calls),
//! `error.rs` (`FsError`), `roots.rs` (`Roots`, `confine`), `walk.rs`, then `read.rs` and
//! `write.rs`; this file re-exports their public items and uses them, none of them uses it.

mod error;
mod read;
mod roots;
mod sys;
mod walk;
mod write;

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

pub use error::{strerror, FsError};
pub use read::{open_read, read_text_file, ReadBound, Reading, SCAN_BYTES, SCAN_TIME};
pub use roots::{confine, normalize, within, Roots, Target};
pub use write::write_text_file;

use error::refused_if_symlink;
use sys::open_at;

/// Where the target resolves to (the walk's absolute location), for the tests.
pub fn resolved(target: &Target<'_>) -> Result<PathBuf, FsError> {
    walk::walk(target, false).map(|walked| walked.at)
}

/// Opens the confined directory itself (a terminal's cwd), without following symlinks.
pub fn open_dir(target: &Target<'_>) -> Result<OwnedFd, FsError> {
    let walked = walk::walk(target, false)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    match &walked.name {
        None => open_at(Some(&walked.dir), OsStr::new("."), flags, 0).map_err(FsError::of),
        Some(name) => open_at(Some(&walked.dir), name, flags, 0)
            .map_err(|e| refused_if_symlink(&walked.dir, name, e)),
    }
}

//! Why an fs request failed, and the JSON-RPC error the agent gets for it.

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;

use acp_proto::host::HostError;

use super::sys::{is_kind, lstat_at};

/// Why an fs request failed.
#[derive(Debug)]
pub enum FsError {
    /// Outside the roots, or a symlink met while opening (swapped in after the check).
    Outside,
    NotFound,
    NotUtf8,
    /// The selected lines exceed this many bytes.
    TooLarge(usize),
    /// The read examined its whole byte budget (or ran out of time) before it was done.
    ScanBound(String),
    /// The read was given up: the client closed, or the turn's timeout passed.
    Stopped(&'static str),
    /// The operation would do what opening the file would not allow (a write to a file the
    /// host's user cannot write, to something that is not a regular file...): why.
    Refused(String),
    Os(io::Error),
}

impl FsError {
    pub(super) fn of(error: io::Error) -> FsError {
        match error.raw_os_error() {
            Some(libc::ENOENT) => FsError::NotFound,
            Some(libc::ELOOP) => FsError::Outside,
            _ => FsError::Os(error),
        }
    }

    /// The JSON-RPC error for it; `path` is the path as the agent sent it.
    pub fn host_error(&self, path: &str) -> HostError {
        match self {
            FsError::Outside => HostError::outside(path),
            FsError::NotFound => HostError::not_found(path),
            FsError::NotUtf8 => HostError::failed(-32603, "not UTF-8 text", Some(path)),
            FsError::TooLarge(limit) => HostError::failed(
                -32603,
                &format!(
                    "the selected lines exceed transfer_limits.request_bytes ({limit} bytes); read fewer lines (line/limit)"
                ),
                Some(path),
            ),
            FsError::ScanBound(why) | FsError::Refused(why) => {
                HostError::failed(-32603, why, Some(path))
            }
            FsError::Stopped(why) => HostError::failed(
                -32603,
                &format!("the read was stopped: {why}"),
                Some(path),
            ),
            FsError::Os(error) => HostError::failed(-32603, &strerror(error), Some(path)),
        }
    }
}

/// The OS's message without Rust's " (os error N)" suffix.
pub fn strerror(error: &io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// An `O_NOFOLLOW` open that failed on a symlink (swapped in after the walk looked): some
/// systems say ENOTDIR for a directory open, so look at what is there.
pub(super) fn refused_if_symlink(dir: &OwnedFd, name: &OsStr, error: io::Error) -> FsError {
    match lstat_at(dir, name) {
        Ok(stat) if is_kind(&stat, libc::S_IFLNK) => FsError::Outside,
        _ => FsError::of(error),
    }
}

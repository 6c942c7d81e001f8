//! `fs/read_text_file`: the selected lines of a confined file, within a `ReadBound` (bytes
//! kept, bytes examined, time, and a stop flag).

use std::fs::File;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{refused_if_symlink, FsError};
use super::roots::Target;
use super::sys::open_at;
use super::walk;

/// How far one read may go (design/host.md §2, and the host issue's "a file read can freeze
/// the host"): the selected lines' bytes, the bytes examined to find them, the time, and a
/// flag another thread sets to give the read up (the client closed).
#[derive(Clone, Debug)]
pub struct ReadBound {
    /// The selected lines may hold at most this many bytes (`transfer_limits.request_bytes`).
    pub max_bytes: usize,
    /// At most this many bytes of the file are examined (skipped lines included).
    pub scan_bytes: u64,
    /// The read ends by then, whatever it found (its time bound, or the turn's deadline).
    pub deadline: Option<(Instant, &'static str)>,
    /// Set from another thread: give the read up at once.
    pub stop: Option<Arc<AtomicBool>>,
}

/// The bytes one read may examine by default: a few hundred milliseconds of scanning.
pub const SCAN_BYTES: u64 = 256 << 20;
/// The time one read may take by default.
pub const SCAN_TIME: Duration = Duration::from_secs(2);

impl ReadBound {
    /// The defaults, with the answer's byte bound.
    pub fn new(max_bytes: usize) -> ReadBound {
        ReadBound {
            max_bytes,
            scan_bytes: SCAN_BYTES,
            deadline: Some((Instant::now() + SCAN_TIME, "")),
            stop: None,
        }
    }

    fn check(&self, examined: u64, first: u64, line: u64) -> Result<(), FsError> {
        if self
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            return Err(FsError::Stopped("the client is closing"));
        }
        if examined > self.scan_bytes {
            return Err(FsError::ScanBound(format!(
                "the read examined {} bytes of the file (the host's bound for one read) and reached line {line} of the lines from {first}; read a smaller file, or fewer lines",
                self.scan_bytes
            )));
        }
        if let Some((deadline, why)) = self.deadline {
            if Instant::now() >= deadline {
                if !why.is_empty() {
                    return Err(FsError::Stopped(why));
                }
                return Err(FsError::ScanBound(format!(
                    "the read took longer than the host's bound for one read ({} s) and reached line {line} after {examined} bytes; read a smaller file, or fewer lines",
                    SCAN_TIME.as_secs()
                )));
            }
        }
        Ok(())
    }
}

/// Reads lines `line..line+limit` (1-based; `limit` None: to the end) of the confined file
/// within `bound`; `missing_as_empty` answers a missing file "".
pub fn read_text_file(
    target: &Target<'_>,
    line: u32,
    limit: Option<u32>,
    bound: &ReadBound,
    missing_as_empty: bool,
) -> Result<String, FsError> {
    let mut reading = open_read(target, line, limit, missing_as_empty)?;
    reading
        .run(bound, u64::MAX)
        .expect("a read without a pause point ends")
}

/// A read in progress: the file and how far the scan got. `run` continues it, so a read that
/// turns out long can be handed to another thread between two chunks.
pub struct Reading {
    /// None: the answer is "" without reading (a missing file read as empty, `limit` 0).
    file: Option<File>,
    first: u64,
    end: Option<u64>,
    line: u64,
    examined: u64,
    kept: Vec<u8>,
    /// The file's size when opened (the answer's buffer is sized from it once).
    size: u64,
}

/// Opens the confined file for a read of lines `line..line+limit` (checks only: nothing read).
pub fn open_read(
    target: &Target<'_>,
    line: u32,
    limit: Option<u32>,
    missing_as_empty: bool,
) -> Result<Reading, FsError> {
    let first = u64::from(line.max(1));
    let end = limit.map(|l| first + u64::from(l)); // first line not kept
    let (file, size) = match open_file(target) {
        Err(FsError::NotFound) if missing_as_empty => (None, 0),
        Err(error) => return Err(error),
        Ok(_) if end == Some(first) => (None, 0),
        Ok((file, size)) => (Some(file), size),
    };
    Ok(Reading {
        file,
        first,
        end,
        line: 1,
        examined: 0,
        kept: Vec::new(),
        size,
    })
}

fn open_file(target: &Target<'_>) -> Result<(File, u64), FsError> {
    let walked = walk::walk(target, false)?;
    let Some(name) = &walked.name else {
        return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)));
    };
    let dir = &walked.dir;
    // O_NONBLOCK: a FIFO planted there cannot stall the read loop (it is refused below).
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK;
    let fd = open_at(Some(dir), name, flags, 0).map_err(|e| refused_if_symlink(dir, name, e))?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(FsError::Os)?;
    if meta.is_dir() {
        return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)));
    }
    if !meta.is_file() {
        return Err(FsError::Os(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    Ok((file, meta.len()))
}

impl Reading {
    /// Reads on within `bound`: Some(answer) when done, None once `pause_after` bytes of the
    /// file have been examined in all (the caller may continue it elsewhere).
    pub fn run(&mut self, bound: &ReadBound, pause_after: u64) -> Option<Result<String, FsError>> {
        let Some(file) = self.file.as_mut() else {
            return Some(Ok(String::new()));
        };
        let max_bytes = bound.max_bytes;
        if self.examined == 0 {
            let hint = usize::try_from(self.size).unwrap_or(usize::MAX);
            self.kept.reserve(hint.min(max_bytes).min(1 << 20));
        }
        let mut buf = [0u8; 64 * 1024];
        'read: loop {
            if self.examined >= pause_after {
                return None;
            }
            let count = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Some(Err(FsError::Os(e))),
            };
            self.examined += count as u64;
            let mut rest = &buf[..count];
            while !rest.is_empty() {
                if self.end.is_some_and(|end| self.line >= end) {
                    break 'read;
                }
                let (piece, newline) = match memchr::memchr(b'\n', rest) {
                    Some(at) => (&rest[..=at], true),
                    None => (rest, false),
                };
                if self.line >= self.first {
                    if self.kept.len() + piece.len() > max_bytes {
                        return Some(Err(FsError::TooLarge(max_bytes)));
                    }
                    self.kept.extend_from_slice(piece);
                } else if !newline {
                    break; // the rest of this chunk is inside a skipped line
                }
                if newline {
                    self.line += 1;
                }
                rest = &rest[piece.len()..];
            }
            // Once per 64 KiB: a clock read and two loads, nothing next to the read itself.
            if let Err(error) = bound.check(self.examined, self.first, self.line) {
                return Some(Err(error));
            }
        }
        let kept = std::mem::take(&mut self.kept);
        Some(String::from_utf8(kept).map_err(|_| FsError::NotUtf8))
    }
}

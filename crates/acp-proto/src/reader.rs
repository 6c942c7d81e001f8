//! The bounded line reader: one buffer of exactly `message_bytes + 1` bytes, allocated before the
//! agent starts and never grown. Bytes are read straight into its free tail; complete lines are
//! handed out as ranges into it. A line that cannot fit (no newline within `message_bytes + 1`
//! bytes) stops all further reading: the agent is another program and may send without end.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::Range;

/// How long a line the reader accepts, newline not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub message_bytes: usize,
}

pub const DEFAULT_LIMITS: Limits = Limits {
    message_bytes: 2 * 1024 * 1024,
};

/// The buffer could not be had: `message_bytes + 1` overflows or the allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityOverflow {
    pub message_bytes: usize,
}

/// A line longer than the limit arrived; the reader is terminal from then on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageTooLong {
    pub message_bytes: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Storage allocated, no agent attached yet.
    Admitted,
    /// The agent is attached and its output is being read.
    Steady,
    /// The client was closed.
    Closed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Admitted => "admitted",
            Phase::Steady => "steady",
            Phase::Closed => "closed",
        }
    }
}

/// A snapshot for hosts: how close the agent's lines come to the limit, and why reading stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub phase: Phase,
    pub message_bytes: usize,
    pub storage_bytes: usize,
    pub buffered_bytes: usize,
    pub high_water_message_bytes: usize,
    pub rejected_message_count: u64,
    pub terminal: bool,
}

/// What `poll` found in the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Poll {
    /// A complete line (without its `\n`), as a range for `Storage::bytes`.
    Line(Range<usize>),
    /// No complete line is buffered: read more into `writable()`.
    NeedInput,
    /// The input ended and every buffered byte has been handed out.
    End,
}

/// Zero-initialised heap bytes of a fixed size, starting on a page boundary. `alloc_zeroed`
/// lets the OS hand out untouched pages, so a 2 MiB limit costs resident memory only for the
/// bytes lines actually use. The start is moved up to the next 4 KiB boundary (the allocation
/// has a page of slack for it) because malloc puts a large block 16 bytes past one, and the
/// kernel's copy out of the pipe's pages into such a buffer ran at half speed: benches case
/// (b2), 64 KiB lines, 580 against 241 µs of system time per MB with the same reads (a copy
/// whose source and destination sit a few bytes apart modulo 4 KiB is a known slow case of
/// `rep movsb`; wave 1's buffer happened to land elsewhere).
struct FixedBuffer {
    /// The allocation, as `alloc_zeroed` returned it (freed with `layout`).
    base: *mut u8,
    layout: Layout,
    /// The first byte on a page boundary: `len` bytes from here are ours.
    ptr: *mut u8,
    len: usize,
}

const PAGE: usize = 4096;

// SAFETY: FixedBuffer owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for FixedBuffer {}
unsafe impl Sync for FixedBuffer {}

impl FixedBuffer {
    fn new(len: usize) -> Option<FixedBuffer> {
        let layout = Layout::array::<u8>(len.checked_add(PAGE)?).ok()?;
        // SAFETY: the layout has a nonzero size.
        let base = unsafe { alloc_zeroed(layout) };
        if base.is_null() {
            return None;
        }
        let skip = base.align_offset(PAGE);
        debug_assert!(skip < PAGE);
        Some(FixedBuffer {
            base,
            layout,
            // SAFETY: skip < PAGE, so ptr..ptr + len lies inside the allocation.
            ptr: unsafe { base.add(skip) },
            len,
        })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for FixedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.base, self.layout) }
    }
}

pub struct Storage {
    buffer: FixedBuffer,
    message_bytes: usize,
    /// First byte of the line not yet handed out.
    start: usize,
    /// One past the last byte read.
    end: usize,
    /// Bytes in `start..scanned` are known to hold no newline (avoids rescanning long lines).
    scanned: usize,
    input_ended: bool,
    terminal: bool,
    high_water: usize,
    rejected: u64,
    phase: Phase,
}

/// Reads take at most `READ_BYTES` (the 1 MiB the agent's stdout pipe is asked to hold, so one
/// read can empty it and the agent, blocked on a full pipe, is woken once per MiB instead of
/// once per read), and the unfinished line moves to the front once the handed-out lines pass
/// `COMPACT_AFTER`, so small lines keep reusing the same few hundred KiB of cache. Measured with
/// the page-aligned buffer (benches case (b2), 64 KiB lines, medians of 5 interleaved): reads of
/// at most 256 KiB 2,142 MB/s and 300 µs of system time per MB; of 1 MiB 2,544 and 266; into
/// the whole free tail 2,456 and 241.
const READ_BYTES: usize = 1 << 20;
const COMPACT_AFTER: usize = 256 * 1024;

impl Storage {
    /// Allocates exactly `message_bytes + 1` bytes, or fails before anything else happens.
    pub fn new(limits: Limits) -> Result<Storage, CapacityOverflow> {
        let overflow = CapacityOverflow {
            message_bytes: limits.message_bytes,
        };
        let size = limits.message_bytes.checked_add(1).ok_or(overflow)?;
        let buffer = FixedBuffer::new(size).ok_or(overflow)?;
        Ok(Storage {
            buffer,
            message_bytes: limits.message_bytes,
            start: 0,
            end: 0,
            scanned: 0,
            input_ended: false,
            terminal: false,
            high_water: 0,
            rejected: 0,
            phase: Phase::Admitted,
        })
    }

    /// Marks the reader attached to a running agent.
    pub fn activate(&mut self) {
        self.phase = Phase::Steady;
    }

    pub fn close(&mut self) {
        self.phase = Phase::Closed;
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Whether `finish` recorded the end of input.
    pub fn input_ended(&self) -> bool {
        self.input_ended
    }

    /// The bytes of a line handed out by the latest `poll`.
    pub fn bytes(&self, range: Range<usize>) -> &[u8] {
        &self.buffer.as_slice()[range]
    }

    /// What was read and not yet handed out (a look ahead that handles nothing).
    pub fn unhandled(&self) -> &[u8] {
        &self.buffer.as_slice()[self.start..self.end]
    }

    /// Finds the next complete line. Lines are split on `\n` only; the caller trims `\r`.
    pub fn poll(&mut self) -> Result<Poll, MessageTooLong> {
        if self.terminal {
            return Err(MessageTooLong {
                message_bytes: self.message_bytes,
            });
        }
        let data = &self.buffer.as_slice()[self.scanned..self.end];
        if let Some(offset) = memchr::memchr(b'\n', data) {
            let newline = self.scanned + offset;
            let line = self.start..newline;
            self.high_water = self.high_water.max(newline - self.start);
            self.start = newline + 1;
            self.scanned = self.start;
            return Ok(Poll::Line(line));
        }
        self.scanned = self.end;
        let pending = self.end - self.start;
        if self.input_ended {
            if pending == 0 {
                return Ok(Poll::End);
            }
            // The agent's last line had no newline: it is still a line.
            let line = self.start..self.end;
            self.high_water = self.high_water.max(pending);
            self.start = self.end;
            return Ok(Poll::Line(line));
        }
        if pending > self.message_bytes {
            self.terminal = true;
            self.rejected += 1;
            self.high_water = self.high_water.max(self.message_bytes);
            return Err(MessageTooLong {
                message_bytes: self.message_bytes,
            });
        }
        if self.start > 0 && self.end == self.buffer.len {
            self.compact();
        }
        Ok(Poll::NeedInput)
    }

    /// Moves the unfinished line to the front so the free tail is as large as it can be.
    fn compact(&mut self) {
        let pending = self.end - self.start;
        self.buffer
            .as_mut_slice()
            .copy_within(self.start..self.end, 0);
        // Lines read but not yet handed out may follow: keep what was scanned, shifted.
        self.scanned -= self.start;
        self.start = 0;
        self.end = pending;
    }

    /// The free tail to read into. Never empty while `poll` says `NeedInput`.
    pub fn writable(&mut self) -> &mut [u8] {
        if self.start == self.end && self.start > 0 {
            // Everything was handed out: start over at the front, no copy needed.
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
        } else if self.start > 0 && (self.end == self.buffer.len || self.start >= COMPACT_AFTER) {
            self.compact();
        }
        let end = self.end;
        let stop = self.buffer.len.min(end.saturating_add(READ_BYTES));
        &mut self.buffer.as_mut_slice()[end..stop]
    }

    /// Records that `count` bytes were read into `writable()`.
    pub fn commit(&mut self, count: usize) {
        debug_assert!(self.end + count <= self.buffer.len);
        self.end += count;
    }

    /// Records the end of input.
    pub fn finish(&mut self) {
        self.input_ended = true;
    }

    pub fn status(&self) -> Status {
        Status {
            phase: self.phase,
            message_bytes: self.message_bytes,
            storage_bytes: self.buffer.len,
            buffered_bytes: self.end - self.start,
            high_water_message_bytes: self.high_water,
            rejected_message_count: self.rejected,
            terminal: self.terminal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size of buffer starts on a page boundary and holds exactly `message_bytes + 1`
    /// bytes, all zero.
    #[test]
    fn buffers_start_on_a_page_boundary() {
        for message_bytes in [0, 1, 32, 4095, 4096, 65_536, 2 << 20] {
            let storage = Storage::new(Limits { message_bytes }).unwrap();
            let bytes = storage.buffer.as_slice();
            assert_eq!(bytes.as_ptr() as usize % PAGE, 0, "{message_bytes}");
            assert_eq!(bytes.len(), message_bytes + 1);
            assert_eq!(storage.status().storage_bytes, message_bytes + 1);
            assert!(bytes.iter().all(|&b| b == 0));
        }
        assert!(Storage::new(Limits {
            message_bytes: usize::MAX
        })
        .is_err());
        assert!(Storage::new(Limits {
            message_bytes: usize::MAX - PAGE
        })
        .is_err());
    }

    /// A read between two lines handed out (the driver reads on while a write waits) may move
    /// the unread lines to the front: they still come out whole, one at a time.
    #[test]
    fn moving_unread_lines_keeps_them_apart() {
        let mut storage = Storage::new(Limits {
            message_bytes: 4 << 20,
        })
        .unwrap();
        let long = vec![b'x'; COMPACT_AFTER + 10];
        let mut input = long.clone();
        input.extend_from_slice(b"\nsecond\nthird\n");
        let mut rest = &input[..];
        while !rest.is_empty() {
            let buf = storage.writable();
            let count = buf.len().min(rest.len());
            buf[..count].copy_from_slice(&rest[..count]);
            storage.commit(count);
            rest = &rest[count..];
        }
        let Ok(Poll::Line(first)) = storage.poll() else {
            panic!("the long line");
        };
        assert_eq!(storage.bytes(first), &long[..]);
        // Past COMPACT_AFTER handed out: this moves "second\nthird\n" to the front.
        assert!(!storage.writable().is_empty());
        storage.commit(0);
        let mut lines = Vec::new();
        while let Ok(Poll::Line(range)) = storage.poll() {
            lines.push(storage.bytes(range).to_vec());
        }
        assert_eq!(lines, [b"second".to_vec(), b"third".to_vec()]);
    }

    fn feed(
        storage: &mut Storage,
        mut input: &[u8],
        chunk: usize,
    ) -> Result<Vec<Vec<u8>>, MessageTooLong> {
        let mut lines = Vec::new();
        loop {
            match storage.poll()? {
                Poll::Line(range) => lines.push(storage.bytes(range).to_vec()),
                Poll::End => return Ok(lines),
                Poll::NeedInput => {
                    if input.is_empty() {
                        storage.finish();
                        continue;
                    }
                    let free = storage.writable();
                    assert!(!free.is_empty());
                    let n = chunk.min(free.len()).min(input.len());
                    free[..n].copy_from_slice(&input[..n]);
                    storage.commit(n);
                    input = &input[n..];
                }
            }
        }
    }

    #[test]
    fn allocates_exactly_limit_plus_one() {
        let storage = Storage::new(Limits { message_bytes: 32 }).unwrap();
        let status = storage.status();
        assert_eq!(status.storage_bytes, 33);
        assert_eq!(status.phase, Phase::Admitted);
    }

    #[test]
    fn refuses_an_unrepresentable_limit() {
        assert!(Storage::new(Limits {
            message_bytes: usize::MAX
        })
        .is_err());
        assert!(Storage::new(Limits {
            message_bytes: usize::MAX / 2
        })
        .is_err());
    }

    #[test]
    fn splits_lines_at_any_chunking() {
        let input = b"alpha\nbeta\r\n\ngamma without newline";
        for chunk in 1..=input.len() {
            let mut storage = Storage::new(Limits { message_bytes: 32 }).unwrap();
            let lines = feed(&mut storage, input, chunk).unwrap();
            assert_eq!(
                lines,
                vec![
                    b"alpha".to_vec(),
                    b"beta\r".to_vec(),
                    b"".to_vec(),
                    b"gamma without newline".to_vec()
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn a_line_of_exactly_the_limit_fits() {
        let mut storage = Storage::new(Limits { message_bytes: 4 }).unwrap();
        let lines = feed(&mut storage, b"abcd\nefgh\n", 3).unwrap();
        assert_eq!(lines, vec![b"abcd".to_vec(), b"efgh".to_vec()]);
        assert_eq!(storage.status().high_water_message_bytes, 4);
    }

    #[test]
    fn an_overlong_line_is_terminal_and_reported() {
        let mut storage = Storage::new(Limits { message_bytes: 32 }).unwrap();
        storage.activate();
        let input = [b'x'; 100];
        let err = feed(&mut storage, &input, 1000).unwrap_err();
        assert_eq!(err.message_bytes, 32);
        assert_eq!(
            storage.status(),
            Status {
                phase: Phase::Steady,
                message_bytes: 32,
                storage_bytes: 33,
                buffered_bytes: 33,
                high_water_message_bytes: 32,
                rejected_message_count: 1,
                terminal: true,
            }
        );
        // Terminal stays terminal.
        assert!(storage.poll().is_err());
    }

    #[test]
    fn lines_before_an_overlong_one_are_delivered() {
        let mut storage = Storage::new(Limits { message_bytes: 8 }).unwrap();
        let mut got = Vec::new();
        let input = b"ok\nstill ok\n0123456789abcdef\n";
        let mut rest: &[u8] = input;
        let err = loop {
            match storage.poll() {
                Ok(Poll::Line(r)) => got.push(storage.bytes(r).to_vec()),
                Ok(Poll::NeedInput) => {
                    let free = storage.writable();
                    let n = free.len().min(rest.len());
                    free[..n].copy_from_slice(&rest[..n]);
                    storage.commit(n);
                    rest = &rest[n..];
                }
                Ok(Poll::End) => panic!("unexpected end"),
                Err(e) => break e,
            }
        };
        assert_eq!(got, vec![b"ok".to_vec(), b"still ok".to_vec()]);
        assert_eq!(err.message_bytes, 8);
    }

    #[test]
    fn storage_never_grows() {
        let mut storage = Storage::new(Limits { message_bytes: 16 }).unwrap();
        let mut input = Vec::new();
        for i in 0..1000 {
            input.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let lines = feed(&mut storage, &input, 7).unwrap();
        assert_eq!(lines.len(), 1000);
        assert_eq!(storage.status().storage_bytes, 17);
    }
}

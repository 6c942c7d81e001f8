//! The record format both journal kinds store: one JSON object a line,
//! `{"n":…,"k":"…","e":…,"s":…,"t":…,"i":"…",…}` (see `acp_fast.journal`). A JSONL journal
//! appends the lines to its file; a SQLite journal stores a batch of them as one row. Making a
//! line is done here, in Rust, for both kinds and for both ways an update arrives (the driver's
//! direct hook, or a Python call of the writer's `update`), in two steps: on the reader's
//! thread a record is its fields and a copy of its bytes (`Made`, `Lines::raw`); the thread
//! that stores the batch makes the lines (`Lines::make_lines`), so the reader pays for a copy
//! and a lock, not for the JSON.

use crate::batch::{now_ns, Core, Pending, Store, Waiting, MAX_PENDING_BYTES};
use crate::error::Error;

/// About what a record's head and its keys take in a line: `bytes()` counts it, so a batch
/// ends near `BATCH_BYTES` of lines.
const HEAD_BYTES: usize = 100;

/// A record's numbers, as its head gives them.
#[derive(Clone, Copy)]
struct Numbers {
    number: u64,
    time: u64,
    epoch: u64,
    sequence: u64,
}

/// A pending record as the reader made it: its numbers, and where its bytes end in
/// `Lines::raw` (its bytes start where the record before it ended).
struct Made {
    numbers: Numbers,
    /// Where the first part of its bytes ends: an update's session (a JSON string), or the
    /// kind of any other record.
    split: usize,
    end: usize,
    kind: MadeKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MadeKind {
    /// An update whose envelope is embedded verbatim (`"m"`).
    Verbatim,
    /// An update whose envelope is a JSON string (`"x"`).
    Quoted,
    /// Any other record: its bytes are its kind, then its text from `"i":` on.
    Other,
}

/// Pending records, and (once `make_lines` ran) their lines and what a SQLite row says about
/// them.
#[derive(Default)]
pub struct Lines {
    made: Vec<Made>,
    raw: Vec<u8>,
    /// The lines, made by `make_lines` on the storing thread.
    pub text: Vec<u8>,
    digits: Digits,
    /// The numbers of the first and last record (set by `make_lines`).
    pub first_record: u64,
    pub last_record: u64,
    /// (transport_epoch, update_sequence) of the first and last update, if any (set by
    /// `make_lines`).
    pub first_update: Option<(u64, u64)>,
    pub last_update: Option<(u64, u64)>,
}

impl Lines {
    pub fn clear(&mut self) {
        self.made.clear();
        self.raw.clear();
        self.text.clear();
        self.first_update = None;
        self.last_update = None;
    }

    /// The pending records' size in lines, near enough.
    pub fn bytes(&self) -> usize {
        self.raw.len() + self.made.len() * HEAD_BYTES
    }

    /// Keeps a record: its numbers, and its bytes in two parts (see `Made::split`).
    fn keep(&mut self, kind: MadeKind, numbers: Numbers, first: &[u8], rest: &[u8]) {
        if self.made.capacity() == 0 {
            // A batch ends at 512 KiB (1 MiB when the store lags): reserved once, kept.
            self.raw.reserve(MAX_PENDING_BYTES + (64 << 10));
            self.made.reserve(MAX_PENDING_BYTES / HEAD_BYTES);
        }
        self.raw.extend_from_slice(first);
        let split = self.raw.len();
        self.raw.extend_from_slice(rest);
        let end = self.raw.len();
        self.made.push(Made {
            numbers,
            split,
            end,
            kind,
        });
    }

    /// Makes the pending records' lines into `text` (on the thread that stores them), and
    /// the numbers a SQLite row names.
    pub fn make_lines(&mut self) {
        let Lines {
            made, raw, text, ..
        } = self;
        text.clear();
        text.reserve(raw.len() + made.len() * (HEAD_BYTES + 40));
        let mut start = 0;
        for record in made.iter() {
            let first = &raw[start..record.split];
            let rest = &raw[record.split..record.end];
            start = record.end;
            let kind: &[u8] = match record.kind {
                MadeKind::Other => first,
                _ => b"update",
            };
            let mut head = head(&mut self.digits, kind, record.numbers);
            match record.kind {
                MadeKind::Other => {
                    head.push(b",");
                    text.extend_from_slice(&head.bytes[..head.len]);
                    text.extend_from_slice(rest);
                    text.push(b'\n');
                }
                update => {
                    head.push(b",\"i\":");
                    text.extend_from_slice(&head.bytes[..head.len]);
                    text.extend_from_slice(first);
                    text.extend_from_slice(if update == MadeKind::Verbatim {
                        b",\"m\":"
                    } else {
                        b",\"x\":"
                    });
                    text.extend_from_slice(rest);
                    text.extend_from_slice(b"}\n");
                }
            }
        }
        let update = |record: &Made| {
            (record.kind != MadeKind::Other)
                .then_some((record.numbers.epoch, record.numbers.sequence))
        };
        self.first_update = made.iter().find_map(update);
        self.last_update = made.iter().rev().find_map(update);
        self.first_record = made.first().map_or(0, |record| record.numbers.number);
        self.last_record = made.last().map_or(0, |record| record.numbers.number);
    }
}

/// What the reader keeps from one update to the next: its session and the session's JSON
/// string (one session in practice: no re-encode).
#[derive(Default)]
pub struct Session {
    id: String,
    json: Vec<u8>,
}

/// The digits of a head's numbers, kept from one record to the next.
#[derive(Default)]
struct Digits {
    record: Decimal,
    epoch: Decimal,
    sequence: Decimal,
    time: Decimal,
}

/// A number's decimal digits, kept for the next record, which mostly needs them again or one
/// more: every line of one read has the same time, the epoch stays, record numbers and update
/// sequences go up by one. So most numbers cost a compare or a one-digit increment, not a
/// conversion.
#[derive(Default)]
struct Decimal {
    value: u64,
    /// 0 until the first number.
    len: usize,
    /// The digits in front; `u64::MAX` has 20.
    digits: [u8; 20],
}

impl Decimal {
    /// `value`'s digits, in front of a 20-byte array (the rest is stale): copied whole, a
    /// fixed-size copy the compiler inlines, then cut to `len`.
    #[inline]
    fn of(&mut self, value: u64) -> (&[u8; 20], usize) {
        if value != self.value || self.len == 0 {
            self.change(value);
        }
        (&self.digits, self.len)
    }

    #[inline(never)]
    fn change(&mut self, value: u64) {
        if self.len != 0 && self.value.checked_add(1) == Some(value) {
            self.increment();
        } else {
            let mut buffer = itoa::Buffer::new();
            let text = buffer.format(value).as_bytes();
            self.digits[..text.len()].copy_from_slice(text);
            self.len = text.len();
        }
        self.value = value;
    }

    fn increment(&mut self) {
        for digit in self.digits[..self.len].iter_mut().rev() {
            if *digit == b'9' {
                *digit = b'0';
            } else {
                *digit += 1;
                return;
            }
        }
        // All nines (now all zeros): one digit more. No overflow: the caller checked the add.
        self.digits[0] = b'1';
        self.digits[self.len] = b'0';
        self.len += 1;
    }
}

/// A record's head, up to its time, made on the stack with fixed-size copies and appended at
/// once: one capacity check and one copy instead of a dozen small ones.
struct Head {
    bytes: [u8; Head::CAPACITY],
    len: usize,
}

impl Head {
    /// The fixed parts (32 bytes with `,"i":`), 4 numbers of up to 20 digits and a kind of up
    /// to `MAX_KIND` bytes.
    const CAPACITY: usize = 32 + 4 * 20 + MAX_KIND;

    fn new() -> Head {
        Head {
            bytes: [0; Head::CAPACITY],
            len: 0,
        }
    }

    fn push<const N: usize>(&mut self, part: &[u8; N]) {
        self.bytes[self.len..self.len + N].copy_from_slice(part);
        self.len += N;
    }

    fn push_digits(&mut self, (digits, len): (&[u8; 20], usize)) {
        self.bytes[self.len..self.len + 20].copy_from_slice(digits);
        self.len += len;
    }
}

/// Appends `text` as a JSON string the way Python's `json.dumps` writes it (ASCII only).
pub fn push_json_string(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for unit in text.encode_utf16() {
        match unit {
            0x22 => out.extend_from_slice(b"\\\""),
            0x5c => out.extend_from_slice(b"\\\\"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0d => out.extend_from_slice(b"\\r"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x20..=0x7e => out.push(unit as u8),
            _ => {
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[usize::from((unit >> shift) & 0xf)]);
                }
            }
        }
    }
    out.push(b'"');
}

/// `{…}` on one line: what a record can embed as its `"m"` without a line break in the file.
pub fn looks_like_an_object(text: &[u8]) -> bool {
    text.first() == Some(&b'{')
        && text.last() == Some(&b'}')
        && memchr::memchr(b'\n', text).is_none()
}

/// The longest kind a record can have ("permission" and the like are far shorter).
pub const MAX_KIND: usize = 32;

/// `{"n":…,"k":"…","e":…,"s":…,"t":…` — a record up to its time.
#[inline]
fn head(digits: &mut Digits, kind: &[u8], numbers: Numbers) -> Head {
    let mut head = Head::new();
    head.push(b"{\"n\":");
    head.push_digits(digits.record.of(numbers.number));
    head.push(b",\"k\":\"");
    if kind == b"update" {
        head.push(b"update");
    } else {
        let kind = &kind[..kind.len().min(MAX_KIND)];
        head.bytes[head.len..head.len + kind.len()].copy_from_slice(kind);
        head.len += kind.len();
    }
    head.push(b"\",\"e\":");
    head.push_digits(digits.epoch.of(numbers.epoch));
    head.push(b",\"s\":");
    head.push_digits(digits.sequence.of(numbers.sequence));
    head.push(b",\"t\":");
    head.push_digits(digits.time.of(numbers.time));
    head
}

/// An update's envelope as a record holds it.
pub enum Envelope<'a> {
    /// One line holding a JSON object (every envelope the core parsed): embedded as `"m"`.
    Verbatim(&'a [u8]),
    /// Anything else (a made-up `Update`), already encoded as a JSON string: `"x"`.
    Quoted(&'a [u8]),
}

/// What an update record needs.
pub struct UpdateRecord<'a> {
    pub epoch: u64,
    pub sequence: u64,
    pub session: &'a str,
    pub envelope: Envelope<'a>,
}

/// Makes an update's record, made at `time` (ns since the epoch), into the pending batch (and
/// stores it at once under fsync "every").
pub fn record_update<S: Store<Batch = Lines, Hot = Session>>(
    core: &Core<S>,
    waiting: &impl Waiting,
    update: UpdateRecord<'_>,
    time: u64,
) -> Result<(), Error> {
    let UpdateRecord {
        epoch,
        sequence,
        session,
        envelope,
    } = update;
    core.append(waiting, true, time, |pending: &mut Pending<S>, number| {
        pending.last_epoch = epoch;
        let Pending { batch, hot, .. } = pending;
        if hot.id != session {
            hot.id.clear();
            hot.id.push_str(session);
            hot.json.clear();
            push_json_string(&mut hot.json, session);
        }
        let (kind, bytes) = match envelope {
            Envelope::Verbatim(line) => (MadeKind::Verbatim, line),
            Envelope::Quoted(string) => (MadeKind::Quoted, string),
        };
        let numbers = Numbers {
            number,
            time,
            epoch,
            sequence,
        };
        batch.keep(kind, numbers, &hot.json, bytes);
    })
}

/// Makes a record that is not an update and stores it (and what is pending) at once. `rest`:
/// its text after the time (``"i":…`` up to the closing brace); `epoch` None: the latest
/// update's.
pub fn record_other<S: Store<Batch = Lines, Hot = Session>>(
    core: &Core<S>,
    waiting: &impl Waiting,
    kind: &str,
    epoch: Option<u64>,
    rest: &[u8],
) -> Result<(), Error> {
    if kind.len() > MAX_KIND {
        let kind = kind.to_owned();
        return Err(Error::Kind {
            kind,
            max: MAX_KIND,
        });
    }
    let time = now_ns();
    core.append(waiting, false, time, |pending, number| {
        let epoch = epoch.unwrap_or(pending.last_epoch);
        let numbers = Numbers {
            number,
            time,
            epoch,
            sequence: 0,
        };
        pending
            .batch
            .keep(MadeKind::Other, numbers, kind.as_bytes(), rest);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(decimal: &mut Decimal, value: u64) -> String {
        let (digits, len) = decimal.of(value);
        String::from_utf8(digits[..len].to_vec()).unwrap()
    }

    #[test]
    fn kept_digits_match_a_fresh_conversion() {
        let mut decimal = Decimal::default();
        let mut values: Vec<u64> = (0..2_100).collect();
        values.extend([5, 5, 999, 1_000, 1_000, 99_999, 100_000, 7, 8, 9, 10, 11]);
        values.extend([u64::MAX - 2, u64::MAX - 1, u64::MAX, u64::MAX, 0, 1, 0]);
        values.extend([9_999_999_999_999_999_999, 10_000_000_000_000_000_000]);
        for value in values {
            assert_eq!(text(&mut decimal, value), value.to_string());
        }
    }

    fn made(lines: &mut Lines, kind: MadeKind, first: &[u8], rest: &[u8], numbers: [u64; 4]) {
        let [number, time, epoch, sequence] = numbers;
        let numbers = Numbers {
            number,
            time,
            epoch,
            sequence,
        };
        lines.keep(kind, numbers, first, rest);
    }

    #[test]
    fn the_storing_thread_makes_the_lines_the_reader_recorded() {
        let mut lines = Lines::default();
        made(
            &mut lines,
            MadeKind::Other,
            b"sent",
            br#""i":"","m":{"id":0}}"#,
            [7, 5, 1, 0],
        );
        made(
            &mut lines,
            MadeKind::Verbatim,
            br#""s-1""#,
            br#"{"a":1}"#,
            [8, 5, 2, 9],
        );
        made(
            &mut lines,
            MadeKind::Quoted,
            br#""s-1""#,
            br#""not an object""#,
            [9, 6, 2, 10],
        );
        assert_eq!(lines.bytes(), lines.raw.len() + 3 * HEAD_BYTES);
        lines.make_lines();
        let expected = concat!(
            r#"{"n":7,"k":"sent","e":1,"s":0,"t":5,"i":"","m":{"id":0}}"#,
            "\n",
            r#"{"n":8,"k":"update","e":2,"s":9,"t":5,"i":"s-1","m":{"a":1}}"#,
            "\n",
            r#"{"n":9,"k":"update","e":2,"s":10,"t":6,"i":"s-1","x":"not an object"}"#,
            "\n",
        );
        assert_eq!(std::str::from_utf8(&lines.text).unwrap(), expected);
        assert_eq!((lines.first_record, lines.last_record), (7, 9));
        assert_eq!(
            (lines.first_update, lines.last_update),
            (Some((2, 9)), Some((2, 10)))
        );
        lines.clear();
        assert_eq!(lines.bytes(), 0);
        made(
            &mut lines,
            MadeKind::Other,
            b"received",
            br#""i":""}"#,
            [10, 7, 2, 0],
        );
        lines.make_lines(); // the kept digits of the batch before do not leak into this one
        let expected = concat!(r#"{"n":10,"k":"received","e":2,"s":0,"t":7,"i":""}"#, "\n");
        assert_eq!(std::str::from_utf8(&lines.text).unwrap(), expected);
        assert_eq!((lines.first_update, lines.last_update), (None, None));
    }

    #[test]
    fn a_head_is_the_record_format() {
        let mut digits = Digits::default();
        for (number, kind, sequence) in [(9, "update", 99), (10, "update", 100), (11, "sent", 0)] {
            let numbers = Numbers {
                number,
                time: 1_796_061_557_809_780_162,
                epoch: 3,
                sequence,
            };
            let head = head(&mut digits, kind.as_bytes(), numbers);
            let expected = format!(
                r#"{{"n":{number},"k":"{kind}","e":3,"s":{sequence},"t":1796061557809780162"#
            );
            assert_eq!(
                std::str::from_utf8(&head.bytes[..head.len]).unwrap(),
                expected
            );
        }
        let long = "k".repeat(MAX_KIND);
        let numbers = Numbers {
            number: u64::MAX,
            time: u64::MAX,
            epoch: u64::MAX,
            sequence: u64::MAX,
        };
        let mut head = head(&mut digits, long.as_bytes(), numbers);
        head.push(b",\"i\":"); // the longest head still has room for its end
        assert_eq!(head.len, Head::CAPACITY);
    }
}

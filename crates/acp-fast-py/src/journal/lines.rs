//! The record format both journal kinds store: one JSON object a line,
//! `{"n":…,"k":"…","e":…,"s":…,"t":…,"i":"…",…}` (see `acp_fast.journal`). A JSONL journal
//! appends the lines to its file; a SQLite journal stores a batch of them as one row. Making a
//! line is the whole per-update cost on the reader's thread, so it is done here, in Rust, for
//! both kinds and for both ways an update arrives (the driver's direct hook, or a Python call
//! of the writer's `update`).

use pyo3::prelude::*;

use super::batch::{Core, Pending, Store, MAX_PENDING_BYTES};

/// Pending records: their lines, and what a SQLite row says about them.
#[derive(Default)]
pub(crate) struct Lines {
    pub text: Vec<u8>,
    /// The numbers of the first and last record in `text` (meaningless while it is empty).
    pub first_record: u64,
    pub last_record: u64,
    /// (transport_epoch, update_sequence) of the first and last update in `text`, if any.
    pub first_update: Option<(u64, u64)>,
    pub last_update: Option<(u64, u64)>,
}

impl Lines {
    pub fn clear(&mut self) {
        self.text.clear();
        self.first_update = None;
        self.last_update = None;
    }

    fn begin(&mut self, number: u64) {
        if self.text.is_empty() {
            self.first_record = number;
            self.first_update = None;
            // A batch ends at 512 KiB (1 MiB when the store lags): reserved once, kept.
            if self.text.capacity() == 0 {
                self.text.reserve(MAX_PENDING_BYTES + (64 << 10));
            }
        }
        self.last_record = number;
    }
}

/// The latest update's session and its JSON string (one session in practice: no re-encode).
#[derive(Default)]
pub(crate) struct Session {
    id: String,
    json: Vec<u8>,
}

/// Appends `text` as a JSON string the way Python's `json.dumps` writes it (ASCII only).
pub(crate) fn push_json_string(out: &mut Vec<u8>, text: &str) {
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
pub(crate) fn looks_like_an_object(text: &[u8]) -> bool {
    text.first() == Some(&b'{')
        && text.last() == Some(&b'}')
        && memchr::memchr(b'\n', text).is_none()
}

fn push_number(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// `{"n":…,"k":"…","e":…,"s":…,"t":…` — a record up to its time.
fn push_head(out: &mut Vec<u8>, number: u64, kind: &str, epoch: u64, sequence: u64, time: u64) {
    out.extend_from_slice(b"{\"n\":");
    push_number(out, number);
    out.extend_from_slice(b",\"k\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"e\":");
    push_number(out, epoch);
    out.extend_from_slice(b",\"s\":");
    push_number(out, sequence);
    out.extend_from_slice(b",\"t\":");
    push_number(out, time);
}

/// An update's envelope as a record holds it.
pub(crate) enum Envelope<'a> {
    /// One line holding a JSON object (every envelope the core parsed): embedded as `"m"`.
    Verbatim(&'a [u8]),
    /// Anything else (a made-up `Update`), already encoded as a JSON string: `"x"`.
    Quoted(&'a [u8]),
}

/// What an update record needs.
pub(crate) struct UpdateRecord<'a> {
    pub epoch: u64,
    pub sequence: u64,
    pub session: &'a str,
    pub envelope: Envelope<'a>,
}

/// Makes an update's record into the pending batch (and stores it at once under fsync
/// "every").
pub(crate) fn record_update<S: Store<Batch = Lines, Hot = Session>>(
    core: &Core<S>,
    py: Python<'_>,
    update: UpdateRecord<'_>,
) -> PyResult<()> {
    let UpdateRecord {
        epoch,
        sequence,
        session,
        envelope,
    } = update;
    core.append(py, true, |pending: &mut Pending<S>, number, time| {
        pending.last_epoch = epoch;
        let Pending { batch, hot, .. } = pending;
        if hot.id != session {
            hot.id.clear();
            hot.id.push_str(session);
            hot.json.clear();
            push_json_string(&mut hot.json, session);
        }
        batch.begin(number);
        if batch.first_update.is_none() {
            batch.first_update = Some((epoch, sequence));
        }
        batch.last_update = Some((epoch, sequence));
        let text = &mut batch.text;
        push_head(text, number, "update", epoch, sequence, time);
        text.extend_from_slice(b",\"i\":");
        text.extend_from_slice(&hot.json);
        match envelope {
            Envelope::Verbatim(line) => {
                text.extend_from_slice(b",\"m\":");
                text.extend_from_slice(line);
            }
            Envelope::Quoted(string) => {
                text.extend_from_slice(b",\"x\":");
                text.extend_from_slice(string);
            }
        }
        text.extend_from_slice(b"}\n");
        Ok(())
    })
}

/// Makes a record that is not an update and stores it (and what is pending) at once. `rest`:
/// its text after the time (``"i":…`` up to the closing brace); `epoch` None: the latest
/// update's.
pub(crate) fn record_other<S: Store<Batch = Lines, Hot = Session>>(
    core: &Core<S>,
    py: Python<'_>,
    kind: &str,
    epoch: Option<u64>,
    rest: &[u8],
) -> PyResult<()> {
    core.append(py, false, |pending, number, time| {
        let epoch = epoch.unwrap_or(pending.last_epoch);
        let batch = &mut pending.batch;
        batch.begin(number);
        push_head(&mut batch.text, number, kind, epoch, 0, time);
        batch.text.push(b',');
        batch.text.extend_from_slice(rest);
        batch.text.push(b'\n');
        Ok(())
    })
}

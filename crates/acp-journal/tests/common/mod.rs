//! What the journal's tests share: a scratch directory, a store in memory, and a check that a
//! journal's text is whole records numbered from one, in order, with no gap.

#![allow(dead_code)] // each test file uses its own part

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_journal::{Envelope, Lines, Session, Store, UpdateRecord};

/// A fresh directory of this test's own (removed when dropped).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "acp-journal-{name}-{}-{unique}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a `Memory` store was given, as its caller sees it.
#[derive(Default)]
pub struct Stored {
    pub text: Vec<u8>,
    /// (first_record, last_record) of each batch, in the order stored.
    pub batches: Vec<(u64, u64)>,
    /// The largest pending size (`Lines::bytes`) a batch had when it reached the store.
    pub largest: usize,
    pub closed: bool,
    /// Set by a test: every store from now on fails (whichever thread stores next).
    pub failing: bool,
}

/// A store in memory that can lag (`delay` a batch) or fail (from the `fail_at`-th batch on).
pub struct Memory {
    pub stored: Arc<Mutex<Stored>>,
    pub delay: Duration,
    pub fail_at: Option<usize>,
    /// For fsync "batch": the file whose sync covers the batches (None: it cannot be found).
    pub sync_file: Option<PathBuf>,
}

impl Memory {
    pub fn new() -> (Memory, Arc<Mutex<Stored>>) {
        let stored = Arc::new(Mutex::new(Stored::default()));
        let memory = Memory {
            stored: Arc::clone(&stored),
            delay: Duration::ZERO,
            fail_at: None,
            sync_file: None,
        };
        (memory, stored)
    }
}

impl Store for Memory {
    type Batch = Lines;
    type Hot = Session;

    fn bytes(batch: &Lines) -> usize {
        batch.bytes()
    }

    fn store(&mut self, batch: &mut Lines) -> Result<(), String> {
        let bytes = batch.bytes();
        batch.make_lines();
        std::thread::sleep(self.delay);
        let mut stored = self.stored.lock().unwrap();
        if stored.failing
            || self
                .fail_at
                .is_some_and(|at| stored.batches.len() + 1 >= at)
        {
            batch.clear();
            return Err("disk full (test)".to_owned());
        }
        stored.largest = stored.largest.max(bytes);
        stored.text.extend_from_slice(&batch.text);
        stored.batches.push((batch.first_record, batch.last_record));
        batch.clear();
        Ok(())
    }

    fn discard(batch: &mut Lines) {
        batch.clear();
    }

    fn sync_file(&self) -> Result<File, String> {
        match &self.sync_file {
            Some(path) => File::open(path).map_err(|error| error.to_string()),
            None => Err("no file to sync (test)".to_owned()),
        }
    }

    fn close(&mut self) {
        self.stored.lock().unwrap().closed = true;
    }
}

/// An update of session `session`, its envelope a small JSON object.
pub fn update<'a>(session: &'a str, sequence: u64, envelope: &'a [u8]) -> UpdateRecord<'a> {
    UpdateRecord {
        epoch: 1,
        sequence,
        session,
        envelope: Envelope::Verbatim(envelope),
    }
}

/// The number of a record's line (`{"n":…,`), or None when the line is not a record's head.
pub fn number(line: &[u8]) -> Option<u64> {
    let digits = line.strip_prefix(b"{\"n\":")?;
    let end = digits.iter().position(|byte| !byte.is_ascii_digit())?;
    if end == 0 || digits[end] != b',' || line.last() != Some(&b'}') {
        return None;
    }
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// Checks `text` is whole records numbered `first`, `first + 1`, … in order, each line ended;
/// returns how many.
pub fn whole_records(text: &[u8], first: u64) -> u64 {
    assert!(
        text.is_empty() || text.ends_with(b"\n"),
        "the text ends in a torn record"
    );
    let mut expected = first;
    for line in text.split(|&byte| byte == b'\n').filter(|l| !l.is_empty()) {
        let found = number(line).unwrap_or_else(|| {
            panic!("not a record: {:?}", String::from_utf8_lossy(line));
        });
        assert_eq!(found, expected, "records out of order or with a gap");
        expected += 1;
    }
    expected - first
}

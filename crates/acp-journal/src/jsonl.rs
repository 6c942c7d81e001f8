//! The JSONL journal's store: records formatted as the Python side reads them, appended to a
//! file open for appending (the binding's duplicate of the descriptor the Python side opened:
//! header, torn tail, last record). fsync "every" syncs in the store; "batch" on the sync
//! thread (`sync`); "never" not at all.

use std::fs::File;
use std::io::Write;

use crate::batch::Store;
use crate::lines::{Lines, Session};
use crate::sync::Fsync;

/// Lines appended to a file; a failed write is cut back, so the file holds whole records.
pub struct JsonlStore {
    /// None once closed: close() closes the descriptor (not the writer's collection).
    file: Option<File>,
    /// Bytes of whole records in the file: a failed write is cut back to this.
    size: u64,
    sync: bool,
}

impl JsonlStore {
    /// A store appending to `file` (open for appending), `size` bytes long, all whole records.
    pub fn new(file: File, size: u64, fsync: Fsync) -> JsonlStore {
        JsonlStore {
            file: Some(file),
            size,
            // Only fsync "every" syncs in the store; "batch" syncs on a thread of its own.
            sync: fsync == Fsync::Every,
        }
    }
}

impl Store for JsonlStore {
    type Batch = Lines;
    type Hot = Session;

    fn bytes(batch: &Lines) -> usize {
        batch.bytes()
    }

    fn store(&mut self, batch: &mut Lines) -> Result<(), String> {
        batch.make_lines();
        let sync = self.sync;
        let Some(file) = self.file.as_mut() else {
            return Err("the journal is closed".to_owned());
        };
        let result =
            file.write_all(&batch.text)
                .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        match result {
            Ok(()) => {
                self.size += batch.text.len() as u64;
                batch.clear();
                Ok(())
            }
            Err(error) => {
                // No torn record and no gap: cut the partial write off.
                let _ = file.set_len(self.size);
                Err(strerror(&error))
            }
        }
    }

    fn discard(batch: &mut Lines) {
        batch.clear();
    }

    fn sync_file(&self) -> Result<File, String> {
        match &self.file {
            Some(file) => file.try_clone().map_err(|error| strerror(&error)),
            None => Err("the journal is closed".to_owned()),
        }
    }

    fn close(&mut self) {
        self.file = None;
    }
}

fn strerror(error: &std::io::Error) -> String {
    // "No space left on device", as Python's strerror says it (without Rust's "(os error N)").
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

//! The SQLite journal's store: a batch of records (the JSONL journal's lines, LZ4-packed) as
//! one row of `batches`, one transaction a batch, through a connection of the writer's own on
//! the SQLite `sqlite3` calls (`sqlite_api`), so neither the reader nor the GIL waits for
//! SQLite and an update costs its line, not an INSERT. The Python side created the database (schema, WAL,
//! format row) and read its last record. fsync "every": `synchronous=FULL` syncs each commit;
//! "batch": NORMAL, and the sync thread syncs the WAL; "never": OFF.

use std::ffi::{c_int, CStr};

use crate::batch::Store;
use crate::lines::{Lines, Session};
use crate::pack::pack_into;
use crate::sqlite_api::{Api, Db, Stmt, SQLITE_DONE};
use crate::sync::Fsync;

/// Python's `sqlite3` waits this long for a lock by default; so does the writer.
const BUSY_TIMEOUT_MS: c_int = 5000;
const INSERT: &CStr = c"INSERT INTO batches (first_record, last_record, first_epoch, \
first_sequence, last_epoch, last_sequence, records) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// A batch of lines a row of `batches`, one transaction a batch.
pub struct SqliteStore {
    api: Api,
    db: *mut Db,
    insert: *mut Stmt,
    /// Format version 3: each batch stored LZ4-packed (`pack`), in `packed`'s reused memory;
    /// version 2 journals are appended to as they are, the lines plain.
    pack: bool,
    packed: Vec<u8>,
    /// The database's path: fsync "batch" syncs its WAL (`<path>-wal`).
    path: String,
}

// SAFETY: the connection is used by one thread at a time (the batch core's store lock), and the
// library is built thread-safe (checked by `Api::bind`).
unsafe impl Send for SqliteStore {}

fn signed(value: u64) -> i64 {
    // SQLite integers are signed 64-bit; numbers, epochs and sequences stay far below.
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl SqliteStore {
    /// Opens the journal database at `path` (created and checked by the caller: schema, WAL,
    /// format) for writing through `api`; `pack`: store each batch LZ4-packed (format 3).
    pub fn open(api: Api, path: &str, fsync: Fsync, pack: bool) -> Result<SqliteStore, String> {
        let db = api.open(path, BUSY_TIMEOUT_MS)?;
        let mut store = SqliteStore {
            api,
            db,
            insert: std::ptr::null_mut(),
            pack,
            packed: Vec::new(),
            // As SQLite names its WAL: from the resolved path, whatever the directory later.
            path: std::fs::canonicalize(path).map_or_else(
                |_| path.to_owned(),
                |real| real.to_string_lossy().into_owned(),
            ),
        };
        // WAL with NORMAL: a commit is written to the WAL, not synced (a killed host loses
        // none of it); SQLite syncs the WAL before each checkpoint and the database after it.
        // fsync "batch" syncs the WAL itself, on the sync thread (`sync`): what FULL gives,
        // one sync for all the commits made while the last one ran.
        let synchronous = match fsync {
            Fsync::Every => c"PRAGMA synchronous=FULL",
            Fsync::Batch => c"PRAGMA synchronous=NORMAL",
            Fsync::Never => c"PRAGMA synchronous=OFF",
        };
        store.api.exec(db, synchronous)?;
        store.insert = store.api.prepare(db, INSERT)?;
        Ok(store)
    }

    fn status(&self, status: c_int) -> Result<(), String> {
        if status == 0 {
            Ok(())
        } else {
            Err(self.api.error(self.db))
        }
    }

    fn int(&self, index: c_int, value: Option<u64>) -> Result<(), String> {
        // SAFETY: the statement is live.
        self.status(unsafe {
            match value {
                Some(value) => (self.api.bind_int64)(self.insert, index, signed(value)),
                None => (self.api.bind_null)(self.insert, index),
            }
        })
    }

    /// Inserts the batch as one row (an implicit transaction: the row is whole or absent).
    fn insert(&mut self, batch: &Lines) -> Result<(), String> {
        if self.db.is_null() {
            return Err("the connection is closed".to_owned());
        }
        let first = batch.first_update;
        let last = batch.last_update;
        self.int(1, Some(batch.first_record))?;
        self.int(2, Some(batch.last_record))?;
        self.int(3, first.map(|(epoch, _)| epoch))?;
        self.int(4, first.map(|(_, sequence)| sequence))?;
        self.int(5, last.map(|(epoch, _)| epoch))?;
        self.int(6, last.map(|(_, sequence)| sequence))?;
        let text = if self.pack {
            let length = pack_into(&batch.text, &mut self.packed)?;
            &self.packed[..length]
        } else {
            &batch.text
        };
        let length = c_int::try_from(text.len()).map_err(|_| "a batch over 2 GiB".to_owned())?;
        // SAFETY: `text` outlives the step that reads it (SQLITE_STATIC); the statement is live.
        self.status(unsafe {
            (self.api.bind_blob)(
                self.insert,
                7,
                text.as_ptr().cast(),
                length,
                std::ptr::null(),
            )
        })?;
        // SAFETY: the statement is live and bound.
        let status = unsafe { (self.api.step)(self.insert) };
        let outcome = if status == SQLITE_DONE {
            Ok(())
        } else {
            Err(self.api.error(self.db))
        };
        // SAFETY: the statement is live; reset keeps its error for the outcome above.
        unsafe { (self.api.reset)(self.insert) };
        outcome
    }
}

impl SqliteStore {
    /// Closes the connection (the last one checkpoints the WAL into the database). Idempotent.
    fn shut(&mut self) {
        // SAFETY: the statement and the connection are this store's, nulled once closed;
        // finalize(null) and close_v2(null) are no-ops.
        unsafe {
            (self.api.finalize)(self.insert);
            (self.api.close_v2)(self.db);
        }
        self.insert = std::ptr::null_mut();
        self.db = std::ptr::null_mut();
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.shut();
    }
}

impl Store for SqliteStore {
    type Batch = Lines;
    type Hot = Session;

    fn bytes(batch: &Lines) -> usize {
        batch.bytes()
    }

    fn store(&mut self, batch: &mut Lines) -> Result<(), String> {
        batch.make_lines();
        let result = self.insert(batch);
        batch.clear();
        result.map_err(|error| format!("cannot write the journal: {error}"))
    }

    fn discard(batch: &mut Lines) {
        batch.clear();
    }

    fn sync_file(&self) -> Result<std::fs::File, String> {
        // The WAL exists while this connection is open: it has just committed into it.
        let wal = format!("{}-wal", self.path);
        std::fs::File::open(&wal).map_err(|error| format!("cannot open {wal} to sync it: {error}"))
    }

    fn close(&mut self) {
        self.shut();
    }
}

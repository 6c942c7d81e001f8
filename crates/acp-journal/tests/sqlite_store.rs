//! The SQLite store on the system's SQLite library, loaded by the test (`Api::load`): there is
//! no Python here, so no `_sqlite3` whose SQLite the binding borrows, and no second SQLite to
//! clash with. The binding's path (`Api::bind` on the loaded `_sqlite3`) is tested through
//! Python (tests/journal). The rows are read back with the same library.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use acp_journal::SqliteStore;
use acp_journal::{record_other, record_update, unpack, Api, Core, Error, Fsync, Plain};
use common::{update, whole_records, Scratch};

#[cfg(target_os = "macos")]
const LIBRARY: &str = "libsqlite3.dylib";
#[cfg(not(target_os = "macos"))]
const LIBRARY: &str = "libsqlite3.so.0";

const SCHEMA: &CStr = c"PRAGMA page_size=16384; PRAGMA journal_mode=WAL;
CREATE TABLE journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE batches (first_record INTEGER PRIMARY KEY, last_record INTEGER NOT NULL,
    first_epoch INTEGER, first_sequence INTEGER, last_epoch INTEGER, last_sequence INTEGER,
    records BLOB NOT NULL);";

fn api() -> Api {
    Api::load(LIBRARY).unwrap_or_else(|error| {
        panic!("these tests need the system's SQLite library ({LIBRARY}): {error}")
    })
}

/// The few SQLite calls the test reads rows with (`Api` keeps its own private).
struct Reader {
    db: *mut c_void,
    prepare: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        c_int,
        *mut *mut c_void,
        *mut *const c_char,
    ) -> c_int,
    step: unsafe extern "C" fn(*mut c_void) -> c_int,
    column_type: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    column_int64: unsafe extern "C" fn(*mut c_void, c_int) -> i64,
    column_blob: unsafe extern "C" fn(*mut c_void, c_int) -> *const u8,
    column_bytes: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
    exec: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        *const c_void,
        *mut c_void,
        *mut *mut c_char,
    ) -> c_int,
    close: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// A batch row: (first_record, last_record, first update, last update, records).
type Row = (i64, i64, Option<(i64, i64)>, Option<(i64, i64)>, Vec<u8>);

impl Reader {
    fn open(path: &Path) -> Reader {
        api(); // loaded once, for good
        let name = CString::new(LIBRARY).unwrap();
        // SAFETY: the library is loaded (NOLOAD finds it); each type is its C signature.
        unsafe {
            let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            assert!(!handle.is_null());
            fn get<T: Copy>(handle: *mut c_void, name: &CStr) -> T {
                // SAFETY: as the caller says.
                unsafe {
                    let found = libc::dlsym(handle, name.as_ptr());
                    assert!(!found.is_null(), "{name:?}");
                    std::mem::transmute_copy(&found)
                }
            }
            let open: unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int =
                get(handle, c"sqlite3_open");
            let path = CString::new(path.to_str().unwrap()).unwrap();
            let mut db = std::ptr::null_mut();
            assert_eq!(open(path.as_ptr(), &mut db), 0);
            Reader {
                db,
                prepare: get(handle, c"sqlite3_prepare_v2"),
                step: get(handle, c"sqlite3_step"),
                column_type: get(handle, c"sqlite3_column_type"),
                column_int64: get(handle, c"sqlite3_column_int64"),
                column_blob: get(handle, c"sqlite3_column_blob"),
                column_bytes: get(handle, c"sqlite3_column_bytes"),
                finalize: get(handle, c"sqlite3_finalize"),
                exec: get(handle, c"sqlite3_exec"),
                close: get(handle, c"sqlite3_close"),
            }
        }
    }

    fn exec(&self, sql: &CStr) {
        // SAFETY: an open connection, a NUL-terminated statement, no callback.
        let status = unsafe {
            (self.exec)(
                self.db,
                sql.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, 0, "{sql:?}");
    }

    fn rows(&self) -> Vec<Row> {
        let sql = c"SELECT first_record, last_record, first_epoch, first_sequence, last_epoch, \
            last_sequence, records FROM batches ORDER BY first_record";
        let mut rows = Vec::new();
        // SAFETY: an open connection; the statement is finalized below; blobs copied at once.
        unsafe {
            let mut statement = std::ptr::null_mut();
            let status = (self.prepare)(
                self.db,
                sql.as_ptr(),
                -1,
                &mut statement,
                std::ptr::null_mut(),
            );
            assert_eq!(status, 0);
            while (self.step)(statement) == 100 {
                let int = |column| (self.column_int64)(statement, column);
                let pair = |column| {
                    ((self.column_type)(statement, column) != 5)
                        .then(|| (int(column), int(column + 1)))
                };
                let length = (self.column_bytes)(statement, 6) as usize;
                let blob = std::slice::from_raw_parts((self.column_blob)(statement, 6), length);
                rows.push((int(0), int(1), pair(2), pair(4), blob.to_vec()));
            }
            (self.finalize)(statement);
        }
        rows
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: the connection is this reader's.
        unsafe { (self.close)(self.db) };
    }
}

fn journal(scratch: &Scratch) -> (std::path::PathBuf, Reader) {
    let path = scratch.file("journal.sqlite");
    let reader = Reader::open(&path);
    reader.exec(SCHEMA);
    (path, reader)
}

const ENVELOPE: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update","params":{"u":"abc"}}"#;

#[test]
fn every_fsync_mode_stores_gap_free_rows_packed_or_plain() {
    for (fsync, packed) in [
        (Fsync::Never, true),
        (Fsync::Batch, true),
        (Fsync::Every, false),
        (Fsync::Batch, false),
    ] {
        let scratch = Scratch::new("sqlite-modes");
        let (path, reader) = journal(&scratch);
        let store = SqliteStore::open(api(), path.to_str().unwrap(), fsync, packed).unwrap();
        let core = Core::new(store, fsync, 0, 3).unwrap();
        record_other(&core, &Plain, "sent", None, br#""i":""}"#).unwrap();
        let updates = if fsync == Fsync::Every { 200 } else { 20_000 };
        for sequence in 0..updates {
            record_update(&core, &Plain, update("s-1", sequence, ENVELOPE), 9).unwrap();
        }
        core.close(&Plain).unwrap();
        let rows = reader.rows();
        // A row holding only the "sent" record names no update.
        assert_eq!(
            (rows[0].0, rows[0].1, rows[0].2, rows[0].3),
            (1, 1, None, None)
        );
        let mut text = Vec::new();
        let mut next = 1;
        for (first, last, first_update, last_update, records) in &rows {
            assert_eq!(*first, next);
            next = last + 1;
            let lines = if packed {
                unpack(records).unwrap()
            } else {
                records.clone()
            };
            let count = whole_records(&lines, *first as u64);
            assert_eq!(count as i64, last - first + 1);
            if let (Some((3, from)), Some((3, to))) = (first_update, last_update) {
                assert_eq!(to - from, last - first, "the row's update sequences");
            }
            text.extend_from_slice(&lines);
        }
        assert_eq!(whole_records(&text, 1), updates + 1, "{fsync:?}");
    }
}

#[test]
fn a_refused_insert_leaves_no_row_and_stops_the_journal() {
    let scratch = Scratch::new("sqlite-refused");
    let (path, reader) = journal(&scratch);
    // The database refuses the second batch, as a full disk or a crafted trigger would.
    reader.exec(
        c"CREATE TRIGGER full BEFORE INSERT ON batches WHEN NEW.first_record > 1
        BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END;",
    );
    let store = SqliteStore::open(api(), path.to_str().unwrap(), Fsync::Never, true).unwrap();
    let core = Core::new(store, Fsync::Never, 0, 1).unwrap();
    for sequence in 0..10 {
        record_update(&core, &Plain, update("s", sequence, ENVELOPE), 9).unwrap();
    }
    core.flush(&Plain).unwrap();
    record_update(&core, &Plain, update("s", 10, ENVELOPE), 9).unwrap();
    let refused = core.flush(&Plain).unwrap_err();
    let said = "cannot write the journal: disk full (test)".to_owned();
    assert_eq!(refused, Error::Write(said.clone()));
    assert_eq!(core.flush(&Plain), Err(Error::Earlier(said.clone())));
    assert_eq!(core.close(&Plain), Err(Error::Lost(said)));
    let rows = reader.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(whole_records(&unpack(&rows[0].4).unwrap(), 1), 10);
}

#[test]
fn a_database_that_is_not_there_is_not_created() {
    let scratch = Scratch::new("sqlite-missing");
    let path = scratch.file("missing.sqlite");
    assert!(SqliteStore::open(api(), path.to_str().unwrap(), Fsync::Never, true).is_err());
    assert!(!path.exists());
    // And a library that is not loaded is never loaded by `bind`.
    let bound = Api::bind("libacp-journal-no-such-library.so", 3_045_000);
    assert!(bound.is_err());
}

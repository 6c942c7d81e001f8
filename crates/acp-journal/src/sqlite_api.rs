//! The SQLite library the standard library's `sqlite3` calls, bound at run time: the functions
//! the writer calls, as a struct of function pointers looked up by `dlsym`. No Python here: the
//! binding names the library (the file of the loaded `_sqlite3` module), this finds it.
//!
//! Never a second SQLite: two SQLite libraries in one process do not see each other's POSIX
//! locks, so a `sqlite3` connection to the journal closing in this process would checkpoint and
//! delete the WAL under the writer (tried with SQLite compiled in: records were lost). The
//! functions are looked up through `sqlite3`'s extension module `_sqlite3`, already loaded
//! (`dlopen(RTLD_NOLOAD)` never loads anything): `dlsym` on its handle searches it, then the
//! libraries it links, as its own calls resolve, so it finds the SQLite `sqlite3` uses whether
//! linked in or shared. Where it finds none (SQLite's functions hidden in `_sqlite3`, or
//! `_sqlite3` built into the interpreter), the journal writes through `sqlite3` instead.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

pub(crate) const SQLITE_OK: c_int = 0;
pub(crate) const SQLITE_DONE: c_int = 101;
const SQLITE_OPEN_READWRITE: c_int = 0x0000_0002;
const SQLITE_OPEN_NOMUTEX: c_int = 0x0000_8000;

/// A connection (`sqlite3 *`).
pub(crate) type Db = c_void;
/// A prepared statement (`sqlite3_stmt *`).
pub(crate) type Stmt = c_void;

/// The functions the writer uses, from the SQLite `sqlite3` calls.
pub struct Api {
    open_v2: unsafe extern "C" fn(*const c_char, *mut *mut Db, c_int, *const c_char) -> c_int,
    pub(crate) close_v2: unsafe extern "C" fn(*mut Db) -> c_int,
    exec: unsafe extern "C" fn(
        *mut Db,
        *const c_char,
        *const c_void,
        *mut c_void,
        *mut *mut c_char,
    ) -> c_int,
    prepare_v2: unsafe extern "C" fn(
        *mut Db,
        *const c_char,
        c_int,
        *mut *mut Stmt,
        *mut *const c_char,
    ) -> c_int,
    pub(crate) bind_int64: unsafe extern "C" fn(*mut Stmt, c_int, i64) -> c_int,
    /// The last argument is the destructor; null is `SQLITE_STATIC` (the bytes outlive the
    /// step that reads them).
    pub(crate) bind_blob:
        unsafe extern "C" fn(*mut Stmt, c_int, *const c_void, c_int, *const c_void) -> c_int,
    pub(crate) bind_null: unsafe extern "C" fn(*mut Stmt, c_int) -> c_int,
    pub(crate) step: unsafe extern "C" fn(*mut Stmt) -> c_int,
    pub(crate) reset: unsafe extern "C" fn(*mut Stmt) -> c_int,
    pub(crate) finalize: unsafe extern "C" fn(*mut Stmt) -> c_int,
    errmsg: unsafe extern "C" fn(*mut Db) -> *const c_char,
    busy_timeout: unsafe extern "C" fn(*mut Db, c_int) -> c_int,
}

/// Looks `name` up in `handle` as a function of type `T`.
///
/// # Safety
/// `T` must be the symbol's true function pointer type.
unsafe fn symbol<T: Copy>(handle: *mut c_void, name: &CStr) -> Result<T, String> {
    let found = libc::dlsym(handle, name.as_ptr());
    if found.is_null() {
        return Err(format!("no {}", name.to_string_lossy()));
    }
    Ok(std::mem::transmute_copy::<*mut c_void, T>(&found))
}

impl Api {
    /// Binds the SQLite that `module` (an already loaded library: the binding gives the
    /// `_sqlite3` extension's file) calls, if it is of version number `version` (what Python's
    /// `sqlite3` reports) and built thread-safe. Never loads anything.
    pub fn bind(module: &str, version: c_int) -> Result<Api, String> {
        // SAFETY: RTLD_NOLOAD only looks up an object already loaded; the handle is never
        // closed (the module stays loaded for the process's life, as `sqlite3` keeps it).
        let handle = unsafe { Api::handle(module, libc::RTLD_NOW | libc::RTLD_NOLOAD)? };
        // SAFETY: a handle dlopen returned.
        unsafe { Api::from_handle(handle, module, Some(version)) }
    }

    /// Loads the SQLite library `library` (say, `libsqlite3.so.0`) and binds it. For a process
    /// with no other SQLite (tests, tools): where Python's `sqlite3` may open the journal, bind
    /// its own library with `bind` instead (two SQLite libraries in one process do not see
    /// each other's locks). The library stays loaded.
    pub fn load(library: &str) -> Result<Api, String> {
        // SAFETY: loading a shared library runs its initialisers: SQLite's are plain.
        let handle = unsafe { Api::handle(library, libc::RTLD_NOW | libc::RTLD_LOCAL)? };
        // SAFETY: a handle dlopen returned.
        unsafe { Api::from_handle(handle, library, None) }
    }

    /// # Safety
    /// As `dlopen` with these flags.
    unsafe fn handle(library: &str, flags: c_int) -> Result<*mut c_void, String> {
        let path = CString::new(library).map_err(|_| "a NUL in the path".to_owned())?;
        let handle = libc::dlopen(path.as_ptr(), flags);
        if handle.is_null() {
            return Err(format!("{library} is not loaded"));
        }
        Ok(handle)
    }

    /// # Safety
    /// `handle` is a live `dlopen` handle (never closed while the `Api` is used).
    unsafe fn from_handle(
        handle: *mut c_void,
        module: &str,
        version: Option<c_int>,
    ) -> Result<Api, String> {
        // SAFETY: each type below is the C signature of the named SQLite function.
        unsafe {
            let number: unsafe extern "C" fn() -> c_int =
                symbol(handle, c"sqlite3_libversion_number")?;
            if let Some(version) = version.filter(|&version| number() != version) {
                return Err(format!("{module} calls SQLite {}, not {version}", number()));
            }
            let threadsafe: unsafe extern "C" fn() -> c_int =
                symbol(handle, c"sqlite3_threadsafe")?;
            if threadsafe() == 0 {
                return Err(format!("{module} calls a SQLite not built thread-safe"));
            }
            Ok(Api {
                open_v2: symbol(handle, c"sqlite3_open_v2")?,
                close_v2: symbol(handle, c"sqlite3_close_v2")?,
                exec: symbol(handle, c"sqlite3_exec")?,
                prepare_v2: symbol(handle, c"sqlite3_prepare_v2")?,
                bind_int64: symbol(handle, c"sqlite3_bind_int64")?,
                bind_blob: symbol(handle, c"sqlite3_bind_blob")?,
                bind_null: symbol(handle, c"sqlite3_bind_null")?,
                step: symbol(handle, c"sqlite3_step")?,
                reset: symbol(handle, c"sqlite3_reset")?,
                finalize: symbol(handle, c"sqlite3_finalize")?,
                errmsg: symbol(handle, c"sqlite3_errmsg")?,
                busy_timeout: symbol(handle, c"sqlite3_busy_timeout")?,
            })
        }
    }

    /// The connection's last error.
    pub(crate) fn error(&self, db: *mut Db) -> String {
        // SAFETY: `db` is an open connection; errmsg returns a NUL-terminated string it owns.
        unsafe {
            let message = (self.errmsg)(db);
            if message.is_null() {
                return "unknown error".to_owned();
            }
            CStr::from_ptr(message).to_string_lossy().into_owned()
        }
    }

    /// Opens an existing database for writing (no create: the caller made it).
    pub(crate) fn open(&self, path: &str, busy_ms: c_int) -> Result<*mut Db, String> {
        let path = CString::new(path).map_err(|_| "a NUL in the path".to_owned())?;
        let mut db = std::ptr::null_mut();
        // SAFETY: a valid path and out-pointer; on failure the handle is closed below.
        let status = unsafe {
            (self.open_v2)(
                path.as_ptr(),
                &mut db,
                SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                std::ptr::null(),
            )
        };
        if status != SQLITE_OK {
            let message = if db.is_null() {
                format!("error {status}")
            } else {
                self.error(db)
            };
            // SAFETY: closing a handle open_v2 returned (null is a no-op).
            unsafe { (self.close_v2)(db) };
            return Err(message);
        }
        // SAFETY: `db` is open.
        unsafe { (self.busy_timeout)(db, busy_ms) };
        Ok(db)
    }

    pub(crate) fn exec(&self, db: *mut Db, sql: &CStr) -> Result<(), String> {
        // SAFETY: `db` is open and `sql` NUL-terminated; no callback.
        let status = unsafe {
            (self.exec)(
                db,
                sql.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if status == SQLITE_OK {
            Ok(())
        } else {
            Err(self.error(db))
        }
    }

    pub(crate) fn prepare(&self, db: *mut Db, sql: &CStr) -> Result<*mut Stmt, String> {
        let mut statement = std::ptr::null_mut();
        // SAFETY: `db` is open, `sql` NUL-terminated (-1: read to the NUL).
        let status = unsafe {
            (self.prepare_v2)(db, sql.as_ptr(), -1, &mut statement, std::ptr::null_mut())
        };
        if status == SQLITE_OK && !statement.is_null() {
            Ok(statement)
        } else {
            Err(self.error(db))
        }
    }
}

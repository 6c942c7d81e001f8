//! `fs/read_text_file` and `fs/write_text_file` confined to a session's roots
//! (design/host.md §2).
//!
//! Each root is opened (a directory descriptor) when the session registers it and held; every
//! request is walked from those descriptors one component at a time (`walk.rs`), symlinks read
//! and checked rather than followed by the kernel, so neither a symlink inside a root pointing
//! out nor a root (or a directory on the way) swapped for a symlink reaches outside. Writes go
//! to a temporary file in the target's directory and are renamed over it, so a reader sees the
//! old file or the new one; a target the host's user could not open for writing, or that is not
//! a plain regular file, is refused, and the file's owner and mode are kept (`write.rs`).

mod walk;
mod write;

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use acp_proto::host::HostError;

pub use write::write_text_file;

/// One root: the forms a request may name it by (as given, as opened, its realpath) and its
/// directory, opened when the root was registered (None: it could not be opened then).
#[derive(Clone, Debug)]
struct Root {
    forms: Vec<PathBuf>,
    real: PathBuf,
    dir: Option<Arc<OwnedFd>>,
}

/// The directories a session's requests may reach, each held open from the moment they are
/// made, and known by every form it was given in and by its realpath.
#[derive(Clone, Debug, Default)]
pub struct Roots {
    roots: Vec<Root>,
}

/// The flags a root is held with: a reference to the directory, nothing readable through it.
#[cfg(target_os = "linux")]
const ROOT_FLAGS: libc::c_int = libc::O_PATH | libc::O_DIRECTORY;
#[cfg(not(target_os = "linux"))]
const ROOT_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY;

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: valid fd and out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), stat.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so it filled the struct.
    Ok(unsafe { stat.assume_init() })
}

/// The realpath of an open directory: the kernel's name for it (Linux), else the realpath of
/// `path` when it is still the same directory (st_dev/st_ino); None when it cannot be told.
fn real_path_of(fd: &OwnedFd, path: &Path) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    if let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        if real.is_absolute() {
            return Some(real);
        }
    }
    let real = std::fs::canonicalize(path).ok()?;
    let held = fstat(fd).ok()?;
    let named = std::fs::metadata(&real).ok()?;
    use std::os::unix::fs::MetadataExt;
    // st_dev/st_ino types differ between systems.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    let same = named.dev() == held.st_dev as u64 && named.ino() == held.st_ino as u64;
    same.then_some(real)
}

/// One held descriptor per directory in the process (by st_dev/st_ino): a thousand sessions
/// in one cwd hold one descriptor, not a thousand. A directory's inode number cannot be reused
/// while a descriptor holds it, so a live entry always names the same directory.
type Held = HashMap<(u64, u64), Weak<OwnedFd>>;

fn shared(fd: OwnedFd) -> Arc<OwnedFd> {
    static HELD: Mutex<Option<Held>> = Mutex::new(None);
    let Ok(stat) = fstat(&fd) else {
        return Arc::new(fd);
    };
    // st_dev/st_ino types differ between systems.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    let key = (stat.st_dev as u64, stat.st_ino as u64);
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let held = held.get_or_insert_with(HashMap::new);
    if let Some(same) = held.get(&key).and_then(Weak::upgrade) {
        return same; // `fd` closes here
    }
    if held.len() >= 64 && held.len().is_power_of_two() {
        held.retain(|_, weak| weak.strong_count() > 0);
    }
    let fd = Arc::new(fd);
    held.insert(key, Arc::downgrade(&fd));
    fd
}

impl Root {
    /// Opens `open` (following symlinks: the user named it) and holds it; `given` is another
    /// name for it that requests may use.
    fn new(given: &str, open: &str) -> Root {
        let given = normalize(Path::new(given));
        let open = normalize(Path::new(open));
        let dir = open_at(None, open.as_os_str(), ROOT_FLAGS, 0).ok();
        let real = dir
            .as_ref()
            .and_then(|fd| real_path_of(fd, &open))
            .unwrap_or_else(|| open.clone());
        let dir = dir.map(shared);
        let mut forms = vec![given];
        for form in [open, real.clone()] {
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
        Root { forms, real, dir }
    }
}

impl Roots {
    /// Roots named by one form each (a session's cwd and its own additional directories).
    pub fn new<S: AsRef<str>>(directories: impl IntoIterator<Item = S>) -> Roots {
        Roots::with_forms(directories.into_iter().map(|d| {
            let d = d.as_ref().to_owned();
            (d.clone(), d)
        }))
    }

    /// Roots given as (the form the user gave, the path to open): a config directory given
    /// through a symlink is opened at the realpath taken at construction and is reachable by
    /// both names (host.md: roots count in both forms).
    pub fn with_forms(directories: impl IntoIterator<Item = (String, String)>) -> Roots {
        Roots {
            roots: directories
                .into_iter()
                .map(|(given, open)| Root::new(&given, &open))
                .collect(),
        }
    }

    /// `/` opened now: `allow_any_path` (confinement lifted; symlinks are still read, not
    /// followed by the kernel, so a swapped path is refused rather than misread).
    fn any() -> Roots {
        Roots::new(["/"])
    }

    /// The realpaths, for the tests and the activity log.
    pub fn real(&self) -> impl Iterator<Item = &Path> {
        self.roots.iter().map(|root| root.real.as_path())
    }

    /// The first root as given (a session's cwd: a terminal's default directory).
    pub fn cwd(&self) -> Option<&Path> {
        self.roots.first().map(|root| root.forms[0].as_path())
    }

    /// The root `path` names exactly, in any of its forms (the first such root).
    fn named(&self, path: &Path) -> Option<usize> {
        let wanted = walk::bytes(path);
        self.roots
            .iter()
            .position(|root| root.forms.iter().any(|f| walk::bytes(f) == wanted))
    }

    fn real_of(&self, index: usize) -> &Path {
        &self.roots[index].real
    }

    fn fd(&self, index: usize) -> Option<&OwnedFd> {
        self.roots[index].dir.as_deref()
    }

    /// Whether `path` (normalised) is within a root, in any form.
    fn contains(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .any(|root| root.forms.iter().any(|form| within(path, form)))
    }
}

/// `path` normalised lexically: `.` and repeated `/` dropped, `..` taking one component off
/// (never above `/`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Separator-aware containment: `/tmp/ws-secrets/x` is not within `/tmp/ws`.
pub fn within(path: &Path, root: &Path) -> bool {
    path.starts_with(root) // `Path::starts_with` compares whole components
}

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
    fn of(error: io::Error) -> FsError {
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

/// A confined request: the path and the roots it is walked from.
#[derive(Debug)]
pub struct Target<'r> {
    roots: Cow<'r, Roots>,
    path: PathBuf,
}

impl Target<'_> {
    fn roots(&self) -> &Roots {
        &self.roots
    }
}

/// Checks `path` (absolute) against the roots: its lexical form must be within a root (either
/// form of it); the walk (`walk.rs`) then checks every symlink on the way. `allow_any` lifts
/// confinement (`/` is then the root, opened now).
pub fn confine<'r>(roots: &'r Roots, path: &str, allow_any: bool) -> Result<Target<'r>, FsError> {
    // The walk takes the path as sent: a `..` after a symlink climbs from where the symlink
    // leads, as the kernel's resolution does (host.md's R), and must stay in a root too.
    let path = PathBuf::from(path);
    if allow_any {
        return Ok(Target {
            roots: Cow::Owned(Roots::any()),
            path,
        });
    }
    if !roots.contains(&normalize(&path)) {
        return Err(FsError::Outside);
    }
    Ok(Target {
        roots: Cow::Borrowed(roots),
        path,
    })
}

/// Where the target resolves to (the walk's absolute location), for the tests.
pub fn resolved(target: &Target<'_>) -> Result<PathBuf, FsError> {
    walk::walk(target, false).map(|walked| walked.at)
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn open_at(
    dir: Option<&OwnedFd>,
    name: &OsStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a valid NUL-terminated name and directory fd; the result is owned below.
    let fd = unsafe {
        libc::openat(
            at,
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn lstat_at(dir: &OwnedFd, name: &OsStr) -> io::Result<libc::stat> {
    let name = c_name(name)?;
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: valid fd, name and out-pointer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat succeeded, so it filled the struct.
    Ok(unsafe { stat.assume_init() })
}

fn is_kind(stat: &libc::stat, kind: libc::mode_t) -> bool {
    stat.st_mode & libc::S_IFMT == kind
}

/// An `O_NOFOLLOW` open that failed on a symlink (swapped in after the walk looked): some
/// systems say ENOTDIR for a directory open, so look at what is there.
fn refused_if_symlink(dir: &OwnedFd, name: &OsStr, error: io::Error) -> FsError {
    match lstat_at(dir, name) {
        Ok(stat) if is_kind(&stat, libc::S_IFLNK) => FsError::Outside,
        _ => FsError::of(error),
    }
}

/// Opens the confined directory itself (a terminal's cwd), without following symlinks.
pub fn open_dir(target: &Target<'_>) -> Result<OwnedFd, FsError> {
    let walked = walk::walk(target, false)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    match &walked.name {
        None => open_at(Some(&walked.dir), OsStr::new("."), flags, 0).map_err(FsError::of),
        Some(name) => open_at(Some(&walked.dir), name, flags, 0)
            .map_err(|e| refused_if_symlink(&walked.dir, name, e)),
    }
}

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

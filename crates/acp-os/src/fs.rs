//! `fs/read_text_file` and `fs/write_text_file` confined to a session's roots
//! (design/host.md §2).
//!
//! Confinement is checked twice: lexically (`..` cannot climb out of a root whatever the string
//! starts with) and on the resolved path (a symlink inside a root pointing out is refused). The
//! operation then opens the resolved path component by component from the root's directory fd
//! with `O_NOFOLLOW`, so the file acted on is the one checked: a symlink swapped in after the
//! check makes the open fail (refused), never escape. Writes go to a temporary file in the
//! target's directory and are renamed over it, so a reader sees the old file or the new one.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use acp_proto::host::HostError;

/// The directories a session's requests may reach, each as given (normalised) and as its
/// realpath (taken when the roots are made).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roots {
    roots: Vec<(PathBuf, PathBuf)>,
}

impl Roots {
    pub fn new<S: AsRef<str>>(directories: impl IntoIterator<Item = S>) -> Roots {
        let roots = directories
            .into_iter()
            .map(|dir| {
                let lexical = normalize(Path::new(dir.as_ref()));
                let real = std::fs::canonicalize(&lexical).unwrap_or_else(|_| lexical.clone());
                (lexical, real)
            })
            .collect();
        Roots { roots }
    }

    /// The realpaths, for the tests and the activity log.
    pub fn real(&self) -> impl Iterator<Item = &Path> {
        self.roots.iter().map(|(_, real)| real.as_path())
    }

    /// The first root as given (a session's cwd: a terminal's default directory).
    pub fn cwd(&self) -> Option<&Path> {
        self.roots.first().map(|(lexical, _)| lexical.as_path())
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

/// A confined target: the root's realpath and the components below it.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    pub root: PathBuf,
    pub components: Vec<OsString>,
}

/// The realpath of `path` when it exists, else the realpath of its deepest existing ancestor
/// joined with the rest (normalised lexically: what does not exist holds no symlink).
fn resolve(path: &Path) -> Result<PathBuf, FsError> {
    let parts: Vec<Component<'_>> = path.components().collect();
    for keep in (1..=parts.len()).rev() {
        let head: PathBuf = parts[..keep].iter().collect();
        match std::fs::canonicalize(&head) {
            Ok(real) => {
                let mut full = real;
                for part in &parts[keep..] {
                    full.push(part.as_os_str());
                }
                return Ok(normalize(&full));
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {}
            Err(e) => return Err(FsError::of(e)),
        }
    }
    Ok(normalize(path))
}

/// Checks `path` (absolute) against the roots; `allow_any` lifts confinement.
pub fn confine(roots: &Roots, path: &str, allow_any: bool) -> Result<Target, FsError> {
    let path = Path::new(path);
    let lexical = normalize(path);
    if !allow_any
        && !roots
            .roots
            .iter()
            .any(|(lex, real)| within(&lexical, lex) || within(&lexical, real))
    {
        return Err(FsError::Outside);
    }
    let resolved = resolve(path)?;
    let root = if allow_any {
        PathBuf::from("/")
    } else {
        roots
            .roots
            .iter()
            .map(|(_, real)| real)
            .filter(|real| within(&resolved, real))
            .max_by_key(|real| real.as_os_str().len())
            .ok_or(FsError::Outside)?
            .clone()
    };
    let components = resolved
        .strip_prefix(&root)
        .expect("within the root")
        .components()
        .map(|c| c.as_os_str().to_owned())
        .collect();
    Ok(Target { root, components })
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

/// An `O_NOFOLLOW` open that failed on a symlink: some systems say ENOTDIR for a directory
/// open, so look at what is there.
fn refused_if_symlink(dir: &OwnedFd, name: &OsStr, error: io::Error) -> FsError {
    match lstat_at(dir, name) {
        Ok(stat) if is_kind(&stat, libc::S_IFLNK) => FsError::Outside,
        _ => FsError::of(error),
    }
}

/// Opens the target's directory from its root, one component at a time without following
/// symlinks (creating missing ones when `create`); returns it and the final name (None when
/// the target is the root itself).
fn open_parent(target: &Target, create: bool) -> Result<(OwnedFd, Option<&OsStr>), FsError> {
    let root = OsStr::new(target.root.as_os_str());
    let mut dir =
        open_at(None, root, libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(FsError::of)?;
    let Some((last, parents)) = target.components.split_last() else {
        return Ok((dir, None));
    };
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    for name in parents {
        let next = match open_at(Some(&dir), name, flags, 0) {
            Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                let c = c_name(name).map_err(FsError::Os)?;
                // SAFETY: valid fd and name; 0o777 & ~umask, as mkdir(1).
                if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
                    let error = io::Error::last_os_error();
                    if error.raw_os_error() != Some(libc::EEXIST) {
                        return Err(FsError::Os(error));
                    }
                }
                open_at(Some(&dir), name, flags, 0)
            }
            other => other,
        };
        dir = next.map_err(|e| refused_if_symlink(&dir, name, e))?;
    }
    Ok((dir, Some(last.as_os_str())))
}

/// Opens the confined directory itself (a terminal's cwd), without following symlinks.
pub fn open_dir(target: &Target) -> Result<OwnedFd, FsError> {
    let (dir, name) = open_parent(target, false)?;
    let Some(name) = name else {
        return Ok(dir);
    };
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    open_at(Some(&dir), name, flags, 0).map_err(|e| refused_if_symlink(&dir, name, e))
}

/// Reads lines `line..line+limit` (1-based; `limit` None: to the end) of the confined file,
/// keeping at most `max_bytes` of them; `missing_as_empty` answers a missing file "".
pub fn read_text_file(
    target: &Target,
    line: u32,
    limit: Option<u32>,
    max_bytes: usize,
    missing_as_empty: bool,
) -> Result<String, FsError> {
    let result = read_lines(target, line.max(1), limit, max_bytes);
    match result {
        Err(FsError::NotFound) if missing_as_empty => Ok(String::new()),
        other => other,
    }
}

fn read_lines(
    target: &Target,
    first: u32,
    limit: Option<u32>,
    max_bytes: usize,
) -> Result<String, FsError> {
    let (dir, name) = open_parent(target, false)?;
    let Some(name) = name else {
        return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)));
    };
    // O_NONBLOCK: a FIFO planted there cannot stall the read loop (it is refused below).
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK;
    let fd = open_at(Some(&dir), name, flags, 0).map_err(|e| refused_if_symlink(&dir, name, e))?;
    let mut file = File::from(fd);
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
    let first = u64::from(first);
    let end = limit.map(|l| first + u64::from(l)); // first line not kept
    if end == Some(first) {
        return Ok(String::new());
    }
    let size = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    let mut kept = Vec::with_capacity(size.min(max_bytes));
    let mut line = 1u64;
    let mut buf = vec![0u8; 64 * 1024];
    'read: loop {
        let count = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FsError::Os(e)),
        };
        let mut rest = &buf[..count];
        while !rest.is_empty() {
            if end.is_some_and(|end| line >= end) {
                break 'read;
            }
            let (piece, newline) = match memchr::memchr(b'\n', rest) {
                Some(at) => (&rest[..=at], true),
                None => (rest, false),
            };
            if line >= first {
                if kept.len() + piece.len() > max_bytes {
                    return Err(FsError::TooLarge(max_bytes));
                }
                kept.extend_from_slice(piece);
            }
            if newline {
                line += 1;
            }
            rest = &rest[piece.len()..];
        }
    }
    String::from_utf8(kept).map_err(|_| FsError::NotUtf8)
}

fn temporary_name(name: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(".acp-{:016x}", hasher.finish()));
    temp
}

/// Writes `content` to the confined file: missing parents created, a temporary file in its
/// directory given the old file's permission bits, then renamed over it.
pub fn write_text_file(target: &Target, content: &str) -> Result<(), FsError> {
    let (dir, name) = open_parent(target, true)?;
    let Some(name) = name else {
        return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)));
    };
    let mode = match lstat_at(&dir, name) {
        Ok(stat) if is_kind(&stat, libc::S_IFLNK) => return Err(FsError::Outside),
        Ok(stat) if is_kind(&stat, libc::S_IFDIR) => {
            return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)))
        }
        // mode_t is u32 on Linux and u16 on macOS.
        #[allow(clippy::useless_conversion)]
        Ok(stat) => Some(u32::from(stat.st_mode) & 0o7777),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => return Err(FsError::Os(e)),
    };
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let mut attempt = 0;
    let (temp, fd) = loop {
        let temp = temporary_name(name);
        match open_at(Some(&dir), &temp, flags, 0o666) {
            Ok(fd) => break (temp, fd),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && attempt < 8 => attempt += 1,
            Err(e) => return Err(FsError::Os(e)),
        }
    };
    let temp_c = c_name(&temp).map_err(FsError::Os)?;
    let written = (|| -> io::Result<()> {
        let mut file = File::from(fd);
        if let Some(mode) = mode {
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        }
        file.write_all(content.as_bytes())?;
        drop(file);
        let name_c = c_name(name)?;
        // SAFETY: valid fds and names.
        let rc = unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                temp_c.as_ptr(),
                dir.as_raw_fd(),
                name_c.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    if let Err(error) = written {
        // SAFETY: valid fd and name; the temporary file is ours.
        unsafe { libc::unlinkat(dir.as_raw_fd(), temp_c.as_ptr(), 0) };
        return Err(FsError::Os(error));
    }
    Ok(())
}

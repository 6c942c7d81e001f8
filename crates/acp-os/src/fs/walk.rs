//! The confinement walk: a path resolved one component at a time from a root's directory
//! descriptor, held open since the session registered the root, never by absolute path.
//!
//! The walk keeps `at`, the absolute location reached so far, and, while `at` is inside a
//! root, the descriptors of the directories between that root and `at`. A component is looked
//! at with `fstatat(AT_SYMLINK_NOFOLLOW)` and opened with `O_NOFOLLOW` from its parent's
//! descriptor; a symlink is read (`readlinkat`) and its target's components are walked in its
//! place (an absolute target restarts at `/`), so what the kernel would follow is followed
//! here, where every step is checked. Outside the roots nothing is looked at: `at` moves
//! lexically until it names a root again (in either of its forms), and that root's held
//! descriptor takes over. A walk that ends outside every root is refused. So swapping a root,
//! or a directory on the way, for a symlink makes the request act on the registered directory
//! or be refused: it never reaches outside.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use super::error::FsError;
use super::roots::{Roots, Target};
use super::sys::{c_name, is_kind, lstat_at, open_at};

/// How many symlinks one request may pass through (the kernel's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// Where a walk ended: the directory holding the final name (opened, not by path), the name
/// (None: the target is that directory itself) and the absolute location, for the tests.
pub(crate) struct Walked {
    pub dir: OwnedFd,
    pub name: Option<OsString>,
    pub at: PathBuf,
}

/// The flags of a directory opened on the way: no symlink followed, no terminal taken.
#[cfg(target_os = "linux")]
const DIR_FLAGS: libc::c_int = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
#[cfg(not(target_os = "linux"))]
const DIR_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;

struct Walk<'r> {
    roots: &'r Roots,
    /// The absolute location reached.
    at: PathBuf,
    /// The root `at` is in (its index) and the directories opened below it, in order.
    inside: Option<(usize, Vec<OwnedFd>)>,
}

impl Walk<'_> {
    /// The directory `at` names (inside a root).
    fn dir(&self) -> Option<&OwnedFd> {
        let (root, dirs) = self.inside.as_ref()?;
        dirs.last().or_else(|| self.roots.fd(*root))
    }

    /// After `at` moved: when it names a root (either form), that root's descriptor takes
    /// over (a nested root is entered by its own descriptor, never walked into).
    fn enter_if_root(&mut self) -> bool {
        match self.roots.named(&self.at) {
            Some(index) => {
                self.at = self.roots.real_of(index).to_path_buf();
                self.inside = Some((index, Vec::new()));
                true
            }
            None => false,
        }
    }

    /// `..`: one directory up; leaving a root's top goes outside (lexical) unless the parent
    /// is a root itself.
    fn up(&mut self) {
        self.at.pop();
        if self.enter_if_root() {
            return;
        }
        match &mut self.inside {
            Some((_, dirs)) if !dirs.is_empty() => {
                dirs.pop();
            }
            _ => self.inside = None,
        }
    }

    /// Steps into `name`, a directory just opened below the current one (not a root's name).
    fn down(&mut self, name: &OsString, dir: OwnedFd) {
        self.at.push(name);
        if let Some((_, dirs)) = &mut self.inside {
            dirs.push(dir);
        }
    }
}

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

fn read_link(dir: &OwnedFd, name: &OsString) -> io::Result<PathBuf> {
    let c = c_name(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: valid fd, name and buffer of the given length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

fn mkdir_at(dir: &OwnedFd, name: &OsString) -> io::Result<()> {
    let c = c_name(name)?;
    // SAFETY: valid fd and name; 0o777 & ~umask, as mkdir(1).
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EEXIST) {
            return Err(error);
        }
    }
    Ok(())
}

/// A directory that cannot be opened without following a symlink was swapped after it was
/// looked at: refused (never followed by the kernel).
fn swapped(error: io::Error) -> FsError {
    match error.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR) => FsError::Outside,
        _ => FsError::of(error),
    }
}

/// Walks `target` from its root's descriptor; with `create`, missing directories on the way
/// are made (`mkdirat` from the opened parent).
pub(crate) fn walk(target: &Target<'_>, create: bool) -> Result<Walked, FsError> {
    let roots = target.roots();
    let mut walk = Walk {
        roots,
        at: PathBuf::from("/"),
        inside: None,
    };
    walk.enter_if_root(); // the root `/` (allow_any_path)
    let mut queue = components(&target.path);
    let mut links = 0;
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            walk.up();
            continue;
        }
        // A root's name (either form, nested or not) is entered by its held descriptor,
        // whatever that name is on disk now.
        let next = walk.at.join(&name);
        if walk.roots.named(&next).is_some() {
            walk.at = next;
            walk.enter_if_root();
            continue;
        }
        let Some(dir) = walk.dir() else {
            // Outside every root: move lexically, touching nothing.
            walk.at = next;
            continue;
        };
        let last = queue.is_empty();
        let stat = match lstat_at(dir, &name) {
            Ok(stat) => Some(stat),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(FsError::of(e)),
        };
        match stat {
            Some(stat) if is_kind(&stat, libc::S_IFLNK) => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(FsError::Outside);
                }
                let link = read_link(dir, &name).map_err(swapped)?;
                if link.is_absolute() {
                    walk.at = PathBuf::from("/");
                    walk.inside = None;
                    walk.enter_if_root();
                }
                for part in components(&link).into_iter().rev() {
                    queue.push_front(part);
                }
            }
            Some(stat) if is_kind(&stat, libc::S_IFDIR) && !last => {
                let opened = open_at(Some(dir), &name, DIR_FLAGS, 0).map_err(swapped)?;
                walk.down(&name, opened);
            }
            None if !last && create => {
                mkdir_at(dir, &name).map_err(FsError::Os)?;
                let opened = open_at(Some(dir), &name, DIR_FLAGS, 0).map_err(swapped)?;
                walk.down(&name, opened);
            }
            None if !last => return Err(FsError::NotFound),
            Some(_) if !last => {
                return Err(FsError::Os(io::Error::from_raw_os_error(libc::ENOTDIR)))
            }
            _ => {
                // The final name (present or not): the operation opens it with O_NOFOLLOW.
                let dir = dir.try_clone().map_err(FsError::Os)?;
                let mut at = walk.at.clone();
                at.push(&name);
                return Ok(Walked {
                    dir,
                    name: Some(name),
                    at,
                });
            }
        }
    }
    // The path ends at a directory (or `..`): the target is that directory itself.
    let dir = walk.dir().ok_or(FsError::Outside)?;
    Ok(Walked {
        dir: dir.try_clone().map_err(FsError::Os)?,
        name: None,
        at: walk.at,
    })
}

//! The roots a session's requests may reach, each opened and held when registered, and
//! `confine`: a request's path checked lexically against them (the walk checks the rest).

use std::borrow::Cow;
use std::collections::HashMap;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::error::FsError;
use super::sys::{bytes, fstat, open_at};
use crate::sync::lock;

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
    let mut held = lock(&HELD);
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
    pub(super) fn named(&self, path: &Path) -> Option<usize> {
        let wanted = bytes(path);
        self.roots
            .iter()
            .position(|root| root.forms.iter().any(|f| bytes(f) == wanted))
    }

    pub(super) fn real_of(&self, index: usize) -> &Path {
        &self.roots[index].real
    }

    pub(super) fn fd(&self, index: usize) -> Option<&OwnedFd> {
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

/// A confined request: the path and the roots it is walked from.
#[derive(Debug)]
pub struct Target<'r> {
    roots: Cow<'r, Roots>,
    pub(super) path: PathBuf,
}

impl Target<'_> {
    pub(super) fn roots(&self) -> &Roots {
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

//! `fs/write_text_file`: the content goes to a new temporary file in the target's directory
//! (an unpredictable name, `O_CREAT|O_EXCL|O_NOFOLLOW`, so nothing planted there is opened or
//! followed), which takes the old file's owner and mode and is renamed over the target.
//!
//! A rename replaces whatever the name holds, so the target is checked as opening it for
//! writing would check it: it must be a regular file with one link (a FIFO, a device, a
//! directory or a hard-linked file is refused: the rename would replace the name, not write
//! through it), the host's user must be able to open it `O_WRONLY` (the kernel says so:
//! modes, ACLs, read-only mounts, immutable files), and a file with no write bit at all is
//! refused even for root, who could write it (the owner marked it read-only; host.md's
//! "a write must be refused where opening the file for writing would be"). When the owner or
//! group cannot be kept (the host is not root and the file is another user's), the write is
//! refused rather than silently giving the file to the host's user.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{strerror, FsError};
use super::roots::Target;
use super::sys::{c_name, fstat, is_kind, lstat_at, open_at};
use super::walk;

/// A name nobody can guess: 64 bits from the process's random SipHash keys, mixed with a
/// counter, the pid and the clock.
fn temporary_name(name: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(".acp-{:016x}", hasher.finish()));
    temp
}

/// What the new file takes from the old one.
struct Keep {
    mode: u32,
    owner: Option<(libc::uid_t, libc::gid_t)>,
}

fn refused(why: String) -> FsError {
    FsError::Refused(why)
}

/// Checks the existing target (None: there is none) as opening it for writing would.
fn check_existing(dir: &OwnedFd, name: &OsStr) -> Result<Option<Keep>, FsError> {
    let stat = match lstat_at(dir, name) {
        Ok(stat) => stat,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(FsError::Os(e)),
    };
    if is_kind(&stat, libc::S_IFLNK) {
        return Err(FsError::Outside); // swapped in after the walk looked
    }
    if is_kind(&stat, libc::S_IFDIR) {
        return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)));
    }
    if !is_kind(&stat, libc::S_IFREG) {
        return Err(refused(
            "not a regular file (a FIFO, a device or a socket): the write would replace it with a regular file, so it is refused".into(),
        ));
    }
    // mode_t is u32 on Linux and u16 on macOS.
    #[allow(clippy::useless_conversion)]
    let mode = u32::from(stat.st_mode) & 0o7777;
    if mode & 0o222 == 0 {
        return Err(refused(format!(
            "the file is read-only (mode {mode:04o}); make it writable first if it should change"
        )));
    }
    // The kernel's own answer to "may the host's user open it for writing?" (no O_TRUNC, no
    // O_CREAT: nothing changes; O_NONBLOCK|O_NOCTTY: nothing planted in between can stall
    // or take a terminal, and the descriptor is checked to be the file looked at).
    let flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let opened = open_at(Some(dir), name, flags, 0).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => FsError::Outside,
        Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ETXTBSY) => refused(format!(
            "the host cannot open the file for writing ({}), so it is not replaced",
            strerror(&e)
        )),
        _ => FsError::of(e),
    })?;
    let now = fstat(&opened).map_err(FsError::Os)?;
    if now.st_dev != stat.st_dev || now.st_ino != stat.st_ino || !is_kind(&now, libc::S_IFREG) {
        return Err(FsError::Outside); // replaced between the look and the open
    }
    if now.st_nlink > 1 {
        return Err(refused(format!(
            "the file has {} hard links: a write replaces this name only and the other names would keep the old content, so it is refused",
            now.st_nlink
        )));
    }
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let owner = (now.st_uid != uid || now.st_gid != gid).then_some((now.st_uid, now.st_gid));
    Ok(Some(Keep {
        // The set-id bits go, as the kernel drops them when a file is written.
        mode: mode & !0o6000,
        owner,
    }))
}

/// Writes `content` to the confined file: missing parents created, a temporary file in its
/// directory given the old file's owner and mode, then renamed over it.
pub fn write_text_file(target: &Target<'_>, content: &str) -> Result<(), FsError> {
    let walked = walk::walk(target, true)?;
    let Some(name) = walked.name.as_deref() else {
        return Err(FsError::Os(io::Error::from_raw_os_error(libc::EISDIR)));
    };
    let dir = &walked.dir;
    let keep = check_existing(dir, name)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let mut attempt = 0;
    let (temp, fd) = loop {
        let temp = temporary_name(name);
        match open_at(Some(dir), &temp, flags, 0o666) {
            Ok(fd) => break (temp, fd),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && attempt < 8 => attempt += 1,
            Err(e) => return Err(FsError::Os(e)),
        }
    };
    let temp_c = c_name(&temp).map_err(FsError::Os)?;
    let written = (|| -> Result<(), FsError> {
        let mut file = File::from(fd);
        if let Some(keep) = &keep {
            if let Some((uid, gid)) = keep.owner {
                // SAFETY: fchown on our own new file.
                if unsafe { libc::fchown(file.as_raw_fd(), uid, gid) } != 0 {
                    let error = io::Error::last_os_error();
                    return Err(refused(format!(
                        "the file belongs to uid {uid} gid {gid} and the host cannot give the new content that owner ({}), so it is not replaced",
                        strerror(&error)
                    )));
                }
            }
            // After fchown, which may clear set-id bits.
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(keep.mode))
                .map_err(FsError::Os)?;
        }
        file.write_all(content.as_bytes()).map_err(FsError::Os)?;
        drop(file);
        let name_c = c_name(name).map_err(FsError::Os)?;
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
            return Err(FsError::Os(io::Error::last_os_error()));
        }
        Ok(())
    })();
    if let Err(error) = written {
        // SAFETY: valid fd and name; the temporary file is ours.
        unsafe { libc::unlinkat(dir.as_raw_fd(), temp_c.as_ptr(), 0) };
        return Err(error);
    }
    Ok(())
}

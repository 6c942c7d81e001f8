//! Writes against the target's own permissions (the host issue's "writes ignore the target's
//! permissions"): a write must be refused where opening the file for writing would be, must
//! refuse anything but a plain regular file, and must keep the owner and mode; its temporary
//! file cannot be redirected by a symlink planted by another user.
//!
//! The tests that need another user re-run this test binary as `nobody` (uid 65534) when they
//! run as root, and say so and pass without checking anything when they do not.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use acp_os::fs::{confine, write_text_file, FsError, Roots};

const NOBODY: u32 = 65534;

fn sandbox(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!("acp-writes-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(base.join("w")).unwrap();
    base.canonicalize().unwrap()
}

fn write(root: &Path, path: &Path, content: &str) -> Result<(), FsError> {
    let roots = Roots::new([root.to_str().unwrap()]);
    let target = confine(&roots, path.to_str().unwrap(), false)?;
    write_text_file(&target, content)
}

fn refused(result: Result<(), FsError>, says: &str) {
    match result {
        Err(FsError::Refused(why)) => assert!(why.contains(says), "{why}"),
        other => panic!("expected a refusal saying {says:?}, got {other:?}"),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_read_only_file_is_refused_even_for_root() {
    let base = sandbox("ro");
    let w = base.join("w");
    let file = w.join("ro.txt");
    fs::write(&file, "keep").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
    refused(write(&w, &file, "new"), "read-only (mode 0444)");
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep");
    assert_eq!(fs::metadata(&file).unwrap().mode() & 0o7777, 0o444);
    let _ = fs::remove_dir_all(&base);
}

#[test]
fn fifos_devices_and_sockets_are_refused_not_replaced() {
    let base = sandbox("special");
    let w = base.join("w");
    let fifo = w.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    refused(write(&w, &fifo, "x"), "not a regular file");
    assert!(fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo_like());
    let socket = w.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    refused(write(&w, &socket, "x"), "not a regular file");
    if is_root() {
        let null = w.join("null");
        let c = std::ffi::CString::new(null.to_str().unwrap()).unwrap();
        // SAFETY: a valid path; /dev/null's numbers (1, 3).
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        if made == 0 {
            refused(write(&w, &null, "x"), "not a regular file");
            assert!(!fs::symlink_metadata(&null).unwrap().file_type().is_file());
        }
    }
    let _ = fs::remove_dir_all(&base);
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for fs::FileType {
    fn is_fifo_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_fifo()
    }
}

#[test]
fn owner_and_mode_are_kept() {
    if !is_root() {
        eprintln!("skipped: giving a file to another user needs root");
        return;
    }
    let base = sandbox("owner");
    let w = base.join("w");
    let file = w.join("theirs.txt");
    fs::write(&file, "old").unwrap();
    std::os::unix::fs::chown(&file, Some(NOBODY), Some(NOBODY)).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    write(&w, &file, "new").unwrap();
    let meta = fs::metadata(&file).unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "new");
    assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY));
    assert_eq!(meta.mode() & 0o7777, 0o640);
    let _ = fs::remove_dir_all(&base);
}

/// Runs test `name` of this binary as nobody, with `ACP_WRITES_DIR` set; true when it passed.
fn as_nobody(name: &str, dir: &Path) -> bool {
    // A copy of this binary in `dir` (0755): the build directory may be one nobody cannot
    // reach (a checkout under a 0700 directory, as `mktemp -d` makes).
    let binary = dir.join("fs-writes-test");
    fs::copy(std::env::current_exe().unwrap(), &binary).unwrap();
    fs::set_permissions(&binary, fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = Command::new(&binary);
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("ACP_WRITES_DIR", dir);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let status = command.status().unwrap();
    status.success()
}

/// The part run as nobody (does nothing unless `ACP_WRITES_DIR` is set).
#[test]
fn nobody_side() {
    let Some(dir) = std::env::var_os("ACP_WRITES_DIR").map(PathBuf::from) else {
        return;
    };
    let w = dir.join("w");
    // Root's 0600 file, in a directory nobody may write: nobody cannot open it for writing,
    // so the write is refused although the rename into the directory would be allowed.
    refused(
        write(&w, &w.join("secret.txt"), "owned"),
        "cannot open the file for writing",
    );
    // Plant symlinks at every temporary name a guesser would try, then let root write.
    for name in [
        ".target.txt.tmp",
        ".target.txt.acp-0000000000000000",
        ".target.txt.acp-tmp",
        "target.txt.tmp",
        "target.txt~",
    ] {
        symlink(dir.join("secret.txt"), w.join(name)).unwrap();
    }
    for pid in 1..512 {
        let _ = symlink(
            dir.join("secret.txt"),
            w.join(format!(".target.txt.{pid}.tmp")),
        );
    }
}

#[test]
fn another_users_files_and_planted_temporary_names() {
    if !is_root() {
        eprintln!("skipped: acting as another user (nobody) needs root");
        return;
    }
    let base = sandbox("nobody");
    let w = base.join("w");
    fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
    // w is writable by everyone and sticky, as /tmp: nobody may add names, not replace ours.
    fs::set_permissions(&w, fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(w.join("secret.txt"), "ROOT ONLY").unwrap();
    fs::set_permissions(w.join("secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(base.join("secret.txt"), "ROOT ONLY").unwrap();
    fs::set_permissions(base.join("secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    assert!(
        as_nobody("nobody_side", &base),
        "the part run as nobody failed"
    );
    // Root writes the target many times among the planted links: never through them.
    let target = w.join("target.txt");
    for i in 0..50 {
        write(&w, &target, &format!("v{i}")).unwrap();
    }
    assert_eq!(fs::read_to_string(&target).unwrap(), "v49");
    assert_eq!(
        fs::read_to_string(base.join("secret.txt")).unwrap(),
        "ROOT ONLY"
    );
    assert_eq!(
        fs::read_to_string(w.join("secret.txt")).unwrap(),
        "ROOT ONLY"
    );
    let left: Vec<_> = fs::read_dir(&w)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_type().unwrap().is_symlink()) // the planted ones
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.contains(".acp-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    let _ = fs::remove_dir_all(&base);
}

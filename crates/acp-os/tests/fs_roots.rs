//! The roots themselves under attack (the host issue's confinement escape): a second thread
//! swaps the cwd root, and an additional root nested in it, with a symlink to an outside
//! directory (`renameat2(RENAME_EXCHANGE)`, thousands of times) while requests run; and a
//! root given through a symlink answers in both of its forms.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use acp_os::fs::{confine, read_text_file, write_text_file, FsError, ReadBound, Roots};
// The swap race needs renameat2(RENAME_EXCHANGE): Linux only.
#[cfg(target_os = "linux")]
use {
    acp_os::fs::open_dir,
    std::ffi::CString,
    std::os::unix::ffi::OsStrExt,
    std::os::unix::fs::MetadataExt,
    std::sync::atomic::{AtomicBool, AtomicU64, Ordering},
    std::sync::Arc,
};

fn sandbox(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!("acp-roots-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(base.join("w/extra")).unwrap();
    fs::create_dir_all(base.join("outside/extra")).unwrap();
    base.canonicalize().unwrap()
}

fn read(roots: &Roots, path: &Path) -> Result<String, FsError> {
    let target = confine(roots, path.to_str().unwrap(), false)?;
    read_text_file(&target, 1, None, &ReadBound::new(1 << 20), false)
}

fn write(roots: &Roots, path: &Path) -> Result<(), FsError> {
    let target = confine(roots, path.to_str().unwrap(), false)?;
    write_text_file(&target, "x")
}

/// `renameat2(dir/a, dir/b, RENAME_EXCHANGE)`: both names swap in one step.
#[cfg(target_os = "linux")]
fn exchange(dir: &fs::File, a: &str, b: &str) -> bool {
    use std::os::fd::AsRawFd;
    let (a, b) = (CString::new(a).unwrap(), CString::new(b).unwrap());
    // SAFETY: valid fd and names.
    unsafe {
        libc::renameat2(
            dir.as_raw_fd(),
            a.as_ptr(),
            dir.as_raw_fd(),
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}

#[cfg(target_os = "linux")]
#[test]
fn swapping_a_root_for_a_symlink_never_reaches_outside() {
    let base = sandbox("swap");
    fs::write(base.join("w/f.txt"), "inside").unwrap();
    fs::write(base.join("w/extra/f.txt"), "inside").unwrap();
    fs::write(base.join("outside/f.txt"), "SECRET").unwrap();
    fs::write(base.join("outside/extra/f.txt"), "SECRET").unwrap();
    // The symlinks each root is swapped with, side by side with it.
    symlink(base.join("outside"), base.join("evil")).unwrap();
    symlink(base.join("outside/extra"), base.join("w/evilextra")).unwrap();
    let (w, extra) = (base.join("w"), base.join("w/extra"));
    let roots = Roots::new([w.to_str().unwrap(), extra.to_str().unwrap()]);
    let (w_ino, extra_ino) = (
        fs::metadata(&w).unwrap().ino(),
        fs::metadata(&extra).unwrap().ino(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let (outer, inner) = (
            fs::File::open(&base).unwrap(),
            fs::File::open(&w).unwrap(), // the real w, wherever its name is
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..2 {
                    if exchange(&outer, "w", "evil") {
                        swaps.fetch_add(1, Ordering::Relaxed);
                    }
                    if exchange(&inner, "extra", "evilextra") {
                        swaps.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // Paced, so the requests are not starved on a loaded machine.
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        })
    };
    let mut answered = 0;
    for i in 0..3000 {
        for file in [w.join("f.txt"), extra.join("f.txt")] {
            match read(&roots, &file) {
                Ok(text) => {
                    assert_eq!(text, "inside", "read outside through a swapped root");
                    answered += 1;
                }
                Err(FsError::Outside | FsError::NotFound) => {}
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        // Writes (a new file, or one in a new directory) every few rounds: this disk's
        // creates are slow, and the reads and cwd opens already walk every swapped root.
        match i % 6 {
            0 => drop(write(&roots, &w.join(format!("n{i}.txt")))),
            2 => drop(write(&roots, &extra.join(format!("n{i}.txt")))),
            4 => drop(write(&roots, &w.join(format!("sub{i}/n.txt")))),
            _ => {}
        }
        // A terminal's cwd goes through the same walk: it must be a root, never outside.
        for (dir, ino) in [(&w, w_ino), (&extra, extra_ino)] {
            if let Ok(target) = confine(&roots, dir.to_str().unwrap(), false) {
                if let Ok(fd) = open_dir(&target) {
                    assert_eq!(fs::File::from(fd).metadata().unwrap().ino(), ino);
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    assert!(swaps >= 1000, "the race ran: {swaps} swaps");
    eprintln!("{swaps} swaps, {answered} reads answered");
    // Back to the registered layout (an even number of swaps of each pair, or one more).
    let outer = fs::File::open(&base).unwrap();
    if fs::symlink_metadata(&w).unwrap().file_type().is_symlink() {
        exchange(&outer, "w", "evil");
    }
    let inner = fs::File::open(&w).unwrap();
    if fs::symlink_metadata(&extra)
        .unwrap()
        .file_type()
        .is_symlink()
    {
        exchange(&inner, "extra", "evilextra");
    }
    let created: Vec<_> = [base.join("outside"), base.join("outside/extra")]
        .iter()
        .flat_map(|d| fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.as_bytes().starts_with(b"n") || n.as_bytes().starts_with(b"sub"))
        .collect();
    assert!(created.is_empty(), "created outside: {created:?}");
    assert!(answered > 0, "some reads were answered from the held roots");
    // Held roots keep answering while their names point elsewhere.
    let _ = fs::remove_dir_all(&base);
}

#[test]
fn a_root_given_through_a_symlink_answers_in_both_forms() {
    let base = sandbox("forms");
    fs::write(base.join("w/extra/f.txt"), "extra").unwrap();
    symlink(base.join("w/extra"), base.join("w/linkextra")).unwrap();
    symlink(base.join("w/extra"), base.join("linkout")).unwrap();
    let given = base.join("w/linkextra");
    let real = base.join("w/extra");
    // As a config directory: given through the link, opened at its realpath; and as a
    // session's own directory given through a link outside the cwd.
    let roots = Roots::with_forms([
        (
            given.to_str().unwrap().to_owned(),
            real.to_str().unwrap().to_owned(),
        ),
        (
            base.join("linkout").to_str().unwrap().to_owned(),
            base.join("linkout").to_str().unwrap().to_owned(),
        ),
    ]);
    for path in [
        given.join("f.txt"),
        real.join("f.txt"),
        base.join("linkout/f.txt"),
    ] {
        assert_eq!(read(&roots, &path).unwrap(), "extra", "{path:?}");
    }
    write(&roots, &given.join("new.txt")).unwrap();
    write(&roots, &base.join("linkout/new2.txt")).unwrap();
    assert!(real.join("new.txt").exists() && real.join("new2.txt").exists());
    // Neither form lets `..` climb out.
    assert!(matches!(
        read(&roots, &given.join("../../outside/extra/f.txt")),
        Err(FsError::Outside)
    ));
    let _ = fs::remove_dir_all(&base);
}

#[test]
fn a_root_renamed_away_is_still_the_registered_directory() {
    let base = sandbox("renamed");
    fs::write(base.join("w/f.txt"), "inside").unwrap();
    let w = base.join("w");
    let roots = Roots::new([w.to_str().unwrap()]);
    fs::rename(&w, base.join("moved")).unwrap();
    symlink(base.join("outside"), &w).unwrap();
    fs::write(base.join("outside/f.txt"), "SECRET").unwrap();
    assert_eq!(read(&roots, &w.join("f.txt")).unwrap(), "inside");
    write(&roots, &w.join("new.txt")).unwrap();
    assert!(base.join("moved/new.txt").exists());
    assert!(!base.join("outside/new.txt").exists());
    let _ = fs::remove_dir_all(&base);
}

//! Confined file access (design/host.md §2): every attack of the host issue against the OS
//! side, a swapped-symlink race run many times, and a property over generated trees.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use acp_os::fs::{confine, read_text_file, resolved, write_text_file, FsError, ReadBound, Roots};
use proptest::prelude::*;

/// A fresh directory with `w/` (the root), `w-secrets/` and `outside/` side by side.
fn sandbox() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir().join(format!(
        "acp-fs-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&base);
    for dir in ["w", "w-secrets", "outside"] {
        fs::create_dir_all(base.join(dir)).unwrap();
    }
    fs::write(base.join("w-secrets/s.txt"), "SECRET").unwrap();
    fs::write(base.join("outside/o.txt"), "SECRET").unwrap();
    base.canonicalize().unwrap()
}

fn roots(base: &Path) -> Roots {
    Roots::new([base.join("w").to_str().unwrap()])
}

fn read(roots: &Roots, path: &Path) -> Result<String, FsError> {
    let target = confine(roots, path.to_str().unwrap(), false)?;
    read_text_file(&target, 1, None, &ReadBound::new(1 << 20), false)
}

fn write(roots: &Roots, path: &Path, content: &str) -> Result<(), FsError> {
    let target = confine(roots, path.to_str().unwrap(), false)?;
    write_text_file(&target, content)
}

fn outside(result: Result<impl std::fmt::Debug, FsError>) {
    match result {
        Err(FsError::Outside) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn reads_select_lines_byte_for_byte() {
    let base = sandbox();
    let r = roots(&base);
    let file = base.join("w/a.txt");
    fs::write(&file, "1\n2\r\n3\n4").unwrap();
    let target = confine(&r, file.to_str().unwrap(), false).unwrap();
    let read = |line, limit| {
        read_text_file(&target, line, limit, &ReadBound::new(1 << 20), false).unwrap()
    };
    assert_eq!(read(2, Some(2)), "2\r\n3\n");
    assert_eq!(read(0, None), "1\n2\r\n3\n4"); // line 0 reads as 1
    assert_eq!(read(4, Some(9)), "4");
    assert_eq!(read(5, None), "");
    assert_eq!(read(1, Some(0)), "");
}

#[test]
fn dot_dot_absolute_and_sibling_prefix_are_refused() {
    let base = sandbox();
    let r = roots(&base);
    outside(read(&r, &base.join("w/../outside/o.txt")));
    outside(read(&r, &base.join("outside/o.txt")));
    outside(read(&r, &base.join("w-secrets/s.txt")));
    outside(read(&r, Path::new("/etc/hostname")));
    outside(write(&r, &base.join("w/../outside/new.txt"), "x"));
    outside(write(&r, &base.join("w-secrets/s.txt"), "x"));
    assert!(!base.join("outside/new.txt").exists());
    assert_eq!(
        fs::read_to_string(base.join("w-secrets/s.txt")).unwrap(),
        "SECRET"
    );
    // `..` that stays inside is fine.
    fs::create_dir(base.join("w/d")).unwrap();
    fs::write(base.join("w/in.txt"), "in").unwrap();
    assert_eq!(read(&r, &base.join("w/d/../in.txt")).unwrap(), "in");
}

#[test]
fn symlinks_pointing_out_are_refused_for_read_and_write() {
    let base = sandbox();
    let r = roots(&base);
    symlink(base.join("outside/o.txt"), base.join("w/link")).unwrap();
    symlink(base.join("outside"), base.join("w/dir")).unwrap();
    outside(read(&r, &base.join("w/link")));
    outside(write(&r, &base.join("w/link"), "pwned"));
    outside(read(&r, &base.join("w/dir/o.txt")));
    outside(write(&r, &base.join("w/dir/new.txt"), "pwned"));
    outside(write(&r, &base.join("w/dir/sub/new.txt"), "pwned"));
    assert_eq!(
        fs::read_to_string(base.join("outside/o.txt")).unwrap(),
        "SECRET"
    );
    assert!(!base.join("outside/new.txt").exists());
    assert!(!base.join("outside/sub").exists());
    // A symlink that stays inside is followed.
    fs::write(base.join("w/real.txt"), "real").unwrap();
    symlink(base.join("w/real.txt"), base.join("w/alias")).unwrap();
    assert_eq!(read(&r, &base.join("w/alias")).unwrap(), "real");
}

#[test]
fn missing_files_non_utf8_and_special_files() {
    let base = sandbox();
    let r = roots(&base);
    assert!(matches!(
        read(&r, &base.join("w/none.txt")),
        Err(FsError::NotFound)
    ));
    assert!(matches!(
        read(&r, &base.join("w/no/dir.txt")),
        Err(FsError::NotFound)
    ));
    let target = confine(&r, base.join("w/none.txt").to_str().unwrap(), false).unwrap();
    assert_eq!(
        read_text_file(&target, 1, None, &ReadBound::new(64), true).unwrap(),
        ""
    );
    fs::write(base.join("w/a.bin"), b"ok\n\xff\xfe\n").unwrap();
    assert!(matches!(
        read(&r, &base.join("w/a.bin")),
        Err(FsError::NotUtf8)
    ));
    // Only the selected lines must be text.
    let target = confine(&r, base.join("w/a.bin").to_str().unwrap(), false).unwrap();
    assert_eq!(
        read_text_file(&target, 1, Some(1), &ReadBound::new(64), false).unwrap(),
        "ok\n"
    );
    assert!(matches!(read(&r, &base.join("w")), Err(FsError::Os(_))));
    let fifo = std::ffi::CString::new(base.join("w/fifo").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert!(matches!(
        read(&r, &base.join("w/fifo")),
        Err(FsError::Os(_))
    ));
}

#[test]
fn a_huge_file_is_read_within_the_bound() {
    let base = sandbox();
    let r = roots(&base);
    let file = fs::File::create(base.join("w/huge")).unwrap();
    file.set_len(1 << 30).unwrap(); // 1 GiB, sparse: one line of zero bytes
    match read(&r, &base.join("w/huge")) {
        Err(FsError::TooLarge(limit)) => assert_eq!(limit, 1 << 20),
        other => panic!("expected the bound, got {other:?}"),
    }
}

#[test]
fn a_read_ends_at_its_scan_bound_its_deadline_or_when_stopped() {
    let base = sandbox();
    let r = roots(&base);
    let file = fs::File::create(base.join("w/sparse")).unwrap();
    file.set_len(40 << 30).unwrap(); // 40 GiB of zero bytes: one line, never ending
    let path = base.join("w/sparse");
    let target = confine(&r, path.to_str().unwrap(), false).unwrap();
    let started = std::time::Instant::now();
    let mut bound = ReadBound::new(1 << 20);
    bound.scan_bytes = 8 << 20;
    match read_text_file(&target, 2, Some(1), &bound, false) {
        Err(FsError::ScanBound(why)) => assert!(why.contains("8388608 bytes"), "{why}"),
        other => panic!("expected the scan bound, got {other:?}"),
    }
    // A deadline already passed (the turn's timeout) ends it at the first chunk.
    let mut bound = ReadBound::new(1 << 20);
    bound.scan_bytes = u64::MAX;
    bound.deadline = Some((std::time::Instant::now(), "a call's timeout passed"));
    match read_text_file(&target, 2, None, &bound, false) {
        Err(FsError::Stopped(why)) => assert_eq!(why, "a call's timeout passed"),
        other => panic!("expected a stop, got {other:?}"),
    }
    // So does the client's closing flag, whatever the other bounds.
    bound.deadline = None;
    bound.stop = Some(Arc::new(AtomicBool::new(true)));
    assert!(matches!(
        read_text_file(&target, 2, None, &bound, false),
        Err(FsError::Stopped(_))
    ));
    // The default time bound alone ends a scan with no byte bound.
    let mut bound = ReadBound::new(1 << 20);
    bound.scan_bytes = u64::MAX;
    match read_text_file(&target, 2, None, &bound, false) {
        Err(FsError::ScanBound(why)) => assert!(why.contains("took longer"), "{why}"),
        other => panic!("expected the time bound, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(60)); // not 40 GiB of scanning
    let _ = fs::remove_dir_all(&base);
}

#[test]
fn writes_replace_atomically_keep_permissions_and_create_parents() {
    let base = sandbox();
    let r = roots(&base);
    let file = base.join("w/keep.txt");
    fs::write(&file, "old").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    write(&r, &file, "new").unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "new");
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    write(&r, &base.join("w/a/b/c.txt"), "deep").unwrap();
    assert_eq!(
        fs::read_to_string(base.join("w/a/b/c.txt")).unwrap(),
        "deep"
    );
    let names: Vec<_> = fs::read_dir(base.join("w"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".acp-")),
        "no temporary file left: {names:?}"
    );
    // A hard-linked file is refused: the rename would replace one name and leave the others
    // with the old content.
    fs::hard_link(&file, base.join("w/hard")).unwrap();
    refused(write(&r, &file, "newer"), "2 hard links");
    assert_eq!(fs::read_to_string(base.join("w/hard")).unwrap(), "new");
    assert_eq!(fs::read_to_string(&file).unwrap(), "new");
}

fn refused(result: Result<(), FsError>, says: &str) {
    match result {
        Err(FsError::Refused(why)) => assert!(why.contains(says), "{why}"),
        other => panic!("expected a refusal saying {says:?}, got {other:?}"),
    }
}

#[test]
fn a_symlink_swapped_in_after_the_check_never_escapes() {
    let base = sandbox();
    let r = roots(&base);
    fs::create_dir(base.join("w/real")).unwrap();
    fs::write(base.join("w/real/f.txt"), "inside").unwrap();
    fs::write(base.join("outside/f.txt"), "SECRET").unwrap();
    symlink(base.join("outside"), base.join("w/evil")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, base) = (stop.clone(), base.clone());
        std::thread::spawn(move || {
            // w/sub flips between the inside directory and the symlink to outside.
            let sub = base.join("w/sub");
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::rename(base.join("w/real"), &sub);
                let _ = fs::rename(&sub, base.join("w/real"));
                let _ = fs::rename(base.join("w/evil"), &sub);
                let _ = fs::rename(&sub, base.join("w/evil"));
            }
        })
    };
    let (mut read_ok, mut refused) = (0, 0);
    for i in 0..5000 {
        match read(&r, &base.join("w/sub/f.txt")) {
            Ok(text) => {
                assert_eq!(text, "inside", "read through the swapped symlink");
                read_ok += 1;
            }
            Err(FsError::Outside | FsError::NotFound) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
        let name = format!("w/sub/n{i}.txt");
        let _ = write(&r, &base.join(name), "x");
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let escaped: Vec<_> = fs::read_dir(base.join("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_str().unwrap().starts_with('n'))
        .collect();
    assert!(escaped.is_empty(), "files written outside: {escaped:?}");
    assert_eq!(
        fs::read_to_string(base.join("outside/f.txt")).unwrap(),
        "SECRET"
    );
    assert!(read_ok + refused == 5000);
}

/// A generated tree: directories and files inside `w` and outside, symlinks anywhere pointing
/// anywhere (absolute or relative, in or out), then requested paths built from its names.
/// (place, name, what) per node; name indices per requested path.
type Tree = (Vec<(u8, u8, u8)>, Vec<Vec<u8>>);

fn tree_and_paths() -> impl Strategy<Value = Tree> {
    (
        prop::collection::vec((0u8..4, 0u8..6, 0u8..8), 1..12),
        prop::collection::vec(prop::collection::vec(0u8..9, 1..5), 1..8),
    )
}

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const PLACES: [&str; 4] = ["w", "w/a", "outside", "w-secrets"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn confinement_never_admits_a_resolved_location_outside(
        (nodes, paths) in tree_and_paths()
    ) {
        let base = sandbox();
        fs::create_dir_all(base.join("w/a")).unwrap();
        for (place, name, what) in &nodes {
            let at = base.join(PLACES[*place as usize]).join(NAMES[*name as usize]);
            if fs::symlink_metadata(&at).is_ok() {
                continue;
            }
            let inside = at.starts_with(base.join("w"));
            match what {
                0 => { let _ = fs::create_dir(&at); }
                1 | 2 => { let _ = fs::write(&at, if inside { "in" } else { "out" }); }
                // Symlinks: absolute in/out, relative climbing out, to a sibling name.
                3 => { let _ = symlink(base.join("outside"), &at); }
                4 => { let _ = symlink(base.join("w"), &at); }
                5 => { let _ = symlink("../..", &at); }
                6 => { let _ = symlink("../outside/a", &at); }
                _ => { let _ = symlink(NAMES[(*name as usize + 1) % 6], &at); }
            }
        }
        let r = roots(&base);
        let root = base.join("w");
        let before = snapshot(&base.join("outside"));
        for parts in &paths {
            let mut path = root.clone();
            for p in parts {
                match p {
                    6 => path.push(".."),
                    7 => path.push("."),
                    8 => path.push("w"),
                    n => path.push(NAMES[*n as usize]),
                }
            }
            let text = path.to_str().unwrap();
            if let Ok(target) = confine(&r, text, false) {
                let Ok(resolved) = resolved(&target) else { continue };
                prop_assert!(resolved.starts_with(&root), "{text} resolved to {resolved:?}");
                if let Ok(real) = fs::canonicalize(&path) {
                    prop_assert!(real.starts_with(&root), "{text} is really {real:?}");
                }
            }
            if let Ok(content) = read(&r, &path) {
                // Outside files say "out"; inside ones "in", or "written" by an earlier write.
                prop_assert!(content == "in" || content == "written", "{} read {:?}", text, content);
            }
            let _ = write(&r, &path, "written");
        }
        prop_assert_eq!(before, snapshot(&base.join("outside")), "nothing outside changed");
        prop_assert_eq!(fs::read_to_string(base.join("w-secrets/s.txt")).unwrap(), "SECRET");
        let _ = fs::remove_dir_all(&base);
    }
}

/// Every path under `dir` (symlinks not followed) with its content.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.push((path, None));
            } else if meta.is_file() {
                out.push((path.clone(), Some(fs::read(&path).unwrap())));
            } else {
                out.push((path, None));
            }
        }
    }
    out.sort();
    out
}

//! The process table, read one way for every caller: /proc on Linux (one parser of
//! `/proc/PID/stat`), libproc on macOS (`darwin`). The stop path finds an agent's or a
//! terminal's descendants here, `group_busy` the rest of its group, and the guard everything
//! belonging to a registered group; all three walk parent links with `descendants`.

use std::collections::{HashMap, HashSet};

/// One process as the table shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: libc::pid_t,
    pub ppid: libc::pid_t,
    pub pgid: libc::pid_t,
    pub sid: libc::pid_t,
    /// A zombie (Linux `Z`) or dead (`X`): it runs nothing.
    pub exited: bool,
    /// Stopped by a signal (Linux `T`, or `t` under a tracer): it cannot fork until resumed.
    pub stopped: bool,
    /// When it started (clock ticks since boot on Linux, microseconds since the epoch on
    /// macOS): with the pid, it names one process even after the pid is reused.
    pub start: u64,
}

/// Reads `/proc/PID/stat`. The command name (field 2) is in parentheses and may hold any
/// byte a process can name itself with (`prctl(PR_SET_NAME)` or an executable's file name):
/// `)`, spaces, newlines, bytes that are not UTF-8. The fields are read after the *last* `)`,
/// and only they need be text.
pub fn parse_stat(pid: libc::pid_t, stat: &[u8]) -> Option<Proc> {
    let after = std::str::from_utf8(&stat[memchr::memrchr(b')', stat)? + 1..]).ok()?;
    let mut fields = after.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    // Field 22 (starttime) is the 19th after the state.
    let start = fields.nth(15)?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgid,
        sid,
        exited: matches!(state, "Z" | "X"),
        stopped: matches!(state, "T" | "t"),
        start,
    })
}

/// The process `pid`, or None once it is gone (or unreadable).
#[cfg(not(target_os = "macos"))]
pub fn process(pid: libc::pid_t) -> Option<Proc> {
    // One short line; its command name is at most 15 bytes, and need not be UTF-8.
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &stat)
}

#[cfg(target_os = "macos")]
pub fn process(pid: libc::pid_t) -> Option<Proc> {
    crate::darwin::info(pid).map(|info| Proc {
        pid,
        ppid: info.ppid,
        pgid: info.pgid,
        sid: info.sid,
        exited: info.zombie,
        stopped: info.stopped,
        start: info.start,
    })
}

/// Whether `pid` is gone, a zombie, or stopped in every one of its threads (Linux: each
/// `/proc/PID/task/TID/stat`; the process's own line shows its main thread only, and another
/// thread may still be finishing a fork). A thread that ends meanwhile counts as stopped.
#[cfg(not(target_os = "macos"))]
pub fn frozen(pid: libc::pid_t) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true; // gone
    };
    tasks.flatten().all(|task| {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            return true;
        };
        std::fs::read(format!("/proc/{pid}/task/{tid}/stat"))
            .ok()
            .and_then(|stat| parse_stat(tid, &stat))
            .is_none_or(|t| t.stopped || t.exited)
    })
}

/// Whether `pid` is gone, a zombie, or stopped (macOS: the process's status; libproc shows no
/// thread's own).
#[cfg(target_os = "macos")]
pub fn frozen(pid: libc::pid_t) -> bool {
    process(pid).is_none_or(|p| p.stopped || p.exited)
}

/// Every process the table lists (none where there is no /proc); one that exits during the
/// walk is left out.
pub fn processes() -> Vec<Proc> {
    pids().into_iter().filter_map(process).collect()
}

#[cfg(not(target_os = "macos"))]
fn pids() -> Vec<libc::pid_t> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(target_os = "macos")]
fn pids() -> Vec<libc::pid_t> {
    crate::darwin::all_pids()
}

/// Every process descended from one of `roots` by parent links in `table` (the roots left
/// out), so that a descendant which left the group (setsid) is still found. One re-parented
/// away before the table was read (its parent had exited) cannot be: the OS keeps no such link.
pub fn descendants_in(table: &[Proc], roots: &HashSet<libc::pid_t>) -> HashSet<libc::pid_t> {
    let mut children: HashMap<libc::pid_t, Vec<libc::pid_t>> = HashMap::new();
    for process in table {
        children.entry(process.ppid).or_default().push(process.pid);
    }
    let mut found = HashSet::new();
    let mut queue: Vec<libc::pid_t> = roots.iter().copied().collect();
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if !roots.contains(&child) && found.insert(child) {
                queue.push(child);
            }
        }
    }
    found
}

/// Every process descended from `root`, read from the table now.
pub fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    descendants_in(&processes(), &HashSet::from([root]))
        .into_iter()
        .collect()
}

/// Whether a live process other than `pgid` itself is in group `pgid`.
pub fn group_has_others(pgid: libc::pid_t) -> bool {
    processes()
        .iter()
        .any(|p| p.pid != pgid && p.pgid == pgid && !p.exited)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(comm: &str, state: &str) -> String {
        // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize …
        format!("4242 ({comm}) {state} 17 4242 4200 0 -1 4194560 90 0 0 0 1 2 0 0 20 0 1 0 987654 1234 56\n")
    }

    #[test]
    fn a_hostile_command_name_is_read_past() {
        for comm in [
            "sh",
            ") R 1 1 1",
            "a) Z 99 99 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1",
            "x y\nz",
            ")",
            "((",
            "\n) \n",
        ] {
            let parsed = parse_stat(4242, stat(comm, "S").as_bytes()).unwrap();
            assert_eq!(
                parsed,
                Proc {
                    pid: 4242,
                    ppid: 17,
                    pgid: 4242,
                    sid: 4200,
                    exited: false,
                    stopped: false,
                    start: 987654,
                },
                "comm {comm:?}"
            );
        }
        assert!(parse_stat(1, stat(") S", "Z").as_bytes()).unwrap().exited);
        assert!(parse_stat(1, stat(") S", "T").as_bytes()).unwrap().stopped);
        assert!(!parse_stat(1, stat(") T", "S").as_bytes()).unwrap().stopped);
        // A name that is not UTF-8 is no reason to lose the process.
        let mut bytes = b"4242 (\xff) \xfe) ".to_vec();
        bytes.extend_from_slice(&stat("", "S").as_bytes()[8..]);
        assert_eq!(parse_stat(4242, &bytes).map(|p| p.ppid), Some(17));
    }

    #[test]
    fn a_truncated_or_garbled_stat_is_no_process() {
        assert_eq!(parse_stat(1, b""), None);
        assert_eq!(parse_stat(1, b"1 (sh"), None);
        assert_eq!(parse_stat(1, b"1 (sh) S 0 1"), None);
        assert_eq!(
            parse_stat(1, b"1 (sh) S x 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1"),
            None
        );
    }

    #[test]
    fn the_walk_follows_parent_links_only_down() {
        let table: Vec<Proc> = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 13), (15, 12)]
            .into_iter()
            .map(|(pid, ppid)| Proc {
                pid,
                ppid,
                pgid: pid,
                sid: pid,
                exited: false,
                stopped: false,
                start: 0,
            })
            .collect();
        let found = descendants_in(&table, &HashSet::from([11]));
        assert_eq!(found, HashSet::from([12, 15]));
        assert_eq!(
            descendants_in(&table, &HashSet::from([11, 13])),
            HashSet::from([12, 14, 15])
        );
    }

    #[test]
    fn this_process_is_in_the_table() {
        let me = std::process::id() as libc::pid_t;
        let mine = process(me).expect("this process");
        assert_eq!(mine.ppid, unsafe { libc::getppid() });
        // SAFETY: getpgid/getsid of ourselves only read.
        assert_eq!(mine.pgid, unsafe { libc::getpgid(0) });
        assert_eq!(mine.sid, unsafe { libc::getsid(0) });
        assert!(processes().iter().any(|p| p.pid == me));
    }

    /// Starts `program -c script`, which prints the pid of a child it starts and waits; returns
    /// the two pids.
    #[cfg(target_os = "linux")]
    fn shell_with_child(
        program: &std::path::Path,
        script: &str,
    ) -> (std::process::Child, libc::pid_t) {
        use std::io::BufRead;
        let mut shell = std::process::Command::new(program)
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(shell.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (shell, line.trim().parse().unwrap())
    }

    /// Attack: live processes whose names are made to fool a parser that reads fields after the
    /// first `)`, splits lines or wants UTF-8: two named by their executable's file name (one
    /// not UTF-8), one by writing its own /proc/self/comm (as prctl(PR_SET_NAME) does). Each must be read right, and the walk
    /// must reach the child beneath it.
    #[cfg(target_os = "linux")]
    #[test]
    fn live_processes_with_hostile_names_are_read_right() {
        use std::os::unix::ffi::OsStrExt;
        let me = std::process::id() as libc::pid_t;
        let dir = std::env::temp_dir().join(format!("acp-os-comm-{me}"));
        std::fs::create_dir_all(&dir).unwrap();
        let by_file = dir.join("a) Z 1 1\n) R 9");
        std::fs::copy("/bin/sh", &by_file).unwrap();
        // A name that is not UTF-8 (a file name may hold any byte but '/' and NUL).
        let not_utf8 = dir.join(std::ffi::OsStr::from_bytes(b"\xff) S 1 1 \xfe"));
        std::fs::copy("/bin/sh", &not_utf8).unwrap();
        let renamed = r#"printf ') X 1 1 1 1\n) ' > /proc/self/comm; sleep 60 & echo $!; wait"#;
        let child_and_wait = "sleep 60 & echo $!; wait";
        for (program, script) in [
            (by_file.as_path(), child_and_wait),
            (not_utf8.as_path(), child_and_wait),
            (std::path::Path::new("/bin/sh"), renamed),
        ] {
            let (mut shell, child) = shell_with_child(program, script);
            let pid = shell.id() as libc::pid_t;
            let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap();
            let comm = String::from_utf8_lossy(&comm);
            assert!(comm.contains(") "), "{comm:?}");
            let read = process(pid).expect("the shell is in the table");
            assert_eq!((read.ppid, read.exited), (me, false), "{comm:?}");
            // SAFETY: getpgid/getsid only read.
            assert_eq!(read.pgid, unsafe { libc::getpgid(pid) });
            assert_eq!(read.sid, unsafe { libc::getsid(pid) });
            let found = descendants(me);
            assert!(
                found.contains(&pid) && found.contains(&child),
                "{comm:?}: {found:?}"
            );
            // SAFETY: kill(2) of our own child and its child.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
            shell.wait().unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

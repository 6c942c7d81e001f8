//! Killing a family of processes without letting any fork away: every target is frozen with
//! SIGSTOP, the table is read again until a pass finds no new one (a stopped process cannot
//! fork), then all are SIGKILLed. A walk followed straight by kills (what `stop` did before)
//! lost whatever a descendant forked between the two, and a child that then called setsid()
//! was in neither the group nor the walk: an orphan. The agent's stop, a terminal's kill and
//! the guard all end their processes here.
//!
//! Targets of a leader `g`: every process whose process group or session is `g`, `g` itself,
//! and every descendant of any of those by parent links. Only for a leader that is not yet
//! reaped (its pid, the group id, is then still ours).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::proc_table::{self, Proc};

/// Every live process that belongs to one of `leaders`: same group or session, or descended
/// from such a process (this process, the guard, left out).
pub fn targets(leaders: &[libc::pid_t]) -> Vec<libc::pid_t> {
    targets_in(&proc_table::processes(), leaders, &HashSet::new())
        .into_iter()
        .collect()
}

/// The targets in `table`; `frozen` (processes already signalled) are roots too, so that what
/// one of them forked is still found after it left the group and session (setsid) with a
/// parent that had exited.
fn targets_in(
    table: &[Proc],
    leaders: &[libc::pid_t],
    frozen: &HashSet<libc::pid_t>,
) -> HashSet<libc::pid_t> {
    let me = std::process::id() as libc::pid_t;
    let live: Vec<Proc> = table
        .iter()
        .filter(|p| !p.exited && p.pid != me)
        .cloned()
        .collect();
    let roots: HashSet<libc::pid_t> = leaders.iter().copied().collect();
    let mut found: HashSet<libc::pid_t> = live
        .iter()
        .filter(|p| {
            roots.contains(&p.pid)
                || roots.contains(&p.pgid)
                || roots.contains(&p.sid)
                || frozen.contains(&p.pid)
        })
        .map(|p| p.pid)
        .collect();
    found.extend(proc_table::descendants_in(&live, &found));
    found
}

/// How long the freeze waits, all told, for the processes it signalled to be seen stopped (a
/// process in an uninterruptible wait, a hung NFS read, stops only when it returns): then they
/// are killed as they are.
const FREEZE_WAIT: Duration = Duration::from_secs(1);

/// Passes over the table, all told: a bound for a fork bomb outrunning it (each pass freezes
/// what it found, so the next finds only what was forked meanwhile).
const FREEZE_PASSES: usize = 200;

/// Freezes every target, then kills them and the groups themselves.
///
/// The freeze is done when a pass over the table finds no new target and every target was
/// confirmed stopped *before that pass began listing the table*, every thread of it (a thread
/// may finish a fork after its leader shows stopped). Confirmed after the listing began is not
/// enough: a process the signal stopped just after finishing a fork has a child the listing
/// may have missed. kill(2) returns before the signal is taken, so each process signalled is
/// waited for (by its own /proc entries, cheaper than the table), then the table is read once
/// more. A process that cannot be signalled (another user's: EPERM) is not waited for.
pub fn freeze_then_kill(leaders: &[libc::pid_t]) {
    if leaders.is_empty() {
        return;
    }
    let deadline = Instant::now() + FREEZE_WAIT;
    let mut signalled: HashSet<libc::pid_t> = HashSet::new();
    let mut unfreezable: HashSet<libc::pid_t> = HashSet::new();
    let mut confirmed: HashSet<libc::pid_t> = HashSet::new();
    for _ in 0..FREEZE_PASSES {
        let confirmed_before = confirmed.clone();
        let table = proc_table::processes();
        let found = targets_in(&table, leaders, &signalled);
        let mut fresh = Vec::new();
        for &pid in &found {
            if signalled.contains(&pid) || unfreezable.contains(&pid) {
                continue;
            }
            // SAFETY: plain kill(2) of a process found in one of the registered groups.
            if unsafe { libc::kill(pid, libc::SIGSTOP) } == 0 {
                signalled.insert(pid);
                fresh.push(pid);
            } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
                confirmed.insert(pid); // gone
            } else {
                unfreezable.insert(pid);
            }
        }
        if fresh.is_empty()
            && found
                .iter()
                .all(|pid| confirmed_before.contains(pid) || unfreezable.contains(pid))
        {
            break;
        }
        // Those not yet confirmed (the fresh ones, and any seen running): then another pass.
        let pending: Vec<libc::pid_t> = found
            .into_iter()
            .filter(|pid| signalled.contains(pid) && !confirmed.contains(pid))
            .collect();
        if !wait_stopped(&pending, deadline, &mut confirmed) && fresh.is_empty() {
            break; // the deadline, and nothing new: kill them as they are
        }
    }
    for &leader in leaders {
        // SAFETY: plain kill(2) of a registered group.
        unsafe { libc::kill(-leader, libc::SIGKILL) };
    }
    for pid in signalled.into_iter().chain(unfreezable) {
        // SAFETY: as above, processes frozen a moment ago (so their pids are still theirs).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Waits until each of `pids` is confirmed stopped (every thread) or gone, reading only their
/// own entries, and notes each in `confirmed`; false when `deadline` came first.
fn wait_stopped(
    pids: &[libc::pid_t],
    deadline: Instant,
    confirmed: &mut HashSet<libc::pid_t>,
) -> bool {
    loop {
        for &pid in pids {
            if !confirmed.contains(&pid) && proc_table::frozen(pid) {
                confirmed.insert(pid);
            }
        }
        if pids.iter().all(|pid| confirmed.contains(pid)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// A flood of forks that call setsid(), for the stop paths' tests (here, `process`, `terminal`).
#[cfg(all(test, target_os = "linux"))]
pub(crate) mod flood {
    use crate::proc_table;

    /// A tag no other process carries: the argument of the flood's `sleep`s.
    pub(crate) fn fork_race_tag() -> String {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(1);
        format!(
            "{}.{}",
            7000 + NEXT.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        )
    }

    /// A shell whose child leaves the group and session (setsid), then starts 1000 `setsid
    /// sleep <tag>`s one after the other, as fast as it can (bounded, so a missed kill cannot
    /// fill the machine), and prints a line after the 20th: the flood is on when its reader
    /// kills. Nothing of the flood is in the leader's group or session, so only the walk of
    /// parent links, and the freeze that keeps those links, can reach a child forked in flight.
    pub(crate) fn fork_race_script(tag: &str) -> String {
        format!(
            "setsid sh -c 'i=0; while [ $i -lt 1000 ]; do setsid sleep {tag} & i=$((i+1)); \
             [ $i = 20 ] && echo 0; done; wait' & wait"
        )
    }

    /// Every process whose command line holds `<tag>` (the flood's shells and sleeps), waited
    /// for up to 2 s to be gone, and looked for once more 50 ms later; the survivors are killed
    /// (so a failure leaves nothing behind) and named in the failure.
    pub(crate) fn assert_none_left(tag: &str) {
        use std::time::{Duration, Instant};
        let wanted = tag.as_bytes();
        let find = || -> Vec<libc::pid_t> {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
                .filter(|&pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| c.windows(wanted.len()).any(|w| w == wanted))
                        && proc_table::process(pid).is_some_and(|p| !p.exited)
                })
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut left = find();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            left = find();
        }
        if left.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
            left = find();
        }
        for &pid in &left {
            // SAFETY: plain kill(2) of a process running our tagged sleep.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert!(
            left.is_empty(),
            "{} tagged processes escaped: {left:?}",
            left.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    fn alive(pid: i32) -> bool {
        proc_table::process(pid).is_some_and(|p| !p.exited)
    }

    /// Starts `sh -c script arg0` as a group leader; returns it and the pid its first line
    /// names.
    fn leader_and_escaped(script: &str, arg0: &std::ffi::OsStr) -> (std::process::Child, i32) {
        use std::io::Read;
        let mut leader = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg(arg0)
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        let mut out = leader.stdout.take().unwrap();
        while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        let escaped = String::from_utf8(line).unwrap().trim().parse().unwrap();
        (leader, escaped)
    }

    /// The guard's targets of `leader` hold `escaped`, and freeze_then_kill kills it.
    fn freeze_reaches(mut leader: std::process::Child, escaped: i32) {
        let group = targets(&[leader.id() as i32]);
        assert!(group.contains(&escaped), "{group:?}");
        freeze_then_kill(&[leader.id() as i32]);
        leader.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(escaped) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(escaped));
    }

    #[test]
    fn freeze_reaches_the_group_and_a_setsid_descendant() {
        // The leader's child calls setsid(): out of the group and session, still a descendant.
        let script = "setsid sleep 100 & echo $!; sleep 100 & wait";
        let (leader, escaped) = leader_and_escaped(script, "sh".as_ref());
        let deadline = Instant::now() + Duration::from_secs(5);
        // SAFETY: getsid(2) only reads.
        while unsafe { libc::getsid(escaped) } != escaped && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        freeze_reaches(leader, escaped);
    }

    /// Attack: the escape goes through a program whose name is not UTF-8 (and holds `)`): the
    /// child it starts is reached only through it.
    #[cfg(target_os = "linux")]
    #[test]
    fn freeze_reaches_through_a_process_whose_name_is_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("acp-os-guard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let odd = dir.join(std::ffi::OsStr::from_bytes(b"\xfe) R 1 1 \xff"));
        std::fs::copy("/bin/sh", &odd).unwrap();
        let script = r#"setsid "$0" -c 'sleep 100 & echo $!; wait' & sleep 100 & wait"#;
        let (leader, escaped) = leader_and_escaped(script, odd.as_os_str());
        freeze_reaches(leader, escaped);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Attack: a descendant forks children that call setsid() as fast as it can while the
    /// family is killed. A walk then kill lost the ones forked between the two (out of the
    /// group and session, unknown to the walk); frozen first, none gets away.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_forking_descendant_loses_no_child_to_setsid() {
        let tag = flood::fork_race_tag();
        let (mut leader, _) = leader_and_escaped(&flood::fork_race_script(&tag), "sh".as_ref());
        freeze_then_kill(&[leader.id() as i32]);
        leader.wait().unwrap();
        flood::assert_none_left(&tag);
    }
}

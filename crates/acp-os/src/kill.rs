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
    targets_in(&proc_table::processes(), leaders)
        .into_iter()
        .map(|p| p.pid)
        .collect()
}

fn targets_in<'t>(table: &'t [Proc], leaders: &[libc::pid_t]) -> Vec<&'t Proc> {
    let me = std::process::id() as libc::pid_t;
    let live: Vec<Proc> = table
        .iter()
        .filter(|p| !p.exited && p.pid != me)
        .cloned()
        .collect();
    let roots: HashSet<libc::pid_t> = leaders.iter().copied().collect();
    let mut found: HashSet<libc::pid_t> = live
        .iter()
        .filter(|p| roots.contains(&p.pid) || roots.contains(&p.pgid) || roots.contains(&p.sid))
        .map(|p| p.pid)
        .collect();
    found.extend(proc_table::descendants_in(&live, &found));
    table
        .iter()
        .filter(|p| !p.exited && p.pid != me && found.contains(&p.pid))
        .collect()
}

/// How long the freeze waits, once a pass finds no new target, for those it signalled to be
/// seen stopped (a process in an uninterruptible wait, a hung NFS read, stops only when it
/// returns): then they are killed as they are.
const FREEZE_WAIT: Duration = Duration::from_secs(1);

/// Passes that may find new targets (each freezes what it found, so a pass finds only what was
/// forked during the one before): a bound for a fork bomb outrunning the table.
const FREEZE_PASSES: usize = 100;

/// Freezes every target, then kills them and the groups themselves. The freeze is done when a
/// pass over the table finds no new target and every one it sent SIGSTOP is seen stopped.
/// A process forked while a pass read the table (a long time on a loaded machine) is found by
/// the next one, its parent being frozen, not dead; and kill(2) returns before the signal is
/// taken, so a process signalled may still fork until it is seen stopped.
pub fn freeze_then_kill(leaders: &[libc::pid_t]) {
    if leaders.is_empty() {
        return;
    }
    // The waits for "seen stopped" share one bound; the passes that find new targets do not.
    let deadline = Instant::now() + FREEZE_WAIT;
    let mut stopped: HashSet<libc::pid_t> = HashSet::new();
    let mut passes = 0;
    loop {
        let table = proc_table::processes();
        let found = targets_in(&table, leaders);
        let mut signalled = Vec::new();
        for process in &found {
            if stopped.insert(process.pid) {
                // SAFETY: plain kill(2) of a process found in one of the registered groups.
                unsafe { libc::kill(process.pid, libc::SIGSTOP) };
                signalled.push(process.pid);
            }
        }
        if signalled.is_empty() {
            let running: Vec<libc::pid_t> =
                found.iter().filter(|p| !p.stopped).map(|p| p.pid).collect();
            if running.is_empty() || !wait_stopped(&running, deadline) {
                break;
            }
        } else {
            passes += 1;
            if passes >= FREEZE_PASSES {
                break;
            }
            // Then a pass for what they forked before they stopped (their parents are frozen,
            // so it is still theirs by parent links); by its end they have mostly stopped, and
            // those that have not are waited for above.
        }
    }
    for &leader in leaders {
        // SAFETY: plain kill(2) of a registered group.
        unsafe { libc::kill(-leader, libc::SIGKILL) };
    }
    for pid in stopped {
        // SAFETY: as above, processes frozen a moment ago (so their pids are still theirs).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Waits until each of `pids` is stopped or gone, reading only their own entries (cheaper than
/// a pass over the table); false when `deadline` came first.
fn wait_stopped(pids: &[libc::pid_t], deadline: Instant) -> bool {
    loop {
        let settled = pids
            .iter()
            .all(|&pid| proc_table::process(pid).is_none_or(|p| p.exited || p.stopped));
        if settled {
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

    /// A shell that starts 1000 `setsid sleep <tag>`s one after the other, as fast as it can
    /// (bounded, so a missed kill cannot fill the machine), and prints a line after the 20th: the
    /// flood is on when its reader kills.
    pub(crate) fn fork_race_script(tag: &str) -> String {
        format!(
            "i=0; while [ $i -lt 1000 ]; do setsid sleep {tag} & i=$((i+1)); \
             [ $i = 20 ] && echo 0; done; wait"
        )
    }

    /// Every process whose command line is `sleep <tag>`, waited for up to 2 s to be gone; the
    /// survivors are killed (so a failure leaves nothing behind) and named in the failure.
    pub(crate) fn assert_none_left(tag: &str) {
        use std::time::{Duration, Instant};
        let wanted = format!("sleep\0{tag}\0").into_bytes();
        let find = || -> Vec<libc::pid_t> {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
                .filter(|&pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted)
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

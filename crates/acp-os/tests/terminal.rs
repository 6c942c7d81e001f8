//! Terminals (design/host.md §3): output kept as a bounded UTF-8-boundary suffix (property),
//! exit statuses, and killing a group whose grandchild ignores SIGTERM.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_os::terminal::{Retained, Spawn, Terminals};
use proptest::prelude::*;

fn env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

fn cwd() -> OwnedFd {
    File::open("/").unwrap().into()
}

fn spawn(terminals: &Arc<Terminals>, script: &str, limit: usize) -> String {
    terminals
        .create(
            "s",
            Spawn {
                command: "sh".into(),
                args: vec!["-c".into(), script.into()],
                env: env(),
                cwd: cwd(),
                limit,
            },
        )
        .unwrap()
}

/// Waits (up to a generous bound, not a timing assertion) until `done` holds.
fn eventually(mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < until, "never happened");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie counts as gone: it runs nothing.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn output_and_exit_status() {
    let terminals = Terminals::new().unwrap();
    let id = spawn(&terminals, "printf 'hi\\n'; echo err >&2; exit 3", 1 << 20);
    assert_eq!(id, "term-1");
    eventually(|| terminals.exit_status(&id, "s").unwrap().is_some());
    eventually(|| terminals.output(&id, "s").unwrap().0 == b"hi\nerr\n");
    let (_, truncated, exit) = terminals.output(&id, "s").unwrap();
    assert!(!truncated);
    assert_eq!(exit.unwrap().exit_code, Some(3));
    assert!(terminals.output(&id, "other session").is_none());
    assert!(terminals.release(&id, "s"));
    assert!(
        terminals.output(&id, "s").is_none(),
        "a released id is unknown"
    );
    assert_eq!(terminals.exit_of(&id).unwrap().exit_code, Some(3));
    terminals.close();
}

#[test]
fn a_flood_is_kept_within_the_limit() {
    let terminals = Terminals::new().unwrap();
    let id = spawn(
        &terminals,
        "yes 'ééé' | head -n 8000000; echo end",
        64 * 1024,
    );
    eventually(|| terminals.exit_status(&id, "s").unwrap().is_some());
    eventually(|| terminals.output(&id, "s").unwrap().0.ends_with(b"end\n"));
    let (bytes, truncated, _) = terminals.output(&id, "s").unwrap();
    assert!(truncated);
    assert!(bytes.len() <= 64 * 1024);
    assert!(std::str::from_utf8(&bytes).is_ok());
    terminals.close();
}

#[test]
fn kill_reaches_a_grandchild_that_ignores_sigterm() {
    let dir = std::env::temp_dir().join(format!("acp-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("grandchild");
    let terminals = Terminals::new().unwrap();
    let script = format!(
        "trap '' TERM; (trap '' TERM; echo $$ >/dev/null; sh -c 'echo $$ > {}; exec sleep 1000') & sleep 1000",
        pidfile.display()
    );
    let id = spawn(&terminals, &script, 1024);
    eventually(|| std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n')));
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    assert!(terminals.kill(&id, "s"));
    eventually(|| terminals.exit_status(&id, "s").unwrap().is_some());
    let exit = terminals.exit_status(&id, "s").unwrap().unwrap();
    assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
    eventually(|| !alive(grandchild));
    assert!(
        terminals.output(&id, "s").is_some(),
        "a killed terminal stays readable"
    );
    terminals.close();
}

#[test]
fn close_kills_every_terminal() {
    let terminals = Terminals::new().unwrap();
    let a = spawn(&terminals, "trap '' TERM; sleep 1000", 16);
    let b = spawn(&terminals, "sleep 1000", 16);
    assert_eq!(b, "term-2");
    assert!(terminals.exit_status(&a, "s").unwrap().is_none());
    terminals.close();
    assert!(terminals.exit_of(&a).is_some() && terminals.exit_of(&b).is_some());
}

/// The longest suffix of `all` within `limit` bytes that starts on a UTF-8 boundary.
fn reference(all: &[u8], limit: usize) -> &[u8] {
    let mut start = all.len().saturating_sub(limit);
    while start < all.len() && all[start] & 0xC0 == 0x80 {
        start += 1;
    }
    &all[start..]
}

proptest! {
    #[test]
    fn retained_output_is_the_longest_valid_suffix_within_the_limit(
        text in "\\PC{0,80}",
        cuts in prop::collection::vec(0usize..400, 0..10),
        limit in 0usize..64,
    ) {
        let all = text.as_bytes();
        let mut retained = Retained::new(limit);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (all.len() + 1)).collect();
        points.sort_unstable();
        let mut from = 0;
        for at in points.into_iter().chain([all.len()]) {
            retained.push(&all[from..at]);
            from = at;
        }
        let (kept, truncated) = retained.snapshot();
        prop_assert!(kept.len() <= limit);
        prop_assert!(std::str::from_utf8(&kept).is_ok());
        prop_assert_eq!(&kept[..], reference(all, limit));
        prop_assert_eq!(truncated, kept.len() < all.len());
    }
}

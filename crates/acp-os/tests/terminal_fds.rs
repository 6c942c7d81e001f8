//! Attack: terminals created on several threads while another thread forks children in a loop.
//! A terminal's output pipe made with pipe() and then fcntl(FD_CLOEXEC) could be inherited by a
//! child forked in between (another terminal, another client's agent), which then held the
//! terminal's output open for as long as it lived. Every child here lists its own descriptors;
//! none may hold the stdout pipe of a terminal other than its own.
#![cfg(target_os = "linux")]

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_os::terminal::{Spawn, Terminals};

/// A shell that lists its own descriptors ("fd -> target" lines), then END.
const LIST_FDS: &str = "ls -l /proc/$$/fd; echo END";

/// (descriptor, pipe inode) of each pipe in an `ls -l /proc/PID/fd` listing.
fn pipes(listing: &str) -> Vec<(u32, u64)> {
    listing
        .lines()
        .filter_map(|line| {
            let (left, target) = line.split_once(" -> ")?;
            let fd = left.rsplit(' ').next()?.parse().ok()?;
            let inode = target
                .strip_prefix("pipe:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            Some((fd, inode))
        })
        .collect()
}

fn spawn(command: &str) -> Spawn {
    Spawn {
        command: "/bin/sh".into(),
        args: vec!["-c".into(), command.into()],
        env: std::env::vars_os().collect::<Vec<(OsString, OsString)>>(),
        cwd: File::open("/").unwrap().into(),
        limit: 1 << 16,
    }
}

/// Creates `count` terminals one after another, each listing its descriptors; returns each
/// listing once complete.
fn terminal_listings(terminals: &Arc<Terminals>, session: &str, count: usize) -> Vec<String> {
    let mut listings = Vec::new();
    for _ in 0..count {
        let id = terminals.create(session, spawn(LIST_FDS)).unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let (bytes, _, exit) = terminals.output(&id, session).unwrap();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if exit.is_some() && text.contains("END") {
                listings.push(text);
                break;
            }
            assert!(Instant::now() < until, "terminal {id} never ended: {text}");
            std::thread::sleep(Duration::from_millis(1));
        }
        terminals.release(&id, session);
    }
    listings
}

#[test]
fn no_child_forked_meanwhile_inherits_a_terminal_pipe() {
    let terminals = Terminals::new().unwrap();
    let stop = AtomicBool::new(false);
    let (listings, forked) = std::thread::scope(|scope| {
        // A thread that forks and execs plain children as fast as it can (another client
        // starting its agent, a host's own subprocesses).
        let forker = scope.spawn(|| {
            let mut listings = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let out = Command::new("/bin/sh")
                    .args(["-c", LIST_FDS])
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .output()
                    .unwrap();
                listings.push(String::from_utf8_lossy(&out.stdout).into_owned());
            }
            listings
        });
        let creators: Vec<_> = (0..3)
            .map(|n| {
                let terminals = &terminals;
                scope.spawn(move || terminal_listings(terminals, &format!("s{n}"), 150))
            })
            .collect();
        let listings: Vec<String> = creators
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        stop.store(true, Ordering::SeqCst);
        (listings, forker.join().unwrap())
    });
    // Each terminal's own output pipe is its fd 1.
    let own: HashMap<u64, usize> = listings
        .iter()
        .enumerate()
        .filter_map(|(n, l)| {
            pipes(l)
                .into_iter()
                .find(|(fd, _)| *fd == 1)
                .map(|(_, i)| (i, n))
        })
        .collect();
    assert_eq!(
        own.len(),
        listings.len(),
        "every terminal's stdout is a pipe of its own"
    );
    let mut leaks = HashSet::new();
    for (n, listing) in listings.iter().enumerate() {
        for (fd, inode) in pipes(listing) {
            if own.get(&inode).is_some_and(|owner| *owner != n) {
                leaks.insert(format!(
                    "terminal {n} holds terminal {}'s pipe as fd {fd}",
                    own[&inode]
                ));
            }
        }
    }
    for listing in &forked {
        for (fd, inode) in pipes(listing) {
            if let Some(owner) = own.get(&inode) {
                leaks.insert(format!(
                    "a forked child holds terminal {owner}'s pipe as fd {fd}"
                ));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "{} of {} terminals' pipes leaked into children ({} forked meanwhile): {leaks:?}",
        leaks.len(),
        listings.len(),
        forked.len()
    );
}

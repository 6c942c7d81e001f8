//! A JSONL journal stays a prefix of whole records whatever cuts a write short: a write the
//! file-size limit stops halfway is cut back to the last whole record (and the journal goes on
//! from there once reopened), and a writer killed mid-stream leaves whole records in order,
//! then at most a torn tail that is the start of the next record (what the Python side drops
//! when it reopens the journal).
//!
//! Both attacks run in a child process (this test binary run again for one test, told by an
//! environment variable): a file-size limit and a SIGKILL must not reach the test runner.

mod common;

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acp_journal::{record_update, Core, Error, Fsync, JsonlStore, Plain};
use common::{number, update, whole_records, Scratch};

/// Where the child writes its journal, set by the parent test.
const CHILD: &str = "ACP_JOURNAL_TEST_CHILD";
/// The file-size limit (bytes) the first child runs under.
const LIMIT: u64 = 300_000;

fn envelope() -> Vec<u8> {
    [b"{\"t\":\"".as_slice(), &[b'c'; 300], b"\"}"].concat()
}

/// Runs this binary's test `name` again in a child, its journal at `path`; `limit`: the
/// file-size limit it runs under (SIGXFSZ ignored: the write fails with EFBIG instead).
fn child(name: &str, path: &std::path::Path, limit: Option<u64>) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, path)
        .stdin(Stdio::null());
    if let Some(limit) = limit {
        // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs here.
        unsafe {
            command.pre_exec(move || {
                let bound = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                if libc::setrlimit(libc::RLIMIT_FSIZE, &bound) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    command
}

/// A child killed and reaped however the test ends (no orphan left writing).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn append_to(path: &std::path::Path) -> std::fs::File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

#[test]
fn a_write_cut_short_is_cut_back_to_whole_records() {
    if let Some(path) = std::env::var_os(CHILD) {
        // The child: records until the limit stops a write (each stored at once: fsync
        // "every", so the failing write is this thread's and its error is seen here).
        let file = append_to(path.as_ref());
        let core = Core::new(JsonlStore::new(file, 0, Fsync::Every), Fsync::Every, 0, 1).unwrap();
        let envelope = envelope();
        let mut sequence = 0;
        let failed = loop {
            // Ten records a write: the limit lands inside one of them.
            let stored = (0..10).try_for_each(|_| {
                sequence += 1;
                record_update(&core, &Plain, update("s", sequence, &envelope), 7)
            });
            if let Err(failed) = stored {
                break failed;
            }
        };
        assert!(
            matches!(&failed, Error::Write(text) if text.contains("too large")),
            "{failed}"
        );
        assert!(matches!(core.close(&Plain), Err(Error::Lost(_))));
        return;
    }
    let scratch = Scratch::new("cut-back");
    let path = scratch.file("journal.jsonl");
    let name = "a_write_cut_short_is_cut_back_to_whole_records";
    let out = child(name, &path, Some(LIMIT)).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child failed ({}): {said}",
        out.status
    );
    let text = std::fs::read(&path).unwrap();
    // Without the cut the file would end at the limit, inside a record.
    assert!((text.len() as u64) < LIMIT, "{} bytes", text.len());
    let whole = whole_records(&text, 1);
    assert!(whole > 100, "{whole} records");
    // Reopened (what the Python side does: size and last record from the file), the journal
    // goes on from its last whole record.
    let size = text.len() as u64;
    let store = JsonlStore::new(append_to(&path), size, Fsync::Never);
    let core = Core::new(store, Fsync::Never, whole, 1).unwrap();
    for sequence in 0..5 {
        record_update(&core, &Plain, update("s", sequence, b"{}"), 7).unwrap();
    }
    core.close(&Plain).unwrap();
    assert_eq!(whole_records(&std::fs::read(&path).unwrap(), 1), whole + 5);
}

#[test]
fn a_writer_killed_mid_stream_leaves_whole_records_then_at_most_a_torn_one() {
    if let Some(path) = std::env::var_os(CHILD) {
        // The child: records as fast as it can, batches written by the batch thread, until
        // killed.
        let core = Core::new(
            JsonlStore::new(append_to(path.as_ref()), 0, Fsync::Never),
            Fsync::Never,
            0,
            1,
        )
        .unwrap();
        let envelope = envelope();
        for sequence in 0.. {
            record_update(&core, &Plain, update("s", sequence, &envelope), 7).unwrap();
        }
        return;
    }
    let scratch = Scratch::new("killed");
    let path = scratch.file("journal.jsonl");
    let name = "a_writer_killed_mid_stream_leaves_whole_records_then_at_most_a_torn_one";
    let running = child(name, &path, None)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Reaped(running);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < 4 << 20 {
        assert!(Instant::now() < deadline, "the child wrote too little");
        std::thread::sleep(Duration::from_millis(1));
    }
    running.0.kill().unwrap(); // SIGKILL: no close(), no flush
    running.0.wait().unwrap();
    let text = std::fs::read(&path).unwrap();
    let end = text
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    let whole = whole_records(&text[..end], 1);
    assert!(whole > 1_000, "{whole} records");
    // A torn tail, if any, is the start of the next record's line.
    let torn = &text[end..];
    let next = format!("{{\"n\":{},", whole + 1);
    let head = &next.as_bytes()[..torn.len().min(next.len())];
    assert!(
        torn.starts_with(head),
        "a torn tail of {} bytes",
        torn.len()
    );
    assert_eq!(number(b"{\"n\":1,}"), Some(1));
}

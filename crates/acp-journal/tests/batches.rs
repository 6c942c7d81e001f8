//! The batch thread and the group-commit syncs: records reach the store whole, in the order
//! they were made, gap-free, whoever stores them (the batch thread, a caller storing a record
//! that must be durable, flush, close); a lagging store bounds what is pending; a failed store
//! stops the journal with the stored part a gap-free prefix.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use acp_journal::{
    record_other, record_update, Core, Error, Fsync, JsonlStore, Plain, MAX_PENDING_BYTES,
};
use common::{number, update, whole_records, Memory, Scratch};

const ENVELOPE: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update","params":{"x":1}}"#;

#[test]
fn threads_appending_at_once_get_one_gap_free_order() {
    let (memory, stored) = Memory::new();
    let core = Core::new(memory, Fsync::Never, 0, 1).unwrap();
    let sessions = ["s-0", "s-1", "s-2", "s-3"];
    std::thread::scope(|scope| {
        for session in sessions {
            let core = &core;
            scope.spawn(move || {
                for sequence in 0..5_000 {
                    record_update(core, &Plain, update(session, sequence, ENVELOPE), 7).unwrap();
                    if sequence % 1_000 == 999 {
                        // Stored at once, on this thread, between the batch thread's batches.
                        record_other(core, &Plain, "sent", None, br#""i":""}"#).unwrap();
                    }
                }
            });
        }
    });
    core.close(&Plain).unwrap();
    let stored = stored.lock().unwrap();
    assert!(stored.closed);
    assert_eq!(whole_records(&stored.text, 1), 4 * 5_000 + 4 * 5);
    // Each batch holds the records its numbers say, the next one starting where it ended.
    let mut next = 1;
    for &(first, last) in &stored.batches {
        assert_eq!(first, next);
        next = last + 1;
    }
    // Each thread's updates are in its own order.
    let mut last: HashMap<Vec<u8>, u64> = HashMap::new();
    for line in stored
        .text
        .split(|&b| b == b'\n')
        .filter(|l| l.contains(&b'm'))
    {
        let text = String::from_utf8_lossy(line);
        let Some(at) = text.find("\"i\":\"") else {
            continue;
        };
        let session = text[at + 5..at + 8].as_bytes().to_vec();
        let sequence: u64 = text
            .split("\"s\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if let Some(before) = last.insert(session, sequence) {
            assert_eq!(sequence, before + 1);
        }
    }
    assert_eq!(last.len(), 4);
}

#[test]
fn a_lagging_store_bounds_what_is_pending() {
    let (mut memory, stored) = Memory::new();
    memory.delay = Duration::from_millis(20);
    let core = Core::new(memory, Fsync::Never, 0, 1).unwrap();
    let envelope = [b"{\"t\":\"".as_slice(), &[b'a'; 900], b"\"}"].concat();
    let updates = 30_000; // ~30 MB of lines: the reader far outruns a store taking 20 ms a batch
    for sequence in 0..updates {
        record_update(&core, &Plain, update("s", sequence, &envelope), 7).unwrap();
    }
    core.close(&Plain).unwrap();
    let stored = stored.lock().unwrap();
    assert_eq!(whole_records(&stored.text, 1), updates);
    // The reader waited at the bound: no batch grew past it by more than one record.
    assert!(
        stored.largest < MAX_PENDING_BYTES + envelope.len() + 200,
        "a batch of {} bytes pending",
        stored.largest
    );
    assert!(
        stored.batches.len() >= 20,
        "{} batches",
        stored.batches.len()
    );
}

#[test]
fn a_failed_store_leaves_a_gap_free_prefix_and_stops_the_journal() {
    let (memory, stored) = Memory::new();
    let core = Core::new(memory, Fsync::Never, 10, 1).unwrap();
    for sequence in 0..100 {
        record_update(&core, &Plain, update("s", sequence, ENVELOPE), 7).unwrap();
    }
    // Records 11 to 110 stored (by the batch thread and this flush, in one batch or more);
    // every store from here on fails, whichever thread makes it.
    core.flush(&Plain).unwrap();
    stored.lock().unwrap().failing = true;
    record_update(&core, &Plain, update("s", 100, ENVELOPE), 7).unwrap();
    // Stored at once on this thread; the batch thread may have met the failure first (storing
    // record 100 if this thread was descheduled for a batch interval), so either error says it.
    let failed = record_other(&core, &Plain, "permission", None, br#""i":""}"#);
    assert!(
        matches!(&failed, Err(Error::Write(m) | Error::Earlier(m)) if m == "disk full (test)"),
        "{failed:?}"
    );
    let earlier = Error::Earlier("disk full (test)".to_owned());
    assert_eq!(
        record_update(&core, &Plain, update("s", 101, ENVELOPE), 7),
        Err(earlier.clone())
    );
    assert_eq!(core.flush(&Plain), Err(earlier));
    let lost = core.close(&Plain);
    assert_eq!(lost, Err(Error::Lost("disk full (test)".to_owned())));
    assert_eq!(
        lost.unwrap_err().to_string(),
        "records were lost: a write failed (disk full (test))"
    );
    assert_eq!(core.close(&Plain), Ok(())); // raised once
    let stored = stored.lock().unwrap();
    let mut next = 11;
    for &(first, last) in &stored.batches {
        assert_eq!(first, next); // gap-free, in order
        next = last + 1;
    }
    assert_eq!(next, 111);
    assert_eq!(whole_records(&stored.text, 11), 100);
}

#[test]
fn group_commit_syncs_leave_every_record_in_order() {
    let scratch = Scratch::new("group-commit");
    let path = scratch.file("journal.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(b"{\"header\":1}\n").unwrap();
    let store = JsonlStore::new(file.try_clone().unwrap(), 13, Fsync::Batch);
    let core = Core::new(store, Fsync::Batch, 0, 1).unwrap();
    let envelope = [b"{\"t\":\"".as_slice(), &[b'b'; 200], b"\"}"].concat();
    for sequence in 0..40_000 {
        record_update(&core, &Plain, update("s", sequence, &envelope), 7).unwrap();
        if sequence % 10_000 == 0 {
            // Durable before it returns: synced on this thread, not the sync thread's turn.
            record_other(&core, &Plain, "permission", Some(1), br#""i":""}"#).unwrap();
        }
    }
    core.flush(&Plain).unwrap();
    assert_eq!(core.last_record(), 40_004);
    core.close(&Plain).unwrap();
    let text = std::fs::read(&path).unwrap();
    let records = text.strip_prefix(b"{\"header\":1}\n".as_slice()).unwrap();
    assert_eq!(whole_records(records, 1), 40_004);
    // Closed: nothing more, no error.
    assert_eq!(core.flush(&Plain), Ok(()));
    assert_eq!(
        record_update(&core, &Plain, update("s", 0, ENVELOPE), 7),
        Err(Error::Closed)
    );
}

#[test]
fn a_sync_file_that_cannot_be_found_fails_the_write() {
    let (memory, stored) = Memory::new(); // fsync "batch" with no file to sync
    let core = Core::new(memory, Fsync::Batch, 0, 1).unwrap();
    record_update(&core, &Plain, update("s", 0, ENVELOPE), 7).unwrap();
    let failed = core.flush(&Plain);
    assert_eq!(
        failed,
        Err(Error::Write("no file to sync (test)".to_owned()))
    );
    assert!(core.close(&Plain).is_err());
    // The batch was stored (its sync failed): what it holds is whole.
    assert_eq!(whole_records(&stored.lock().unwrap().text, 1), 1);
}

#[test]
fn a_forked_child_stores_nothing_and_touches_no_store() {
    let (memory, stored) = Memory::new();
    let core = Core::new(memory, Fsync::Never, 0, 1).unwrap();
    record_update(&core, &Plain, update("s", 0, ENVELOPE), 7).unwrap();
    core.forked();
    let owner = std::process::id();
    assert_eq!(
        record_update(&core, &Plain, update("s", 1, ENVELOPE), 7),
        Err(Error::Foreign { owner })
    );
    assert_eq!(core.close(&Plain), Ok(()));
    drop(core);
    // The store is the parent's: never closed, nothing stored by the child.
    std::thread::sleep(Duration::from_millis(100));
    let stored = stored.lock().unwrap();
    assert!(!stored.closed);
}

#[test]
fn a_kind_too_long_is_refused_before_anything_is_pending() {
    let (memory, stored) = Memory::new();
    let core = Core::new(memory, Fsync::Never, 0, 1).unwrap();
    let kind = "k".repeat(33);
    let refused = record_other(&core, &Plain, &kind, None, b"\"i\":\"\"}");
    assert!(matches!(refused, Err(Error::Kind { max: 32, .. })));
    assert_eq!(core.last_record(), 0);
    core.close(&Plain).unwrap();
    assert!(stored.lock().unwrap().text.is_empty());
    assert_eq!(number(b"{\"n\":12,\"k\":\"x\"}"), Some(12));
}

//! The blocking client's cross-thread steering queue (`Controls`): a waiting thread never
//! waits past its deadline or a close, and a request it gave up on is withdrawn.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_client::controls::Controls;
use acp_proto::encode::ContentBlock;

fn text(body: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(body.into())]
}

#[test]
fn an_unanswered_steer_gives_up_at_its_deadline() {
    let controls = Controls::new(None);
    let ticket = controls.queue_steer("s1".into(), text("left"));
    let began = Instant::now();
    let error = controls
        .wait_steer(ticket, Instant::now() + Duration::from_millis(50))
        .unwrap_err();
    assert!(error
        .to_string()
        .contains("did not answer the steering request"));
    // A generous bound: it returned at its deadline, not never.
    assert!(began.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_close_from_another_thread_ends_the_wait() {
    let controls = Arc::new(Controls::new(None));
    let ticket = controls.queue_steer("s1".into(), text("left"));
    let closer = {
        let controls = Arc::clone(&controls);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            controls.closed.store(true, Ordering::SeqCst);
        })
    };
    // The close does not notify: the wait sees it at its deadline at the latest.
    let error = controls
        .wait_steer(ticket, Instant::now() + Duration::from_millis(200))
        .unwrap_err();
    closer.join().unwrap();
    assert!(error
        .to_string()
        .contains("closed before the agent answered"));
}

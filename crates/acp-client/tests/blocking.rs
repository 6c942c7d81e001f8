//! A blocking call's steps (`Pump::run_call`) over a real agent process, and `start()`'s steps
//! (`start_steps`): what the agent sent since the last call is handled before the call begins,
//! a call's own failure is its outcome while a failure of the run is the error, and a client
//! closed by another thread lets its pipes go.

mod common;

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acp_client::blocking::start_steps;
use acp_client::call::Call;
use acp_client::Error;
use acp_proto::calls::CallId;
use acp_proto::encode::ContentBlock;
use acp_proto::error::AcpError;
use acp_proto::{Connection, Outcome, Request};

use common::*;

const SECOND_END_TURN: &str = r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#;

/// A prompt of session "s" queued by `run_call`'s `start`.
fn queue_prompt(conn: &mut Connection, timeout_ms: Option<u64>) -> Option<CallId> {
    let content = [ContentBlock::Text("hi".into())];
    let prompt = Request::Prompt {
        session_id: "s",
        content: &content,
        timeout_ms,
        gated: true,
        meta: &[],
    };
    Some(conn.request(prompt).unwrap())
}

#[test]
fn what_the_agent_sent_after_the_last_call_is_handled_before_the_next_call_begins() {
    // The first turn ends, then a late update comes before the second prompt is read.
    let turn = format!(
        "say '{END_TURN}'; say '{}'; read -r l; say '{}'; say '{SECOND_END_TURN}'",
        chunk("late"),
        chunk("second")
    );
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let pump = &mut agented.pump;
    let first = pump.run_call(
        &mut edge,
        None,
        |conn| Ok(queue_prompt(conn, None)),
        |_| {},
        |_, outcome| outcome,
    );
    assert!(matches!(first, Ok(Ok(Some(Outcome::Turn(_))))), "{first:?}");
    std::thread::sleep(Duration::from_millis(200)); // the late update is written
    let second = pump.run_call(
        &mut edge,
        None,
        |conn| Ok(queue_prompt(conn, None)),
        |edge| edge.events.push("begun".into()),
        |edge, outcome| {
            edge.events.push("finished".into());
            outcome
        },
    );
    assert!(
        matches!(second, Ok(Ok(Some(Outcome::Turn(_))))),
        "{second:?}"
    );
    assert_eq!(
        edge.events,
        ["update 1 late", "begun", "update 2 second", "finished"]
    );
}

#[test]
fn a_calls_own_failure_is_its_outcome_and_finish_still_runs() {
    let mut agented = start(":", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    // The agent never answers: the turn's timeout (0.1 s, then the 0.2 s grace) ends it.
    let result = agented.pump.run_call(
        &mut edge,
        None,
        |conn| Ok(queue_prompt(conn, Some(100))),
        |_| {},
        |_, outcome| outcome,
    );
    assert!(
        matches!(result, Ok(Err(AcpError::TurnTimeout { .. }))),
        "{result:?}"
    );
}

#[test]
fn a_start_that_refuses_fails_the_run_and_nothing_more_happens() {
    let mut agented = start(":", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let called = RefCell::new(Vec::new());
    let result = agented.pump.run_call(
        &mut edge,
        None,
        |_| Err(AcpError::Misuse("refused".into())),
        |_| called.borrow_mut().push("begun"),
        |_, _| called.borrow_mut().push("finished"),
    );
    assert!(matches!(result, Err(Error::Acp(AcpError::Misuse(_)))));
    assert!(called.borrow().is_empty());
}

#[test]
fn a_client_closed_by_another_thread_ends_the_call_and_lets_its_pipes_go() {
    let mut agented = start(":", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    agented.controls.closed.store(true, Ordering::SeqCst);
    let result = agented.pump.run_call(
        &mut edge,
        None,
        |conn| Ok(queue_prompt(conn, None)),
        |_| {},
        |_, outcome| outcome,
    );
    assert!(matches!(result, Err(Error::Halted(_))), "{result:?}");
    assert!(agented.pump.pipes.is_none());
    assert!(agented.pump.reading_ended());
}

fn start_call(new_session: bool) -> Call {
    Call::Start {
        cwd: "/".into(),
        new_session,
        timeout: None,
    }
}

#[test]
fn start_runs_session_new_after_initialize_and_gives_the_session() {
    let mut ran = Vec::new();
    let session = start_steps::<AcpError>(start_call(true), |call| {
        ran.push(matches!(call, Call::StartSession { .. }));
        Ok(Some(if ran.len() == 1 {
            Outcome::Initialized
        } else {
            Outcome::SessionOpened("s".into())
        }))
    });
    assert_eq!(session, Ok(Some("s".into())));
    assert_eq!(ran, [false, true]);
}

#[test]
fn start_without_a_session_ends_at_initialize() {
    let mut runs = 0;
    let session = start_steps::<AcpError>(start_call(false), |_| {
        runs += 1;
        Ok(Some(Outcome::Initialized))
    });
    assert_eq!(session, Ok(None));
    assert_eq!(runs, 1);
}

#[test]
fn a_start_step_that_ends_without_an_answer_or_fails_ends_start() {
    let unanswered = start_steps::<AcpError>(start_call(true), |_| Ok(None));
    assert!(
        matches!(unanswered, Err(AcpError::AgentProtocol(ref e)) if e.description.contains("without an answer"))
    );
    let failed = start_steps(start_call(true), |_| Err(AcpError::Misuse("no".into())));
    assert_eq!(failed, Err(AcpError::Misuse("no".into())));
}

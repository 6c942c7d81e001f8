//! The asyncio driver's calls in flight with no Python and no process: the agent's lines are
//! fed to the `Connection` by hand. Which call an answer settles (and `start()`'s next step),
//! and which call an error in a step fails, with what.

use std::sync::Arc;

use acp_client::call::Call;
use acp_client::host::{Host, HostConfig};
use acp_client::inflight::{Failure, InFlight, Settled};
use acp_client::{Controls, Error, Pump};
use acp_proto::calls::CallId;
use acp_proto::encode::ContentBlock;
use acp_proto::error::AcpError;
use acp_proto::limits::{Config, TransferLimits};
use acp_proto::reader::Limits;
use acp_proto::{Connection, Event, Outcome};

const INIT: &str =
    r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
const SESSION: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#;

/// A pump with no agent: nothing is read or written but what a test feeds and flushes.
fn pump() -> Pump {
    let limits = TransferLimits {
        request_bytes: 1 << 20,
        response_bytes: 1 << 20,
        update_bytes: 1 << 20,
        update_count: 1 << 20,
        response_segment_count: 1 << 20,
    };
    let conn = Connection::new(
        Config::new(limits, 7),
        Limits {
            message_bytes: 1 << 16,
        },
    )
    .unwrap();
    let controls = Arc::new(Controls::new(None));
    Pump::new(conn, None, Host::new(HostConfig::default()), controls)
}

/// The agent writes `line`.
fn feed(conn: &mut Connection, line: &str) {
    let line = format!("{line}\n");
    let buf = conn.read_buf();
    buf[..line.len()].copy_from_slice(line.as_bytes());
    conn.received(line.len());
}

/// Takes what the client queued for the agent, line by line.
fn flush(conn: &mut Connection) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some((bytes, fresh)) = conn.poll_transmit() {
        if fresh {
            lines.push(String::from_utf8_lossy(bytes).trim_end().to_owned());
            conn.announce_transmit();
        } else {
            let count = bytes.len();
            conn.transmitted(count);
        }
    }
    lines
}

/// The next answer the connection hands out.
fn answer(conn: &mut Connection) -> (CallId, Result<Outcome, AcpError>) {
    loop {
        match conn.poll_event().expect("a valid line") {
            Some(Event::Done { call, outcome, .. }) => return (call, outcome),
            Some(_) => continue,
            None => panic!("no answer was fed"),
        }
    }
}

/// `start()` run through the calls in flight, its session "s" opened.
fn started() -> (Pump, InFlight) {
    let mut pump = pump();
    let mut calls = InFlight::default();
    let start = Call::Start {
        cwd: "/".into(),
        new_session: true,
        timeout: Some(30.0),
    };
    let (first, _) = calls.begin(&mut pump, start).unwrap().unwrap();
    assert!(
        pump.conn.poll_timeout().is_some(),
        "start()'s deadline runs"
    );
    feed(&mut pump.conn, INIT);
    let (call, outcome) = answer(&mut pump.conn);
    // initialize answered: session/new is now waiting in its place, nothing is settled.
    assert!(calls.complete(&mut pump.conn, call, outcome).is_none());
    assert!(!calls.is_empty());
    let sent = flush(&mut pump.conn);
    assert!(sent.iter().any(|l| l.contains("session/new")), "{sent:?}");
    feed(&mut pump.conn, SESSION);
    let (call, outcome) = answer(&mut pump.conn);
    let settled = calls
        .complete(&mut pump.conn, call, outcome)
        .expect("settled");
    // Reported under the id the caller was given, the first step's.
    assert_eq!(settled.reported, first);
    assert_eq!(settled.result, Ok(Outcome::SessionOpened("s".into())));
    assert!(calls.is_empty());
    // The handshake is over: its deadline no longer applies.
    assert_eq!(pump.conn.poll_timeout(), None);
    (pump, calls)
}

fn begin(pump: &mut Pump, calls: &mut InFlight, call: Call) -> CallId {
    calls.begin(pump, call).unwrap().expect("waiting").0
}

/// A turn of `session` (a call about that session).
fn prompt(session: &str) -> Call {
    Call::Prompt {
        session_id: session.into(),
        content: vec![ContentBlock::Text("hi".into())],
        timeout_ms: None,
        gated: false,
        meta: Vec::new(),
    }
}

fn new_session() -> Call {
    Call::NewSession {
        cwd: "/".into(),
        directories: Vec::new(),
        servers: None,
        system_prompt: None,
    }
}

/// The failed calls as `(reported id, what they raise)`.
fn failed(failed: &[Settled<Failure<String>>]) -> Vec<(i64, String)> {
    failed
        .iter()
        .map(|settled| {
            let why = match &settled.result {
                Failure::Error(Error::Acp(error)) => format!("acp: {}", error.description()),
                Failure::Error(Error::Edge(error)) => format!("edge: {error}"),
                Failure::Error(Error::Halted(error)) => format!("halted: {}", error.description()),
                Failure::Stopped(reason) => format!("stopped: {reason}"),
            };
            (settled.reported.0, why)
        })
        .collect()
}

#[test]
fn start_reports_its_session_under_its_first_steps_id_and_ends_its_deadline() {
    started();
}

#[test]
fn start_without_a_session_settles_at_initialize() {
    let mut pump = pump();
    let mut calls = InFlight::default();
    let start = Call::Start {
        cwd: "/".into(),
        new_session: false,
        timeout: Some(30.0),
    };
    let first = begin(&mut pump, &mut calls, start);
    feed(&mut pump.conn, INIT);
    let (call, outcome) = answer(&mut pump.conn);
    let settled = calls.complete(&mut pump.conn, call, outcome).unwrap();
    assert_eq!(settled.reported, first);
    assert_eq!(settled.result, Ok(Outcome::Initialized));
    assert_eq!(pump.conn.poll_timeout(), None);
}

#[test]
fn a_call_abandoned_by_its_caller_is_not_settled_by_its_late_answer() {
    let (mut pump, mut calls) = started();
    let call = begin(&mut pump, &mut calls, new_session());
    let abandoned = calls.abandon(&mut pump.conn, call).expect("it waited");
    assert!(matches!(abandoned, Call::NewSession { .. }));
    assert!(calls.is_empty());
    let sent = flush(&mut pump.conn);
    assert!(
        sent.iter().any(|l| l.contains("$/cancel_request")),
        "{sent:?}"
    );
    // Whatever the connection still hands out for it settles nothing.
    let late = calls.complete(&mut pump.conn, call, Ok(Outcome::Initialized));
    assert!(late.is_none());
}

#[test]
fn a_halt_fails_every_call_with_it_and_ends_reading() {
    let (mut pump, mut calls) = started();
    let a = begin(&mut pump, &mut calls, prompt("s"));
    let b = begin(&mut pump, &mut calls, new_session());
    let halt = Error::<String>::Halted(AcpError::protocol("close() from another thread"));
    let routed = calls.route(&mut pump, halt);
    let why = "acp: close() from another thread".to_owned();
    assert_eq!(failed(&routed.failed), [(a.0, why.clone()), (b.0, why)]);
    assert!(routed.ended && routed.end_step && !routed.stopped);
    assert!(routed.next.is_none());
    assert!(calls.is_empty());
}

#[test]
fn a_stop_fails_the_call_about_the_failing_session_with_the_error_the_others_stopped() {
    let (mut pump, mut calls) = started();
    let other = begin(&mut pump, &mut calls, new_session());
    let about = begin(&mut pump, &mut calls, prompt("s"));
    pump.conn.stop("on_update raised".into());
    pump.failed_session = Some("s".into());
    let routed = calls.route(&mut pump, Error::Edge("boom".to_owned()));
    assert_eq!(
        failed(&routed.failed),
        [
            (other.0, "stopped: on_update raised".to_owned()),
            (about.0, "edge: boom".to_owned()),
        ]
    );
    assert!(routed.stopped && routed.end_step && !routed.ended);
    assert!(routed.next.is_none());
    assert!(calls.is_empty());
}

#[test]
fn a_stop_about_no_waiting_calls_session_fails_the_oldest_with_the_error() {
    let (mut pump, mut calls) = started();
    let oldest = begin(&mut pump, &mut calls, prompt("s"));
    let newer = begin(&mut pump, &mut calls, new_session());
    pump.conn.stop("on_sent raised".into());
    pump.failed_session = Some("elsewhere".into());
    let routed = calls.route(&mut pump, Error::Edge("boom".to_owned()));
    assert_eq!(
        failed(&routed.failed),
        [
            (oldest.0, "edge: boom".to_owned()),
            (newer.0, "stopped: on_sent raised".to_owned()),
        ]
    );
}

#[test]
fn a_stop_with_no_call_waiting_goes_to_the_next_call() {
    let (mut pump, mut calls) = started();
    pump.conn.stop("on_update raised".into());
    let routed = calls.route(&mut pump, Error::Edge("boom".to_owned()));
    assert!(routed.failed.is_empty());
    assert!(matches!(routed.next, Some(Error::Edge(ref e)) if e == "boom"));
    assert!(routed.stopped && routed.end_step);
}

#[test]
fn an_error_that_does_not_stop_fails_the_oldest_call_and_the_others_go_on() {
    let (mut pump, mut calls) = started();
    let oldest = begin(&mut pump, &mut calls, prompt("s"));
    let newer = begin(&mut pump, &mut calls, new_session());
    let bad = Error::<String>::Acp(AcpError::protocol("a bad line"));
    let routed = calls.route(&mut pump, bad);
    assert_eq!(
        failed(&routed.failed),
        [(oldest.0, "acp: a bad line".to_owned())]
    );
    assert!(!routed.end_step && !routed.stopped && !routed.ended);
    assert!(!calls.is_empty());
    // The newer call is still settled by its answer.
    let answered = calls.complete(
        &mut pump.conn,
        newer,
        Ok(Outcome::SessionOpened("t".into())),
    );
    assert_eq!(answered.map(|s| s.reported), Some(newer));
}

#[test]
fn an_error_after_the_output_ended_ends_the_step_with_the_last_call() {
    let (mut pump, mut calls) = started();
    let call = begin(&mut pump, &mut calls, prompt("s"));
    pump.conn.input_ended();
    let ended = Error::<String>::Acp(AcpError::protocol("the output ended"));
    let routed = calls.route(&mut pump, ended);
    assert_eq!(
        failed(&routed.failed),
        [(call.0, "acp: the output ended".to_owned())]
    );
    assert!(routed.end_step);
}

#[test]
fn an_error_with_no_call_waiting_goes_to_the_next_call() {
    let (mut pump, mut calls) = started();
    let routed = calls.route(&mut pump, Error::<String>::Acp(AcpError::protocol("bad")));
    assert!(routed.failed.is_empty());
    assert!(matches!(routed.next, Some(Error::Acp(_))));
    assert!(routed.end_step && !routed.stopped);
}

#[test]
fn a_failed_start_step_ends_the_start_deadline() {
    let mut pump = pump();
    let mut calls = InFlight::default();
    let start = Call::Start {
        cwd: "/".into(),
        new_session: true,
        timeout: Some(30.0),
    };
    let first = begin(&mut pump, &mut calls, start);
    let routed = calls.route(&mut pump, Error::<String>::Acp(AcpError::protocol("bad")));
    assert_eq!(failed(&routed.failed), [(first.0, "acp: bad".to_owned())]);
    assert_eq!(pump.conn.poll_timeout(), None);
}

//! The one driver loop with no Python: a `Pump` over a real agent process (a `sh` script that
//! reads our lines and writes scripted answers) and a Rust `Edge` that records what it is
//! handed. The loop's rules: stops before anything else, cancels taken per line, timers, events
//! in arrival order, the budget, deferral, commit before answer, a failing callback stopping the
//! client, close.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_client::host::{Host, HostConfig};
use acp_client::{Error, Reads, Stop};
use acp_proto::error::AcpError;
use acp_proto::permission::{ObserverAnswer, Selection};
use acp_proto::Outcome;

use common::*;

#[test]
fn a_blocking_call_runs_to_its_end_with_updates_in_arrival_order() {
    let turn = format!(
        "say '{}'; say '{}'; say '{}'; say '{END_TURN}'",
        chunk("a"),
        mode("plan"),
        chunk("b")
    );
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder {
        fold: true,
        ..Recorder::default()
    };
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    let outcome = agented.pump.run_until(&mut edge, Some(call), None);
    assert!(matches!(outcome, Ok(Some(Outcome::Turn(_)))));
    assert_eq!(
        edge.events,
        [
            "update 1 a",
            "after s publish=false fold=true",
            "update 2 plan",
            "after s publish=true fold=true",
            "update 3 b",
            "after s publish=false fold=true",
        ]
    );
    // Lines the client wrote went through the edge's `sent`, in order.
    assert!(edge.sent[0].contains("\"initialize\""));
    assert!(edge.sent[2].contains("\"session/prompt\""));
}

#[test]
fn a_step_handles_at_most_its_budget_and_says_more_is_left() {
    let turn = format!(
        "say '{}'; say '{}'; say '{}'; say '{END_TURN}'",
        chunk("a"),
        chunk("b"),
        chunk("c")
    );
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    agented.pump.write(&mut edge, true).unwrap();
    // Wait until the first two updates are handled in a step of two.
    let stop = step_until(&mut agented.pump, &mut edge, 2, |s| {
        matches!(s, Stop::Budget)
    });
    assert!(matches!(stop, Stop::Budget));
    assert_eq!(edge.events, ["update 1 a", "update 2 b"]);
    let stop = step_until(&mut agented.pump, &mut edge, 8, |s| {
        matches!(s, Stop::Done(..))
    });
    assert!(matches!(stop, Stop::Done(done, Ok(Outcome::Turn(_))) if done == call));
    assert_eq!(edge.events.len(), 3);
}

#[test]
fn a_paused_edge_ends_the_step() {
    let turn = format!(
        "say '{}'; say '{}'; say '{END_TURN}'",
        chunk("a"),
        chunk("b")
    );
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    prompt(&mut agented.pump, None);
    agented.pump.write(&mut edge, true).unwrap();
    edge.fold = true;
    edge.pause = true;
    let stop = step_until(&mut agented.pump, &mut edge, 100, |s| {
        matches!(s, Stop::Paused)
    });
    assert!(matches!(stop, Stop::Paused));
    assert_eq!(
        edge.events,
        ["update 1 a", "after s publish=false fold=true"]
    );
}

#[test]
fn a_deferred_permission_waits_and_its_decision_is_committed_then_answered() {
    let turn = format!("say '{PERMISSION}'; read -r answer; say '{END_TURN}'");
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder {
        defer: true,
        commits: true,
        ..Recorder::default()
    };
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    agented.pump.write(&mut edge, true).unwrap();
    let stop = step_until(&mut agented.pump, &mut edge, 100, |s| {
        matches!(s, Stop::Deferred(..))
    });
    let Stop::Deferred(ask, token) = stop else {
        panic!("deferred: {stop:?}");
    };
    assert_eq!(token, 7);
    assert!(agented.pump.is_deferred(ask));
    let sent_before = edge.sent.len();
    // Nothing is answered while the request waits: the turn goes on being read.
    let stop = step_until(&mut agented.pump, &mut edge, 100, |_| true);
    assert!(matches!(stop, Stop::NeedInput));
    assert_eq!(edge.sent.len(), sent_before);
    let reply = ObserverAnswer::Reply(Selection {
        outcome: "selected".into(),
        option_id: "y".into(),
        option_kind: "allow_once".into(),
    });
    agented
        .pump
        .decide(&mut edge, ask, Some(reply))
        .ok()
        .unwrap();
    assert!(!agented.pump.is_deferred(ask));
    agented.pump.write(&mut edge, true).unwrap();
    assert_eq!(edge.events, ["ask \"edit\"", "commit \"selected\""]);
    let answer = edge.sent.last().unwrap();
    assert!(
        answer.contains(r#""id":"p""#) && answer.contains(r#""optionId":"y""#),
        "{answer}"
    );
    let stop = step_until(&mut agented.pump, &mut edge, 100, |s| {
        matches!(s, Stop::Done(..))
    });
    assert!(matches!(stop, Stop::Done(done, Ok(_)) if done == call));
}

/// A prompt whose permission request waits on a deferred answer: the request.
fn deferred(agented: &mut Agented, edge: &mut Recorder) -> acp_proto::AskId {
    open(agented, edge);
    prompt(&mut agented.pump, None);
    agented.pump.write(edge, true).unwrap();
    let stop = step_until(&mut agented.pump, edge, 100, |s| {
        matches!(s, Stop::Deferred(..))
    });
    let Stop::Deferred(ask, _) = stop else {
        panic!("deferred: {stop:?}");
    };
    ask
}

#[test]
fn a_deferred_answer_is_settled_once() {
    let turn = format!("say '{PERMISSION}'; read -r answer; say '{END_TURN}'");
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder {
        defer: true,
        commits: true,
        ..Recorder::default()
    };
    let ask = deferred(&mut agented, &mut edge);
    let settled = agented.pump.settle(&mut edge, ask, || Ok(None));
    assert!(settled.is_ok());
    assert!(!agented.pump.is_deferred(ask));
    // Abstained: the policy decided, and the decision was committed.
    assert_eq!(edge.events.len(), 2, "{:?}", edge.events);
    // A second answer (the awaitable resolved twice, say) is not read, let alone decided.
    let again = agented.pump.settle(&mut edge, ask, || panic!("read again"));
    assert!(again.is_ok());
    assert_eq!(edge.events.len(), 2);
}

#[test]
fn a_deferred_answer_that_raised_stops_the_client_about_its_session() {
    let turn = format!("say '{PERMISSION}'; read -r answer; say '{END_TURN}'");
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder {
        defer: true,
        ..Recorder::default()
    };
    let ask = deferred(&mut agented, &mut edge);
    let settled = agented
        .pump
        .settle(&mut edge, ask, || Err("raised".to_owned()));
    assert!(matches!(settled, Err(Error::Edge(ref e)) if e == "raised"));
    assert_eq!(
        agented.pump.conn.stopped(),
        Some("stopped after on_permission raised raised")
    );
    assert_eq!(agented.pump.failed_session.as_deref(), Some("s"));
    assert!(!agented.pump.is_deferred(ask));
}

#[test]
fn a_deferred_answer_after_the_client_stopped_is_not_read() {
    let turn = format!("say '{PERMISSION}'; read -r answer; say '{END_TURN}'");
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder {
        defer: true,
        ..Recorder::default()
    };
    let ask = deferred(&mut agented, &mut edge);
    agented.pump.conn.stop("a callback raised".into());
    let settled = agented.pump.settle(&mut edge, ask, || panic!("read"));
    assert!(settled.is_ok());
    assert_eq!(edge.events, ["ask \"edit\""]);
}

#[test]
fn a_durable_edge_without_a_commit_stops_the_client_and_nothing_is_answered() {
    let turn = format!("say '{PERMISSION}'; read -r answer; say '{END_TURN}'");
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder {
        answer: Some("y"),
        durable: true,
        ..Recorder::default()
    };
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    let sent = edge.sent.len() + 1; // the prompt
    let result = agented.pump.run_until(&mut edge, Some(call), None);
    let Err(Error::Edge(message)) = result else {
        panic!("the call fails: {result:?}");
    };
    assert!(message.contains("on_permission_commit"), "{message}");
    assert!(agented.pump.conn.stopped().is_some());
    assert_eq!(agented.pump.failed_session.as_deref(), Some("s"));
    assert_eq!(
        edge.sent.len(),
        sent,
        "no answer was written: {:?}",
        edge.sent
    );
}

#[test]
fn a_failing_callback_stops_the_client_with_the_edges_reason() {
    let turn = format!("say '{}'; say '{END_TURN}'", chunk("a"));
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    edge.fail_update = true;
    let result = agented.pump.run_until(&mut edge, Some(call), None);
    assert!(matches!(result, Err(Error::Edge(ref e)) if e == "boom"));
    assert_eq!(edge.stops, ["on_update: boom"]);
    assert_eq!(
        agented.pump.conn.stopped(),
        Some("stopped after on_update raised boom")
    );
    assert_eq!(agented.pump.failed_session.as_deref(), Some("s"));
}

#[test]
fn a_stop_from_another_thread_is_seen_before_any_buffered_line() {
    let turn = format!("say '{}'; say '{END_TURN}'", chunk("a"));
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    prompt(&mut agented.pump, None);
    agented.pump.write(&mut edge, true).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // the chunk is written (unread)
    agented.controls.closed.store(true, Ordering::SeqCst);
    let mut budget = 100;
    let result = agented.pump.step(&mut edge, &mut budget, Reads::Once);
    assert!(matches!(result, Err(Error::Halted(_))), "{result:?}");
    assert!(
        edge.events.is_empty(),
        "nothing was handled: {:?}",
        edge.events
    );
    assert_eq!(budget, 100);
}

#[test]
fn a_cancel_queued_by_another_thread_is_sent_before_the_next_line() {
    let turn = "read -r cancel; say \"$cancel\" >&2; say '{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":\"cancelled\"}}'";
    let mut agented = start(turn, |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    let controls = Arc::clone(&agented.controls);
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        controls.queue_cancel("s".into());
    });
    let result = agented.pump.run_until(&mut edge, Some(call), None);
    canceller.join().unwrap();
    let Ok(Some(Outcome::Turn(turn))) = result else {
        panic!("the turn ends: {result:?}");
    };
    assert_eq!(turn.stop_reason, "cancelled");
    assert!(
        edge.sent.iter().any(|l| l.contains("session/cancel")),
        "{:?}",
        edge.sent
    );
}

#[test]
fn a_turns_timer_fires_while_the_agent_is_silent() {
    let mut agented = start(":", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    assert_eq!(agented.pump.next_timer_secs(), None);
    let began = Instant::now();
    let call = prompt(&mut agented.pump, Some(100));
    // An event loop is told to wake for the turn's timer: within its 0.1 s.
    let due = agented.pump.next_timer_secs().expect("the turn's timer");
    assert!((0.0..=0.1).contains(&due), "{due}");
    let result = agented.pump.run_until(&mut edge, Some(call), None);
    assert!(
        matches!(result, Err(Error::Acp(AcpError::TurnTimeout { .. }))),
        "{result:?}"
    );
    // The timeout (0.1 s), session/cancel, then the grace (0.2 s): well within 10 s.
    assert!(began.elapsed() < Duration::from_secs(10));
    assert!(edge.sent.iter().any(|l| l.contains("session/cancel")));
}

#[test]
fn a_deadline_ends_run_until_without_a_call() {
    let mut agented = start(":", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let until = Instant::now() + Duration::from_millis(50);
    let result = agented.pump.run_until(&mut edge, None, Some(until));
    assert!(matches!(result, Ok(None)));
    assert!(Instant::now() >= until);
}

#[test]
fn a_closed_pump_refuses_to_wait() {
    let mut agented = start(":", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    assert!(!agented.pump.reading_ended());
    agented.pump.pipes = None;
    assert!(agented.pump.reading_ended());
    let call = prompt(&mut agented.pump, None);
    let result = agented.pump.run_until(&mut edge, Some(call), None);
    assert!(
        matches!(result, Err(Error::Acp(AcpError::Misuse(ref m))) if m.contains("the client is closed")),
        "{result:?}"
    );
}

#[test]
fn an_agent_that_exits_ends_its_output_and_the_call() {
    let mut agented = start("exit 0", |_| {});
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let call = prompt(&mut agented.pump, None);
    let result = agented.pump.run_until(&mut edge, Some(call), None);
    assert!(result.is_err(), "{result:?}");
    assert!(agented.pump.conn.output_ended());
    assert!(agented.pump.reading_ended());
}

#[test]
fn a_wait_for_exit_is_answered_when_the_terminal_exits() {
    let turn = r#"say '{"jsonrpc":"2.0","id":"c1","method":"terminal/create","params":{"sessionId":"s","command":"sh","args":["-c","sleep 0.3"]}}'
read -r created
tid=$(printf '%s' "$created" | sed -n 's/.*"terminalId":"\([^"]*\)".*/\1/p')
say "{\"jsonrpc\":\"2.0\",\"id\":\"w1\",\"method\":\"terminal/wait_for_exit\",\"params\":{\"sessionId\":\"s\",\"terminalId\":\"$tid\"}}"
read -r exited
say "$exited" >&2
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'"#;
    let mut agented = start(turn, |config| {
        config.capabilities = Some(acp_proto::host::HostCapabilities {
            read_text_file: false,
            write_text_file: false,
            terminal: true,
        });
    });
    let host = Host::new(HostConfig {
        terminal_output_bytes: 1 << 16,
        max_terminals: 4,
        env: std::env::vars_os().collect(),
        ..HostConfig::default()
    });
    let roots = host.open_roots(std::env::temp_dir().to_string_lossy().into_owned(), vec![]);
    host.kill_switch().set_roots("s".into(), Some(roots));
    agented.pump.host = host;
    let mut edge = Recorder::default();
    open(&mut agented, &mut edge);
    let began = Instant::now();
    let call = prompt(&mut agented.pump, None);
    // Bounded: without the pump's terminal-wait step the turn never ends.
    let until = Some(began + Duration::from_secs(10));
    let result = agented.pump.run_until(&mut edge, Some(call), until);
    assert!(matches!(result, Ok(Some(Outcome::Turn(_)))), "{result:?}");
    assert_eq!(
        edge.events,
        [
            "activity terminal/create",
            "activity terminal/wait_for_exit"
        ]
    );
    let answer = edge
        .sent
        .iter()
        .find(|l| l.contains(r#""id":"w1""#))
        .unwrap();
    assert!(answer.contains(r#""exitCode":0"#), "{answer}");
    // Answered after the exit (0.3 s), not at once, and well within 10 s.
    assert!(began.elapsed() >= Duration::from_millis(250));
    assert!(began.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_published_views_follow_the_connection_and_a_session_is_refreshed_alone() {
    use acp_client::controls::lock;
    use acp_client::published::{view, Published};
    let turn = format!("say '{}'; say '{END_TURN}'", mode("plan"));
    let mut agented = start(&turn, |_| {});
    let mut edge = Recorder::default();
    let published = Published::default();
    published.all(&agented.pump.conn);
    assert!(lock(&published.0).open.is_empty());
    assert!(lock(&published.0).initialize.is_none());
    open(&mut agented, &mut edge);
    published.all(&agented.pump.conn);
    {
        let views = lock(&published.0);
        assert_eq!(views.open, ["s"]);
        assert!(views.initialize.is_some());
        assert!(views.reader.is_some());
        assert_eq!(views.sessions["s"], view(&agented.pump.conn, "s"));
    }
    // A session that is not open has the default view.
    assert_eq!(view(&agented.pump.conn, "nope"), Default::default());
    let call = prompt(&mut agented.pump, None);
    let outcome = agented.pump.run_until(&mut edge, Some(call), None);
    assert!(matches!(outcome, Ok(Some(Outcome::Turn(_)))));
    // Only the one session is refreshed: the rest of the views stay as the last call left them.
    lock(&published.0).open.clear();
    published.session(&agented.pump.conn, "s");
    let views = lock(&published.0);
    assert_eq!(views.sessions["s"].modes.0, "plan");
    assert!(views.open.is_empty());
}

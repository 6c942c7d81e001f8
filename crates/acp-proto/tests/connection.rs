//! The `Connection` with an in-memory agent and no Python: the ordering rules of
//! design/sessions.md §1, sessions, cancel, timeouts and tombstones, and every recorded
//! real-agent transcript of `tests/interop/data/` replayed through it.

use std::collections::HashMap;

use acp_proto::calls::CallId;
use acp_proto::encode::ContentBlock;
use acp_proto::error::AcpError;
use acp_proto::host::HostOk;
use acp_proto::limits::TransferLimits;
use acp_proto::{Connection, Event, Outcome, Request};
use serde_json::Value;

mod common;
use common::{limits, push, sent};

fn connection_with(limits: TransferLimits) -> Connection {
    common::connection(acp_proto::limits::Protocol::V1, limits)
}

/// What the events of the lines read so far were, as short strings; permissions decided by
/// the policy and committed.
fn events(conn: &mut Connection) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match conn.poll_event() {
            Ok(None) => return seen,
            Ok(Some(Event::Update { update, joined, .. })) => seen.push(format!(
                "update {} {} {}{}",
                update.update_sequence,
                update.session_id,
                update.text,
                if joined.any() { " joined" } else { "" }
            )),
            Ok(Some(Event::Permission { ask, cancelled, .. })) => {
                let decided = conn.decide(ask, None).unwrap();
                seen.push(format!(
                    "permission {} {}{}",
                    decided.record.outcome,
                    decided.record.option_id,
                    if cancelled { " cancelled" } else { "" }
                ));
                conn.send(decided);
            }
            Ok(Some(Event::Done { call, outcome, .. })) => seen.push(match outcome {
                Ok(Outcome::Turn(turn)) => {
                    format!("done {} {} {:?}", call.0, turn.stop_reason, turn.response)
                }
                Ok(other) => format!("done {} {other:?}", call.0),
                Err(error) => format!("failed {} {}", call.0, error.class_name()),
            }),
            Ok(Some(Event::Other { line })) => seen.push(format!("other {line}")),
            Ok(Some(Event::Elicitation { ask, .. })) => {
                let decided = conn.decide_elicitation(ask, None).unwrap();
                seen.push(format!(
                    "elicitation {} {}",
                    decided.record.action, decided.record.reason
                ));
                conn.send_elicitation(decided);
            }
            Ok(Some(Event::Host {
                host, method, op, ..
            })) => {
                let answer = conn
                    .answer_host(host, op.map(|_| HostOk::Empty), None)
                    .unwrap();
                seen.push(format!(
                    "host {} {:?} {:?}",
                    method.wire(),
                    answer.activity.error_code,
                    answer.activity.reason
                ));
                conn.send_host(answer);
            }
            Err(error) => {
                seen.push(format!("error {}", error.class_name()));
                return seen;
            }
        }
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"list":{}}}}}"#;

fn chunk(session: &str, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
    )
}

fn started() -> Connection {
    let mut conn = connection_with(limits());
    conn.request(Request::Initialize).unwrap();
    push(&mut conn, INIT);
    assert_eq!(events(&mut conn), ["done 0 Initialized"]);
    sent(&mut conn);
    conn
}

fn open(conn: &mut Connection, id: &str) {
    conn.request(Request::NewSession {
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        system_prompt: None,
    })
    .unwrap();
    let wire = sent(conn);
    let request: Value = serde_json::from_str(&wire[0]).unwrap();
    push(
        conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"{id}"}}}}"#,
            request["id"]
        ),
    );
    assert!(events(conn)[0].starts_with("done"));
}

fn prompt(conn: &mut Connection, session: &str, timeout_ms: Option<u64>) -> CallId {
    let content = [ContentBlock::Text("go".into())];
    conn.request(Request::Prompt {
        session_id: session,
        content: &content,
        timeout_ms,
        gated: true,
        meta: &[],
    })
    .unwrap()
}

#[test]
fn ids_count_up_and_updates_route_by_session() {
    let mut conn = started();
    open(&mut conn, "a");
    open(&mut conn, "b");
    let call = prompt(&mut conn, "a", None);
    assert_eq!(call, CallId(3));
    assert!(sent(&mut conn)[0].contains(r#""id":3,"method":"session/prompt""#));
    push(&mut conn, &chunk("a", "x"));
    push(&mut conn, &chunk("b", "y"));
    push(&mut conn, &chunk("nobody", "z"));
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#,
    );
    assert_eq!(
        events(&mut conn),
        [
            "update 1 a x joined",
            "update 2 b y",
            "update 3 nobody z",
            "done 3 end_turn \"x\"",
        ]
    );
}

#[test]
fn a_permission_is_decided_before_its_answer_is_queued_and_dropping_it_writes_nothing() {
    let mut conn = started();
    open(&mut conn, "a");
    prompt(&mut conn, "a", None);
    sent(&mut conn);
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"a","toolCall":{"toolCallId":"t","kind":"read"},"options":[{"optionId":"y","kind":"allow_once"}]}}"#,
    );
    push(&mut conn, &chunk("a", "after"));
    let Ok(Some(Event::Permission { ask, cancelled })) = conn.poll_event() else {
        panic!("the permission first");
    };
    assert!(!cancelled);
    let preview = conn.preview(ask).expect("not yet decided");
    assert_eq!(preview.outcome, "pending");
    assert_eq!(preview.session_id, "a");
    assert_eq!(preview.tool_kind, "read");
    assert!(preview.envelope.is_empty(), "the preview has no line");
    assert_eq!(conn.ask_session(ask), Some("a"));
    assert!(
        conn.poll_transmit().is_none(),
        "nothing is answered before the decision"
    );
    let decided = conn.decide(ask, None).unwrap();
    assert_eq!(decided.record.option_id, "y");
    drop(decided); // the commit callback raised: nothing is written
    assert!(conn.poll_transmit().is_none());
    assert!(conn.decide(ask, None).is_err(), "a request is decided once");
    assert!(
        conn.preview(ask).is_none(),
        "a decided request has no preview"
    );
    assert_eq!(events(&mut conn), ["update 1 a after joined"]);
}

#[test]
fn overflow_and_cancel_share_one_latch() {
    let mut tight = limits();
    tight.response_bytes = 3;
    let mut conn = connection_with(tight);
    conn.request(Request::Initialize).unwrap();
    push(&mut conn, INIT);
    events(&mut conn);
    sent(&mut conn);
    open(&mut conn, "a");
    prompt(&mut conn, "a", None);
    sent(&mut conn);
    push(&mut conn, &chunk("a", "ab"));
    push(&mut conn, &chunk("a", "cd"));
    events(&mut conn);
    conn.cancel("a");
    assert_eq!(
        sent(&mut conn),
        [r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"a"}}"#],
        "one session/cancel per turn, whoever trips the latch"
    );
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"a","toolCall":{"toolCallId":"t","kind":"read"},"options":[{"optionId":"y","kind":"allow_once"}]}}"#,
    );
    assert_eq!(events(&mut conn), ["permission cancelled  cancelled"]);
    assert_eq!(
        sent(&mut conn),
        [r#"{"jsonrpc":"2.0","id":"p","result":{"outcome":{"outcome":"cancelled"}}}"#]
    );
}

#[test]
fn a_timeout_cancels_then_gives_up_after_the_grace_and_drops_the_late_answer() {
    let mut conn = started();
    open(&mut conn, "a");
    conn.set_now(1_000);
    let call = prompt(&mut conn, "a", Some(200));
    sent(&mut conn);
    assert_eq!(conn.poll_timeout(), Some(1_200));
    conn.handle_timeout(1_199);
    assert!(sent(&mut conn).is_empty());
    conn.handle_timeout(1_200);
    assert_eq!(sent(&mut conn).len(), 1, "the timeout sends session/cancel");
    assert_eq!(conn.poll_timeout(), Some(1_700), "then waits the grace");
    conn.handle_timeout(1_700);
    assert_eq!(
        events(&mut conn),
        [format!("failed {} TurnTimeout", call.0)]
    );
    assert!(!conn.is_waiting(call));
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}"#,
    );
    let seen = events(&mut conn);
    assert!(seen[0].starts_with("other "), "dropped silently: {seen:?}");
    // The session takes a new turn.
    let next = prompt(&mut conn, "a", None);
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"stopReason":"end_turn"}}}}"#,
            next.0
        ),
    );
    assert_eq!(
        events(&mut conn),
        [format!("done {} end_turn \"\"", next.0)]
    );
}

#[test]
fn tombstones_are_bounded() {
    let mut conn = started();
    open(&mut conn, "a");
    let first = prompt(&mut conn, "a", None);
    conn.abandon(first);
    for _ in 0..1024 {
        let call = prompt(&mut conn, "a", None);
        conn.abandon(call);
    }
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"stopReason":"end_turn"}}}}"#,
            first.0
        ),
    );
    assert_eq!(
        events(&mut conn),
        ["error AgentProtocolError"],
        "the oldest was forgotten"
    );
}

#[test]
fn refused_calls_take_no_id_and_write_nothing() {
    let mut conn = started();
    open(&mut conn, "a");
    let error = conn
        .request(Request::DeleteSession { session_id: "a" })
        .unwrap_err();
    assert!(
        matches!(&error, AcpError::Capability { capability, .. } if capability == "sessionCapabilities.delete")
    );
    assert_eq!(
        error.description(),
        "ACP agent 'mem' did not advertise the 'sessionCapabilities.delete' capability."
    );
    assert!(matches!(
        conn.request(Request::SetMode {
            session_id: "a",
            mode_id: "x"
        }),
        Err(AcpError::Capability { .. })
    ));
    assert!(matches!(
        conn.request(Request::SetMode {
            session_id: "zz",
            mode_id: "x"
        }),
        Err(AcpError::Misuse(_))
    ));
    assert!(conn.poll_transmit().is_none());
    assert_eq!(prompt(&mut conn, "a", None), CallId(2));
}

#[test]
fn a_loaded_session_is_open_before_its_replay() {
    let mut conn = started();
    conn.request(Request::LoadSession {
        session_id: "old",
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        resume: false,
        system_prompt: None,
        replay_from_start: false,
    })
    .unwrap();
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"old","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}}"#,
    );
    push(&mut conn, r#"{"jsonrpc":"2.0","id":1,"result":null}"#);
    assert_eq!(
        events(&mut conn),
        ["update 1 old code", "done 1 SessionOpened(\"old\")"]
    );
    assert_eq!(conn.session("old").unwrap().modes.current, "code");
}

#[test]
fn listing_follows_cursors_and_refuses_a_loop() {
    let mut conn = started();
    conn.request(Request::ListSessions { cwd: None }).unwrap();
    assert_eq!(
        sent(&mut conn),
        [r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}"#]
    );
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":1,"result":{"sessions":[{"sessionId":"a","cwd":"/"}],"nextCursor":"n"}}"#,
    );
    events(&mut conn);
    assert_eq!(
        sent(&mut conn),
        [r#"{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"cursor":"n"}}"#]
    );
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessions":[],"nextCursor":"n"}}"#,
    );
    assert_eq!(events(&mut conn), ["failed 1 AgentProtocolError"]);
}

#[test]
fn a_stopped_connection_refuses_every_call() {
    let mut conn = started();
    open(&mut conn, "a");
    conn.stop("stopped for a test".into());
    assert!(
        matches!(conn.request(Request::Logout), Err(AcpError::AgentProtocol(p)) if p.description == "stopped for a test")
    );
}

#[test]
fn other_requests_get_method_not_found_and_notifications_are_dropped() {
    let mut conn = started();
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":"u-1","method":"fs/read_text_file","params":{}}"#,
    );
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#,
    );
    assert_eq!(events(&mut conn).len(), 2);
    assert_eq!(
        sent(&mut conn),
        [r#"{"jsonrpc":"2.0","id":"u-1","error":{"code":-32601,"message":"method not found"}}"#]
    );
}

/// Replays every recorded transcript: the client's requests are issued as the recording client
/// issued them (ids remapped to the connection's), the agent's lines are fed back, and every
/// update must be delivered and every recorded answer must finish its call the same way.
#[test]
fn recorded_transcripts_replay_through_the_connection() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/data");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        replay(&path);
        replayed += 1;
    }
    assert!(
        replayed >= 20,
        "only {replayed} transcripts found in {}",
        dir.display()
    );
}

fn replay(path: &std::path::Path) {
    let name = path.display().to_string();
    let mut conn = connection_with(limits());
    let mut ids: HashMap<String, i64> = HashMap::new();
    let mut expected_updates = 0;
    let mut delivered = 0;
    let mut finished = Vec::new();
    let text = std::fs::read_to_string(path).unwrap();
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let Some(message) = record.get("msg") else {
            continue;
        };
        match record["dir"].as_str() {
            Some("->") => {
                let method = message.get("method").and_then(Value::as_str);
                let params = &message["params"];
                let session = params["sessionId"].as_str().unwrap_or("");
                let content = [ContentBlock::Text("replayed".into())];
                let request = match method {
                    Some("initialize") => Some(Request::Initialize),
                    Some("session/new") => Some(Request::NewSession {
                        cwd: "/w",
                        additional_directories: &[],
                        mcp_servers: None,
                        system_prompt: None,
                    }),
                    Some("session/prompt") => Some(Request::Prompt {
                        session_id: session,
                        content: &content,
                        timeout_ms: None,
                        gated: false,
                        meta: &[],
                    }),
                    Some("session/cancel") => {
                        conn.cancel(session);
                        None
                    }
                    _ => None,
                };
                if let Some(request) = request {
                    match conn.request(request) {
                        Ok(call) => {
                            ids.insert(message["id"].to_string(), call.0);
                        }
                        Err(error) => panic!("{name}: {method:?} refused: {error}"),
                    }
                }
            }
            Some("<-") => {
                let mut message = message.clone();
                if message.get("method").is_none() {
                    let Some(ours) = ids.get(&message["id"].to_string()) else {
                        continue;
                    };
                    message["id"] = Value::from(*ours);
                    finished.push((*ours, message.get("error").is_some()));
                }
                if message.get("method").and_then(Value::as_str) == Some("session/update") {
                    expected_updates += 1;
                }
                push(&mut conn, &message.to_string());
                for event in events(&mut conn) {
                    assert!(!event.starts_with("error"), "{name}: {event}");
                    if event.starts_with("update") {
                        delivered += 1;
                    }
                    if let Some(rest) = event.strip_prefix("failed ") {
                        let id: i64 = rest.split(' ').next().unwrap().parse().unwrap();
                        assert!(
                            finished.contains(&(id, true)),
                            "{name}: call {id} failed: {event}"
                        );
                    }
                }
                sent(&mut conn);
            }
            _ => {}
        }
    }
    assert_eq!(
        delivered, expected_updates,
        "{name}: every update is delivered"
    );
}

#[test]
fn permission_requests_announce_their_calls_in_the_turn_record_as_sent() {
    let mut conn = started();
    open(&mut conn, "a");
    let call = prompt(&mut conn, "a", None);
    sent(&mut conn);
    let permission = |id: &str, tool_call: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","method":"session/request_permission","params":{{"sessionId":"a","toolCall":{tool_call},"options":[{{"optionId":"y","kind":"allow_once"}}]}}}}"#
        )
    };
    push(
        &mut conn,
        &permission(
            "p1",
            r#"{"toolCallId":"t2","title":"Run ls","kind":"execute","rawInput":{"argv":["ls","-l"]}}"#,
        ),
    );
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":{"sessionUpdate":"tool_call_update","toolCallId":"t2","status":"completed","rawInput":null,"title":null}}}"#,
    );
    push(
        &mut conn,
        &permission(
            "p2",
            r#"{"toolCallId":"t3", "title":"Read \u0061","kind":"read"}"#,
        ),
    );
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"stopReason":"end_turn"}}}}"#,
            call.0
        ),
    );
    let mut tool_calls = None;
    loop {
        match conn.poll_event().unwrap() {
            None => break,
            Some(Event::Permission { ask, .. }) => {
                let decided = conn.decide(ask, None).unwrap();
                conn.send(decided);
            }
            Some(Event::Done {
                outcome: Ok(Outcome::Turn(turn)),
                ..
            }) => tool_calls = Some(turn.tool_calls),
            Some(_) => {}
        }
    }
    let tool_calls: Vec<Value> = tool_calls
        .expect("the turn ended")
        .iter()
        .map(|text| serde_json::from_str(text).unwrap())
        .collect();
    assert_eq!(
        tool_calls,
        [
            serde_json::json!({"toolCallId": "t2", "title": "Run ls", "kind": "execute", "status": "completed"}),
            serde_json::json!({"toolCallId": "t3", "title": "Read a", "kind": "read"}),
        ],
        "an amended call is merged; the other is the object as sent"
    );
}

#[test]
fn answers_the_agent_does_not_take_are_counted_and_flag_a_backlog() {
    let mut conn = started();
    open(&mut conn, "a");
    prompt(&mut conn, "a", None);
    sent(&mut conn);
    assert_eq!(conn.queued_bytes(), 0);
    let request = r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"a","toolCall":{"toolCallId":"t","kind":"read"},"options":[{"optionId":"y","kind":"allow_once"}]}}"#;
    let mut answers = 0usize;
    while !conn.backlogged() {
        push(&mut conn, request);
        let Ok(Some(Event::Permission { ask, .. })) = conn.poll_event() else {
            panic!("a permission request");
        };
        let decided = conn.decide(ask, None).unwrap();
        conn.send(decided);
        answers += 1;
    }
    let per_answer = conn.queued_bytes() / answers;
    assert!(
        conn.queued_bytes() > 8 << 20 && per_answer < 100,
        "{answers} answers queued"
    );
    // The agent takes half a line: counted; then everything: no backlog.
    let (line, _) = conn.poll_transmit().unwrap();
    let half = line.len() / 2;
    let before = conn.queued_bytes();
    conn.transmitted(half);
    assert_eq!(conn.queued_bytes(), before - half);
    sent(&mut conn);
    assert_eq!(conn.queued_bytes(), 0);
    assert!(!conn.backlogged());
}

/// A line is new to `poll_transmit` until the driver marks it, however many writes it takes;
/// the next line is new again.
#[test]
fn a_line_is_announced_once_however_many_writes_it_takes() {
    let mut conn = connection_with(limits());
    conn.request(Request::Initialize).unwrap();
    let (bytes, fresh) = conn.poll_transmit().unwrap();
    let whole = bytes.len();
    assert!(fresh);
    conn.announce_transmit();
    assert!(!conn.poll_transmit().unwrap().1, "marked");
    conn.transmitted(3); // a full pipe took 3 bytes
    let (rest, fresh) = conn.poll_transmit().unwrap();
    assert_eq!((rest.len(), fresh), (whole - 3, false));
    conn.transmitted(whole - 3);
    assert!(conn.poll_transmit().is_none());
    push(&mut conn, INIT);
    events(&mut conn);
    conn.request(Request::NewSession {
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        system_prompt: None,
    })
    .unwrap();
    assert!(conn.poll_transmit().unwrap().1, "the next line is new");
}

#[test]
fn the_start_deadline_ends_the_handshake_and_stops_the_connection() {
    let mut conn = connection_with(limits());
    conn.set_now(1_000);
    conn.set_start_deadline(Some(0.5));
    let init = conn.request(Request::Initialize).unwrap();
    sent(&mut conn);
    assert_eq!(conn.poll_timeout(), Some(1_500));
    conn.handle_timeout(1_499);
    assert!(events(&mut conn).is_empty() && conn.stopped().is_none());
    conn.handle_timeout(1_500);
    let Ok(Some(Event::Done { call, outcome, .. })) = conn.poll_event() else {
        panic!("the call ends");
    };
    assert_eq!(call, init);
    let Err(error) = outcome else {
        panic!("with an error");
    };
    assert_eq!(error.class_name(), "ConnectError");
    assert!(error.fails_connect());
    let reason = "start() timed out after 0.5 s; only close() is accepted (and request_cancel())";
    assert_eq!(error.description(), reason);
    assert_eq!(conn.stopped(), Some(reason));
    assert_eq!(conn.poll_timeout(), None);
    // A late answer is dropped.
    push(&mut conn, INIT);
    assert!(!events(&mut conn).iter().any(|e| e.starts_with("done")));
}

#[test]
fn a_cleared_start_deadline_never_fires() {
    let mut conn = connection_with(limits());
    conn.set_start_deadline(Some(0.5));
    conn.request(Request::Initialize).unwrap();
    push(&mut conn, INIT);
    assert_eq!(events(&mut conn), ["done 0 Initialized"]);
    conn.set_start_deadline(None);
    assert_eq!(conn.poll_timeout(), None);
    conn.handle_timeout(10_000);
    assert!(conn.stopped().is_none());
}

#[test]
fn which_handshake_failures_fail_to_connect() {
    let mut conn = connection_with(limits());
    conn.request(Request::Initialize).unwrap();
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"agentCapabilities":{}}}"#,
    );
    let Ok(Some(Event::Done {
        outcome: Err(version),
        ..
    })) = conn.poll_event()
    else {
        panic!("initialize fails");
    };
    assert!(version.fails_connect(), "{version:?}");
    let mut conn = connection_with(limits());
    conn.request(Request::Initialize).unwrap();
    push(&mut conn, r#"{"jsonrpc":"2.0","id":0,"result":[]}"#);
    let Ok(Some(Event::Done {
        outcome: Err(malformed),
        ..
    })) = conn.poll_event()
    else {
        panic!("initialize fails");
    };
    assert!(
        !malformed.fails_connect(),
        "a malformed line is a protocol fault: {malformed:?}"
    );
    let mut conn = connection_with(limits());
    conn.request(Request::Initialize).unwrap();
    conn.input_ended();
    let Err(ended) = conn.poll_event() else {
        panic!("the output ended while initialize waits");
    };
    assert!(ended.fails_connect(), "{ended:?}");
}

#[test]
fn terminal_output_is_cut_from_the_front_until_its_answer_fits() {
    let mut small = limits();
    small.request_bytes = 300;
    let mut conn = connection_with(small);
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":"t","method":"terminal/output","params":{"sessionId":"a","terminalId":"x"}}"#,
    );
    let Ok(Some(Event::Host { host, .. })) = conn.poll_event() else {
        panic!("a host request");
    };
    let full: String = "é0123456789".repeat(60);
    let output = Ok(HostOk::Output {
        output: full.clone(),
        truncated: false,
        exit: None,
    });
    let fitted = conn.fit_host_answer(host, output);
    let answer = acp_proto::host::answer("\"t\"", &fitted);
    assert!(answer.len() <= 300, "{} bytes", answer.len());
    let Ok(HostOk::Output {
        output, truncated, ..
    }) = fitted
    else {
        panic!("still output");
    };
    assert!(truncated && !output.is_empty() && full.ends_with(&output));
    // Other answers are left to answer_host's checks.
    let empty = conn.fit_host_answer(host, Ok(HostOk::Empty));
    assert!(matches!(empty, Ok(HostOk::Empty)));
}

/// opencode 1.18 offers its modes only as a `"mode"` select config option: they are the
/// session's modes, `set_mode` goes through `session/set_config_option`, and the answer's
/// options move the current mode. An agent with a `modes` object keeps `session/set_mode`.
#[test]
fn modes_offered_as_a_config_option_are_the_session_s_modes() {
    let mut conn = started();
    conn.request(Request::NewSession {
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        system_prompt: None,
    })
    .unwrap();
    let request: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    let options = |current: &str| {
        format!(
            r#"[{{"id":"agent-mode","name":"Mode","category":"mode","type":"select","currentValue":"{current}","options":[{{"value":"build","name":"Build"}},{{"value":"plan","name":"Plan"}}]}}]"#
        )
    };
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"s","configOptions":{}}}}}"#,
            request["id"],
            options("build")
        ),
    );
    assert!(events(&mut conn)[0].starts_with("done"));
    let modes = conn.session("s").unwrap().offered_modes();
    assert_eq!(modes.current, "build");
    let ids: Vec<&str> = modes.available.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["build", "plan"]);

    let refused = conn.request(Request::SetMode {
        session_id: "s",
        mode_id: "yolo",
    });
    assert!(matches!(refused, Err(AcpError::InvalidArgument(_))));
    conn.request(Request::SetMode {
        session_id: "s",
        mode_id: "plan",
    })
    .unwrap();
    let wire: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    assert_eq!(wire["method"], "session/set_config_option");
    assert_eq!(wire["params"]["configId"], "agent-mode");
    assert_eq!(wire["params"]["value"], "plan");
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"configOptions":{}}}}}"#,
            wire["id"],
            options("plan")
        ),
    );
    events(&mut conn);
    assert_eq!(conn.session("s").unwrap().offered_modes().current, "plan");

    // A session with a modes object: set_mode as before.
    conn.request(Request::NewSession {
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        system_prompt: None,
    })
    .unwrap();
    let request: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"t","modes":{{"currentModeId":"ask","availableModes":[{{"id":"ask","name":"Ask"}},{{"id":"code","name":"Code"}}]}},"configOptions":{}}}}}"#,
            request["id"],
            options("build")
        ),
    );
    events(&mut conn);
    assert_eq!(conn.session("t").unwrap().offered_modes().current, "ask");
    conn.request(Request::SetMode {
        session_id: "t",
        mode_id: "code",
    })
    .unwrap();
    let wire: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    assert_eq!(wire["method"], "session/set_mode");
}

#[test]
fn permission_requests_waiting_for_the_host_are_bounded() {
    let mut conn = started();
    open(&mut conn, "s");
    prompt(&mut conn, "s", None);
    sent(&mut conn);
    let mut asks = Vec::new();
    for i in 0..70 {
        push(
            &mut conn,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"session/request_permission","params":{{"sessionId":"s","toolCall":{{"toolCallId":"t{i}","kind":"edit","title":"Edit"}},"options":[{{"optionId":"ok","name":"OK","kind":"allow_once"}},{{"optionId":"no","name":"No","kind":"reject_once"}}]}}}}"#,
                100 + i
            ),
        );
        // Left waiting, as an awaited on_permission leaves them, except the refused ones.
        while let Some(event) = conn.poll_event().unwrap() {
            if let Event::Permission { ask, cancelled } = event {
                asks.push((ask, cancelled));
            }
        }
    }
    let ruled: Vec<bool> = asks.iter().map(|(_, ruled)| *ruled).collect();
    assert!(ruled[..64].iter().all(|r| !r), "64 wait for the host");
    assert!(
        ruled[64..].iter().all(|r| *r),
        "the rest are decided on arrival"
    );
    let answer = acp_proto::permission::ObserverAnswer::Outcome {
        decision: acp_proto::rules::Decision::Allow,
        option_id: None,
        reason: None,
    };
    let last = conn.decide(asks[69].0, Some(answer.clone())).unwrap();
    assert_eq!(last.record.option_id, "no");
    assert!(
        last.record
            .reason
            .contains("too many permission requests pending"),
        "{:?}",
        last.record.reason
    );
    let first = conn.decide(asks[0].0, Some(answer)).unwrap();
    assert_eq!(first.record.option_id, "ok");
}

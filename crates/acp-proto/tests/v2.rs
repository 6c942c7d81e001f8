//! ACP v2 through the `Connection` (design/protocol-now.md §4): negotiation, the turn that ends
//! at its `idle`, the reply folded per message, v2 permission requests, the calls v2 does not
//! have, and the recorded traffic of the two official SDKs' v2 agents replayed.

mod common;

use std::collections::HashMap;

use acp_proto::encode::ContentBlock;
use acp_proto::error::AcpError;
use acp_proto::limits::Protocol;
use acp_proto::{Connection, Request};
use common::{connection, events, limits, push, sent};
use serde_json::Value;

const INIT_V2: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{"prompt":{"image":{}}}},"authMethods":[{"methodId":"m","name":"M","type":"agent"}]}}"#;
const INIT_V1: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;

fn started(protocol: Protocol, answer: &str) -> (Connection, Vec<String>) {
    started_with(protocol, answer, limits())
}

fn started_with(
    protocol: Protocol,
    answer: &str,
    limits: acp_proto::limits::TransferLimits,
) -> (Connection, Vec<String>) {
    let mut conn = connection(protocol, limits);
    conn.request(Request::Initialize).unwrap();
    let wire = sent(&mut conn);
    push(&mut conn, answer);
    let seen = events(&mut conn);
    assert_eq!(seen.len(), 1, "{seen:?}");
    (conn, vec![wire[0].clone(), seen[0].clone()])
}

fn v2() -> Connection {
    v2_with(limits())
}

/// A v2 connection with session "s" open, under `limits`.
fn v2_with(limits: acp_proto::limits::TransferLimits) -> Connection {
    let (mut conn, seen) = started_with(Protocol::V2, INIT_V2, limits);
    assert_eq!(seen[1], "done 0 Initialized");
    open(&mut conn, "s");
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
    let request: Value = serde_json::from_str(&sent(conn)[0]).unwrap();
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"{id}"}}}}"#,
        request["id"]
    );
    push(conn, &answer);
    assert!(events(conn)[0].starts_with("done"));
}

/// Sends a prompt; its wire id.
fn prompt(conn: &mut Connection, session: &str, timeout_ms: Option<u64>) -> i64 {
    let content = [ContentBlock::Text("go".into())];
    conn.request(Request::Prompt {
        session_id: session,
        content: &content,
        timeout_ms,
        gated: true,
        meta: &[],
    })
    .unwrap();
    let request: Value = serde_json::from_str(sent(conn).last().unwrap()).unwrap();
    request["id"].as_i64().unwrap()
}

fn update(session: &str, body: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{body}}}}}"#
    )
}

fn state(session: &str, state: &str, stop: Option<&str>) -> String {
    let stop = stop.map_or(String::new(), |s| format!(r#","stopReason":"{s}""#));
    update(
        session,
        &format!(r#"{{"sessionUpdate":"state_update","state":"{state}"{stop}}}"#),
    )
}

fn chunk(session: &str, message: &str, text: &str) -> String {
    update(
        session,
        &format!(
            r#"{{"sessionUpdate":"agent_message_chunk","messageId":"{message}","content":{{"type":"text","text":"{text}"}}}}"#
        ),
    )
}

fn message(session: &str, message: &str, text: &str) -> String {
    update(
        session,
        &format!(
            r#"{{"sessionUpdate":"agent_message","messageId":"{message}","content":[{{"type":"text","text":"{text}"}}]}}"#
        ),
    )
}

fn ack(id: i64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"messageId":"u{id}"}}}}"#)
}

/// Pushes the lines and returns every event they made.
fn feed(conn: &mut Connection, lines: &[String]) -> Vec<String> {
    let mut seen = Vec::new();
    for line in lines {
        push(conn, line);
        seen.extend(events(conn));
    }
    seen
}

fn done(seen: &[String]) -> Vec<&String> {
    seen.iter()
        .filter(|e| e.starts_with("done") || e.starts_with("failed"))
        .collect()
}

#[test]
fn v2_offers_version_2_with_only_what_v2_has_and_reads_v2_capabilities() {
    let (conn, seen) = started(Protocol::V2, INIT_V2);
    let offer: Value = serde_json::from_str(&seen[0]).unwrap();
    assert_eq!(offer["params"]["protocolVersion"], 2);
    assert!(offer["params"]["info"]["name"].is_string());
    assert_eq!(offer["params"]["capabilities"], serde_json::json!({}));
    assert!(offer["params"].get("clientCapabilities").is_none());
    let info = conn.initialize().unwrap();
    assert_eq!(info.protocol_version, 2);
    let caps = &info.capabilities;
    assert!(caps.prompt_image && !caps.prompt_audio && !caps.load_session);
    assert!(caps.session_list && caps.session_resume && caps.session_close);
    assert!(
        caps.auth_logout,
        "a non-empty authMethods advertises auth/logout"
    );
    assert_eq!(info.auth_methods[0].id, "m");
    assert_eq!(
        info.agent_info.as_deref(),
        Some(r#"{"name":"a","version":"1"}"#)
    );
}

#[test]
fn auto_falls_back_to_v1_and_v2_alone_refuses_a_v1_agent() {
    let (conn, seen) = started(Protocol::Auto, INIT_V1);
    assert_eq!(seen[1], "done 0 Initialized");
    // auto offers 2 and carries v1's keys for an agent that answers 1.
    let offer: Value = serde_json::from_str(&seen[0]).unwrap();
    assert_eq!(offer["params"]["protocolVersion"], 2);
    assert!(offer["params"]["capabilities"].is_object());
    assert!(offer["params"]["clientCapabilities"].is_object());
    assert_eq!(offer["params"]["clientInfo"], offer["params"]["info"]);
    assert_eq!(conn.initialize().unwrap().protocol_version, 1);
    assert!(conn.initialize().unwrap().capabilities.load_session);
    let (_, seen) = started(Protocol::V2, INIT_V1);
    assert!(
        seen[1].starts_with("failed 0 AgentProtocolError"),
        "{seen:?}"
    );
    assert!(seen[1].contains("protocol=\"auto\""), "{seen:?}");
    let (_, seen) = started(Protocol::V1, INIT_V2);
    assert!(
        seen[1].contains("speaks ACP protocol version 2"),
        "{seen:?}"
    );
    let (conn, seen) = started(Protocol::V1, INIT_V1);
    let offer: Value = serde_json::from_str(&seen[0]).unwrap();
    assert_eq!(offer["params"]["protocolVersion"], 1);
    assert!(offer["params"].get("clientCapabilities").is_some());
    assert_eq!(conn.initialize().unwrap().protocol_version, 1);
}

#[test]
fn a_turn_ends_at_the_idle_after_its_running_with_its_stop_reason() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[
            state("s", "idle", None), // the session was idle before it took the prompt
            ack(id),
            state("s", "running", None),
            chunk("s", "m1", "hel"),
            chunk("s", "m1", "lo"),
        ],
    );
    assert!(done(&seen).is_empty(), "{seen:?}");
    let seen = feed(&mut conn, &[state("s", "idle", Some("max_tokens"))]);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[0].starts_with("update 5 state_update s idle"),
        "{seen:?}"
    );
    assert_eq!(seen[1], format!("done {id} max_tokens \"hello\" tools=0"));
    // The session takes a new turn at once; an idle with no reason ends it normally.
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[
            ack(id),
            state("s", "running", None),
            state("s", "idle", None),
        ],
    );
    assert_eq!(done(&seen), [&format!("done {id} end_turn \"\" tools=0")]);
}

#[test]
fn the_acknowledgement_may_come_after_the_idle_or_twice() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[
            state("s", "running", None),
            chunk("s", "m", "x"),
            state("s", "idle", Some("end_turn")),
        ],
    );
    assert_eq!(done(&seen), [&format!("done {id} end_turn \"x\" tools=0")]);
    // The late acknowledgement is dropped as a late answer, never an error.
    let seen = feed(&mut conn, &[ack(id)]);
    assert_eq!(seen, [format!("other {}", ack(id))]);
    let id = prompt(&mut conn, "s", None);
    let seen = feed(&mut conn, &[ack(id), ack(id)]);
    assert!(
        seen[1].starts_with(&format!("failed {id} AgentProtocolError")),
        "{seen:?}"
    );
    assert!(seen[1].contains("a second time"), "{seen:?}");
    // The session is free again.
    prompt(&mut conn, "s", None);
}

#[test]
fn an_agent_that_never_says_running_still_ends_its_turn_with_a_reason() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[ack(id), chunk("s", "m", "hi"), state("s", "idle", None)],
    );
    assert!(
        done(&seen).is_empty(),
        "an idle without a reason before running: {seen:?}"
    );
    let seen = feed(&mut conn, &[state("s", "idle", Some("refusal"))]);
    assert_eq!(done(&seen), [&format!("done {id} refusal \"hi\" tools=0")]);
}

#[test]
fn the_reply_is_per_message_the_last_upsert_wins_and_later_chunks_append() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[
            ack(id),
            state("s", "running", None),
            chunk("s", "a", "draft "),
            chunk("s", "b", "B1"),
            message("s", "a", "Final A. "),
            chunk("s", "b", "B2"),
            update("s", r#"{"sessionUpdate":"agent_message","messageId":"b"}"#),
            chunk("s", "a", "More."),
            update(
                "s",
                r#"{"sessionUpdate":"user_message","messageId":"u","content":[{"type":"text","text":"go"}]}"#,
            ),
            state("s", "idle", Some("end_turn")),
        ],
    );
    assert_eq!(
        done(&seen),
        [&format!(
            "done {id} end_turn \"Final A. More.B1B2\" tools=0"
        )]
    );
    assert!(
        seen.iter().any(|e| e.contains("agent_message s Final A. ")),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|e| e.contains("user_message s go")),
        "{seen:?}"
    );
    // What a host that assembles the reply itself is told: appends, and splices of earlier
    // messages (applied in order they give the same reply: tests/v2 checks it end to end).
    let edits: Vec<&str> = seen
        .iter()
        .filter(|e| e.ends_with("joined") || e.contains(" spliced "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        edits,
        [
            "update 2 agent_message_chunk s draft  joined",
            "update 3 agent_message_chunk s B1 joined",
            "update 4 agent_message s Final A.  spliced 0 6",
            "update 5 agent_message_chunk s B2 joined",
            "update 7 agent_message_chunk s More. spliced 9 0",
        ]
    );
}

#[test]
fn tool_calls_are_upserts_with_content_chunks_and_plans_replace() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    conn.request(Request::SessionStatus { session_id: "s" })
        .ok();
    let lines = [
        ack(id),
        state("s", "running", None),
        update(
            "s",
            r#"{"sessionUpdate":"tool_call_update","toolCallId":"t","title":"Read","kind":"read","status":"pending"}"#,
        ),
        update(
            "s",
            r#"{"sessionUpdate":"tool_call_content_chunk","toolCallId":"t","content":{"type":"content","content":{"type":"text","text":"a"}}}"#,
        ),
        update(
            "s",
            r#"{"sessionUpdate":"tool_call_content_chunk","toolCallId":"t","content":{"type":"diff","changes":[{"type":"add","path":"/w/f"}]}}"#,
        ),
        update(
            "s",
            r#"{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed"}"#,
        ),
        update(
            "s",
            r#"{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"one","priority":"high","status":"pending"},{"content":"two","priority":"low","status":"pending"}]}}"#,
        ),
        update("s", r#"{"sessionUpdate":"_vendor_thing","x":1}"#),
        state("s", "idle", Some("end_turn")),
    ];
    let mut turn = None;
    for line in &lines {
        push(&mut conn, line);
        loop {
            match conn.poll_event().unwrap() {
                None => break,
                Some(acp_proto::Event::Done {
                    outcome: Ok(acp_proto::Outcome::Turn(t)),
                    ..
                }) => turn = Some(t),
                Some(acp_proto::Event::Update { update, .. }) => {
                    if update.session_update == "plan_update" {
                        assert_eq!(update.text, "one\ntwo");
                    }
                    if update.session_update == "_vendor_thing" {
                        assert_eq!(update.kind, acp_proto::update::UpdateKind::Unknown);
                    }
                }
                Some(_) => {}
            }
        }
    }
    let turn = turn.expect("the turn ended");
    assert_eq!(turn.tool_calls.len(), 1);
    let call: Value = serde_json::from_str(&turn.tool_calls[0]).unwrap();
    assert_eq!(call["status"], "completed");
    assert_eq!(call["kind"], "read");
    assert_eq!(call["content"].as_array().unwrap().len(), 2);
    assert_eq!(call["content"][1]["changes"][0]["type"], "add");
    let plan: Value = serde_json::from_str(turn.plan.as_deref().unwrap()).unwrap();
    assert_eq!(plan.as_array().unwrap().len(), 2);
    let _ = id;
}

#[test]
fn cancel_latches_permissions_and_the_turn_ends_at_its_cancelled_idle() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    feed(&mut conn, &[ack(id), state("s", "running", None)]);
    conn.cancel("s");
    let wire = sent(&mut conn);
    assert!(wire[0].contains("session/cancel"), "{wire:?}");
    let request = r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","title":"Read it","subject":{"type":"tool_call","toolCall":{"toolCallId":"t","kind":"read"}},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}]}}"#;
    let seen = feed(&mut conn, &[request.to_owned()]);
    assert_eq!(seen, ["permission cancelled  \"Read it\" cancelled"]);
    let seen = feed(&mut conn, &[state("s", "idle", Some("cancelled"))]);
    assert_eq!(done(&seen), [&format!("done {id} cancelled \"\" tools=1")]);
}

#[test]
fn v2_permission_requests_are_ruled_by_their_title_and_subject() {
    let mut conn = v2();
    let id = prompt(&mut conn, "s", None);
    feed(&mut conn, &[ack(id), state("s", "running", None)]);
    let read = r#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s","title":"Read f","subject":{"type":"tool_call","toolCall":{"toolCallId":"t","title":"other","kind":"read"}},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"},{"optionId":"no","name":"No","kind":"reject_once"}]}}"#;
    let command = r#"{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"s","title":"Run ls","subject":{"type":"command","command":"ls"},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"},{"optionId":"no","name":"No","kind":"reject_once"}]}}"#;
    let seen = feed(&mut conn, &[read.to_owned(), command.to_owned()]);
    assert_eq!(
        seen,
        [
            "permission selected ok \"Read f\"",
            "permission selected no \"Run ls\""
        ]
    );
    let answers = sent(&mut conn);
    assert!(answers[0].contains(r#""id":7"#) && answers[0].contains(r#""optionId":"ok""#));
    assert!(answers[1].contains(r#""id":8"#) && answers[1].contains(r#""optionId":"no""#));
}

#[test]
fn calls_v2_does_not_have_are_capability_errors_naming_the_version() {
    let mut conn = v2();
    let load = |resume, replay_from_start| Request::LoadSession {
        session_id: "old",
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        resume,
        system_prompt: None,
        replay_from_start,
    };
    let error = conn.request(load(false, false)).unwrap_err();
    match &error {
        AcpError::Capability {
            capability,
            message,
            ..
        } => {
            assert_eq!(capability, "session/load");
            assert!(
                message.contains("ACP v2") && message.contains("replay_from"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let error = conn
        .request(Request::SetMode {
            session_id: "s",
            mode_id: "x",
        })
        .unwrap_err();
    assert!(
        matches!(&error, AcpError::Capability { capability, .. } if capability == "session/set_mode"),
        "{error:?}"
    );
    let error = conn
        .request(Request::SetModel {
            session_id: "s",
            model_id: "x",
        })
        .unwrap_err();
    assert!(
        matches!(&error, AcpError::Capability { capability, .. } if capability == "session/set_model"),
        "{error:?}"
    );
    assert!(
        sent(&mut conn).is_empty(),
        "nothing written for a refused call"
    );
    // A resume that replays from the start.
    conn.request(load(true, true)).unwrap();
    let wire: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    assert_eq!(wire["method"], "session/resume");
    assert_eq!(wire["params"]["replayFrom"]["type"], "start");
    // v1 has no replayFrom.
    let (mut v1, _) = started(Protocol::V1, INIT_V1);
    let error = v1.request(load(true, true)).unwrap_err();
    assert!(
        matches!(&error, AcpError::Capability { message, .. } if message.contains("ACP v1")),
        "{error:?}"
    );
}

#[test]
fn login_and_logout_use_v2_method_names() {
    let mut conn = v2();
    conn.request(Request::Authenticate { method_id: "m" })
        .unwrap();
    conn.request(Request::Logout).unwrap();
    let wire = sent(&mut conn);
    assert!(wire[0].contains(r#""method":"auth/login""#) && wire[0].contains(r#""methodId":"m""#));
    assert!(wire[1].contains(r#""method":"auth/logout""#));
    let login: Value = serde_json::from_str(&wire[0]).unwrap();
    let refusal = format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32000,"message":"no"}}}}"#,
        login["id"]
    );
    let seen = feed(&mut conn, &[refusal]);
    assert!(
        seen[0].contains("answered auth/login"),
        "errors name v2's method: {seen:?}"
    );
}

#[test]
fn a_v2_agent_asking_for_files_or_terminals_gets_method_not_found() {
    let mut conn = v2();
    let ask = r#"{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/etc/passwd"}}"#;
    let seen = feed(&mut conn, &[ask.to_owned()]);
    assert_eq!(seen.len(), 1);
    assert!(seen[0].starts_with("other"), "{seen:?}");
    let answer = sent(&mut conn);
    assert!(answer[0].contains("-32601"), "{answer:?}");
}

#[test]
fn a_replacing_upsert_past_response_bytes_overflows_and_cancels_once() {
    let mut small = limits();
    small.response_bytes = 11; // the message's id ("m") counts too
    let mut conn = v2_with(small);
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[
            ack(id),
            state("s", "running", None),
            chunk("s", "m", "12345"),
            message("s", "m", "1234567890"), // replaces: 1 + 10 bytes, within
            message("s", "m", "12345678901"), // 1 + 11: over
        ],
    );
    let cancels: Vec<String> = sent(&mut conn)
        .into_iter()
        .filter(|l| l.contains("session/cancel"))
        .collect();
    assert_eq!(cancels.len(), 1, "{seen:?}");
    let seen = feed(&mut conn, &[state("s", "idle", Some("cancelled"))]);
    assert_eq!(
        done(&seen),
        [&format!("done {id} cancelled \"1234567890\" tools=0")]
    );
}

#[test]
fn a_turn_that_never_goes_idle_times_out_and_its_late_idle_frees_the_latch() {
    let mut conn = v2();
    conn.set_now(0);
    let id = prompt(&mut conn, "s", Some(100));
    feed(&mut conn, &[ack(id), state("s", "running", None)]);
    conn.handle_timeout(100);
    assert!(sent(&mut conn).iter().any(|l| l.contains("session/cancel")));
    conn.handle_timeout(700);
    let seen = events(&mut conn);
    assert!(
        seen[0].starts_with(&format!("failed {id} TurnTimeout")),
        "{seen:?}"
    );
    // Until the late idle, the turn's requests are answered cancelled.
    let request = r#"{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"s","title":"Read","subject":{"type":"tool_call","toolCall":{"toolCallId":"t","kind":"read"}},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}]}}"#;
    let seen = feed(&mut conn, &[request.to_owned()]);
    assert!(seen[0].starts_with("permission cancelled"), "{seen:?}");
    feed(&mut conn, &[state("s", "idle", Some("cancelled"))]);
    let seen = feed(&mut conn, &[request.replace(r#""id":9"#, r#""id":10"#)]);
    assert!(seen[0].starts_with("permission selected ok"), "{seen:?}");
}

#[test]
fn state_updates_mean_nothing_to_a_v1_turn() {
    let (mut conn, _) = started(Protocol::V1, INIT_V1);
    open(&mut conn, "s");
    let id = prompt(&mut conn, "s", None);
    let seen = feed(
        &mut conn,
        &[
            state("s", "running", None),
            state("s", "idle", Some("end_turn")),
        ],
    );
    assert!(done(&seen).is_empty(), "{seen:?}");
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#);
    assert_eq!(done(&feed(&mut conn, &[answer])).len(), 1);
}

#[test]
fn the_fast_path_reads_a_message_id_before_or_after_the_content() {
    for line in [
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m7","content":{"type":"text","text":"hi"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"messageId":"m7"}}}"#,
    ] {
        let chunk = acp_proto::wire::text_chunk(line.as_bytes()).expect("the fast path");
        assert_eq!((chunk.text, chunk.message_id), ("hi", Some("m7")));
    }
    let v1 = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#;
    assert_eq!(
        acp_proto::wire::text_chunk(v1.as_bytes())
            .unwrap()
            .message_id,
        None
    );
    // Both places at once is not the template: the general parser reads it.
    let both = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"a","content":{"type":"text","text":"hi"},"messageId":"b"}}}"#;
    assert!(acp_proto::wire::text_chunk(both.as_bytes()).is_none());
}

#[test]
fn the_official_sdks_v2_agents_recorded_traffic_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/data/v2");
    let ts = replay(&dir.join("ts-sdk-2-v2.jsonl"));
    assert_eq!(
        ts,
        [
            "end_turn \"hello there\" tools=0",
            "end_turn \"I wrote the file.\" tools=1",
            "end_turn \"I did not write the file.\" tools=1",
            "cancelled \"tick 0. tick 1. \" tools=0",
        ]
    );
    let rust = replay(&dir.join("rust-sdk-v2.jsonl"));
    assert_eq!(
        rust,
        [
            "end_turn \"Echo: hello there\" tools=0",
            "end_turn \"Echo: write hello.txt\" tools=0",
            "end_turn \"Echo: write hello.txt\" tools=0",
            "end_turn \"Echo: slow\" tools=0",
        ]
    );
}

/// Replays a recorded v2 session through the connection: our requests for the recorded ones,
/// the agent's lines as recorded (ids mapped), permissions answered as recorded. The turns'
/// outcomes, in order.
fn replay(path: &std::path::Path) -> Vec<String> {
    let mut conn = connection(Protocol::Auto, limits());
    let mut ids: HashMap<String, i64> = HashMap::new();
    let mut turns = Vec::new();
    let mut updates = (0, 0);
    let text = std::fs::read_to_string(path).unwrap();
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let message = &record["msg"];
        if record["dir"] == "->" {
            let params = &message["params"];
            let session = params["sessionId"].as_str().unwrap_or("");
            let content = [ContentBlock::Text("replayed".into())];
            let request = match message["method"].as_str() {
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
                let call = conn.request(request).unwrap();
                ids.insert(message["id"].to_string(), call.0);
            }
            continue;
        }
        let mut message = message.clone();
        if message.get("method").is_none() {
            message["id"] = Value::from(ids[&message["id"].to_string()]);
        }
        if message["method"] == "session/update" {
            updates.0 += 1;
        }
        push(&mut conn, &message.to_string());
        while let Some(event) = conn.poll_event().unwrap() {
            match event {
                acp_proto::Event::Update { .. } => updates.1 += 1,
                acp_proto::Event::Permission { ask, .. } => {
                    // The recorded agent goes on as recorded whatever is answered.
                    let decided = conn.decide(ask, None).unwrap();
                    conn.send(decided);
                }
                acp_proto::Event::Done { outcome, .. } => {
                    if let Ok(acp_proto::Outcome::Turn(turn)) = outcome {
                        turns.push(format!(
                            "{} {:?} tools={}",
                            turn.stop_reason,
                            turn.response,
                            turn.tool_calls.len()
                        ));
                    }
                }
                acp_proto::Event::Other { .. } => {} // the acknowledgements
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        sent(&mut conn);
    }
    assert_eq!(updates.0, updates.1, "every update delivered");
    turns
}

#[test]
fn many_messages_and_content_items_stay_within_the_turn_s_bounds() {
    let mut few = limits();
    few.response_segment_count = 100;
    let mut conn = v2_with(few);
    let id = prompt(&mut conn, "s", None);
    let mut lines = vec![ack(id), state("s", "running", None)];
    lines.extend((0..150).map(|i| chunk("s", &format!("m{i}"), "x")));
    lines.extend((0..1100).map(|i| {
        update(
            "s",
            &format!(r#"{{"sessionUpdate":"tool_call_content_chunk","toolCallId":"t","content":{{"type":"content","content":{{"type":"text","text":"{i}"}}}}}}"#),
        )
    }));
    let seen = feed(&mut conn, &lines);
    assert_eq!(
        seen.iter().filter(|e| e.starts_with("update")).count(),
        1251
    );
    let cancels = sent(&mut conn)
        .iter()
        .filter(|l| l.contains("session/cancel"))
        .count();
    assert_eq!(cancels, 1, "the 101st message overflows once");
    push(&mut conn, &state("s", "idle", Some("cancelled")));
    let mut turn = None;
    while let Some(event) = conn.poll_event().unwrap() {
        if let acp_proto::Event::Done {
            outcome: Ok(acp_proto::Outcome::Turn(t)),
            ..
        } = event
        {
            turn = Some(t);
        }
    }
    let turn = turn.unwrap();
    assert_eq!(turn.response, "x".repeat(100));
    assert_eq!(turn.overflow.unwrap().admitted_segments, 100);
    let call: Value = serde_json::from_str(&turn.tool_calls[0]).unwrap();
    assert_eq!(call["content"].as_array().unwrap().len(), 1024);
}

#[test]
fn message_ids_count_against_response_bytes() {
    let mut small = limits();
    small.response_bytes = 1000;
    let mut conn = v2_with(small);
    let id = prompt(&mut conn, "s", None);
    let long = "i".repeat(600);
    let seen = feed(
        &mut conn,
        &[
            ack(id),
            state("s", "running", None),
            chunk("s", &long, "a"),
            chunk("s", &long, "b"), // the same message: its id counted once
            chunk("s", &format!("{long}2"), "c"), // a second 600-byte id: over
        ],
    );
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(
        sent(&mut conn)
            .iter()
            .filter(|l| l.contains("session/cancel"))
            .count(),
        1
    );
    push(&mut conn, &state("s", "idle", Some("cancelled")));
    let seen = events(&mut conn);
    assert_eq!(
        done(&seen),
        [&format!("done {id} cancelled \"ab\" tools=0")]
    );
}

#[test]
fn v2_config_options_are_read_by_config_id_and_set_with_a_typed_value() {
    let (mut conn, _) = started(Protocol::V2, INIT_V2);
    conn.request(Request::NewSession {
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        system_prompt: None,
    })
    .unwrap();
    let request: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    let options = r#"[{"configId":"mode","name":"Mode","category":"mode","type":"select","currentValue":"ask","options":[{"groupId":"g","name":"G","options":[{"value":"ask","name":"Ask"},{"value":"code","name":"Code"}]}]}]"#;
    push(
        &mut conn,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"s","configOptions":{options}}}}}"#,
            request["id"]
        ),
    );
    events(&mut conn);
    conn.request(Request::SetMode {
        session_id: "s",
        mode_id: "code",
    })
    .unwrap();
    let wire: Value = serde_json::from_str(&sent(&mut conn)[0]).unwrap();
    assert_eq!(wire["method"], "session/set_config_option");
    assert_eq!(
        wire["params"],
        serde_json::json!({"sessionId": "s", "configId": "mode", "type": "id", "value": "code"})
    );
    let error = conn
        .request(Request::SetMode {
            session_id: "s",
            mode_id: "nope",
        })
        .unwrap_err();
    assert!(matches!(error, AcpError::InvalidArgument(_)), "{error:?}");
}

//! Elicitations through the `Connection` with an in-memory agent: advertised only when asked,
//! declined without an observer, answered only after the decision, withdrawn by
//! `$/cancel_request`, cancelled with their turn, and hostile requests refused with an error.

use acp_proto::elicitation::{Action, Answer};
use acp_proto::limits::{Config, TransferLimits};
use acp_proto::reader::Limits;
use acp_proto::{AskId, Connection, Event, Request};
use serde_json::Value;

fn connection(advertise: bool) -> Connection {
    let limits = TransferLimits {
        request_bytes: 1 << 20,
        response_bytes: 1 << 20,
        update_bytes: 1 << 20,
        update_count: 1 << 20,
        response_segment_count: 1 << 20,
    };
    let mut conn = Connection::new(
        Config::new(limits, 1),
        Limits {
            message_bytes: 16 << 20,
        },
    )
    .unwrap();
    conn.advertise_elicitation(advertise);
    conn
}

fn push(conn: &mut Connection, line: &str) {
    let mut rest = line.as_bytes().to_vec();
    rest.push(b'\n');
    let mut rest = &rest[..];
    while !rest.is_empty() {
        let buf = conn.read_buf();
        let count = buf.len().min(rest.len());
        buf[..count].copy_from_slice(&rest[..count]);
        conn.received(count);
        rest = &rest[count..];
    }
}

fn sent(conn: &mut Connection) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some((bytes, _)) = conn.poll_transmit() {
        let count = bytes.len();
        lines.push(String::from_utf8_lossy(bytes).trim_end().to_owned());
        conn.transmitted(count);
    }
    lines
}

/// Handles every event read so far; the elicitation asks are returned, other events dropped.
fn asks(conn: &mut Connection) -> Vec<AskId> {
    let mut asks = Vec::new();
    while let Some(event) = conn.poll_event().unwrap() {
        if let Event::Elicitation { ask, .. } = event {
            asks.push(ask);
        }
    }
    asks
}

/// Started, with session "s" open and a turn running in it.
fn running(advertise: bool) -> (Connection, String) {
    let mut conn = connection(advertise);
    conn.request(Request::Initialize).unwrap();
    let init = sent(&mut conn);
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#,
    );
    asks(&mut conn);
    conn.request(Request::NewSession {
        cwd: "/w",
        additional_directories: &[],
        mcp_servers: None,
        system_prompt: None,
    })
    .unwrap();
    sent(&mut conn);
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#,
    );
    asks(&mut conn);
    let content = [acp_proto::encode::ContentBlock::Text("go".into())];
    conn.request(Request::Prompt {
        session_id: "s",
        content: &content,
        timeout_ms: None,
        gated: true,
        meta: &[],
    })
    .unwrap();
    sent(&mut conn);
    (conn, init[0].clone())
}

fn form(id: &str, session: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"elicitation/create","params":{{"sessionId":"{session}","mode":"form","message":"Your name?","requestedSchema":{{"type":"object","properties":{{"name":{{"type":"string"}}}}}}}}}}"#
    )
}

fn result(line: &str) -> Value {
    let value: Value = serde_json::from_str(line).unwrap();
    value["result"].clone()
}

#[test]
fn advertised_only_when_the_observer_answers_elicitations() {
    let (_, init) = running(true);
    let value: Value = serde_json::from_str(&init).unwrap();
    assert_eq!(
        value["params"]["clientCapabilities"]["elicitation"],
        serde_json::json!({"form": {}, "url": {}})
    );
    let (_, init) = running(false);
    assert!(!init.contains("elicitation"));
}

#[test]
fn without_the_capability_the_agent_gets_the_schemas_decline() {
    let (mut conn, _) = running(false);
    push(&mut conn, &form("5", "s"));
    assert!(asks(&mut conn).is_empty(), "nobody is asked");
    let lines = sent(&mut conn);
    assert_eq!(
        lines,
        [r#"{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}"#]
    );
}

#[test]
fn an_accept_is_answered_only_once_decided_and_dropping_it_writes_nothing() {
    let (mut conn, _) = running(true);
    push(&mut conn, &form("\"e\"", "s"));
    let [ask] = asks(&mut conn)[..] else {
        panic!("one ask")
    };
    let record = conn.elicitation(ask).unwrap();
    assert_eq!(
        (record.mode.as_str(), record.session_id.as_str()),
        ("form", "s")
    );
    assert!(sent(&mut conn).is_empty(), "nothing before the decision");
    let answer = Answer::from_parts("accept", r#"{"name":"Ada"}"#.into()).unwrap();
    let decided = conn.decide_elicitation(ask, Some(answer.clone())).unwrap();
    assert_eq!(decided.record.action, "accept");
    drop(decided);
    assert!(
        sent(&mut conn).is_empty(),
        "a dropped decision writes nothing"
    );
    assert!(conn.decide_elicitation(ask, Some(answer)).is_err());

    push(&mut conn, &form("6", "s"));
    let [ask] = asks(&mut conn)[..] else {
        panic!("one ask")
    };
    let answer = Answer::from_parts("accept", r#"{"name":"Ada"}"#.into()).unwrap();
    let decided = conn.decide_elicitation(ask, Some(answer)).unwrap();
    conn.send_elicitation(decided);
    let lines = sent(&mut conn);
    assert_eq!(
        result(&lines[0]),
        serde_json::json!({"action": "accept", "content": {"name": "Ada"}})
    );
    push(&mut conn, &form("7", "s"));
    let [ask] = asks(&mut conn)[..] else {
        panic!("one ask")
    };
    let decided = conn.decide_elicitation(ask, None).unwrap();
    assert_eq!(decided.record.reason, "the observer abstained");
    conn.send_elicitation(decided);
    assert_eq!(
        result(&sent(&mut conn)[0]),
        serde_json::json!({"action": "decline"})
    );
}

#[test]
fn a_withdrawn_or_cancelled_elicitation_is_answered_cancel() {
    let (mut conn, _) = running(true);
    push(&mut conn, &form("8", "s"));
    let [ask] = asks(&mut conn)[..] else {
        panic!("one ask")
    };
    assert!(!conn.ask_cancelled(ask));
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}"#,
    );
    asks(&mut conn);
    assert!(
        conn.ask_cancelled(ask),
        "the pump tells a pending awaitable"
    );
    let answer = Some(Answer {
        action: Action::Accept,
        content: Some("{}".into()),
    });
    let decided = conn.decide_elicitation(ask, answer).unwrap();
    assert_eq!(decided.record.reason, "cancelled by the agent");
    conn.send_elicitation(decided);
    assert_eq!(
        result(&sent(&mut conn)[0]),
        serde_json::json!({"action": "cancel"})
    );

    // The blocking driver's look-ahead sees a cancel already read.
    push(
        &mut conn,
        &format!(
            "{}\n{}",
            form("9", "s"),
            r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9}}"#
        ),
    );
    let Some(Event::Elicitation { ask, .. }) = conn.poll_event().unwrap() else {
        panic!("the elicitation first")
    };
    assert!(conn.elicitation_withdrawn_ahead(ask));

    // The session's turn is being cancelled: answered cancel without asking.
    conn.cancel("s");
    sent(&mut conn);
    asks(&mut conn);
    push(&mut conn, &form("10", "s"));
    assert!(asks(&mut conn).is_empty());
    let lines = sent(&mut conn);
    assert!(lines
        .iter()
        .any(|l| l.contains(r#""id":10"#) && l.contains("cancel")));
}

#[test]
fn hostile_requests_get_an_error_and_nobody_is_asked() {
    let (mut conn, _) = running(true);
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":20,"method":"elicitation/create","params":{{"sessionId":"s","mode":"form","message":"m","requestedSchema":{{"type":"object","properties":{{"a":{{"type":"string","default":{}1{}}}}}}}}}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    let wide = |id: u32, count: usize| {
        let many: Vec<String> = (0..count)
            .map(|i| format!(r#""p{i}":{{"type":"boolean"}}"#))
            .collect();
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"elicitation/create","params":{{"sessionId":"s","mode":"form","message":"m","requestedSchema":{{"properties":{{{}}}}}}}}}"#,
            many.join(",")
        )
    };
    let deeper = format!(
        r#"{{"jsonrpc":"2.0","id":27,"method":"elicitation/create","params":{{"sessionId":"s","mode":"form","message":"m","requestedSchema":{}1{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":22,"method":"elicitation/create","params":{{"sessionId":"s","mode":"url","message":"{}","url":"https://x.test","elicitationId":"e"}}}}"#,
        "m".repeat(10 << 20)
    );
    let cases: [(&str, String); 8] = [
        ("nested", deep),
        ("nested", deeper),
        ("properties", wide(21, 300)),
        ("bytes", wide(28, 100_000)),
        ("bytes", huge),
        ("unknown session", form("23", "nobody")),
        (
            "unknown request",
            r#"{"jsonrpc":"2.0","id":24,"method":"elicitation/create","params":{"requestId":999,"mode":"url","message":"m","url":"u","elicitationId":"e"}}"#.into(),
        ),
        (
            "must be a string",
            r#"{"jsonrpc":"2.0","id":25,"method":"elicitation/create","params":{"sessionId":"s","mode":"form","message":7,"requestedSchema":{}}}"#.into(),
        ),
    ];
    for (why, line) in cases {
        push(&mut conn, &line);
        assert!(asks(&mut conn).is_empty(), "{why}: nobody is asked");
        let lines = sent(&mut conn);
        assert_eq!(lines.len(), 1, "{why}");
        let answer: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(answer["error"]["code"], -32602, "{why}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{why}: {message}");
    }
    // An unknown mode is declined (never shown as a known one); a completion for an id nobody
    // knows is a notification like any other.
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":26,"method":"elicitation/create","params":{"sessionId":"s","mode":"_x","message":"m"}}"#,
    );
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","method":"elicitation/complete","params":{"elicitationId":"nobody"}}"#,
    );
    assert!(asks(&mut conn).is_empty());
    assert_eq!(
        sent(&mut conn),
        [r#"{"jsonrpc":"2.0","id":26,"result":{"action":"decline"}}"#]
    );
}

#[test]
fn a_request_scoped_elicitation_names_a_call_in_flight() {
    let (mut conn, _) = running(true);
    // Call 2 (the prompt) is in flight.
    push(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":30,"method":"elicitation/create","params":{"requestId":2,"mode":"url","message":"Log in","url":"https://x.test/login","elicitationId":"e1"}}"#,
    );
    let [ask] = asks(&mut conn)[..] else {
        panic!("one ask")
    };
    let record = conn.elicitation(ask).unwrap();
    assert_eq!(record.scope_request_id.as_deref(), Some("2"));
    assert_eq!(record.url.as_deref(), Some("https://x.test/login"));
    assert_eq!(record.session_id, "");
}

#[test]
fn pending_elicitations_are_bounded() {
    let (mut conn, _) = running(true);
    for id in 0..acp_proto::elicitation::PENDING + 2 {
        push(&mut conn, &form(&(100 + id).to_string(), "s"));
    }
    assert_eq!(asks(&mut conn).len(), acp_proto::elicitation::PENDING);
    let refused = sent(&mut conn);
    assert_eq!(refused.len(), 2);
    assert!(refused
        .iter()
        .all(|l| l.contains("too many elicitations pending")));
}

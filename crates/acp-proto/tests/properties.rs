//! Property tests of the pure-Rust core (issue 4: fuzzing and properties).
//!
//! - The line reader: any bytes, any chunking give the same lines (and the same stop on an
//!   overlong line) as reading everything at once, and its storage never grows past
//!   `message_bytes + 1`.
//! - Classification and extraction: any bytes give an envelope or a defined `WireError`, and the
//!   extractors give a value or a defined error, never a panic.
//! - The connection: any line, in any state, gives an event or an `AcpError`, never a panic;
//!   updates are numbered 1, 2, 3… with no gap.
//!
//! The number of cases per property comes from proptest's `PROPTEST_CASES` (default 256), e.g.
//! `PROPTEST_CASES=100000 cargo test --release --test properties` for a long run.

use std::ops::Range;

use proptest::collection::vec;
use proptest::prelude::*;

use acp_proto::calls::CallId;
use acp_proto::encode::{ClientInfo, ContentBlock};
use acp_proto::error::AcpError;
use acp_proto::limits::{Config, PermissionPolicy, TransferLimits};
use acp_proto::reader::{Limits, Poll, Storage};
use acp_proto::wire;
use acp_proto::{Connection, Event, Outcome, Request};

// --- the line reader ---------------------------------------------------------------------------

/// What the reader must produce for `input`: every `\n`-terminated line, then the unterminated
/// rest as a last line; or, at the first line longer than `limit`, the lines before it and a stop.
fn expected_lines(input: &[u8], limit: usize) -> (Vec<Vec<u8>>, bool) {
    let mut lines = Vec::new();
    let mut rest = input;
    loop {
        match rest.iter().position(|&b| b == b'\n') {
            Some(newline) => {
                if newline > limit {
                    return (lines, true);
                }
                lines.push(rest[..newline].to_vec());
                rest = &rest[newline + 1..];
            }
            None => {
                if rest.len() > limit {
                    return (lines, true);
                }
                if !rest.is_empty() {
                    lines.push(rest.to_vec());
                }
                return (lines, false);
            }
        }
    }
}

/// Drives `Storage` as the call loop does, reading `chunks[i]` bytes on the i-th read (cycled;
/// 0 means an empty "idle" read), checking the storage bound after every step.
fn read_chunked(input: &[u8], limit: usize, chunks: &[usize]) -> (Vec<Vec<u8>>, bool) {
    let mut storage = Storage::new(Limits {
        message_bytes: limit,
    })
    .expect("a small buffer can be had");
    storage.activate();
    let mut lines = Vec::new();
    let mut rest = input;
    let mut reads = 0usize;
    let mut idle_in_a_row = 0usize;
    loop {
        let status = storage.status();
        assert_eq!(status.storage_bytes, limit + 1, "the buffer changed size");
        assert!(
            status.buffered_bytes <= limit + 1,
            "more buffered than the buffer holds"
        );
        assert!(status.high_water_message_bytes <= limit);
        let poll = storage.poll();
        match poll {
            Err(_) => {
                assert!(storage.is_terminal());
                assert!(storage.status().terminal);
                assert_eq!(storage.status().rejected_message_count, 1);
                // Terminal means terminal: every later poll fails too.
                assert!(storage.poll().is_err());
                return (lines, true);
            }
            Ok(Poll::Line(range)) => {
                let Range { start, end } = range.clone();
                assert!(
                    end - start <= limit,
                    "a line longer than the limit was handed out"
                );
                lines.push(storage.bytes(range).to_vec());
                idle_in_a_row = 0;
            }
            Ok(Poll::End) => {
                // End is sticky.
                assert!(matches!(storage.poll(), Ok(Poll::End)));
                return (lines, false);
            }
            Ok(Poll::NeedInput) => {
                let want = chunks[reads % chunks.len()];
                reads += 1;
                if rest.is_empty() {
                    storage.finish();
                    continue;
                }
                let free = storage.writable();
                assert!(!free.is_empty(), "NeedInput with no room to read into");
                assert!(free.len() <= limit + 1);
                let n = want.min(free.len()).min(rest.len());
                if n == 0 {
                    idle_in_a_row += 1;
                    // A transport may report "nothing yet" any number of times, but the
                    // chunking vector always holds a nonzero size, so this ends.
                    assert!(
                        idle_in_a_row <= chunks.len(),
                        "the reader spun without progress"
                    );
                    continue;
                }
                idle_in_a_row = 0;
                free[..n].copy_from_slice(&rest[..n]);
                storage.commit(n);
                rest = &rest[n..];
            }
        }
    }
}

/// Bytes rich in newlines, carriage returns and braces, so short lines and long lines both occur.
fn line_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![
            4 => Just(b'\n'),
            1 => Just(b'\r'),
            1 => Just(b'{'),
            1 => Just(0u8),
            10 => b'a'..=b'e',
            2 => any::<u8>(),
        ],
        0..max,
    )
}

proptest! {
    #[test]
    fn reader_any_chunking_gives_the_lines_of_reading_at_once(
        input in line_bytes(400),
        limit in 1usize..40,
        chunks in vec(0usize..50, 1..8).prop_filter("one nonzero read size", |c| c.iter().any(|&n| n > 0)),
    ) {
        let expected = expected_lines(&input, limit);
        let at_once = read_chunked(&input, limit, &[usize::MAX]);
        prop_assert_eq!(&at_once, &expected);
        let chunked = read_chunked(&input, limit, &chunks);
        prop_assert_eq!(&chunked, &expected);
    }

    #[test]
    fn reader_any_bytes_one_at_a_time(input in vec(any::<u8>(), 0..300), limit in 1usize..16) {
        let expected = expected_lines(&input, limit);
        prop_assert_eq!(read_chunked(&input, limit, &[1]), expected);
    }

    #[test]
    fn reader_storage_never_grows(
        limit in 1usize..2048,
        segments in vec((0usize..6000, any::<bool>(), any::<u8>()), 0..24),
    ) {
        // Lines shorter and far longer than the limit through a small buffer: the storage stays
        // limit + 1 bytes throughout (read_chunked asserts it after every step), and the lines
        // are those of reading at once.
        let mut input = Vec::new();
        for (length, newline, byte) in segments {
            input.extend(std::iter::repeat_n(byte | 0x80, length));
            if newline {
                input.push(b'\n');
            }
        }
        let expected = expected_lines(&input, limit);
        prop_assert_eq!(read_chunked(&input, limit, &[limit + 1, 7, 1, 4096]), expected);
    }
}

// --- classification and extraction ------------------------------------------------------------

/// Arbitrary JSON text (valid), with keys the client reads among random ones.
fn json_value() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("jsonrpc".to_owned()),
        Just("id".to_owned()),
        Just("method".to_owned()),
        Just("params".to_owned()),
        Just("result".to_owned()),
        Just("error".to_owned()),
        Just("sessionId".to_owned()),
        Just("update".to_owned()),
        Just("sessionUpdate".to_owned()),
        Just("content".to_owned()),
        Just("type".to_owned()),
        Just("text".to_owned()),
        Just("toolCall".to_owned()),
        Just("options".to_owned()),
        Just("optionId".to_owned()),
        Just("kind".to_owned()),
        Just("entries".to_owned()),
        Just("stopReason".to_owned()),
        Just("protocolVersion".to_owned()),
        Just("code".to_owned()),
        Just("message".to_owned()),
        "[a-z]{0,6}",
    ];
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        Just("123456789012345678901234567890".to_owned()),
        Just("-0".to_owned()),
        Just("2.0".to_owned()),
        Just("1e400".to_owned()),
        prop_oneof![
            Just("session/update".to_owned()),
            Just("session/request_permission".to_owned()),
            Just("agent_message_chunk".to_owned()),
            Just("tool_call".to_owned()),
            Just("plan".to_owned()),
            Just("allow_once".to_owned()),
            Just("reject_always".to_owned()),
            Just("text".to_owned()),
            ".{0,8}",
        ]
        .prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(","))),
            vec((key.clone(), inner), 0..6).prop_map(|fields| {
                let body: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v)| format!("{}:{v}", serde_json::to_string(&k).unwrap()))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
}

/// A JSON-RPC message shaped like what the client acts on, with fields of any type.
fn message_like() -> impl Strategy<Value = String> {
    let method = prop_oneof![
        Just(r#""session/update""#.to_owned()),
        Just(r#""session/request_permission""#.to_owned()),
        Just(r#""fs/read_text_file""#.to_owned()),
        json_value(),
    ];
    let id = prop_oneof![
        (-2i64..4).prop_map(|n| n.to_string()),
        Just("2.0".to_owned()),
        Just("null".to_owned()),
        Just(r#""2""#.to_owned()),
        Just("99999999999999999999999".to_owned()),
        Just("-9223372036854775809".to_owned()),
        json_value(),
    ];
    (
        proptest::option::of(id),
        proptest::option::of(method),
        proptest::option::of(json_value()),
        proptest::option::of(json_value()),
        proptest::option::of(json_value()),
    )
        .prop_map(|(id, method, params, result, error)| {
            let mut fields = vec![r#""jsonrpc":"2.0""#.to_owned()];
            for (name, value) in [
                ("id", id),
                ("method", method),
                ("params", params),
                ("result", result),
                ("error", error),
            ] {
                if let Some(value) = value {
                    fields.push(format!(r#""{name}":{value}"#));
                }
            }
            format!("{{{}}}", fields.join(","))
        })
}

/// Any line: random bytes, valid JSON of any shape, message-shaped JSON, or one of those cut or
/// with a byte changed.
fn any_line() -> impl Strategy<Value = Vec<u8>> {
    let whole = prop_oneof![
        2 => vec(any::<u8>(), 0..200),
        3 => json_value().prop_map(String::into_bytes),
        6 => message_like().prop_map(String::into_bytes),
    ];
    (whole, any::<u16>(), any::<u8>(), 0u8..4).prop_map(|(mut bytes, at, byte, how)| {
        if !bytes.is_empty() {
            let at = at as usize % bytes.len();
            match how {
                0 => bytes.truncate(at),
                1 => bytes[at] = byte,
                _ => {}
            }
        }
        bytes
    })
}

/// Runs every extractor the client uses on a classified line; none may panic. (The line is
/// classified again for each extractor that takes the envelope's params by value.)
fn extract_everything(line: &[u8]) {
    let Ok(envelope) = wire::classify(line) else {
        return;
    };
    let _ = envelope.integer_id();
    for id in -2..4 {
        let _ = envelope.is_response_for(id);
    }
    match wire::session_update(envelope.params) {
        Ok(update) => {
            assert!(update.fields.session_update.as_str().is_some());
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
    let envelope = wire::classify(line).expect("classified once already");
    let permission = wire::permission_request(envelope.params);
    let _ = permission.options.0.as_ref().map(Vec::len);
    if let Some(error) = envelope.error {
        let _ = wire::error_answer(error);
    }
    if let Some(result) = envelope.result {
        let _ = wire::initialize_result(result);
        let _ = wire::session_new_result(result);
        let _ = wire::prompt_result(result);
    }
}

proptest! {
    #[test]
    fn classify_any_bytes_is_an_envelope_or_a_defined_error(line in vec(any::<u8>(), 0..300)) {
        match wire::classify(&line) {
            Ok(_) => {}
            // Every WireError says what was wrong.
            Err(error) => prop_assert!(!error.to_string().is_empty()),
        }
        extract_everything(&line);
    }

    #[test]
    fn extraction_from_any_message_never_panics(line in any_line()) {
        extract_everything(&line);
    }

    #[test]
    fn valid_json_objects_classify(text in message_like()) {
        // Valid JSON objects classify, with two defined exceptions reported as invalid JSON: a
        // field the client reads given twice (duplicate keys are ambiguous) and a number
        // serde_json cannot represent (1e400).
        match wire::classify(text.as_bytes()) {
            Ok(_) => {}
            Err(error) => {
                let said = error.to_string();
                prop_assert!(
                    said.contains("duplicate field")
                        || (text.contains("1e400") && said.contains("out of range")),
                    "{}: {}", text, said
                );
            }
        }
    }
}

/// 100,000 nested arrays or objects: serde_json skips values it does not keep without
/// recursion, and its recursion limit (128) guards the rest, so this is an error or a lenient
/// read, never a stack overflow.
#[test]
fn deep_nesting_is_a_defined_outcome_not_a_stack_overflow() {
    for depth in [127usize, 128, 129, 1_000, 100_000] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(wire::classify(arrays.as_bytes()).is_err());
        let objects = format!("{}{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        extract_everything(objects.as_bytes());
        let inside = [
            // Nested where the client reads a field…
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"plan","entries":{}{}}}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{}{}}}}}}}"#,
                r#"{"content":"#.repeat(depth),
                "}".repeat(depth)
            ),
            // …and where it skips one.
            format!(
                r#"{{"jsonrpc":"2.0","method":"x/y","params":{{"deep":{}{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn","deep":{}{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            ),
        ];
        for line in &inside {
            extract_everything(line.as_bytes());
            let mut engine = prompting();
            drive(&mut engine, line.as_bytes());
        }
        let mut engine = prompting();
        assert!(first_event_fails(&mut engine, arrays.as_bytes()));
        let mut engine = prompting();
        assert!(first_event_fails(&mut engine, objects.as_bytes()));
    }
}

// --- the connection ----------------------------------------------------------------------------

fn config() -> Config {
    let mut config = Config::new(
        TransferLimits {
            request_bytes: 1 << 16,
            response_bytes: 64,
            update_bytes: 1 << 12,
            update_count: 1 << 20,
            response_segment_count: 4,
        },
        7,
    );
    config.client_info = ClientInfo::default();
    config.policy = PermissionPolicy {
        allowed_tool_kinds: vec!["read".into()],
        allowed_title_prefixes: vec!["ok".into()],
        ..PermissionPolicy::default()
    };
    config
}

fn connection() -> Connection {
    Connection::new(
        config(),
        Limits {
            message_bytes: 1 << 24,
        },
    )
    .unwrap()
}

fn push(conn: &mut Connection, line: &[u8]) {
    let mut bytes = line.to_vec();
    bytes.push(b'\n');
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let buf = conn.read_buf();
        let count = buf.len().min(rest.len());
        if count == 0 {
            return; // reading stopped (an overlong line): the next poll says so
        }
        buf[..count].copy_from_slice(&rest[..count]);
        conn.received(count);
        rest = &rest[count..];
    }
}

fn answer(conn: &mut Connection, call: CallId, line: &[u8]) -> Outcome {
    push(conn, line);
    match conn.poll_event() {
        Ok(Some(Event::Done {
            call: done,
            outcome,
            ..
        })) if done == call => outcome.unwrap(),
        other => panic!("expected the answer, got {other:?}"),
    }
}

/// A connection with session "s" open and a prompt (id 2) in flight.
fn prompting() -> Connection {
    let mut conn = connection();
    let call = conn.request(Request::Initialize).unwrap();
    assert_eq!(
        answer(
            &mut conn,
            call,
            br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#
        ),
        Outcome::Initialized
    );
    let call = conn
        .request(Request::NewSession {
            cwd: "/w",
            additional_directories: &[],
            mcp_servers: None,
            system_prompt: None,
        })
        .unwrap();
    assert_eq!(
        answer(
            &mut conn,
            call,
            br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#
        ),
        Outcome::SessionOpened("s".into())
    );
    let content = [ContentBlock::Text("hi".into())];
    conn.request(Request::Prompt {
        session_id: "s",
        content: &content,
        timeout_ms: None,
        gated: true,
        meta: &[],
    })
    .unwrap();
    conn
}

fn first_event_fails(conn: &mut Connection, line: &[u8]) -> bool {
    push(conn, line);
    conn.poll_event().is_err()
}

/// Feeds one line as a driver would; returns whether a call ended (done or failed).
fn drive(conn: &mut Connection, line: &[u8]) -> bool {
    push(conn, line);
    let mut ended = false;
    loop {
        let before = conn.next_update_sequence();
        match conn.poll_event() {
            Ok(None) => return ended,
            Ok(Some(Event::Update { update, .. })) => {
                assert_eq!(
                    update.update_sequence, before,
                    "updates are numbered without gaps"
                );
                assert_eq!(update.transport_epoch, 7);
                assert!(update.envelope.len() <= 1 << 12);
                assert_eq!(conn.next_update_sequence(), before + 1);
            }
            Ok(Some(Event::Permission { ask, .. })) => {
                let preview = conn.preview(ask).expect("undecided");
                assert_eq!(preview.outcome, "pending");
                assert!(preview.envelope.is_empty());
                let decided = conn
                    .decide(ask, None)
                    .expect("a small answer fits request_bytes");
                assert!(matches!(
                    decided.record.outcome.as_str(),
                    "selected" | "cancelled"
                ));
                assert_eq!(decided.record.envelope.as_bytes(), line.trim_ascii());
                conn.send(decided);
                let (bytes, _) = conn.poll_transmit().expect("the answer is queued");
                assert!(bytes.ends_with(b"\n"));
                let count = bytes.len();
                conn.transmitted(count);
            }
            Ok(Some(Event::Done { .. })) => ended = true,
            Ok(Some(Event::Other { .. })) => {}
            Ok(Some(Event::Elicitation { ask, .. })) => {
                let decided = conn.decide_elicitation(ask, None).expect("a decline fits");
                conn.send_elicitation(decided);
            }
            Ok(Some(Event::Host { host, op, .. })) => {
                let answer = conn
                    .answer_host(host, op.map(|_| acp_proto::host::HostOk::Empty), None)
                    .expect("a small answer fits request_bytes");
                conn.send_host(answer);
            }
            Err(error) => {
                assert!(!error.description().is_empty());
                return true;
            }
        }
        while let Some((bytes, _)) = conn.poll_transmit() {
            let count = bytes.len();
            conn.transmitted(count);
        }
    }
}

proptest! {
    #[test]
    fn lines_never_panic_before_any_call(line in any_line()) {
        let mut conn = connection();
        drive(&mut conn, &line);
    }

    #[test]
    fn lines_never_panic_awaiting_initialize(line in any_line()) {
        let mut conn = connection();
        conn.request(Request::Initialize).unwrap();
        drive(&mut conn, &line);
    }

    #[test]
    fn lines_never_panic_while_prompting(lines in vec(any_line(), 1..12)) {
        let mut conn = prompting();
        for line in &lines {
            if drive(&mut conn, line) {
                break;
            }
        }
    }

    #[test]
    fn errors_are_defined_variants(line in any_line()) {
        let mut conn = prompting();
        push(&mut conn, &line);
        if let Err(error) = conn.poll_event() {
            // Each maps to a Python exception named in DESIGN.md.
            let name = error.class_name();
            prop_assert!(matches!(
                error,
                AcpError::AgentProtocol(_)
                    | AcpError::UpdateCapacityExceeded(_)
                    | AcpError::UpdateCountCapacityExceeded(_)
                    | AcpError::RequestCapacityExceeded(_)
                    | AcpError::ReaderMessageCapacityExceeded(_)
            ), "{}: {}", name, error);
        }
    }

    /// Any split of the same byte stream into reads gives the same events and bytes.
    #[test]
    fn any_split_gives_the_same_events(lines in vec(any_line(), 1..8), cuts in vec(1usize..64, 1..16)) {
        let whole = events_for(&lines, &[usize::MAX]);
        let split = events_for(&lines, &cuts);
        prop_assert_eq!(whole, split);
    }
}

/// Feeds `lines` to a prompting connection in reads of the sizes in `cuts` (cycled), recording
/// a description of every event and every outgoing byte.
fn events_for(lines: &[Vec<u8>], cuts: &[usize]) -> Vec<String> {
    let mut conn = prompting();
    while let Some((bytes, _)) = conn.poll_transmit() {
        let count = bytes.len();
        conn.transmitted(count);
    }
    let mut stream = Vec::new();
    for line in lines {
        stream.extend_from_slice(line);
        stream.push(b'\n');
    }
    let mut seen = Vec::new();
    let mut rest = &stream[..];
    let mut cut = cuts.iter().cycle();
    let mut failed = false;
    while !rest.is_empty() && !failed {
        let want = (*cut.next().unwrap()).min(rest.len());
        let buf = conn.read_buf();
        if buf.is_empty() {
            break;
        }
        let count = want.min(buf.len());
        buf[..count].copy_from_slice(&rest[..count]);
        conn.received(count);
        rest = &rest[count..];
        loop {
            match conn.poll_event() {
                Ok(None) => break,
                Ok(Some(Event::Permission { ask, .. })) => {
                    let decided = conn.decide(ask, None).unwrap();
                    seen.push(format!("permission {:?}", decided.record));
                    conn.send(decided);
                }
                Ok(Some(event)) => seen.push(format!("{event:?}")),
                Err(error) => {
                    seen.push(format!("error {error}"));
                    failed = true;
                    break;
                }
            }
            // A driver writes what an event queued before it polls the next one.
            while let Some((bytes, _)) = conn.poll_transmit() {
                seen.push(format!("sent {}", String::from_utf8_lossy(bytes)));
                let count = bytes.len();
                conn.transmitted(count);
            }
        }
    }
    seen
}

// --- the text-chunk fast path agrees with the general parser ---------------------------------

/// Strings that stress the fast path: quotes, backslashes, control characters, non-ASCII.
fn tricky_string() -> impl Strategy<Value = String> {
    vec(
        prop_oneof![
            Just('a'),
            Just(' '),
            Just('"'),
            Just('\\'),
            Just('\n'),
            Just('\u{1}'),
            Just('é'),
            Just('😀'),
            Just('/'),
            any::<char>(),
        ],
        0..24,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// A chunk line with the three strings spliced in either escaped (valid JSON) or raw (maybe
/// not JSON at all).
fn chunk_line(session: &str, kind: &str, text: &str, escape: bool) -> Vec<u8> {
    let put = |value: &str| {
        if escape {
            serde_json::to_string(value).unwrap()
        } else {
            format!("\"{value}\"")
        }
    };
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":{},"update":{{"sessionUpdate":{},"content":{{"type":"text","text":{}}}}}}}}}"#,
        put(session),
        put(kind),
        put(text)
    )
    .into_bytes()
}

proptest! {
    #[test]
    fn text_chunk_fast_path_agrees_with_the_general_parser(
        session in tricky_string(),
        kind in tricky_string(),
        text in tricky_string(),
        escape in any::<bool>(),
    ) {
        let line = chunk_line(&session, &kind, &text, escape);
        let general = wire::classify(&line);
        match wire::text_chunk(&line) {
            None => {}
            Some(fast) => {
                // Whatever the fast path accepts, the general parser accepts with the same meaning.
                let envelope = general.expect("the fast path accepted what the parser refuses");
                prop_assert_eq!(envelope.method.as_deref(), Some("session/update"));
                let update = wire::session_update(envelope.params).expect("a valid update");
                prop_assert_eq!(&*update.session_id, fast.session_id);
                prop_assert_eq!(update.fields.session_update.as_str(), Some(fast.session_update));
                let content = update.fields.content.0.expect("content");
                prop_assert_eq!(content.text.as_str(), Some(fast.text));
                prop_assert_eq!(fast.ascii, line.is_ascii());
                prop_assert_eq!(fast.text_line.as_bytes(), &line[..]);
            }
        }
        // Plain strings (no quote, backslash or control character) always take the fast path.
        let plain = |s: &str| !s.chars().any(|c| c == '"' || c == '\\' || (c as u32) < 0x20);
        if plain(&session) && plain(&kind) && plain(&text) {
            prop_assert!(wire::text_chunk(&line).is_some());
        }
    }
}

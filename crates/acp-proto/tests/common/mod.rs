//! An in-memory agent for the `Connection`: lines in (in small reads, so lines split across
//! them), lines out, and every event of what was read as a short string.

// Each test file uses the part it needs.
#![allow(dead_code)]

use acp_proto::limits::{Config, PermissionPolicy, Protocol, TransferLimits};
use acp_proto::reader::Limits;
use acp_proto::{Connection, Event, Outcome};

pub fn limits() -> TransferLimits {
    TransferLimits {
        request_bytes: 1 << 20,
        response_bytes: 1 << 20,
        update_bytes: 1 << 20,
        update_count: 1 << 20,
        response_segment_count: 1 << 20,
    }
}

/// A connection offering `protocol`; the policy allows `read` tool calls, denies the rest.
pub fn connection(protocol: Protocol, limits: TransferLimits) -> Connection {
    let mut config = Config::new(limits, 9);
    config.agent_id = "mem".into();
    config.cancel_grace_ms = 500;
    config.protocol = protocol;
    config.policy = PermissionPolicy {
        allowed_tool_kinds: vec!["read".into()],
        allowed_title_prefixes: vec![],
        ..PermissionPolicy::default()
    };
    Connection::new(
        config,
        Limits {
            message_bytes: 1 << 20,
        },
    )
    .unwrap()
}

pub fn push(conn: &mut Connection, line: &str) {
    let mut bytes = line.as_bytes().to_vec();
    bytes.push(b'\n');
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let buf = conn.read_buf();
        let count = buf.len().min(rest.len()).min(7);
        buf[..count].copy_from_slice(&rest[..count]);
        conn.received(count);
        rest = &rest[count..];
    }
}

/// Every line queued for the agent, in order.
pub fn sent(conn: &mut Connection) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = Vec::new();
    while let Some((bytes, _)) = conn.poll_transmit() {
        current.extend_from_slice(bytes);
        let count = bytes.len();
        conn.transmitted(count);
        if current.ends_with(b"\n") {
            let line = String::from_utf8(std::mem::take(&mut current)).unwrap();
            lines.push(line.trim_end().to_owned());
        }
    }
    lines
}

/// The events of the lines read so far, as short strings; permissions decided by the policy.
pub fn events(conn: &mut Connection) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match conn.poll_event() {
            Ok(None) => return seen,
            Ok(Some(Event::Update { update, joined, .. })) => seen.push(format!(
                "update {} {} {} {}{}",
                update.update_sequence,
                update.session_update,
                update.session_id,
                update.text,
                match joined {
                    acp_proto::update::Joined::No => String::new(),
                    acp_proto::update::Joined::Append => " joined".into(),
                    acp_proto::update::Joined::Splice { at, remove } => {
                        format!(" spliced {at} {remove}")
                    }
                }
            )),
            Ok(Some(Event::Permission { ask, cancelled })) => {
                let decided = conn.decide(ask, None).unwrap();
                seen.push(format!(
                    "permission {} {} {:?}{}",
                    decided.record.outcome,
                    decided.record.option_id,
                    decided.record.title,
                    if cancelled { " cancelled" } else { "" }
                ));
                conn.send(decided);
            }
            Ok(Some(Event::Done { call, outcome, .. })) => seen.push(match outcome {
                Ok(Outcome::Turn(turn)) => format!(
                    "done {} {} {:?} tools={}",
                    call.0,
                    turn.stop_reason,
                    turn.response,
                    turn.tool_calls.len()
                ),
                Ok(other) => format!("done {} {other:?}", call.0),
                Err(error) => format!("failed {} {}: {error}", call.0, error.class_name()),
            }),
            Ok(Some(Event::Other { line })) => seen.push(format!("other {line}")),
            Ok(Some(other)) => seen.push(format!("event {other:?}")),
            Err(error) => {
                seen.push(format!("error {}: {error}", error.class_name()));
                return seen;
            }
        }
    }
}

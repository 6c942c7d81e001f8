//! Elicitations (`elicitation/create`, schema v1 since 1.21): the agent asks the user for
//! structured input (form mode: a flat JSON Schema of primitive properties) or to visit a URL
//! (url mode). Like a permission request, the host's observer answers it; unlike one, there is
//! no policy tier: no observer means the schema's `decline`.
//!
//! Everything here is the agent's text: the request is read only within the bounds below, and
//! a request that passes them is handed to the observer as it came (the URL is never opened
//! here). A request outside them is answered with a JSON-RPC error at once, the observer never
//! asked.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The largest `elicitation/create` line read (the reader's own cap may be larger).
pub const REQUEST_BYTES: usize = 1 << 20;
/// The deepest nesting of `params` (objects and arrays). A form's schema is flat by the
/// protocol's rules: params → requestedSchema → properties → a property → items → anyOf → an
/// item is 7 levels; the rest is room for `_meta`.
pub const PARAMS_DEPTH: usize = 12;
/// The most top-level properties a form may have.
pub const SCHEMA_PROPERTIES: usize = 256;
/// The longest property name, `message`, and any other string of the schema.
pub const NAME_BYTES: usize = 256;
pub const MESSAGE_BYTES: usize = 64 << 10;
pub const URL_BYTES: usize = 8 << 10;
pub const ELICITATION_ID_BYTES: usize = 1 << 10;
/// The JSON text of `requestedSchema`.
pub const SCHEMA_BYTES: usize = 256 << 10;
/// Elicitations waiting for an awaited observer at once: one user answers them one at a time,
/// so more than this is an agent flooding the loop with tasks.
pub const PENDING: usize = 64;

/// The reason recorded for an elicitation the agent cancelled (`$/cancel_request`).
pub const WITHDRAWN: &str = "cancelled by the agent";

/// What the user (the observer) did: the schema's three actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Accept,
    Decline,
    Cancel,
}

impl Action {
    pub fn parse(text: &str) -> Option<Action> {
        match text {
            "accept" => Some(Action::Accept),
            "decline" => Some(Action::Decline),
            "cancel" => Some(Action::Cancel),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Decline => "decline",
            Action::Cancel => "cancel",
        }
    }
}

/// The observer's answer: an action, and for `accept` the content (a JSON object's text, already
/// checked against the request's schema by the binding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub action: Action,
    pub content: Option<String>,
}

impl Answer {
    /// An answer as a binding passes it: the action's name and the content's JSON text ("" for
    /// none).
    pub fn from_parts(action: &str, content: String) -> Result<Answer, String> {
        let action = Action::parse(action).ok_or_else(|| {
            format!("an elicitation's action must be accept, decline or cancel (got {action:?})")
        })?;
        if content.is_empty() {
            return Ok(Answer {
                action,
                content: None,
            });
        }
        if action != Action::Accept {
            return Err(format!(
                "only an accept carries content (got {})",
                action.as_str()
            ));
        }
        match serde_json::from_str::<Value>(&content) {
            Ok(Value::Object(_)) => Ok(Answer {
                action,
                content: Some(content),
            }),
            _ => Err("an elicitation's content must be a JSON object".into()),
        }
    }
}

/// An elicitation as the observer sees it (owned: it outlives the line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElicitationRecord {
    /// The session it belongs to ("" when it belongs to a request).
    pub session_id: String,
    pub tool_call_id: Option<String>,
    /// The request it belongs to (our request's id, raw JSON), when not a session.
    pub scope_request_id: Option<String>,
    /// "form" or "url".
    pub mode: String,
    pub message: String,
    /// Form mode: `requestedSchema` as JSON text.
    pub requested_schema: Option<String>,
    /// Url mode: the URL (handed over, never opened here) and the elicitation's id.
    pub url: Option<String>,
    pub elicitation_id: Option<String>,
    /// The agent's id as raw JSON text.
    pub request_id: String,
    pub envelope: String,
    /// The answer once decided ("" while pending), its content, and why when the observer did
    /// not give it ("no observer", "cancelled by the agent", "session cancelled").
    pub action: String,
    pub content: Option<String>,
    pub reason: String,
}

/// How a request that will not be shown to the observer is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A JSON-RPC error -32602 (invalid params) with this message.
    Invalid(String),
    /// The schema's `decline` (a mode the client does not know: the schema says never to
    /// render it as a known one).
    Decline(String),
}

/// Reads an `elicitation/create` line's `params` within the bounds. `Err`: how to refuse it.
/// The scope (session or request) is checked by the connection, which knows both.
pub fn read(raw_id: &str, envelope: &str) -> Result<ElicitationRecord, Refusal> {
    let invalid = |why: String| Refusal::Invalid(why);
    if envelope.len() > REQUEST_BYTES {
        return Err(invalid(format!(
            "the elicitation request is {} bytes, more than this client reads ({REQUEST_BYTES})",
            envelope.len()
        )));
    }
    // The envelope is one level above params.
    let depth = nesting(envelope.as_bytes()).saturating_sub(1);
    if depth > PARAMS_DEPTH {
        return Err(invalid(format!(
            "params are nested {depth} deep, more than this client reads ({PARAMS_DEPTH})"
        )));
    }
    let params = match serde_json::from_str::<Value>(envelope) {
        Ok(Value::Object(mut message)) => message.remove("params"),
        _ => None,
    };
    let Some(Value::Object(mut params)) = params else {
        return Err(invalid("params must be an object".into()));
    };
    let message = text(&params, "message", MESSAGE_BYTES, true).map_err(invalid)?;
    let mode = match params.get("mode") {
        Some(Value::String(mode)) => mode.clone(),
        _ => return Err(invalid("mode must be a string".into())),
    };
    let session_id = text(&params, "sessionId", NAME_BYTES * 4, false).map_err(invalid)?;
    let tool_call_id = text(&params, "toolCallId", NAME_BYTES * 4, false).map_err(invalid)?;
    let scope_request_id = match params.get("requestId") {
        None | Some(Value::Null) => None,
        Some(id @ (Value::String(_) | Value::Number(_))) if session_id.is_none() => {
            Some(id.to_string())
        }
        Some(_) if session_id.is_some() => None,
        Some(_) => return Err(invalid("requestId must be a string or a number".into())),
    };
    if session_id.is_none() && scope_request_id.is_none() {
        return Err(invalid(
            "an elicitation names a sessionId or a requestId".into(),
        ));
    }
    let mut record = ElicitationRecord {
        session_id: session_id.unwrap_or_default(),
        tool_call_id,
        scope_request_id,
        mode: mode.clone(),
        message: message.unwrap_or_default(),
        request_id: raw_id.to_owned(),
        envelope: envelope.to_owned(),
        ..ElicitationRecord::default()
    };
    match mode.as_str() {
        "form" => {
            let schema = params
                .remove("requestedSchema")
                .ok_or_else(|| invalid("a form elicitation has a requestedSchema".into()))?;
            check_schema(&schema).map_err(invalid)?;
            // The agent's own text: a parsed value would lose the properties' order, which
            // is the form's order.
            record.requested_schema =
                Some(raw_schema(envelope).unwrap_or_else(|| schema.to_string()));
        }
        "url" => {
            record.url = text(&params, "url", URL_BYTES, true).map_err(invalid)?;
            record.elicitation_id =
                text(&params, "elicitationId", ELICITATION_ID_BYTES, true).map_err(invalid)?;
        }
        other => {
            return Err(Refusal::Decline(format!(
                "elicitation mode {:?} is not one this client knows",
                crate::error::excerpt(other.as_bytes(), 64)
            )))
        }
    }
    Ok(record)
}

/// `params.requestedSchema` exactly as sent.
fn raw_schema(envelope: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow, rename = "requestedSchema")]
        requested_schema: &'a RawValue,
    }
    let message: Message<'_> = serde_json::from_str(envelope).ok()?;
    Some(message.params.requested_schema.get().to_owned())
}

/// A string field within `limit` bytes: `Ok(None)` when absent (an error when `required`).
fn text(
    params: &Map<String, Value>,
    key: &str,
    limit: usize,
    required: bool,
) -> Result<Option<String>, String> {
    match params.get(key) {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(text)) if text.len() <= limit => Ok(Some(text.clone())),
        Some(Value::String(text)) => Err(format!(
            "{key} is {} bytes, more than this client reads ({limit})",
            text.len()
        )),
        _ => Err(format!("{key} must be a string")),
    }
}

/// A form's schema: an object of type "object" within `SCHEMA_BYTES` whose `properties` is an
/// object of at most `SCHEMA_PROPERTIES` property schemas, each an object with a string `type`;
/// property names and types within `NAME_BYTES` (titles and descriptions are bounded by the
/// schema's size).
fn check_schema(schema: &Value) -> Result<(), String> {
    let Value::Object(fields) = schema else {
        return Err("requestedSchema must be an object".into());
    };
    let size = schema.to_string().len();
    if size > SCHEMA_BYTES {
        return Err(format!(
            "requestedSchema is {size} bytes, more than this client reads ({SCHEMA_BYTES})"
        ));
    }
    match fields.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "object" => {}
        _ => return Err("requestedSchema.type must be \"object\"".into()),
    }
    let properties = match fields.get("properties") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(properties)) => properties,
        Some(_) => return Err("requestedSchema.properties must be an object".into()),
    };
    if properties.len() > SCHEMA_PROPERTIES {
        return Err(format!(
            "requestedSchema has {} properties, more than this client shows ({SCHEMA_PROPERTIES})",
            properties.len()
        ));
    }
    for (name, property) in properties {
        if name.len() > NAME_BYTES {
            return Err(format!(
                "a property name is {} bytes, more than this client shows ({NAME_BYTES})",
                name.len()
            ));
        }
        match property.get("type") {
            Some(Value::String(kind)) if kind.len() <= NAME_BYTES => {}
            _ => {
                return Err(format!(
                    "requestedSchema.properties[{:?}] has no string type",
                    crate::error::excerpt(name.as_bytes(), 64)
                ))
            }
        }
    }
    match fields.get("required") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(names)) if names.iter().all(Value::is_string) => Ok(()),
        Some(_) => Err("requestedSchema.required must be an array of strings".into()),
    }
}

/// The deepest nesting of objects and arrays in JSON text, strings skipped (read before
/// parsing, so a hostile depth costs one pass over bytes already bounded).
pub fn nesting(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The answer's line: `{"action": …, "content": …}` as the result.
pub fn answer(raw_id: &str, action: Action, content: Option<&str>) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{{"action":"{}""#,
        action.as_str()
    );
    if let Some(content) = content.filter(|_| action == Action::Accept) {
        line.push_str(r#","content":"#);
        line.push_str(content);
    }
    line.push_str("}}\n");
    line.into_bytes()
}

/// A JSON-RPC error answer -32602 with `message`.
pub fn invalid_params(raw_id: &str, message: &str) -> Vec<u8> {
    let message = Value::String(message.to_owned()).to_string();
    format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"error":{{"code":-32602,"message":{message}}}}}"#)
        .into_bytes()
        .into_iter()
        .chain(*b"\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_params(params: &str) -> Result<ElicitationRecord, Refusal> {
        let envelope = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{params}}}"#
        );
        read("7", &envelope)
    }

    #[test]
    fn a_form_and_a_url_elicitation_are_read() {
        let form = read_params(
            r#"{"sessionId":"s","mode":"form","message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}"#,
        )
        .unwrap();
        assert_eq!(form.mode, "form");
        assert_eq!(form.session_id, "s");
        assert!(form.requested_schema.unwrap().contains("\"name\""));
        let url = read_params(
            r#"{"sessionId":"s","mode":"url","message":"Log in","url":"https://x.test/a","elicitationId":"e1"}"#,
        )
        .unwrap();
        assert_eq!(url.url.as_deref(), Some("https://x.test/a"));
        assert_eq!(url.elicitation_id.as_deref(), Some("e1"));
    }

    #[test]
    fn hostile_requests_are_refused_with_a_reason() {
        let deep = format!(
            r#"{{"sessionId":"s","mode":"form","message":"m","requestedSchema":{}1{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert!(matches!(read_params(&deep), Err(Refusal::Invalid(why)) if why.contains("nested")));
        let many: Vec<String> = (0..100_000)
            .map(|i| format!(r#""p{i}":{{"type":"string"}}"#))
            .collect();
        let wide = format!(
            r#"{{"sessionId":"s","mode":"form","message":"m","requestedSchema":{{"properties":{{{}}}}}}}"#,
            many.join(",")
        );
        assert!(matches!(read_params(&wide), Err(Refusal::Invalid(_))));
        assert!(matches!(
            read_params(r#"{"sessionId":"s","mode":"_custom","message":"m"}"#),
            Err(Refusal::Decline(_))
        ));
        assert!(matches!(
            read_params(r#"{"mode":"form","message":"m","requestedSchema":{}}"#),
            Err(Refusal::Invalid(_))
        ));
    }

    #[test]
    fn nesting_skips_brackets_in_strings() {
        assert_eq!(nesting(br#"{"a":"[[[{{\"]]"}"#), 1);
        assert_eq!(nesting(br#"[[{}]]"#), 3);
    }

    #[test]
    fn answers_are_byte_exact() {
        assert_eq!(
            answer("3", Action::Accept, Some(r#"{"a":1}"#)),
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"action\":\"accept\",\"content\":{\"a\":1}}}\n"
        );
        assert_eq!(
            answer("\"x\"", Action::Decline, None),
            b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"action\":\"decline\"}}\n"
        );
        assert!(Answer::from_parts("decline", "{}".into()).is_err());
        assert!(Answer::from_parts("maybe", String::new()).is_err());
    }
}

//! Incoming messages: classify one line (response / request / notification) and pull out the
//! fields the client acts on, borrowing from the line. No generic JSON tree is built: serde
//! visits the line once, reading the envelope and the params fields of every message the client
//! acts on in the same pass (`result` and `error` stay raw slices, read only for a response the
//! client awaits); the common text-chunk layout is matched byte for byte before that. Fields of
//! the wrong JSON type read as absent, as the behaviour reference does; only what the protocol
//! cannot do without is required.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

mod fast;
mod lenient;
mod messages;

pub use fast::*;
pub use lenient::*;
pub use messages::*;

/// Why a line is not a usable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Not UTF-8 (the byte offset of the first invalid sequence).
    NotUtf8(usize),
    /// Not JSON at all (with serde's description, which names line and column).
    InvalidJson(String),
    /// Valid JSON, but not an object.
    NotAnObject,
    /// A message the client acts on lacks something it needs.
    Malformed(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::NotUtf8(at) => write!(f, "a line that is not valid UTF-8 (at byte {at})"),
            WireError::InvalidJson(detail) => write!(f, "invalid JSON ({detail})"),
            WireError::NotAnObject => write!(f, "a JSON value that is not a JSON object"),
            WireError::Malformed(detail) => write!(f, "{detail}"),
        }
    }
}

/// A JSON value that must be present even when it is `null` (`Option<&RawValue>` alone would
/// read `"id": null` as absent, and the reference answers a request whose id is null).
fn present_raw<'de, D>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: Deserializer<'de>,
{
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// `params`: absent, present but not an object, or an object read in the same pass as the
/// envelope. The fields of every message the client acts on are read here at once, whatever the
/// method (unknown keys are skipped), so each line is scanned once.
// Unboxed on purpose: boxing would cost an allocation per line on the hot path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Default)]
pub enum ParamsField<'a> {
    #[default]
    Absent,
    NotObject,
    Object(Params<'a>),
}

impl<'de: 'a, 'a> Deserialize<'de> for ParamsField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Obj::<Params<'a>>::deserialize(d)?.0 {
            Some(params) => ParamsField::Object(params),
            None => ParamsField::NotObject,
        })
    }
}

/// The fields of `params` the client reads: `session/update` uses `sessionId` and `update`,
/// `session/request_permission` uses `sessionId`, `toolCall` and `options`.
#[derive(Deserialize, Default, Debug)]
pub struct Params<'a> {
    #[serde(default, borrow, rename = "sessionId")]
    pub session_id: Str<'a>,
    // Boxed: serde moves values up through every visitor layer, and small fields here keep
    // those copies cheap (measured: unboxed, memcpy took 18% of a chunk's handling).
    #[serde(default, borrow)]
    pub update: Obj<Box<UpdateFields<'a>>>,
    #[serde(default, borrow, rename = "toolCall")]
    pub tool_call: ToolCallField<'a>,
    /// `None` when `options` is absent or not an array; non-object items are `Obj(None)`.
    #[serde(default, borrow)]
    pub options: Arr<Obj<OptionFields<'a>>>,
    /// v2's permission request: its own `title`, and `subject` (`{type: "tool_call",
    /// toolCall}` or `{type: "command", …}`) where v1 has `toolCall`.
    #[serde(default, borrow)]
    pub title: Str<'a>,
    #[serde(default, borrow)]
    pub subject: Obj<Subject<'a>>,
}

/// v2's `RequestPermissionSubject`.
#[derive(Deserialize, Default, Debug)]
pub struct Subject<'a> {
    #[serde(default, borrow, rename = "type")]
    pub kind: Str<'a>,
    #[serde(default, borrow, rename = "toolCall")]
    pub tool_call: ToolCallField<'a>,
}

/// The top level of any JSON-RPC message; `result` and `error` are left raw (they are read only
/// for the one response a call waits for).
#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(default, borrow, deserialize_with = "present_raw")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Str<'a>,
    #[serde(default, borrow)]
    params: ParamsField<'a>,
    #[serde(default, borrow, deserialize_with = "present_raw")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present_raw")]
    error: Option<&'a RawValue>,
}

/// One classified line.
#[derive(Debug)]
pub struct Envelope<'a> {
    /// The whole line (valid UTF-8).
    pub text: &'a str,
    /// The id exactly as sent (any JSON value), when present.
    pub id: Option<&'a RawValue>,
    /// The method, when present and a string.
    pub method: Option<Cow<'a, str>>,
    pub params: ParamsField<'a>,
    pub result: Option<&'a RawValue>,
    pub error: Option<&'a RawValue>,
}

impl<'a> Envelope<'a> {
    /// The id when it is a JSON integer that fits i64 (the client's own ids are).
    pub fn integer_id(&self) -> Option<i64> {
        let text = self.id?.get();
        let first = text.as_bytes().first()?;
        if !(first.is_ascii_digit() || *first == b'-') {
            return None;
        }
        serde_json::from_str::<i64>(text).ok()
    }

    /// A response to request `id`: the id matches and `result` or `error` is present.
    pub fn is_response_for(&self, id: i64) -> bool {
        self.integer_id() == Some(id) && (self.result.is_some() || self.error.is_some())
    }
}

/// Parses a line (already trimmed of surrounding whitespace) in one pass.
pub fn classify(line: &[u8]) -> Result<Envelope<'_>, WireError> {
    let text = std::str::from_utf8(line).map_err(|e| WireError::NotUtf8(e.valid_up_to()))?;
    match text.bytes().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(_) => {
            // Tell "not JSON" apart from "JSON, but not an object".
            return match serde_json::from_str::<IgnoredAny>(text) {
                Ok(_) => Err(WireError::NotAnObject),
                Err(e) => Err(WireError::InvalidJson(e.to_string())),
            };
        }
        None => return Err(WireError::InvalidJson("empty line".into())),
    }
    // from_str, not from_slice: the text is known to be UTF-8, so strings need no re-check.
    let raw: RawEnvelope<'_> =
        serde_json::from_str(text).map_err(|e| WireError::InvalidJson(e.to_string()))?;
    Ok(Envelope {
        text,
        id: raw.id,
        method: raw.method.0,
        params: raw.params,
        result: raw.result,
        error: raw.error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers serde_json holds as text (`arbitrary_precision`) are not objects, and a tree
    /// of the agent's JSON writes every number back as it came.
    #[test]
    fn numbers_held_as_text_are_not_objects_and_survive() {
        for number in [
            "1.5",
            "-0.0",
            "18446744073709551617",
            "1e400",
            "0.00014000000000000001",
        ] {
            let read = serde_json::from_str::<Obj<Box<UpdateFields<'_>>>>(number).unwrap();
            assert!(read.0.is_none(), "{number}");
            let text = format!("{{\"a\":{number}}}");
            let read = serde_json::from_str::<Obj<Box<UpdateFields<'_>>>>(&text).unwrap();
            assert!(read.0.is_some(), "{text}");
        }
        let read = serde_json::from_str::<Obj<Box<UpdateFields<'_>>>>("{}").unwrap();
        assert!(read.0.is_some());
        let escaped = r#"{"session\u0055pdate":"plan","sessionUpdate":"x"}"#;
        assert!(serde_json::from_str::<Obj<Box<UpdateFields<'_>>>>(escaped).is_err());
        let numbers = "[0.00014000000000000001,18446744073709551617,-0.0,1e400,5e-324,-7]";
        let tree = serde_json::from_str::<serde_json::Value>(numbers).unwrap();
        // The same numbers; serde_json writes an exponent with its sign.
        assert_eq!(tree.to_string(), numbers.replace("1e400", "1e+400"));
    }

    /// A message line around `params` (raw JSON text).
    fn line_with(params: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","method":"x","params":{params}}}"#)
    }

    #[test]
    fn classifies_a_response() {
        let env =
            classify(br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#).unwrap();
        assert!(env.is_response_for(2));
        assert!(!env.is_response_for(3));
        assert!(env.method.is_none());
    }

    #[test]
    fn a_response_needs_result_or_error() {
        let env = classify(br#"{"jsonrpc":"2.0","id":2}"#).unwrap();
        assert!(!env.is_response_for(2));
        let env = classify(br#"{"jsonrpc":"2.0","id":2,"result":null}"#).unwrap();
        assert!(env.is_response_for(2), "a null result is still present");
    }

    #[test]
    fn string_and_float_ids_are_not_integer_ids() {
        assert_eq!(
            classify(br#"{"id":"2","result":{}}"#).unwrap().integer_id(),
            None
        );
        assert_eq!(
            classify(br#"{"id":2.0,"result":{}}"#).unwrap().integer_id(),
            None
        );
        assert_eq!(
            classify(br#"{"id":-1,"result":{}}"#).unwrap().integer_id(),
            Some(-1)
        );
    }

    #[test]
    fn keeps_request_ids_verbatim() {
        let env = classify(br#"{"id":123456789012345678901234567890,"method":"x"}"#).unwrap();
        assert_eq!(env.id.unwrap().get(), "123456789012345678901234567890");
        let env = classify(br#"{"id":null,"method":"x"}"#).unwrap();
        assert_eq!(env.id.unwrap().get(), "null");
        assert_eq!(env.method.as_deref(), Some("x"));
    }

    /// The fast path agrees with the general one wherever it answers, and declines the rest.
    fn agrees_with_general(line: &str) -> bool {
        let Some(fast) = text_chunk(line.as_bytes()) else {
            return false;
        };
        let general = classify(line.as_bytes()).unwrap();
        assert_eq!(general.method.as_deref(), Some("session/update"));
        let update = session_update(general.params).unwrap();
        assert_eq!(update.session_id, fast.session_id);
        assert_eq!(
            update.fields.session_update.as_str(),
            Some(fast.session_update)
        );
        let content = update.fields.content.0.unwrap();
        assert_eq!(content.kind.as_str(), Some("text"));
        assert_eq!(content.text.as_str(), Some(fast.text));
        true
    }

    #[test]
    fn the_text_chunk_fast_path() {
        let chunk = |s: &str, k: &str, t: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{s}","update":{{"sessionUpdate":"{k}","content":{{"type":"text","text":"{t}"}}}}}}}}"#
            )
        };
        assert!(agrees_with_general(&chunk(
            "s",
            "agent_message_chunk",
            "hello"
        )));
        assert!(agrees_with_general(&chunk("", "x", "")));
        assert!(agrees_with_general(&chunk(
            "s",
            "agent_thought_chunk",
            "héllo wörld 😀"
        )));
        // Escapes, control characters, other layouts, trailing bytes: the general path decides.
        assert!(!agrees_with_general(&chunk(
            "s",
            "agent_message_chunk",
            r#"a\"b"#
        )));
        assert!(!agrees_with_general(&chunk(
            "s",
            "agent_message_chunk",
            "a\\u0001b"
        )));
        assert!(text_chunk(chunk("s", "k", "a\tb").as_bytes()).is_none());
        assert!(text_chunk(chunk("s", "k", "a\u{1}b").as_bytes()).is_none());
        assert!(text_chunk(format!("{} ", chunk("s", "k", "t")).as_bytes()).is_none());
        assert!(text_chunk(
            chunk("s", "k", "t")
                .replace("\"2.0\"", "\"2.1\"")
                .as_bytes()
        )
        .is_none());
        let spaced = chunk("s", "k", "t").replace(":", ": ");
        assert!(text_chunk(spaced.as_bytes()).is_none());
        let unterminated = &chunk("s", "k", "t")[..60];
        assert!(text_chunk(unterminated.as_bytes()).is_none());
    }

    #[test]
    fn refuses_invalid_utf8() {
        assert_eq!(
            classify(b"{\"a\":\"\xff\"}").unwrap_err(),
            WireError::NotUtf8(6)
        );
    }

    #[test]
    fn tells_invalid_json_from_non_objects() {
        assert!(matches!(classify(b"{nope"), Err(WireError::InvalidJson(_))));
        assert!(matches!(classify(b"nope"), Err(WireError::InvalidJson(_))));
        assert_eq!(classify(b"[1,2]").unwrap_err(), WireError::NotAnObject);
        assert_eq!(classify(b"42").unwrap_err(), WireError::NotAnObject);
    }

    #[test]
    fn non_string_method_reads_as_absent() {
        let env = classify(br#"{"method":5}"#).unwrap();
        assert!(env.method.is_none());
    }

    #[test]
    fn reads_an_update_with_escapes() {
        let line = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\"b\u00e9"},"messageId":"m1"}}}"#;
        let env = classify(line).unwrap();
        let update = session_update(env.params).unwrap();
        assert_eq!(update.session_id, "s");
        assert_eq!(
            update.fields.session_update.as_str(),
            Some("agent_message_chunk")
        );
        let content = update.fields.content.0.unwrap();
        assert_eq!(content.text.as_str(), Some("a\"b\u{e9}"));
        assert_eq!(update.fields.message_id.as_str(), Some("m1"));
    }

    #[test]
    fn wrongly_typed_update_fields_read_as_absent() {
        let line = line_with(
            r#"{"sessionId":7,"update":{"sessionUpdate":"tool_call","title":[1],"content":[{"type":"content"}],"toolCallId":{"a":1},"entries":"x"}}"#,
        );
        let update = session_update(classify(line.as_bytes()).unwrap().params).unwrap();
        assert_eq!(update.session_id, "");
        assert_eq!(update.fields.title.as_str(), None);
        assert!(update.fields.content.0.is_none());
        assert_eq!(update.fields.tool_call_id.as_str(), None);
        assert!(update.fields.entries.0.is_none());
    }

    #[test]
    fn malformed_updates_fail() {
        for params in [
            r#"[1]"#,
            r#"{"sessionId":"s"}"#,
            r#"{"update":[]}"#,
            r#"{"update":{"sessionUpdate":3}}"#,
            r#"{"update":{}}"#,
        ] {
            let line = line_with(params);
            assert!(
                session_update(classify(line.as_bytes()).unwrap().params).is_err(),
                "{params}"
            );
        }
        let no_params = classify(br#"{"method":"session/update"}"#).unwrap();
        assert!(session_update(no_params.params).is_err());
    }

    #[test]
    fn a_tool_call_object_keeps_its_exact_text() {
        let tool_call = r#"{"toolCallId":"t\u0031","title":"run","kind":"execute","rawInput":{"a":[1,2.5,null]}}"#;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{{"sessionId":"s","toolCall":{tool_call},"options":[]}}}}"#
        );
        let params = permission_request(classify(line.as_bytes()).unwrap().params);
        let fields = params.tool_call.0.expect("an object");
        assert_eq!(fields.tool_call_id.as_str(), Some("t1"));
        assert_eq!(fields.kind.as_str(), Some("execute"));
        assert_eq!(params.tool_call.1.map(RawValue::get), Some(tool_call));
        for params in [
            r#"{"toolCall":"x"}"#,
            r#"{"toolCall":null}"#,
            r#"{"toolCall":[{"toolCallId":"t"}]}"#,
            r#"{"sessionId":"s"}"#,
        ] {
            let line =
                format!(r#"{{"id":1,"method":"session/request_permission","params":{params}}}"#);
            let params = permission_request(classify(line.as_bytes()).unwrap().params);
            assert!(params.tool_call.0.is_none() && params.tool_call.1.is_none());
        }
    }

    #[test]
    fn reads_permission_options_leniently() {
        let line = line_with(
            r#"{"sessionId":"s","toolCall":{"toolCallId":"t","title":"run","kind":"execute"},"options":[{"optionId":"a","name":"A","kind":"allow_once"},5,{"optionId":1}]}"#,
        );
        let fields = permission_request(classify(line.as_bytes()).unwrap().params);
        let tool = fields.tool_call.0.unwrap();
        assert_eq!(tool.kind.as_str(), Some("execute"));
        assert_eq!(tool.status.as_str(), None);
        let options = fields.options.0.unwrap();
        assert_eq!(options.len(), 3);
        assert!(options[1].0.is_none());
        assert_eq!(options[2].0.as_ref().unwrap().option_id.as_str(), None);
    }

    #[test]
    fn reads_error_answers() {
        let raw =
            RawValue::from_string(r#"{"code":-32000,"message":"boom","data":{"why":"x"}}"#.into())
                .unwrap();
        let answer = error_answer(&raw);
        assert_eq!(answer.code, Some(-32000));
        assert_eq!(answer.message.as_deref(), Some("boom"));
        assert_eq!(answer.data.as_deref(), Some(r#"{"why":"x"}"#));
    }

    #[test]
    fn reads_initialize_capabilities_under_both_spellings() {
        for key in ["embeddedContent", "embeddedContext"] {
            let text = format!(
                r#"{{"protocolVersion":1,"agentCapabilities":{{"loadSession":true,"promptCapabilities":{{"image":true,"{key}":true}}}},"authMethods":[{{"id":"token"}}]}}"#
            );
            let raw = RawValue::from_string(text).unwrap();
            let fields = initialize_result(&raw).unwrap();
            let caps = fields.capabilities.0.unwrap();
            assert!(caps.load_session.0);
            let prompt = caps.prompt.0.unwrap();
            assert!(prompt.image.0);
            assert!(!prompt.audio.0);
            assert!(prompt.embedded_content.0 || prompt.embedded_context.0);
            assert_eq!(
                fields.auth_methods.0.unwrap()[0]
                    .0
                    .as_ref()
                    .unwrap()
                    .id
                    .as_str(),
                Some("token")
            );
        }
    }
}

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

// --- the fast path for the commonest line ---------------------------------------------------

/// A text chunk in the shape nearly every agent writes, read without serde.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextChunk<'a> {
    /// The whole line.
    pub text_line: &'a str,
    pub session_id: &'a str,
    /// The `sessionUpdate` value.
    pub session_update: &'a str,
    /// The content block's text.
    pub text: &'a str,
    /// v2's `messageId`, before or after `content`.
    pub message_id: Option<&'a str>,
    /// The whole line is ASCII.
    pub ascii: bool,
}

const CHUNK_PARTS: [&[u8]; 4] = [
    br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":""#,
    br#"","update":{"sessionUpdate":""#,
    br#"","content":{"type":"text","text":""#,
    br#""}}}}"#,
];

/// The string at the start of `rest` up to its closing quote, when it needs no decoding (no
/// escapes, no control characters); `None` sends the line to the general parser.
/// Also tells whether the string is ASCII, found in the same pass.
fn plain_string(rest: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    if rest[end] != b'"' {
        return None;
    }
    let value = &rest[..end];
    // JSON forbids raw control characters in strings; the general parser reports them.
    let (control, high) = control_and_high(value);
    if control {
        return None;
    }
    Some((value, &rest[end + 1..], !high))
}

/// Whether `bytes` holds a byte below 0x20 and whether it holds one of 0x80 or above, eight
/// bytes at a time (a byte loop cost about two instructions a byte on every chunk's strings).
fn control_and_high(bytes: &[u8]) -> (bool, bool) {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut control = 0u64;
    let mut high = 0u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
        // A byte below 0x20 borrows in `w - 0x20..` and has its top bit clear in `w`; the
        // first such byte is always flagged (later flags may be spurious, which is fine:
        // only whether any exists matters).
        control |= w.wrapping_sub(ONES * 0x20) & !w;
        high |= w;
    }
    let tail = words.remainder();
    let (tail_control, tail_high) = tail.iter().fold((false, false), |(control, high), b| {
        (control | (*b < 0x20), high | (*b >= 0x80))
    });
    (
        control & HIGHS != 0 || tail_control,
        high & HIGHS != 0 || tail_high,
    )
}

/// Reads a `session/update` line laid out exactly as
/// `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":S,"update":{"sessionUpdate":K,"content":{"type":"text","text":T}}}}`
/// with plain strings S, K, T. Every byte outside the three strings is fixed, so a match is
/// valid JSON with the same meaning `classify` gives it; anything else returns `None` and takes
/// the general path.
pub fn text_chunk(line: &[u8]) -> Option<TextChunk<'_>> {
    let mut rest = line.strip_prefix(CHUNK_PARTS[0])?;
    let mut ascii = true;
    fn take<'l>(rest: &mut &'l [u8], ascii: &mut bool) -> Option<&'l [u8]> {
        let (value, after, value_ascii) = plain_string(rest)?;
        *ascii &= value_ascii;
        *rest = after;
        Some(value)
    }
    let session_id = take(&mut rest, &mut ascii)?;
    rest = rest.strip_prefix(&CHUNK_PARTS[1][1..])?;
    let session_update = take(&mut rest, &mut ascii)?;
    // v2's chunks carry a `messageId`: the SDKs write it before or after `content`.
    // One byte tells the layouts apart (`,"m` from `,"c`, `},` from `}}`), so a v1 line pays
    // a byte compare here, not a failed prefix compare.
    let mut message_id = None;
    if rest.get(2) == Some(&b'm') {
        rest = rest.strip_prefix(MESSAGE_ID_BEFORE)?;
        message_id = Some(take(&mut rest, &mut ascii)?);
    }
    rest = rest.strip_prefix(&CHUNK_PARTS[2][1..])?;
    let text = take(&mut rest, &mut ascii)?;
    if rest.get(1) == Some(&b',') && message_id.is_none() {
        rest = rest.strip_prefix(MESSAGE_ID_AFTER)?;
        message_id = Some(take(&mut rest, &mut ascii)?);
        rest = rest.strip_prefix(br#"}}}"#)?;
    } else {
        rest = rest.strip_prefix(&CHUNK_PARTS[3][1..])?;
    }
    if !rest.is_empty() {
        return None;
    }
    let text_line = if ascii {
        // SAFETY: every byte is ASCII (the template's, and the strings' as just checked).
        unsafe { std::str::from_utf8_unchecked(line) }
    } else {
        std::str::from_utf8(line).ok()?
    };
    // SAFETY: each string is a sub-slice of `line`, which is valid UTF-8, and starts and ends
    // next to an ASCII quote, so it starts and ends on character boundaries.
    fn text_of(bytes: &[u8]) -> &str {
        // SAFETY: as above, the caller's slices are whole strings of a UTF-8 line.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
    Some(TextChunk {
        text_line,
        session_id: text_of(session_id),
        session_update: text_of(session_update),
        text: text_of(text),
        message_id: message_id.map(text_of),
        ascii,
    })
}

/// Where v2's `messageId` sits in a chunk line: right after `sessionUpdate`, or after the content
/// object (then the line ends `"}}}`).
const MESSAGE_ID_BEFORE: &[u8] = br#","messageId":""#;
const MESSAGE_ID_AFTER: &[u8] = br#"},"messageId":""#;

// --- lenient field types -------------------------------------------------------------------

/// A string field that reads as `None` when absent or of another JSON type.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Option<Cow<'a, str>>);

impl<'a> Str<'a> {
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
    pub fn or_empty(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Str(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Str(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Str(Some(Cow::Owned(v))))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Str(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Str(None))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrVisitor)
    }
}

/// A boolean field that reads as `false` unless it is `true`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = IgnoredOr::<bool>::deserialize(d)?;
        Ok(Flag(value.0 == Some(true)))
    }
}

/// An object field parsed as `T` when it is an object, `None` for any other JSON type.
#[derive(Debug, Clone, PartialEq)]
pub struct Obj<T>(pub Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // A number serde_json holds as text (a float, an integer beyond 64 bits: the
                // `arbitrary_precision` feature, so numbers survive exactly) arrives as a map
                // of one entry under its private key: it is not an object.
                let first = map
                    .next_key::<Str<'de>>()?
                    .map(|key| key.0.unwrap_or_default());
                if first.as_deref() == Some(NUMBER_TOKEN) {
                    map.next_value::<IgnoredAny>()?;
                    return Ok(Obj(None));
                }
                let replay = Replay {
                    done: first.is_none(),
                    first,
                    map,
                };
                T::deserialize(de::value::MapAccessDeserializer::new(replay)).map(|v| Obj(Some(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Obj(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
        }
        d.deserialize_any(ObjVisitor(std::marker::PhantomData))
    }
}

/// serde_json's private key for a number held as text (`arbitrary_precision`).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A map whose first key was already read (to tell an object from a number held as text),
/// handed on whole.
struct Replay<'de, A> {
    first: Option<Cow<'de, str>>,
    done: bool,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Replay<'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if self.done {
            return Ok(None);
        }
        match self.first.take() {
            Some(Cow::Borrowed(key)) => seed
                .deserialize(de::value::BorrowedStrDeserializer::new(key))
                .map(Some),
            Some(Cow::Owned(key)) => seed
                .deserialize(de::value::StringDeserializer::new(key))
                .map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// An array field: `Some(items)` when it is an array, `None` otherwise. Items are lenient `T`.
#[derive(Debug, Clone, PartialEq)]
pub struct Arr<T>(pub Option<Vec<T>>);

impl<T> Default for Arr<T> {
    fn default() -> Self {
        Arr(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Arr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = IgnoredOr::<Vec<T>>::deserialize(d)?;
        Ok(Arr(value.0))
    }
}

/// `T` when the value has T's JSON shape, `None` (value skipped) otherwise.
struct IgnoredOr<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for IgnoredOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Buffering through RawValue keeps this generic without a tree: T gets a second,
        // strict look at a slice that is already known to be valid JSON.
        let raw = <&RawValue>::deserialize(d)?;
        Ok(IgnoredOr(serde_json::from_str::<T>(raw.get()).ok()))
    }
}

// --- the messages the client acts on --------------------------------------------------------

#[derive(Deserialize, Default, Debug)]
pub struct TextContent<'a> {
    #[serde(default, borrow, rename = "type")]
    pub kind: Str<'a>,
    #[serde(default, borrow)]
    pub text: Str<'a>,
}

#[derive(Deserialize, Default, Debug)]
pub struct PlanEntry<'a> {
    #[serde(default, borrow)]
    pub content: Str<'a>,
}

/// The fields of `params.update` the client reads.
#[derive(Deserialize, Default, Debug)]
pub struct UpdateFields<'a> {
    #[serde(default, borrow, rename = "sessionUpdate")]
    pub session_update: Str<'a>,
    #[serde(default, borrow)]
    pub content: Obj<TextContent<'a>>,
    #[serde(default, borrow, rename = "toolCallId")]
    pub tool_call_id: Str<'a>,
    #[serde(default, borrow, rename = "messageId")]
    pub message_id: Str<'a>,
    #[serde(default, borrow)]
    pub title: Str<'a>,
    #[serde(default, borrow, rename = "currentModeId")]
    pub current_mode_id: Str<'a>,
    #[serde(default, borrow)]
    pub entries: Arr<Obj<PlanEntry<'a>>>,
    /// A tool call's kind (`tool_call` / `tool_call_update`).
    #[serde(default, borrow)]
    pub kind: Str<'a>,
    /// A tool call's name (schema 1.22), remembered for permission requests that omit it.
    #[serde(default, borrow)]
    pub name: Str<'a>,
}

/// What a `session/update` carries, borrowed from its line.
#[derive(Debug)]
pub struct SessionUpdate<'a> {
    pub session_id: Cow<'a, str>,
    pub fields: Box<UpdateFields<'a>>,
}

/// Takes a `session/update`'s fields; fails when there is no params object, no update object
/// or no string `sessionUpdate`.
pub fn session_update(params: ParamsField<'_>) -> Result<SessionUpdate<'_>, WireError> {
    let params = match params {
        ParamsField::Object(params) => params,
        ParamsField::NotObject => {
            return Err(WireError::Malformed(
                "session/update whose params is not a JSON object".into(),
            ))
        }
        ParamsField::Absent => {
            return Err(WireError::Malformed("session/update without params".into()))
        }
    };
    let fields = params.update.0.ok_or_else(|| {
        WireError::Malformed(
            "session/update whose params.update is missing or not an object".into(),
        )
    })?;
    if fields.session_update.0.is_none() {
        return Err(WireError::Malformed(
            "session/update whose params.update.sessionUpdate is missing or not a string".into(),
        ));
    }
    Ok(SessionUpdate {
        session_id: params.session_id.0.unwrap_or(Cow::Borrowed("")),
        fields,
    })
}

#[derive(Deserialize, Default, Debug, Clone)]
pub struct ToolCallFields<'a> {
    #[serde(default, borrow, rename = "toolCallId")]
    pub tool_call_id: Str<'a>,
    #[serde(default, borrow)]
    pub title: Str<'a>,
    #[serde(default, borrow)]
    pub kind: Str<'a>,
    #[serde(default, borrow)]
    pub status: Str<'a>,
    /// The tool's own name (schema 1.22), matched by `PermissionRule(name=…)`.
    #[serde(default, borrow)]
    pub name: Str<'a>,
}

/// `params.toolCall`: its fields when it is an object, and then the object's exact text too
/// (the turn's record keeps it as sent instead of building it as a JSON value).
#[derive(Default, Debug)]
pub struct ToolCallField<'a>(
    pub Option<Box<ToolCallFields<'a>>>,
    pub Option<&'a RawValue>,
);

impl<'de: 'a, 'a> Deserialize<'de> for ToolCallField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'a RawValue>::deserialize(d)?;
        // The object's text is small and hot in cache: reading it twice costs less than
        // building it.
        let fields = serde_json::from_str::<Obj<Box<ToolCallFields<'a>>>>(raw.get())
            .map_err(de::Error::custom)?
            .0;
        let raw = fields.is_some().then_some(raw);
        Ok(ToolCallField(fields, raw))
    }
}

#[derive(Deserialize, Default, Debug, Clone)]
pub struct OptionFields<'a> {
    #[serde(default, borrow, rename = "optionId")]
    pub option_id: Str<'a>,
    #[serde(default, borrow)]
    pub name: Str<'a>,
    #[serde(default, borrow)]
    pub kind: Str<'a>,
}

/// What a `session/request_permission` carries. Missing or wrongly typed fields read as absent:
/// the client still answers (with `cancelled` when no option can be chosen).
pub fn permission_request(params: ParamsField<'_>) -> Params<'_> {
    match params {
        ParamsField::Object(mut params) => {
            // v2: a `tool_call` subject's `toolCall` is v1's `toolCall` (kind, name, id, the
            // announced call); the rules read it from there.
            if params.tool_call.0.is_none() {
                if let Some(subject) = params.subject.0.as_mut() {
                    if subject.kind.as_str() == Some("tool_call") {
                        params.tool_call = std::mem::take(&mut subject.tool_call);
                    }
                }
            }
            params
        }
        _ => Params::default(),
    }
}

/// A JSON-RPC error object, as much of it as is there.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorAnswer {
    pub code: Option<i64>,
    pub message: Option<String>,
    /// `data` as raw JSON text, when present.
    pub data: Option<String>,
}

#[derive(Deserialize)]
struct ErrorFields<'a> {
    #[serde(default)]
    code: IgnoredOrI64,
    #[serde(default, borrow)]
    message: Str<'a>,
    #[serde(default, borrow, deserialize_with = "present_raw")]
    data: Option<&'a RawValue>,
}

#[derive(Default)]
struct IgnoredOrI64(Option<i64>);

impl<'de> Deserialize<'de> for IgnoredOrI64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(IgnoredOrI64(IgnoredOr::<i64>::deserialize(d)?.0))
    }
}

pub fn error_answer(error: &RawValue) -> ErrorAnswer {
    match serde_json::from_str::<ErrorFields<'_>>(error.get()) {
        Ok(fields) if error.get().starts_with('{') => ErrorAnswer {
            code: fields.code.0,
            message: fields.message.0.map(Cow::into_owned),
            data: fields.data.map(|d| d.get().to_owned()),
        },
        _ => ErrorAnswer {
            code: None,
            message: None,
            data: Some(error.get().to_owned()),
        },
    }
}

// --- responses to the client's own requests -------------------------------------------------

#[derive(Deserialize, Default, Debug)]
pub struct PromptCapabilities {
    #[serde(default)]
    pub image: Flag,
    #[serde(default)]
    pub audio: Flag,
    /// The official schema's name.
    #[serde(default, rename = "embeddedContext")]
    pub embedded_context: Flag,
    /// The name the behaviour reference's tests use.
    #[serde(default, rename = "embeddedContent")]
    pub embedded_content: Flag,
}

#[derive(Deserialize, Default, Debug)]
pub struct AgentCapabilities {
    #[serde(default, rename = "loadSession")]
    pub load_session: Flag,
    #[serde(default, rename = "promptCapabilities")]
    pub prompt: Obj<PromptCapabilities>,
}

#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq)]
pub struct NamedEntry<'a> {
    #[serde(default, borrow)]
    pub id: Str<'a>,
    #[serde(default, borrow)]
    pub name: Str<'a>,
    #[serde(default, borrow)]
    pub description: Str<'a>,
}

#[derive(Deserialize, Debug)]
pub struct InitializeFields<'a> {
    #[serde(
        default,
        rename = "protocolVersion",
        borrow,
        deserialize_with = "present_raw"
    )]
    pub protocol_version: Option<&'a RawValue>,
    #[serde(default, rename = "agentCapabilities")]
    pub capabilities: Obj<AgentCapabilities>,
    #[serde(default, borrow, rename = "authMethods")]
    pub auth_methods: Arr<Obj<NamedEntry<'a>>>,
    #[serde(
        default,
        rename = "agentInfo",
        borrow,
        deserialize_with = "present_raw"
    )]
    pub agent_info: Option<&'a RawValue>,
}

pub fn initialize_result(result: &RawValue) -> Result<InitializeFields<'_>, WireError> {
    serde_json::from_str(result.get())
        .map_err(|e| WireError::Malformed(format!("initialize result unreadable: {e}")))
}

#[derive(Deserialize, Default, Debug)]
pub struct ModesFields<'a> {
    #[serde(default, borrow, rename = "currentModeId")]
    pub current: Str<'a>,
    #[serde(default, borrow, rename = "availableModes")]
    pub available: Arr<Obj<NamedEntry<'a>>>,
}

#[derive(Deserialize, Debug)]
pub struct SessionNewFields<'a> {
    #[serde(default, borrow, rename = "sessionId")]
    pub session_id: Str<'a>,
    #[serde(default, borrow)]
    pub modes: Obj<ModesFields<'a>>,
}

pub fn session_new_result(result: &RawValue) -> Result<SessionNewFields<'_>, WireError> {
    serde_json::from_str(result.get())
        .map_err(|e| WireError::Malformed(format!("session/new result unreadable: {e}")))
}

#[derive(Deserialize, Debug)]
pub struct PromptFields<'a> {
    #[serde(default, borrow, rename = "stopReason")]
    pub stop_reason: Str<'a>,
    /// The turn's token usage (unstable `Usage`), as sent: read by the facade, not here.
    #[serde(default, borrow)]
    pub usage: Option<&'a RawValue>,
}

pub fn prompt_result(result: &RawValue) -> Result<PromptFields<'_>, WireError> {
    serde_json::from_str(result.get())
        .map_err(|e| WireError::Malformed(format!("session/prompt result unreadable: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time scan says what the byte loop says, for every byte value at every
    /// position of strings up to 24 bytes, alone and next to others.
    #[test]
    fn control_and_high_match_a_byte_loop() {
        let by_bytes = |bytes: &[u8]| {
            (
                bytes.iter().any(|b| *b < 0x20),
                bytes.iter().any(|b| *b >= 0x80),
            )
        };
        for len in 0..=24 {
            for at in 0..len {
                for value in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = value;
                    assert_eq!(control_and_high(&bytes), by_bytes(&bytes), "{bytes:?}");
                    bytes[len - 1 - at] = 0x1f;
                    assert_eq!(control_and_high(&bytes), by_bytes(&bytes), "{bytes:?}");
                    bytes.fill(value);
                    assert_eq!(control_and_high(&bytes), by_bytes(&bytes), "{bytes:?}");
                }
            }
        }
    }

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

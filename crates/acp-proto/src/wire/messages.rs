//! The messages the client acts on, and the responses to its own requests: their fields,
//! borrowed from the line.

use super::*;

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

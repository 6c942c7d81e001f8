//! What the agent's answers to the client's calls say: `initialize` (version, capabilities, auth
//! methods), the session results (modes, config options, legacy models) and `session/list`
//! pages. These answers are rare, so they are read as JSON values; absent or wrongly typed
//! fields read as absent.

use serde_json::Value;

use crate::error::{excerpt, AcpError};
use crate::limits::Protocol;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedEntry {
    pub id: String,
    pub name: String,
    pub description: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthMethodInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    /// "terminal", another string as sent (e.g. "env_var"), "" for agent methods.
    pub kind: String,
}

/// What the agent advertised; a capability the calls of §6 check before writing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub load_session: bool,
    pub prompt_image: bool,
    pub prompt_audio: bool,
    pub prompt_embedded_context: bool,
    pub session_resume: bool,
    pub session_list: bool,
    pub session_delete: bool,
    pub session_close: bool,
    pub session_additional_directories: bool,
    pub mcp_http: bool,
    pub mcp_sse: bool,
    pub auth_logout: bool,
    /// `sessionCapabilities.systemPrompt` (the `append` mode), and its `mode.override`.
    pub system_prompt: bool,
    pub system_prompt_override: bool,
    /// Unstable: `sessionCapabilities.fork`, `.title`, `.status`.
    pub session_fork: bool,
    pub session_title: bool,
    pub session_status: bool,
    /// The `_session/steering` extension: `initialize`'s top-level `_meta.steering.supported`.
    pub steering: bool,
}

/// The agent's answer to `initialize`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitializeInfo {
    pub protocol_version: i64,
    pub capabilities: Capabilities,
    pub auth_methods: Vec<AuthMethodInfo>,
    /// `agentInfo` as raw JSON text, when it is an object.
    pub agent_info: Option<String>,
    /// The whole result object as raw JSON text.
    pub raw: String,
}

/// A current choice among named entries: a session's modes or its models (from the `modes` /
/// `models` objects or from a select config option of that category).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectInfo {
    pub current: String,
    pub available: Vec<NamedEntry>,
}

pub type ModesInfo = SelectInfo;
pub type ModelsInfo = SelectInfo;

/// What a `session/new`, `load` or `resume` result sets; `None` leaves the handle's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionResult {
    pub session_id: Option<String>,
    pub modes: Option<ModesInfo>,
    pub config_options: Option<Value>,
    pub models: Option<ModelsInfo>,
}

fn string(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn is_true(value: Option<&Value>) -> bool {
    value.and_then(Value::as_bool) == Some(true)
}

/// Present and not null: how the schema's `sessionCapabilities.*` and `auth.logout` advertise.
fn present(value: Option<&Value>) -> bool {
    value.is_some_and(|v| !v.is_null())
}

fn objects(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.is_object())
}

pub fn parse_object(raw: &str, what: &str) -> Result<Value, AcpError> {
    serde_json::from_str(raw)
        .map_err(|e| AcpError::protocol(format!("malformed {what} result ({e})")))
}

fn version_refused(description: String) -> AcpError {
    AcpError::AgentProtocol(crate::error::ProtocolError {
        description,
        version_refused: true,
        ..Default::default()
    })
}

/// The agent's answer to `initialize`, read as the version it agreed: 1 (v1's
/// `agentCapabilities`/`agentInfo`) or 2 (`capabilities`/`info`), refused unless `offered`
/// allows it (`Auto` takes either: the agent answers at or below what was offered).
pub fn initialize(raw: &str, offered: Protocol) -> Result<InitializeInfo, AcpError> {
    let result = parse_object(raw, "initialize")?;
    let Some(version) = result.get("protocolVersion").and_then(Value::as_i64) else {
        return Err(version_refused(format!(
            "the agent's initialize result has no integer protocolVersion: {}",
            excerpt(raw.as_bytes(), 200)
        )));
    };
    match (version, offered) {
        (1, Protocol::V1 | Protocol::Auto) => Ok(initialize_v1(raw, &result)),
        (2, Protocol::V2 | Protocol::Auto) => Ok(initialize_v2(raw, &result)),
        (1, Protocol::V2) => Err(version_refused(
            "the agent speaks ACP protocol version 1 and this client asked for version 2 only (protocol=\"v2\"): use protocol=\"auto\" to fall back to version 1, or protocol=\"v1\"".into(),
        )),
        (2, Protocol::V1) => Err(version_refused(
            "the agent speaks ACP protocol version 2; this client speaks version 1 (protocol=\"v1\"): use protocol=\"auto\" or \"v2\"".into(),
        )),
        (other, _) => Err(version_refused(format!(
            "the agent speaks ACP protocol version {other}; this client offered version {} and speaks versions 1 and 2",
            offered.offered()
        ))),
    }
}

fn initialize_v1(raw: &str, result: &Value) -> InitializeInfo {
    let caps = result.get("agentCapabilities").filter(|c| c.is_object());
    let get = |path: &[&str]| walk(caps, path);
    let prompt = |key: &str| is_true(get(&["promptCapabilities", key]));
    let capabilities = Capabilities {
        load_session: is_true(get(&["loadSession"])),
        prompt_image: prompt("image"),
        prompt_audio: prompt("audio"),
        // The schema's name, and the one the behaviour reference's tests use.
        prompt_embedded_context: prompt("embeddedContext") || prompt("embeddedContent"),
        session_resume: present(get(&["sessionCapabilities", "resume"])),
        session_list: present(get(&["sessionCapabilities", "list"])),
        session_delete: present(get(&["sessionCapabilities", "delete"])),
        session_close: present(get(&["sessionCapabilities", "close"])),
        session_additional_directories: present(get(&[
            "sessionCapabilities",
            "additionalDirectories",
        ])),
        mcp_http: is_true(get(&["mcpCapabilities", "http"])),
        mcp_sse: is_true(get(&["mcpCapabilities", "sse"])),
        auth_logout: present(get(&["auth", "logout"])),
        // `{}` advertises the append mode; `override` needs its own `mode.override` entry.
        system_prompt: present(get(&["sessionCapabilities", "systemPrompt"])),
        system_prompt_override: present(get(&[
            "sessionCapabilities",
            "systemPrompt",
            "mode",
            "override",
        ])),
        session_fork: present(get(&["sessionCapabilities", "fork"])),
        session_title: present(get(&["sessionCapabilities", "title"])),
        session_status: present(get(&["sessionCapabilities", "status"])),
        steering: steering(result),
    };
    InitializeInfo {
        protocol_version: 1,
        capabilities,
        auth_methods: auth_methods(result, "id"),
        agent_info: object_text(result.get("agentInfo")),
        raw: raw.to_owned(),
    }
}

/// v2's `initialize` result: `capabilities.session` present means the baseline session methods
/// (`session/new`, `list`, `resume`, `close`, `prompt`, `cancel`); each optional feature is an
/// object whose presence advertises it (`{}`), not a boolean.
fn initialize_v2(raw: &str, result: &Value) -> InitializeInfo {
    let caps = result.get("capabilities").filter(|c| c.is_object());
    let get = |path: &[&str]| walk(caps, path);
    let session = present(get(&["session"]));
    let methods = auth_methods(result, "methodId");
    let capabilities = Capabilities {
        load_session: false,
        prompt_image: present(get(&["session", "prompt", "image"])),
        prompt_audio: present(get(&["session", "prompt", "audio"])),
        prompt_embedded_context: present(get(&["session", "prompt", "embeddedContext"])),
        session_resume: session,
        session_list: session,
        session_delete: present(get(&["session", "delete"])),
        session_close: session,
        session_additional_directories: present(get(&["session", "additionalDirectories"])),
        mcp_http: present(get(&["session", "mcp", "http"])),
        mcp_sse: false,
        // A non-empty `authMethods` advertises both `auth/login` and `auth/logout`.
        auth_logout: !methods.is_empty(),
        system_prompt: present(get(&["session", "systemPrompt"])),
        system_prompt_override: present(get(&["session", "systemPrompt", "mode", "override"])),
        session_fork: present(get(&["session", "fork"])),
        session_title: present(get(&["session", "title"])),
        session_status: present(get(&["session", "status"])),
        steering: steering(result),
    };
    InitializeInfo {
        protocol_version: 2,
        capabilities,
        auth_methods: methods,
        agent_info: object_text(result.get("info")),
        raw: raw.to_owned(),
    }
}

fn walk<'v>(root: Option<&'v Value>, path: &[&str]) -> Option<&'v Value> {
    let mut node = root?;
    for key in path {
        node = node.get(key).filter(|n| !n.is_null())?;
    }
    Some(node)
}

fn steering(result: &Value) -> bool {
    is_true(
        result
            .get("_meta")
            .and_then(|m| m.get("steering"))
            .and_then(|s| s.get("supported")),
    )
}

fn object_text(value: Option<&Value>) -> Option<String> {
    value.filter(|v| v.is_object()).map(Value::to_string)
}

fn auth_methods(result: &Value, id_key: &str) -> Vec<AuthMethodInfo> {
    objects(result.get("authMethods"))
        .map(|m| AuthMethodInfo {
            id: string(m, id_key),
            name: string(m, "name"),
            description: string(m, "description"),
            kind: string(m, "type"),
        })
        .collect()
}

fn named(items: Option<&Value>, id_key: &str) -> Vec<NamedEntry> {
    objects(items)
        .map(|e| NamedEntry {
            id: string(e, id_key),
            name: string(e, "name"),
            description: string(e, "description"),
        })
        .collect()
}

/// Reads a session result; `null` or `{}` sets nothing.
pub fn session(raw: &str, what: &str) -> Result<SessionResult, AcpError> {
    let result = parse_object(raw, what)?;
    if !(result.is_object() || result.is_null()) {
        return Err(AcpError::protocol(format!(
            "the agent's result for {what} is not a JSON object: {}",
            excerpt(raw.as_bytes(), 200)
        )));
    }
    let modes = result
        .get("modes")
        .filter(|m| m.is_object())
        .map(|m| ModesInfo {
            current: string(m, "currentModeId"),
            available: named(m.get("availableModes"), "id"),
        });
    let models = result
        .get("models")
        .filter(|m| m.is_object())
        .map(|m| ModelsInfo {
            current: string(m, "currentModelId"),
            available: named(m.get("availableModels"), "modelId"),
        });
    Ok(SessionResult {
        session_id: result
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned),
        modes,
        config_options: result
            .get("configOptions")
            .filter(|c| c.is_array())
            .cloned(),
        models,
    })
}

/// One `session/list` page: the sessions (raw JSON objects) and the next cursor, if any.
pub fn list_page(raw: &str) -> Result<(Vec<String>, Option<String>), AcpError> {
    let result = parse_object(raw, "session/list")?;
    let sessions = objects(result.get("sessions"))
        .map(Value::to_string)
        .collect();
    let cursor = result
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    Ok((sessions, cursor))
}

/// The select config option of `category` among a session's config options (`"model"`, or
/// `"mode"` for agents that offer their modes only that way, as opencode 1.18 does), as a
/// choice: the same shape as the `modes` / `models` objects, so `Session.modes`, `set_mode`
/// and `set_model` work for either.
pub fn select_from_config(options: &Value, category: &str) -> Option<SelectInfo> {
    let option = objects(Some(options)).find(|o| {
        o.get("category").and_then(Value::as_str) == Some(category)
            && o.get("type").and_then(Value::as_str) == Some("select")
    })?;
    Some(SelectInfo {
        current: string(option, "currentValue"),
        available: select_values(option)
            .map(|v| NamedEntry {
                id: string(v, "value"),
                name: string(v, "name"),
                description: string(v, "description"),
            })
            .collect(),
    })
}

/// A select option's values, groups flattened.
pub fn select_values(option: &Value) -> impl Iterator<Item = &Value> {
    objects(option.get("options")).flat_map(|item| {
        // v1 names a group `group`, v2 `groupId`.
        let named = item.get("group").is_some() || item.get("groupId").is_some();
        let group = named && item.get("options").is_some();
        let nested: Vec<&Value> = if group {
            objects(item.get("options")).collect()
        } else {
            vec![item]
        };
        nested
    })
}

/// The config option `config_id` (type and object) among `options`.
pub fn config_option<'a>(options: &'a Value, config_id: &str) -> Option<&'a Value> {
    objects(Some(options)).find(|o| option_id(o) == Some(config_id))
}

/// A config option's id: v1's `id`, v2's `configId`.
fn option_id(option: &Value) -> Option<&str> {
    option
        .get("id")
        .or_else(|| option.get("configId"))
        .and_then(Value::as_str)
}

/// (id, category) of each select config option, in order.
pub fn select_config_ids(options: &Value) -> impl Iterator<Item = (&str, &str)> {
    objects(Some(options)).filter_map(|o| {
        if o.get("type").and_then(Value::as_str) != Some("select") {
            return None;
        }
        Some((
            option_id(o)?,
            o.get("category").and_then(Value::as_str).unwrap_or(""),
        ))
    })
}

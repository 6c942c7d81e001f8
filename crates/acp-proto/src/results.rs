//! What the agent's answers to the client's calls say: `initialize` (version, capabilities, auth
//! methods), the session results (modes, config options, legacy models) and `session/list`
//! pages. These answers are rare, so they are read as JSON values; absent or wrongly typed
//! fields read as absent.

use serde_json::Value;

use crate::error::{excerpt, AcpError};

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

pub fn initialize(raw: &str) -> Result<InitializeInfo, AcpError> {
    let result = parse_object(raw, "initialize")?;
    match result.get("protocolVersion").and_then(Value::as_i64) {
        Some(1) => {}
        Some(other) => {
            return Err(version_refused(format!(
                "the agent speaks ACP protocol version {other}; this client speaks version 1"
            )))
        }
        None => {
            return Err(version_refused(format!(
                "the agent's initialize result has no integer protocolVersion: {}",
                excerpt(raw.as_bytes(), 200)
            )))
        }
    }
    let caps = result.get("agentCapabilities").filter(|c| c.is_object());
    let get = |path: &[&str]| {
        let mut node = caps?;
        for key in path {
            node = node.get(key).filter(|n| !n.is_null())?;
        }
        Some(node)
    };
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
        steering: is_true(
            result
                .get("_meta")
                .and_then(|m| m.get("steering"))
                .and_then(|s| s.get("supported")),
        ),
    };
    let auth_methods = objects(result.get("authMethods"))
        .map(|m| AuthMethodInfo {
            id: string(m, "id"),
            name: string(m, "name"),
            description: string(m, "description"),
            kind: string(m, "type"),
        })
        .collect();
    let agent_info = result
        .get("agentInfo")
        .filter(|v| v.is_object())
        .map(|v| v.to_string());
    Ok(InitializeInfo {
        protocol_version: 1,
        capabilities,
        auth_methods,
        agent_info,
        raw: raw.to_owned(),
    })
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
        let group = item.get("group").is_some() && item.get("options").is_some();
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
    objects(Some(options)).find(|o| o.get("id").and_then(Value::as_str) == Some(config_id))
}

/// (id, category) of each select config option, in order.
pub fn select_config_ids(options: &Value) -> impl Iterator<Item = (&str, &str)> {
    objects(Some(options)).filter_map(|o| {
        if o.get("type").and_then(Value::as_str) != Some("select") {
            return None;
        }
        Some((
            o.get("id")?.as_str()?,
            o.get("category").and_then(Value::as_str).unwrap_or(""),
        ))
    })
}

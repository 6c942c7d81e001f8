//! Outgoing messages, byte-exact as the behaviour reference writes them: minified JSON, keys in
//! its order, empty optional strings left out, one line each (the trailing `\n` included, since
//! `request_bytes` counts it).

/// What the client reports about itself in `initialize`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientInfo {
    pub name: String,
    pub title: String,
    pub version: String,
}

impl Default for ClientInfo {
    fn default() -> Self {
        ClientInfo {
            name: "acp".into(),
            title: "acp".into(),
            version: "1.0.0".into(),
        }
    }
}

/// An MCP server the agent is asked to connect to. `Stdio` is written untagged (wave 1's bytes);
/// `Http` and `Sse` carry their `type` tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpServer {
    Stdio {
        name: String,
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        name: String,
        url: String,
        headers: Vec<(String, String)>,
    },
    Sse {
        name: String,
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// A client system prompt (`systemPrompt` on session/new, load and resume; schema 1.30):
/// `mode` is "append" or "override", `text` its one text block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemPrompt {
    pub mode: String,
    pub text: String,
}

/// One prompt content block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentBlock {
    Text(String),
    Image {
        mime_type: String,
        data: String,
        uri: String,
    },
    Audio {
        mime_type: String,
        data: String,
        uri: String,
    },
    TextResource {
        uri: String,
        text: String,
        mime_type: String,
    },
    BlobResource {
        uri: String,
        blob: String,
        mime_type: String,
    },
    ResourceLink {
        uri: String,
        name: String,
        mime_type: String,
        title: String,
        description: String,
        size: Option<i64>,
    },
    /// A block already encoded as one JSON object (the typed model's `to_json()`).
    Raw(String),
}

/// A minified JSON writer that knows whether a comma is due.
struct Json {
    out: Vec<u8>,
    need_comma: bool,
}

impl Json {
    fn new() -> Json {
        Json {
            out: Vec::with_capacity(256),
            need_comma: false,
        }
    }

    fn separator(&mut self) {
        if self.need_comma {
            self.out.push(b',');
        }
    }

    fn string(&mut self, value: &str) {
        serde_json::to_writer(&mut self.out, value).expect("writing to a Vec cannot fail");
    }

    fn key(&mut self, key: &str) {
        self.separator();
        self.string(key);
        self.out.push(b':');
        self.need_comma = false;
    }

    fn open_object(&mut self) {
        self.separator();
        self.out.push(b'{');
        self.need_comma = false;
    }

    fn open_array(&mut self) {
        self.separator();
        self.out.push(b'[');
        self.need_comma = false;
    }

    fn close(&mut self, byte: u8) {
        self.out.push(byte);
        self.need_comma = true;
    }

    fn raw(&mut self, json: &str) {
        self.separator();
        self.out.extend_from_slice(json.as_bytes());
        self.need_comma = true;
    }

    fn str_value(&mut self, value: &str) {
        self.separator();
        self.string(value);
        self.need_comma = true;
    }

    fn field_str(&mut self, key: &str, value: &str) {
        self.key(key);
        self.str_value(value);
    }

    fn field_raw(&mut self, key: &str, json: &str) {
        self.key(key);
        self.raw(json);
    }

    fn field_optional_str(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            self.field_str(key, value);
        }
    }

    /// `{"jsonrpc":"2.0"` — every message starts so.
    fn message() -> Json {
        let mut json = Json::new();
        json.open_object();
        json.field_str("jsonrpc", "2.0");
        json
    }

    fn finish_line(mut self) -> Vec<u8> {
        self.close(b'}');
        self.out.push(b'\n');
        self.out
    }
}

/// `initialize`; `capabilities` is the `clientCapabilities` JSON (wave 1: `{}`).
pub fn initialize(id: i64, info: &ClientInfo, capabilities: &str) -> Vec<u8> {
    initialize_as(id, info, capabilities, 1)
}

/// `initialize` offering `version`: v2 names v1's `clientCapabilities`/`clientInfo`
/// `capabilities`/`info`.
pub fn initialize_as(id: i64, info: &ClientInfo, capabilities: &str, version: i64) -> Vec<u8> {
    initialize_offer(id, info, capabilities, version, None)
}

/// `initialize` offering `version`; with `v1_capabilities` (an offer of 2 that falls back to 1)
/// v1's `clientCapabilities` and `clientInfo` ride along, so an agent that answers 1 knows what
/// the host serves (both versions' agents ignore the other's keys).
pub fn initialize_offer(
    id: i64,
    info: &ClientInfo,
    capabilities: &str,
    version: i64,
    v1_capabilities: Option<&str>,
) -> Vec<u8> {
    let (caps_key, info_key) = match version {
        1 => ("clientCapabilities", "clientInfo"),
        _ => ("capabilities", "info"),
    };
    let write_info = |json: &mut Json, key: &str| {
        json.key(key);
        json.open_object();
        json.field_str("name", &info.name);
        json.field_str("title", &info.title);
        json.field_str("version", &info.version);
        json.close(b'}');
    };
    let mut json = Json::message();
    json.field_raw("id", &id.to_string());
    json.field_str("method", "initialize");
    json.key("params");
    json.open_object();
    json.field_raw("protocolVersion", &version.to_string());
    json.field_raw(caps_key, capabilities);
    write_info(&mut json, info_key);
    if let Some(v1) = v1_capabilities {
        json.field_raw("clientCapabilities", v1);
        write_info(&mut json, "clientInfo");
    }
    json.close(b'}');
    json.finish_line()
}

/// `session/new` (wave 1's bytes when `additional_directories` is empty).
pub fn session_new(
    id: i64,
    cwd: &str,
    additional_directories: &[String],
    servers: &[McpServer],
    system_prompt: Option<&SystemPrompt>,
) -> Vec<u8> {
    let mut json = request(id, "session/new");
    json.key("params");
    json.open_object();
    json.field_str("cwd", cwd);
    write_directories(&mut json, additional_directories);
    json.key("mcpServers");
    write_mcp_servers(&mut json, servers);
    write_system_prompt(&mut json, system_prompt);
    json.close(b'}');
    json.finish_line()
}

/// `session/load` or, with `method` "session/resume", the same params for a resume.
pub fn session_load(
    id: i64,
    method: &str,
    session_id: &str,
    cwd: &str,
    additional_directories: &[String],
    servers: &[McpServer],
    system_prompt: Option<&SystemPrompt>,
) -> Vec<u8> {
    session_resume(
        id,
        method,
        session_id,
        cwd,
        additional_directories,
        servers,
        system_prompt,
        false,
    )
}

/// `session_load`'s params, and v2's `replayFrom: {"type": "start"}` when `replay_from_start`.
#[allow(clippy::too_many_arguments)]
pub fn session_resume(
    id: i64,
    method: &str,
    session_id: &str,
    cwd: &str,
    additional_directories: &[String],
    servers: &[McpServer],
    system_prompt: Option<&SystemPrompt>,
    replay_from_start: bool,
) -> Vec<u8> {
    let mut json = request(id, method);
    json.key("params");
    json.open_object();
    json.field_str("sessionId", session_id);
    json.field_str("cwd", cwd);
    write_directories(&mut json, additional_directories);
    json.key("mcpServers");
    write_mcp_servers(&mut json, servers);
    write_system_prompt(&mut json, system_prompt);
    if replay_from_start {
        json.field_raw("replayFrom", r#"{"type":"start"}"#);
    }
    json.close(b'}');
    json.finish_line()
}

/// `session/fork` (unstable): `session/load`'s params, a system prompt only when given.
pub fn session_fork(
    id: i64,
    session_id: &str,
    cwd: &str,
    additional_directories: &[String],
    servers: &[McpServer],
    system_prompt: Option<&SystemPrompt>,
) -> Vec<u8> {
    session_load(
        id,
        "session/fork",
        session_id,
        cwd,
        additional_directories,
        servers,
        system_prompt,
    )
}

/// `session/list`: `cwd` only when given, `cursor` only after the first page.
pub fn session_list(id: i64, cwd: Option<&str>, cursor: Option<&str>) -> Vec<u8> {
    let mut json = request(id, "session/list");
    json.key("params");
    json.open_object();
    if let Some(cwd) = cwd {
        json.field_str("cwd", cwd);
    }
    if let Some(cursor) = cursor {
        json.field_str("cursor", cursor);
    }
    json.close(b'}');
    json.finish_line()
}

/// A request whose params are `{"sessionId":…}` plus string fields in the given order
/// (`session/delete`, `session/close`, `session/set_mode`, `session/set_model`).
pub fn session_call(id: i64, method: &str, session_id: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut json = request(id, method);
    json.key("params");
    json.open_object();
    json.field_str("sessionId", session_id);
    for (key, value) in fields {
        json.field_str(key, value);
    }
    json.close(b'}');
    json.finish_line()
}

/// A config option's new value: a select's value id or a boolean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigValue<'a> {
    Select(&'a str),
    Boolean(bool),
}

/// `session/set_config_option`; a select value is `{"type": "id", "value": …}` in v2
/// (`typed_select`), a bare `value` in v1.
pub fn set_config_option(
    id: i64,
    session_id: &str,
    config_id: &str,
    value: ConfigValue<'_>,
    typed_select: bool,
) -> Vec<u8> {
    let mut json = request(id, "session/set_config_option");
    json.key("params");
    json.open_object();
    json.field_str("sessionId", session_id);
    json.field_str("configId", config_id);
    match value {
        ConfigValue::Select(value) => {
            if typed_select {
                json.field_str("type", "id");
            }
            json.field_str("value", value)
        }
        ConfigValue::Boolean(value) => {
            json.field_str("type", "boolean");
            json.field_raw("value", if value { "true" } else { "false" });
        }
    }
    json.close(b'}');
    json.finish_line()
}

/// `authenticate` (v1) or `auth/login` (v2): the same params under the version's method name.
pub fn authenticate(id: i64, method: &str, method_id: &str) -> Vec<u8> {
    let mut json = request(id, method);
    json.key("params");
    json.open_object();
    json.field_str("methodId", method_id);
    json.close(b'}');
    json.finish_line()
}

/// `logout` (v1) or `auth/logout` (v2).
pub fn logout(id: i64, method: &str) -> Vec<u8> {
    let mut json = request(id, method);
    json.field_raw("params", "{}");
    json.finish_line()
}

/// An error answer to an agent request (e.g. -32800 for a cancelled one).
pub fn error_answer(raw_id: &str, code: i64, message: &str) -> Vec<u8> {
    let mut json = Json::message();
    json.field_raw("id", raw_id);
    json.key("error");
    json.open_object();
    json.field_raw("code", &code.to_string());
    json.field_str("message", message);
    json.close(b'}');
    json.finish_line()
}

fn request(id: i64, method: &str) -> Json {
    let mut json = Json::message();
    json.field_raw("id", &id.to_string());
    json.field_str("method", method);
    json
}

fn write_directories(json: &mut Json, directories: &[String]) {
    if directories.is_empty() {
        return;
    }
    json.key("additionalDirectories");
    json.open_array();
    for directory in directories {
        json.str_value(directory);
    }
    json.close(b']');
}

/// `"systemPrompt":{"mode":…,"content":[{"type":"text","text":…}]}`, only when given.
fn write_system_prompt(json: &mut Json, system_prompt: Option<&SystemPrompt>) {
    let Some(prompt) = system_prompt else {
        return;
    };
    json.key("systemPrompt");
    json.open_object();
    json.field_str("mode", &prompt.mode);
    json.key("content");
    json.open_array();
    json.open_object();
    json.field_str("type", "text");
    json.field_str("text", &prompt.text);
    json.close(b'}');
    json.close(b']');
    json.close(b'}');
}

fn write_pairs(json: &mut Json, pairs: &[(String, String)]) {
    json.open_array();
    for (name, value) in pairs {
        json.open_object();
        json.field_str("name", name);
        json.field_str("value", value);
        json.close(b'}');
    }
    json.close(b']');
}

fn write_mcp_servers(json: &mut Json, servers: &[McpServer]) {
    json.open_array();
    for server in servers {
        json.open_object();
        match server {
            McpServer::Stdio {
                name,
                command,
                args,
                env,
            } => {
                json.field_str("name", name);
                json.field_str("command", command);
                json.key("args");
                json.open_array();
                for arg in args {
                    json.str_value(arg);
                }
                json.close(b']');
                json.key("env");
                write_pairs(json, env);
            }
            McpServer::Http { name, url, headers } | McpServer::Sse { name, url, headers } => {
                let tag = if matches!(server, McpServer::Http { .. }) {
                    "http"
                } else {
                    "sse"
                };
                json.field_str("type", tag);
                json.field_str("name", name);
                json.field_str("url", url);
                json.key("headers");
                write_pairs(json, headers);
            }
        }
        json.close(b'}');
    }
    json.close(b']');
}

pub fn prompt(
    id: i64,
    session_id: &str,
    content: &[ContentBlock],
    meta: &[(String, String)],
) -> Vec<u8> {
    let mut json = Json::message();
    json.field_raw("id", &id.to_string());
    json.field_str("method", "session/prompt");
    json.key("params");
    json.open_object();
    json.field_str("sessionId", session_id);
    json.key("prompt");
    write_content(&mut json, content);
    if !meta.is_empty() {
        // Strings only, escaped as any other field: the host's trace context, never raw JSON.
        json.key("_meta");
        json.open_object();
        for (key, value) in meta {
            json.field_str(key, value);
        }
        json.close(b'}');
    }
    json.close(b'}');
    json.finish_line()
}

/// `_session/steering` (claude-agent-acp's and codex-acp's extension): the prompt's content,
/// and `idleBehavior: "promptRequired"` so an idle agent refuses rather than starts a turn.
pub fn steer(id: i64, session_id: &str, content: &[ContentBlock]) -> Vec<u8> {
    let mut json = request(id, "_session/steering");
    json.key("params");
    json.open_object();
    json.field_str("sessionId", session_id);
    json.key("prompt");
    write_content(&mut json, content);
    json.key("_meta");
    json.open_object();
    json.key("steering");
    json.open_object();
    json.field_str("idleBehavior", "promptRequired");
    json.close(b'}');
    json.close(b'}');
    json.close(b'}');
    json.finish_line()
}

fn write_content(json: &mut Json, content: &[ContentBlock]) {
    json.open_array();
    for block in content {
        if let ContentBlock::Raw(object) = block {
            json.raw(object);
            continue;
        }
        json.open_object();
        match block {
            ContentBlock::Raw(_) => unreachable!("written above"),
            ContentBlock::Text(text) => {
                json.field_str("type", "text");
                json.field_str("text", text);
            }
            ContentBlock::Image {
                mime_type,
                data,
                uri,
            } => write_media(json, "image", mime_type, data, uri),
            ContentBlock::Audio {
                mime_type,
                data,
                uri,
            } => write_media(json, "audio", mime_type, data, uri),
            ContentBlock::TextResource {
                uri,
                text,
                mime_type,
            } => write_resource(json, uri, "text", text, mime_type),
            ContentBlock::BlobResource {
                uri,
                blob,
                mime_type,
            } => write_resource(json, uri, "blob", blob, mime_type),
            ContentBlock::ResourceLink {
                uri,
                name,
                mime_type,
                title,
                description,
                size,
            } => {
                json.field_str("type", "resource_link");
                json.field_str("uri", uri);
                json.field_str("name", name);
                json.field_optional_str("mimeType", mime_type);
                json.field_optional_str("title", title);
                json.field_optional_str("description", description);
                if let Some(size) = size {
                    json.field_raw("size", &size.to_string());
                }
            }
        }
        json.close(b'}');
    }
    json.close(b']');
}

fn write_media(json: &mut Json, kind: &str, mime_type: &str, data: &str, uri: &str) {
    json.field_str("type", kind);
    json.field_str("mimeType", mime_type);
    json.field_str("data", data);
    json.field_optional_str("uri", uri);
}

fn write_resource(json: &mut Json, uri: &str, body_key: &str, body: &str, mime_type: &str) {
    json.field_str("type", "resource");
    json.key("resource");
    json.open_object();
    json.field_str("uri", uri);
    json.field_str(body_key, body);
    json.field_optional_str("mimeType", mime_type);
    json.close(b'}');
}

/// The answer to a permission request; `raw_id` is the agent's id exactly as it sent it.
pub fn permission_answer(raw_id: &str, outcome: &str, option_id: &str) -> Vec<u8> {
    let mut json = Json::message();
    json.field_raw("id", raw_id);
    json.key("result");
    json.open_object();
    json.key("outcome");
    json.open_object();
    json.field_str("outcome", outcome);
    json.field_optional_str("optionId", option_id);
    json.close(b'}');
    json.close(b'}');
    json.finish_line()
}

/// The answer to any agent request the client does not serve.
pub fn method_not_found(raw_id: &str) -> Vec<u8> {
    let mut json = Json::message();
    json.field_raw("id", raw_id);
    json.field_raw("error", r#"{"code":-32601,"message":"method not found"}"#);
    json.finish_line()
}

/// `$/cancel_request` for one of our requests (the schema's cancellation notification).
pub fn cancel_request(id: i64) -> Vec<u8> {
    let mut json = Json::message();
    json.field_str("method", "$/cancel_request");
    json.key("params");
    json.open_object();
    json.field_raw("requestId", &id.to_string());
    json.close(b'}');
    json.finish_line()
}

pub fn cancel(session_id: &str) -> Vec<u8> {
    let mut json = Json::message();
    json.field_str("method", "session/cancel");
    json.key("params");
    json.open_object();
    json.field_str("sessionId", session_id);
    json.close(b'}');
    json.finish_line()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn initialize_matches_the_reference() {
        assert_eq!(
            text(initialize(0, &ClientInfo::default(), "{}")),
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{},\"clientInfo\":{\"name\":\"acp\",\"title\":\"acp\",\"version\":\"1.0.0\"}}}\n"
        );
    }

    #[test]
    fn structured_prompt_content_matches_the_reference() {
        let content = [
            ContentBlock::Text("hello".into()),
            ContentBlock::TextResource {
                uri: "file:///tmp/context.zig".into(),
                text: "const answer = 42;".into(),
                mime_type: "text/zig".into(),
            },
            ContentBlock::ResourceLink {
                uri: "file:///tmp/notes.md".into(),
                name: "notes.md".into(),
                mime_type: "text/markdown".into(),
                title: "Notes".into(),
                description: "user notes".into(),
                size: Some(12),
            },
        ];
        let mut json = Json::new();
        write_content(&mut json, &content);
        assert_eq!(
            text(json.out),
            "[{\"type\":\"text\",\"text\":\"hello\"},{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///tmp/context.zig\",\"text\":\"const answer = 42;\",\"mimeType\":\"text/zig\"}},{\"type\":\"resource_link\",\"uri\":\"file:///tmp/notes.md\",\"name\":\"notes.md\",\"mimeType\":\"text/markdown\",\"title\":\"Notes\",\"description\":\"user notes\",\"size\":12}]"
        );
    }

    #[test]
    fn empty_optionals_are_left_out() {
        let content = [
            ContentBlock::Image {
                mime_type: "image/png".into(),
                data: "AAAA".into(),
                uri: String::new(),
            },
            ContentBlock::BlobResource {
                uri: "file:///b".into(),
                blob: "QQ==".into(),
                mime_type: String::new(),
            },
            ContentBlock::ResourceLink {
                uri: "u".into(),
                name: "n".into(),
                mime_type: String::new(),
                title: String::new(),
                description: String::new(),
                size: None,
            },
        ];
        let mut json = Json::new();
        write_content(&mut json, &content);
        assert_eq!(
            text(json.out),
            r#"[{"type":"image","mimeType":"image/png","data":"AAAA"},{"type":"resource","resource":{"uri":"file:///b","blob":"QQ=="}},{"type":"resource_link","uri":"u","name":"n"}]"#
        );
    }

    #[test]
    fn mcp_servers_match_the_reference() {
        let mut json = Json::new();
        write_mcp_servers(
            &mut json,
            &[McpServer::Stdio {
                name: "sample".into(),
                command: "/bin/sample-mcp".into(),
                args: vec!["serve".into(), "stdio".into()],
                env: vec![("SAMPLE_SESSION".into(), "session.jsonl".into())],
            }],
        );
        assert_eq!(
            text(json.out),
            "[{\"name\":\"sample\",\"command\":\"/bin/sample-mcp\",\"args\":[\"serve\",\"stdio\"],\"env\":[{\"name\":\"SAMPLE_SESSION\",\"value\":\"session.jsonl\"}]}]"
        );
    }

    #[test]
    fn session_new_and_prompt_lines() {
        assert_eq!(
            text(session_new(1, "/w", &[], &[], None)),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"/w\",\"mcpServers\":[]}}\n"
        );
        let prompt_ = SystemPrompt {
            mode: "append".into(),
            text: "Be \"brief\"\n".into(),
        };
        assert_eq!(
            text(session_new(1, "/w", &[], &[], Some(&prompt_))),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"/w\",\"mcpServers\":[],\"systemPrompt\":{\"mode\":\"append\",\"content\":[{\"type\":\"text\",\"text\":\"Be \\\"brief\\\"\\n\"}]}}}\n"
        );
        assert_eq!(
            text(prompt(2, "s", &[ContentBlock::Text("a\"\n".into())], &[])),
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"s\",\"prompt\":[{\"type\":\"text\",\"text\":\"a\\\"\\n\"}]}}\n"
        );
    }

    #[test]
    fn prompt_meta_is_an_object_of_escaped_strings() {
        let meta = [
            ("traceparent".to_owned(), "00-ab-cd-01".to_owned()),
            ("tracestate".to_owned(), "k=\"v\"}".to_owned()),
        ];
        assert_eq!(
            text(prompt(3, "s", &[], &meta)),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"s\",\"prompt\":[],\"_meta\":{\"traceparent\":\"00-ab-cd-01\",\"tracestate\":\"k=\\\"v\\\"}\"}}}\n"
        );
    }

    #[test]
    fn answers_echo_the_raw_id() {
        assert_eq!(
            text(permission_answer("\"perm-1\"", "selected", "allow")),
            "{\"jsonrpc\":\"2.0\",\"id\":\"perm-1\",\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"allow\"}}}\n"
        );
        assert_eq!(
            text(permission_answer("0", "cancelled", "")),
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"outcome\":{\"outcome\":\"cancelled\"}}}\n"
        );
        assert_eq!(
            text(method_not_found("123456789012345678901234567890")),
            "{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234567890,\"error\":{\"code\":-32601,\"message\":\"method not found\"}}\n"
        );
        assert_eq!(
            text(cancel("s")),
            "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s\"}}\n"
        );
    }

    #[test]
    fn session_control_lines_match_the_design() {
        let dirs = vec!["/x".to_owned()];
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                session_new(2, "/w", &dirs, &[], None),
                r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","additionalDirectories":["/x"],"mcpServers":[]}}"#,
            ),
            (
                session_load(3, "session/load", "s1", "/w", &[], &[], None),
                r#"{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s1","cwd":"/w","mcpServers":[]}}"#,
            ),
            (
                session_load(4, "session/load", "s1", "/w", &dirs, &[], None),
                r#"{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"s1","cwd":"/w","additionalDirectories":["/x"],"mcpServers":[]}}"#,
            ),
            (
                session_load(5, "session/resume", "s1", "/w", &[], &[], None),
                r#"{"jsonrpc":"2.0","id":5,"method":"session/resume","params":{"sessionId":"s1","cwd":"/w","mcpServers":[]}}"#,
            ),
            (
                session_list(6, None, None),
                r#"{"jsonrpc":"2.0","id":6,"method":"session/list","params":{}}"#,
            ),
            (
                session_list(7, Some("/w"), Some("c2")),
                r#"{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"cwd":"/w","cursor":"c2"}}"#,
            ),
            (
                session_call(8, "session/delete", "s1", &[]),
                r#"{"jsonrpc":"2.0","id":8,"method":"session/delete","params":{"sessionId":"s1"}}"#,
            ),
            (
                session_call(9, "session/close", "s1", &[]),
                r#"{"jsonrpc":"2.0","id":9,"method":"session/close","params":{"sessionId":"s1"}}"#,
            ),
            (
                session_call(10, "session/set_mode", "s1", &[("modeId", "code")]),
                r#"{"jsonrpc":"2.0","id":10,"method":"session/set_mode","params":{"sessionId":"s1","modeId":"code"}}"#,
            ),
            (
                set_config_option(11, "s1", "mode", ConfigValue::Select("code"), false),
                r#"{"jsonrpc":"2.0","id":11,"method":"session/set_config_option","params":{"sessionId":"s1","configId":"mode","value":"code"}}"#,
            ),
            (
                set_config_option(12, "s1", "brave", ConfigValue::Boolean(true), false),
                r#"{"jsonrpc":"2.0","id":12,"method":"session/set_config_option","params":{"sessionId":"s1","configId":"brave","type":"boolean","value":true}}"#,
            ),
            (
                session_call(13, "session/set_model", "s1", &[("modelId", "opus")]),
                r#"{"jsonrpc":"2.0","id":13,"method":"session/set_model","params":{"sessionId":"s1","modelId":"opus"}}"#,
            ),
            (
                authenticate(14, "authenticate", "agent-login"),
                r#"{"jsonrpc":"2.0","id":14,"method":"authenticate","params":{"methodId":"agent-login"}}"#,
            ),
            (
                logout(15, "logout"),
                r#"{"jsonrpc":"2.0","id":15,"method":"logout","params":{}}"#,
            ),
            (
                cancel("s1"),
                r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}"#,
            ),
            (
                permission_answer("\"perm-1\"", "cancelled", ""),
                r#"{"jsonrpc":"2.0","id":"perm-1","result":{"outcome":{"outcome":"cancelled"}}}"#,
            ),
            (
                error_answer("\"c0a8\"", -32800, "request cancelled"),
                r#"{"jsonrpc":"2.0","id":"c0a8","error":{"code":-32800,"message":"request cancelled"}}"#,
            ),
        ];
        for (bytes, expected) in cases {
            assert_eq!(text(bytes), format!("{expected}\n"));
        }
    }

    #[test]
    fn http_and_sse_servers_are_tagged() {
        let mut json = Json::new();
        let headers = vec![("Authorization".to_owned(), "x".to_owned())];
        write_mcp_servers(
            &mut json,
            &[
                McpServer::Http {
                    name: "h".into(),
                    url: "http://127.0.0.1/".into(),
                    headers: headers.clone(),
                },
                McpServer::Sse {
                    name: "s".into(),
                    url: "http://127.0.0.1/e".into(),
                    headers: vec![],
                },
            ],
        );
        assert_eq!(
            text(json.out),
            r#"[{"type":"http","name":"h","url":"http://127.0.0.1/","headers":[{"name":"Authorization","value":"x"}]},{"type":"sse","name":"s","url":"http://127.0.0.1/e","headers":[]}]"#
        );
    }

    #[test]
    fn raw_blocks_are_written_as_given() {
        let mut json = Json::new();
        write_content(
            &mut json,
            &[
                ContentBlock::Raw(r#"{"type":"text","text":"x","_meta":{}}"#.into()),
                ContentBlock::Text("y".into()),
            ],
        );
        assert_eq!(
            text(json.out),
            r#"[{"type":"text","text":"x","_meta":{}},{"type":"text","text":"y"}]"#
        );
    }
}

//! Host requests (design/host.md §1–4): what the agent asks of the client's files and
//! terminals, the checks that need no OS (capability, params, absolute path), the answers'
//! bytes and the activity record. The operations themselves are the OS side's (`acp-os`).

use serde_json::Value;

/// A host request's method; the values are the wire names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientMethod {
    ReadTextFile,
    WriteTextFile,
    TerminalCreate,
    TerminalOutput,
    TerminalWaitForExit,
    TerminalKill,
    TerminalRelease,
}

impl ClientMethod {
    pub fn from_wire(method: &str) -> Option<ClientMethod> {
        Some(match method {
            "fs/read_text_file" => ClientMethod::ReadTextFile,
            "fs/write_text_file" => ClientMethod::WriteTextFile,
            "terminal/create" => ClientMethod::TerminalCreate,
            "terminal/output" => ClientMethod::TerminalOutput,
            "terminal/wait_for_exit" => ClientMethod::TerminalWaitForExit,
            "terminal/kill" => ClientMethod::TerminalKill,
            "terminal/release" => ClientMethod::TerminalRelease,
            _ => return None,
        })
    }

    pub fn wire(self) -> &'static str {
        match self {
            ClientMethod::ReadTextFile => "fs/read_text_file",
            ClientMethod::WriteTextFile => "fs/write_text_file",
            ClientMethod::TerminalCreate => "terminal/create",
            ClientMethod::TerminalOutput => "terminal/output",
            ClientMethod::TerminalWaitForExit => "terminal/wait_for_exit",
            ClientMethod::TerminalKill => "terminal/kill",
            ClientMethod::TerminalRelease => "terminal/release",
        }
    }

    /// The capability that must be advertised for it, as named in the activity's reason.
    pub fn capability(self) -> &'static str {
        match self {
            ClientMethod::ReadTextFile => "fs.readTextFile",
            ClientMethod::WriteTextFile => "fs.writeTextFile",
            _ => "terminal",
        }
    }
}

/// What the client advertises in `initialize` (`None` in the config: `{}`, wave 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCapabilities {
    pub read_text_file: bool,
    pub write_text_file: bool,
    pub terminal: bool,
}

impl HostCapabilities {
    pub fn advertises(caps: Option<&HostCapabilities>, method: ClientMethod) -> bool {
        caps.is_some_and(|c| match method {
            ClientMethod::ReadTextFile => c.read_text_file,
            ClientMethod::WriteTextFile => c.write_text_file,
            _ => c.terminal,
        })
    }

    /// The `clientCapabilities` object, keys in the docs' order.
    pub fn json(caps: Option<&HostCapabilities>) -> String {
        match caps {
            None => "{}".into(),
            Some(c) => format!(
                r#"{{"fs":{{"readTextFile":{},"writeTextFile":{}}},"terminal":{}}}"#,
                c.read_text_file, c.write_text_file, c.terminal
            ),
        }
    }
}

/// What the client opts into beyond the host side (each advertised only when on, because an
/// agent that sees it changes what it sends): `session.notices` (`notice` updates instead of
/// message chunks), `session.compaction` (compaction updates), `auth.terminal` (terminal login
/// methods in `authMethods`), `elicitation` (form and url; set from whether an observer
/// answers them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptIns {
    pub notices: bool,
    pub compaction: bool,
    pub auth_terminal: bool,
    pub elicitation: bool,
}

/// The whole `clientCapabilities` object: the host's (`HostCapabilities::json`), then
/// `"session":{"notices":{},"compaction":{}}`, `"auth":{"terminal":true}` and
/// `"elicitation":{"form":{},"url":{}}`, each only when opted into.
pub fn client_capabilities_json(caps: Option<&HostCapabilities>, opt_ins: OptIns) -> String {
    let host = HostCapabilities::json(caps);
    let inner = host
        .strip_prefix('{')
        .and_then(|h| h.strip_suffix('}'))
        .unwrap_or("");
    let mut members: Vec<String> = Vec::with_capacity(4);
    if !inner.is_empty() {
        members.push(inner.to_owned());
    }
    let session: Vec<&str> = [
        (opt_ins.notices, r#""notices":{}"#),
        (opt_ins.compaction, r#""compaction":{}"#),
    ]
    .into_iter()
    .filter_map(|(on, key)| on.then_some(key))
    .collect();
    if !session.is_empty() {
        members.push(format!(r#""session":{{{}}}"#, session.join(",")));
    }
    if opt_ins.auth_terminal {
        members.push(r#""auth":{"terminal":true}"#.to_owned());
    }
    if opt_ins.elicitation {
        members.push(r#""elicitation":{"form":{},"url":{}}"#.to_owned());
    }
    format!("{{{}}}", members.join(","))
}

/// v2's `capabilities`: only what v2 has (no `fs`/`terminal`, no session opt-ins; terminal
/// authentication is an object there).
pub fn client_capabilities_v2_json(opt_ins: OptIns) -> String {
    let mut members: Vec<&str> = Vec::with_capacity(2);
    if opt_ins.auth_terminal {
        members.push(r#""auth":{"terminal":{}}"#);
    }
    if opt_ins.elicitation {
        members.push(r#""elicitation":{"form":{},"url":{}}"#);
    }
    format!("{{{}}}", members.join(","))
}

/// A checked host request: what the OS side is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostOp {
    Read {
        path: String,
        /// 1-based; absent, null and 0 read as 1.
        line: u32,
        limit: Option<u32>,
    },
    Write {
        path: String,
        content: String,
    },
    TerminalCreate {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
        output_byte_limit: Option<u64>,
    },
    /// output, wait_for_exit, kill, release
    Terminal {
        terminal_id: String,
    },
}

/// A failed host request: the JSON-RPC error and how the activity records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostError {
    pub code: i64,
    pub message: String,
    /// Raw JSON of `error.data`, when there is one.
    pub data: Option<String>,
    /// Refused by steps 1–3 (capability, params, confinement): the activity's `allowed` False.
    pub refused: bool,
    /// The activity's reason when refused (else none).
    pub reason: String,
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a str always encodes")
}

impl HostError {
    pub fn method_not_found(method: ClientMethod) -> HostError {
        HostError {
            code: -32601,
            message: "method not found".into(),
            data: None,
            refused: true,
            reason: format!("capability not advertised: {}", method.capability()),
        }
    }

    /// `-32602` refusals: `message` with `data: {key: value}`.
    pub fn refused(message: &str, key: &str, value: &str) -> HostError {
        HostError {
            code: -32602,
            message: message.into(),
            data: Some(format!("{{{}:{}}}", quoted(key), quoted(value))),
            refused: true,
            reason: message.into(),
        }
    }

    fn invalid(field: &str, reason: &str) -> HostError {
        HostError {
            code: -32602,
            message: "invalid params".into(),
            data: Some(format!(
                r#"{{"field":{},"reason":{}}}"#,
                quoted(field),
                quoted(reason)
            )),
            refused: true,
            reason: format!("invalid params: {field}: {reason}"),
        }
    }

    pub fn outside(path: &str) -> HostError {
        HostError::refused("path outside the allowed roots", "path", path)
    }

    /// An operation that ran and failed (allowed, no reason): `data` as `{"path": …}` when set.
    pub fn failed(code: i64, message: &str, path: Option<&str>) -> HostError {
        HostError {
            code,
            message: message.into(),
            data: path.map(|p| format!(r#"{{"path":{}}}"#, quoted(p))),
            refused: false,
            reason: String::new(),
        }
    }

    pub fn not_found(path: &str) -> HostError {
        HostError::failed(-32002, "Resource not found", Some(path))
    }
}

/// A successful host answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostOk {
    Content(String),
    Empty,
    TerminalCreated(String),
    Output {
        output: String,
        truncated: bool,
        exit: Option<ExitStatus>,
    },
    Exit(ExitStatus),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
}

impl ExitStatus {
    fn json(&self) -> String {
        format!(
            r#"{{"exitCode":{},"signal":{}}}"#,
            self.exit_code
                .map_or_else(|| "null".to_owned(), |c| c.to_string()),
            self.signal
                .as_deref()
                .map_or_else(|| "null".to_owned(), quoted)
        )
    }
}

/// The answer line to host request `raw_id`.
pub fn answer(raw_id: &str, result: &Result<HostOk, HostError>) -> Vec<u8> {
    let body = match result {
        Ok(HostOk::Content(text)) => format!(r#""result":{{"content":{}}}"#, quoted(text)),
        Ok(HostOk::Empty) => r#""result":{}"#.to_owned(),
        Ok(HostOk::TerminalCreated(id)) => format!(r#""result":{{"terminalId":{}}}"#, quoted(id)),
        Ok(HostOk::Output {
            output,
            truncated,
            exit,
        }) => {
            let exit = exit
                .as_ref()
                .map_or_else(String::new, |e| format!(r#","exitStatus":{}"#, e.json()));
            format!(
                r#""result":{{"output":{},"truncated":{truncated}{exit}}}"#,
                quoted(output)
            )
        }
        Ok(HostOk::Exit(status)) => format!(r#""result":{}"#, status.json()),
        Err(error) => {
            let data = error
                .data
                .as_deref()
                .map_or_else(String::new, |d| format!(r#","data":{d}"#));
            format!(
                r#""error":{{"code":{},"message":{}{data}}}"#,
                error.code,
                quoted(&error.message)
            )
        }
    };
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{raw_id},{body}}}\n").into_bytes()
}

/// What `observer.on_activity` records of one host request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    pub method: &'static str,
    pub allowed: bool,
    pub path: Option<String>,
    pub command: Option<String>,
    pub terminal_id: Option<String>,
    pub reason: Option<String>,
    pub session_id: String,
    pub error_code: Option<i64>,
}

fn string_field<'v>(params: &'v Value, key: &str) -> Result<&'v str, HostError> {
    match params.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(HostError::invalid(&format!("$.{key}"), "expected a string")),
        None => Err(HostError::invalid(&format!("$.{key}"), "missing")),
    }
}

fn optional_u32(params: &Value, key: &str) -> Result<Option<u32>, HostError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                HostError::invalid(&format!("$.{key}"), "expected an integer in 0..4294967295")
            }),
    }
}

/// The keys host requests read; one given twice makes the request ambiguous (parsers
/// disagree on which value wins), so it is refused, as duplicate keys the client reads are in
/// every other message (docs/reliability.md).
const READ_KEYS: [&str; 11] = [
    "sessionId",
    "path",
    "line",
    "limit",
    "content",
    "command",
    "args",
    "env",
    "cwd",
    "outputByteLimit",
    "terminalId",
];

/// A JSON object's members in order, values left unparsed.
struct Members;

impl<'de> serde::de::Visitor<'de> for Members {
    type Value = Vec<(String, &'de serde_json::value::RawValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry()? {
            members.push(member);
        }
        Ok(members)
    }
}

#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    params: Option<&'a serde_json::value::RawValue>,
}

/// Why a member's value could not be read: a lone surrogate escape is named as such.
fn unreadable(raw: &str, error: &serde_json::Error) -> String {
    let text = error.to_string();
    let surrogate = raw.as_bytes().windows(6).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && std::str::from_utf8(&w[2..])
                .ok()
                .and_then(|hex| u16::from_str_radix(hex, 16).ok())
                .is_some_and(|unit| (0xD800..=0xDFFF).contains(&unit))
    });
    if surrogate || text.contains("surrogate") {
        "not valid Unicode: a \\uD800-\\uDFFF escape without its pair (a lone surrogate) cannot name a file or be written to one".into()
    } else {
        let at = text
            .rfind(" at line ")
            .map_or(text.as_str(), |at| &text[..at]);
        format!("not valid JSON here ({at})")
    }
}

/// The params of a host request line, as a value of the members that could be read, and the
/// first reason to refuse it: a key the request reads given twice, or a member whose value is
/// not valid (a lone surrogate in a path).
pub fn params_of(line: &str) -> (Option<Value>, Option<HostError>) {
    use serde::Deserializer;
    let raw = match serde_json::from_str::<Envelope<'_>>(line) {
        Ok(Envelope { params: Some(raw) }) => raw,
        _ => return (None, None),
    };
    let mut reader = serde_json::Deserializer::from_str(raw.get());
    let Ok(members) = (&mut reader).deserialize_map(Members) else {
        // Not an object (or keys that cannot be read): as a value, or absent.
        return (serde_json::from_str(raw.get()).ok(), None);
    };
    let mut object = serde_json::Map::new();
    let mut refused = None;
    for (key, raw) in members {
        if object.contains_key(&key) && READ_KEYS.contains(&key.as_str()) {
            refused.get_or_insert_with(|| {
                HostError::invalid(
                    &format!("$.{key}"),
                    "given more than once (an ambiguous request is refused)",
                )
            });
        }
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(value) => {
                object.insert(key, value);
            }
            Err(error) => {
                refused.get_or_insert_with(|| {
                    HostError::invalid(&format!("$.{key}"), &unreadable(raw.get(), &error))
                });
            }
        }
    }
    (Some(Value::Object(object)), refused)
}

/// `sessionId` of a request's params, when it is a string (for the activity of a refusal).
pub fn session_of(params: Option<&Value>) -> String {
    params
        .and_then(|p| p.get("sessionId"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// Step 2 (params) for `method`, given its `params` (any JSON; unknown keys allowed).
pub fn decode(method: ClientMethod, params: Option<&Value>) -> Result<HostOp, HostError> {
    let params = match params {
        Some(p @ Value::Object(_)) => p,
        _ => return Err(HostError::invalid("$", "expected an object")),
    };
    string_field(params, "sessionId")?;
    let absolute = |path: &str| Ok::<String, HostError>(path.to_owned());
    Ok(match method {
        ClientMethod::ReadTextFile => {
            let path = string_field(params, "path")?;
            let line = optional_u32(params, "line")?.unwrap_or(1).max(1);
            let limit = optional_u32(params, "limit")?;
            HostOp::Read {
                path: absolute(path)?,
                line,
                limit,
            }
        }
        ClientMethod::WriteTextFile => {
            let path = string_field(params, "path")?;
            let content = string_field(params, "content")?.to_owned();
            HostOp::Write {
                path: absolute(path)?,
                content,
            }
        }
        ClientMethod::TerminalCreate => {
            let command = string_field(params, "command")?.to_owned();
            let args = match params.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            HostError::invalid(&format!("$.args[{i}]"), "expected a string")
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(HostError::invalid("$.args", "expected an array")),
            };
            let env = match params.get("env") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let field = |key: &str| {
                            item.get(key).and_then(Value::as_str).ok_or_else(|| {
                                HostError::invalid(
                                    &format!("$.env[{i}].{key}"),
                                    "expected a string",
                                )
                            })
                        };
                        Ok((field("name")?.to_owned(), field("value")?.to_owned()))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(HostError::invalid("$.env", "expected an array")),
            };
            let cwd = match params.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(cwd)) => Some(absolute(cwd)?),
                Some(_) => return Err(HostError::invalid("$.cwd", "expected a string")),
            };
            let output_byte_limit = match params.get("outputByteLimit") {
                None | Some(Value::Null) => None,
                Some(value) => Some(value.as_u64().ok_or_else(|| {
                    HostError::invalid("$.outputByteLimit", "expected a non-negative integer")
                })?),
            };
            HostOp::TerminalCreate {
                command,
                args,
                env,
                cwd,
                output_byte_limit,
            }
        }
        _ => HostOp::Terminal {
            terminal_id: string_field(params, "terminalId")?.to_owned(),
        },
    })
}

impl HostOp {
    /// The path an fs request names, or the cwd a terminal asks for.
    pub fn path(&self) -> Option<&str> {
        match self {
            HostOp::Read { path, .. } | HostOp::Write { path, .. } => Some(path),
            HostOp::TerminalCreate { cwd, .. } => cwd.as_deref(),
            HostOp::Terminal { .. } => None,
        }
    }

    /// Step 2's last check: a path (or a terminal's cwd) must be absolute; nothing is touched.
    pub fn check_absolute(&self) -> Result<(), HostError> {
        match self.path() {
            Some(path) if !path.starts_with('/') => {
                Err(HostError::refused("path is not absolute", "path", path))
            }
            _ => Ok(()),
        }
    }
}

/// `shlex.join([command, *args])`: each word quoted only when it needs it.
pub fn shell_join(command: &str, args: &[String]) -> String {
    let quote = |word: &str| {
        let safe = !word.is_empty()
            && word
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b));
        if safe {
            word.to_owned()
        } else {
            format!("'{}'", word.replace('\'', "'\"'\"'"))
        }
    };
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap().trim_end().to_owned()
    }

    #[test]
    fn answers_match_the_contract_bytes() {
        assert_eq!(
            text(answer("3", &Ok(HostOk::Content("2\n3\n".into())))),
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":"2\n3\n"}}"#
        );
        assert_eq!(
            text(answer("4", &Ok(HostOk::Empty))),
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#
        );
        assert_eq!(
            text(answer(
                "5",
                &Err(HostError::method_not_found(ClientMethod::ReadTextFile))
            )),
            r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found"}}"#
        );
        assert_eq!(
            text(answer("6", &Err(HostError::outside("/etc/hostname")))),
            r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"path outside the allowed roots","data":{"path":"/etc/hostname"}}}"#
        );
        let bad_line = decode(
            ClientMethod::ReadTextFile,
            Some(&serde_json::json!({"sessionId": "s", "path": "/w/a", "line": -1})),
        );
        assert_eq!(
            text(answer("7", &bad_line.map(|_| HostOk::Empty))),
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"invalid params","data":{"field":"$.line","reason":"expected an integer in 0..4294967295"}}}"#
        );
        assert_eq!(
            text(answer("8", &Err(HostError::not_found("/w/none.txt")))),
            r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32002,"message":"Resource not found","data":{"path":"/w/none.txt"}}}"#
        );
        let exit = ExitStatus {
            exit_code: Some(0),
            signal: None,
        };
        assert_eq!(
            text(answer(
                "\"t\"",
                &Ok(HostOk::Output {
                    output: "hi\n".into(),
                    truncated: false,
                    exit: Some(exit)
                })
            )),
            r#"{"jsonrpc":"2.0","id":"t","result":{"output":"hi\n","truncated":false,"exitStatus":{"exitCode":0,"signal":null}}}"#
        );
    }

    #[test]
    fn capabilities_are_written_in_the_docs_order() {
        assert_eq!(HostCapabilities::json(None), "{}");
        let caps = HostCapabilities {
            read_text_file: true,
            write_text_file: false,
            terminal: true,
        };
        assert_eq!(
            HostCapabilities::json(Some(&caps)),
            r#"{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true}"#
        );
    }

    #[test]
    fn opt_ins_are_advertised_only_when_on() {
        let off = OptIns::default();
        assert_eq!(client_capabilities_json(None, off), "{}");
        let caps = HostCapabilities {
            read_text_file: true,
            write_text_file: true,
            terminal: false,
        };
        assert_eq!(
            client_capabilities_json(Some(&caps), off),
            HostCapabilities::json(Some(&caps))
        );
        let notices = OptIns {
            notices: true,
            ..off
        };
        assert_eq!(
            client_capabilities_json(Some(&caps), notices),
            r#"{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":false,"session":{"notices":{}}}"#
        );
        let all = OptIns {
            notices: true,
            compaction: true,
            auth_terminal: true,
            elicitation: true,
        };
        assert_eq!(
            client_capabilities_json(None, all),
            r#"{"session":{"notices":{},"compaction":{}},"auth":{"terminal":true},"elicitation":{"form":{},"url":{}}}"#
        );
        let login = OptIns {
            auth_terminal: true,
            ..off
        };
        assert_eq!(
            client_capabilities_json(None, login),
            r#"{"auth":{"terminal":true}}"#
        );
        for json in [
            client_capabilities_json(None, all),
            client_capabilities_json(Some(&caps), all),
            client_capabilities_json(Some(&caps), login),
        ] {
            serde_json::from_str::<Value>(&json).expect("valid JSON");
        }
    }

    #[test]
    fn params_are_checked_in_order() {
        let read = |v: Value| decode(ClientMethod::ReadTextFile, Some(&v));
        assert_eq!(
            read(serde_json::json!({"sessionId": "s", "path": "w/a"}))
                .unwrap()
                .check_absolute()
                .unwrap_err()
                .message,
            "path is not absolute"
        );
        assert_eq!(
            read(serde_json::json!({"sessionId": 1, "path": "/a"}))
                .unwrap_err()
                .reason,
            "invalid params: $.sessionId: expected a string"
        );
        assert_eq!(
            read(serde_json::json!({"sessionId": "s", "path": "/a", "line": 0, "x": 1})).unwrap(),
            HostOp::Read {
                path: "/a".into(),
                line: 1,
                limit: None
            }
        );
    }

    #[test]
    fn duplicate_read_keys_and_lone_surrogates_are_named() {
        let line = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{params}}}"#)
        };
        let (_, refused) = params_of(&line(
            r#"{"sessionId":"s","path":"/w/a","path":"/etc/shadow"}"#,
        ));
        assert_eq!(
            refused.unwrap().reason,
            "invalid params: $.path: given more than once (an ambiguous request is refused)"
        );
        let (value, refused) = params_of(&line(r#"{"sessionId":"s","path":"/w/\ud800"}"#));
        let reason = refused.unwrap().reason;
        assert!(
            reason.starts_with("invalid params: $.path: not valid Unicode"),
            "{reason}"
        );
        // The activity still names the session.
        assert_eq!(session_of(value.as_ref()), "s");
        // A key the request does not read may repeat (as `_meta` elsewhere).
        let (value, refused) = params_of(&line(r#"{"sessionId":"s","path":"/w/a","x":1,"x":2}"#));
        assert!(refused.is_none());
        assert_eq!(value.unwrap()["path"], "/w/a");
        assert!(params_of(&line("[1]")).1.is_none());
    }

    #[test]
    fn commands_are_joined_as_shlex_does() {
        assert_eq!(
            shell_join("ls", &["-l".into(), "a b".into(), "it's".into(), "".into()]),
            r#"ls -l 'a b' 'it'"'"'s' ''"#
        );
    }
}

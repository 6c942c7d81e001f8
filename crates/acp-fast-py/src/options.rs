//! Reading the client's options from the Python option object (`acp_fast._client._CoreOptions`),
//! once, with every limit validated here so the messages live in one place.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyList, PyTuple};

use std::ffi::OsString;
use std::time::Duration;

use acp_client::host::HostConfig;
use acp_client::settings;
use acp_os::process::StderrMode;
use acp_proto::encode::{ClientInfo, ContentBlock, McpServer};
use acp_proto::error::AcpError;
use acp_proto::host::{HostCapabilities, OptIns};
use acp_proto::limits::{Config, PermissionPolicy, Protocol, TransferLimits};

/// A positive integer limit, with the message every binding shares.
pub(crate) fn positive(
    value: &Bound<'_, PyAny>,
    name: &str,
    maximum: u64,
) -> Result<u64, AcpError> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        let type_name = value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(AcpError::InvalidLimits(format!(
            "{name} must be an int (got {type_name})"
        )));
    }
    if value.lt(1).unwrap_or(true) {
        return Err(AcpError::InvalidLimits(format!(
            "{name} must be above zero (got {value})"
        )));
    }
    match value.extract::<u64>() {
        Ok(n) if n <= maximum => Ok(n),
        _ => Err(AcpError::InvalidLimits(format!(
            "{name} must be at most {maximum} (got {value})"
        ))),
    }
}

fn attr<'py, T: FromPyObjectOwned<'py>>(options: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    options.getattr(name)?.extract::<T>().map_err(Into::into)
}

/// What spawning the agent reads from the option object: str through the file-system
/// encoding (surrogate escapes too), as subprocess does.
#[derive(FromPyObject)]
pub(crate) struct Spawn {
    #[pyo3(attribute)]
    pub command: OsString,
    #[pyo3(attribute)]
    pub args: Vec<OsString>,
    #[pyo3(attribute)]
    pub cwd: Option<OsString>,
    #[pyo3(attribute)]
    pub env: Option<Vec<(OsString, OsString)>>,
}

fn truthy(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    value.is_truthy()
}

/// The observer's callbacks as the option object gives them (None: not given).
#[derive(FromPyObject)]
pub(crate) struct Observer {
    #[pyo3(attribute)]
    pub on_update: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub permission_preview: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub permission_commit: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub on_sent: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub on_received: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub fold: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub on_activity: Option<Py<PyAny>>,
    #[pyo3(attribute)]
    pub elicitation_preview: Option<Py<PyAny>>,
    #[pyo3(attribute, from_py_with = truthy)]
    pub durable: bool,
}

pub(crate) struct Options {
    pub config: Config,
    pub message_bytes: u64,
    pub stderr: StderrMode,
}

fn pairs(list: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    list.try_iter()?
        .map(|item| item?.extract::<(String, String)>())
        .collect()
}

/// `("stdio", name, command, args, env)`, `("http"|"sse", name, url, headers)`.
pub(crate) fn mcp_server(item: &Bound<'_, PyAny>) -> PyResult<McpServer> {
    let tuple = item.cast::<PyTuple>()?;
    let tag: String = tuple.get_item(0)?.extract()?;
    let name: String = tuple.get_item(1)?.extract()?;
    Ok(match tag.as_str() {
        "stdio" => McpServer::Stdio {
            name,
            command: tuple.get_item(2)?.extract()?,
            args: tuple.get_item(3)?.extract()?,
            env: pairs(&tuple.get_item(4)?)?,
        },
        "http" | "sse" => {
            let url: String = tuple.get_item(2)?.extract()?;
            let headers = pairs(&tuple.get_item(3)?)?;
            if tag == "http" {
                McpServer::Http { name, url, headers }
            } else {
                McpServer::Sse { name, url, headers }
            }
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "unknown MCP server kind {other:?}"
            )))
        }
    })
}

pub(crate) fn mcp_servers(list: &Bound<'_, PyAny>) -> PyResult<Vec<McpServer>> {
    list.try_iter()?.map(|item| mcp_server(&item?)).collect()
}

pub(crate) fn read(
    py: Python<'_>,
    options: &Bound<'_, PyAny>,
) -> PyResult<Result<Options, AcpError>> {
    let _ = py;
    let u64_max = u64::MAX;
    let usize_max = usize::MAX as u64;
    let limits = options.getattr("transfer_limits")?;
    let limit = |name: &str, maximum: u64| -> PyResult<Result<u64, AcpError>> {
        Ok(positive(
            &limits.getattr(name)?,
            &format!("transfer_limits.{name}"),
            maximum,
        ))
    };
    macro_rules! take {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            }
        };
    }
    let request_bytes = take!(limit("request_bytes", usize_max)?);
    let response_bytes = take!(limit("response_bytes", usize_max)?);
    let update_bytes = take!(limit("update_bytes", usize_max)?);
    let update_count = take!(limit("update_count", u64_max)?);
    let response_segment_count = take!(limit("response_segment_count", usize_max)?);
    let epoch = options.getattr("transport_epoch")?;
    let transport_epoch = match positive(&epoch, "transport_epoch", u64_max) {
        Ok(v) => v,
        Err(_) => {
            return Ok(Err(AcpError::InvalidLimits(format!(
                "transport_epoch must be a nonzero u64 int (got {})",
                epoch.repr()?
            ))))
        }
    };
    let message_bytes = options.getattr("message_bytes")?;
    if message_bytes.is_instance_of::<PyBool>() || !message_bytes.is_instance_of::<PyInt>() {
        return Ok(Err(AcpError::InvalidLimits(
            "reader_limits.message_bytes must be an int".into(),
        )));
    }
    if message_bytes.lt(1)? {
        return Ok(Err(AcpError::InvalidLimits(format!(
            "reader_limits.message_bytes must be above zero (got {message_bytes})"
        ))));
    }
    // Too large to allocate is a capacity error, reported before anything starts.
    let message_bytes: u64 = message_bytes.extract::<u64>().unwrap_or(u64::MAX);
    let cancel_grace_ms = take!(settings::cancel_grace_ms(attr(options, "cancel_grace")?));
    let stderr_mode: String = attr(options, "stderr")?;
    let tail = options.getattr("stderr_tail_bytes")?;
    let stderr = match stderr_mode.as_str() {
        "discard" => StderrMode::Discard,
        "inherit" => StderrMode::Inherit,
        "tail" => StderrMode::Tail(take!(positive(&tail, "stderr_tail_bytes", usize_max)) as usize),
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "stderr must be \"discard\", \"inherit\" or \"tail\" (got {other:?})"
            )))
        }
    };
    if stderr_mode != "tail" {
        take!(positive(&tail, "stderr_tail_bytes", usize_max));
    }
    let (name, title, version): (String, String, String) = attr(options, "client_info")?;
    let policy = options.getattr("permission_policy")?;
    let capabilities = capability_config(options)?;
    // Read by name with a default, so an options object from before v2 still reads as v1.
    let protocol_name: String = match options.getattr("protocol") {
        Ok(value) => value.extract().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(
                "protocol must be a str: \"v1\", \"v2\" or \"auto\"",
            )
        })?,
        Err(_) => "v1".to_owned(),
    };
    let Some(protocol) = Protocol::from_name(&protocol_name) else {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "protocol must be \"v1\", \"v2\" or \"auto\" (got {protocol_name:?})"
        )));
    };
    let config = Config {
        limits: TransferLimits {
            request_bytes: request_bytes as usize,
            response_bytes: response_bytes as usize,
            update_bytes: update_bytes as usize,
            update_count,
            response_segment_count: response_segment_count as usize,
        },
        transport_epoch,
        client_info: ClientInfo {
            name,
            title,
            version,
        },
        mcp_servers: mcp_servers(&options.getattr("mcp_servers")?)?,
        policy: read_policy(&policy)?,
        agent_id: attr(options, "agent_id")?,
        cancel_grace_ms,
        // The host joins the chunk strings it already made for the observer, once.
        collect_reply: false,
        capabilities: read_capabilities(capabilities.as_ref()),
        opt_ins: read_opt_ins(capabilities.as_ref()),
        protocol,
    };
    Ok(Ok(Options {
        config,
        message_bytes,
        stderr,
    }))
}

/// The policy, compiled by `policy::read_policy` (wave 1's two lists and host.md's rules).
pub(crate) fn read_policy(policy: &Bound<'_, PyAny>) -> PyResult<PermissionPolicy> {
    crate::policy::read_policy(policy)
}

/// A call's timeout in seconds: None, or a positive finite number.
pub(crate) fn deadline(seconds: Option<f64>, name: &str) -> PyResult<Option<Duration>> {
    settings::timeout(seconds, name).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// `ClientCapabilityConfig` (`acp_fast._types`), read by attribute name (the facade checked
/// its types and values when it was made).
#[derive(FromPyObject)]
struct CapabilityConfig {
    read_text_file: bool,
    write_text_file: bool,
    terminal: bool,
    /// The realpaths of the additional directories.
    additional_directories: Vec<String>,
    allow_any_path: bool,
    terminal_output_bytes: u64,
    read_missing_as_empty: bool,
    terminal_shell: Option<String>,
    max_terminals: usize,
    /// The additional directories as given (a symlinked one answers in both forms).
    #[pyo3(attribute("_given_directories"))]
    given_directories: Vec<String>,
    notices: bool,
    compaction: bool,
    auth_terminal: bool,
}

fn capability_config(options: &Bound<'_, PyAny>) -> PyResult<Option<CapabilityConfig>> {
    options.getattr("capabilities")?.extract()
}

/// What `initialize` advertises (`None`: `{}`, wave 1).
fn read_capabilities(config: Option<&CapabilityConfig>) -> Option<HostCapabilities> {
    config.map(|c| HostCapabilities {
        read_text_file: c.read_text_file,
        write_text_file: c.write_text_file,
        terminal: c.terminal,
    })
}

/// What is opted into beyond the host side (elicitation is set from the observer, later).
fn read_opt_ins(config: Option<&CapabilityConfig>) -> OptIns {
    config
        .map(|c| OptIns {
            notices: c.notices,
            compaction: c.compaction,
            auth_terminal: c.auth_terminal,
            elicitation: false,
        })
        .unwrap_or_default()
}

/// The host's settings (default: no files or terminals served).
pub(crate) fn host_config(options: &Bound<'_, PyAny>) -> PyResult<HostConfig> {
    let Some(config) = capability_config(options)? else {
        return Ok(HostConfig::default());
    };
    let env: Option<Vec<(String, String)>> = options.getattr("env")?.extract()?;
    Ok(HostConfig {
        additional_directories: settings::paired_directories(
            config.given_directories,
            config.additional_directories,
        ),
        allow_any_path: config.allow_any_path,
        terminal_output_bytes: config.terminal_output_bytes,
        read_missing_as_empty: config.read_missing_as_empty,
        terminal_shell: config.terminal_shell,
        max_terminals: config.max_terminals,
        env: settings::host_env(env),
    })
}

/// Content blocks as tagged tuples (the facade's `_content_tuple`), or `("raw", json)`.
pub(crate) fn content(blocks: &Bound<'_, PyList>) -> PyResult<Vec<ContentBlock>> {
    blocks.iter().map(|item| content_block(&item)).collect()
}

fn content_block(item: &Bound<'_, PyAny>) -> PyResult<ContentBlock> {
    let tuple = item.cast::<PyTuple>()?;
    let tag: String = tuple.get_item(0)?.extract()?;
    let s = |i: usize| -> PyResult<String> { tuple.get_item(i)?.extract() };
    Ok(match tag.as_str() {
        "text" => ContentBlock::Text(s(1)?),
        "image" => ContentBlock::Image {
            mime_type: s(1)?,
            data: s(2)?,
            uri: s(3)?,
        },
        "audio" => ContentBlock::Audio {
            mime_type: s(1)?,
            data: s(2)?,
            uri: s(3)?,
        },
        "resource_text" => ContentBlock::TextResource {
            uri: s(1)?,
            text: s(2)?,
            mime_type: s(3)?,
        },
        "resource_blob" => ContentBlock::BlobResource {
            uri: s(1)?,
            blob: s(2)?,
            mime_type: s(3)?,
        },
        "resource_link" => ContentBlock::ResourceLink {
            uri: s(1)?,
            name: s(2)?,
            mime_type: s(3)?,
            title: s(4)?,
            description: s(5)?,
            size: tuple.get_item(6)?.extract()?,
        },
        "raw" => ContentBlock::Raw(s(1)?),
        other => {
            return Err(PyTypeError::new_err(format!(
                "unknown content block {other:?}"
            )))
        }
    })
}

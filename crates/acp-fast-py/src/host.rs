//! The host side of the binding (design/host.md): the permission policy compiled from its
//! Python object, the title patterns evaluated under the GIL, the observer's answer read, and
//! host requests served (files through `acp_os::fs`, then `on_activity`, then the answer).

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use acp_os::fs::{self, Roots};
use acp_proto::error::AcpError;
use acp_proto::host::{HostCapabilities, HostError, HostOk, HostOp};
use acp_proto::limits::PermissionPolicy;
use acp_proto::HostId;

use crate::client::CoreClient;
use crate::driver::Driven;
use crate::errors::CallError;
use acp_proto::permission::{ObserverAnswer, Selection};
use acp_proto::rules::{Decision, Matcher, Rule, TitleMatcher, TitleRule};

/// The policy's `re.Pattern` rules (their bound `search`), asked only when a tier reaches them.
struct PyPatterns {
    search: Vec<Py<PyAny>>,
}

impl TitleMatcher for PyPatterns {
    fn search(&self, pattern: usize, title: &str) -> bool {
        Python::attach(|py| {
            self.search[pattern]
                .call1(py, (title,))
                .is_ok_and(|found| !found.is_none(py))
        })
    }

    fn casefold(&self, title: &str) -> String {
        Python::attach(|py| {
            PyString::new(py, title)
                .call_method0("casefold")
                .and_then(|folded| folded.extract::<String>())
                .unwrap_or_else(|_| title.to_lowercase())
        })
    }
}

fn strings(policy: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    policy
        .getattr(name)?
        .try_iter()?
        .map(|item| item?.extract::<String>())
        .collect()
}

fn rules(
    policy: &Bound<'_, PyAny>,
    name: &str,
    patterns: &mut Vec<Py<PyAny>>,
) -> PyResult<Vec<Rule>> {
    let mut compiled = Vec::new();
    for rule in policy.getattr(name)?.try_iter()? {
        let rule = rule?;
        let kind: Option<String> = rule.getattr("kind")?.extract()?;
        let title = rule.getattr("title")?;
        let title = if title.is_none() {
            TitleRule::Any
        } else if let Ok(text) = title.cast::<PyString>() {
            // Case-folded once, here, as Python folds it.
            TitleRule::Folded(text.call_method0("casefold")?.extract()?)
        } else if title.hasattr("search")? {
            patterns.push(title.getattr("search")?.unbind());
            TitleRule::Pattern(patterns.len() - 1)
        } else {
            return Err(PyTypeError::new_err(format!(
                "PermissionRule.title must be a str, a re.Pattern or None (got {})",
                title.repr()?
            )));
        };
        compiled.push(Rule { kind, title });
    }
    Ok(compiled)
}

/// Compiles a `PermissionPolicy`-like object once (wave 1's two lists and host.md's rules).
pub(crate) fn read_policy(policy: &Bound<'_, PyAny>) -> PyResult<PermissionPolicy> {
    let optional = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        if policy.hasattr(name)? {
            Ok(Some(policy.getattr(name)?))
        } else {
            Ok(None)
        }
    };
    let mut patterns = Vec::new();
    let (allow, deny) = if policy.hasattr("allow")? {
        (
            rules(policy, "allow", &mut patterns)?,
            rules(policy, "deny", &mut patterns)?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let default = match optional("default")? {
        None => Decision::Deny,
        Some(value) => {
            let text: String = value.str()?.extract()?;
            Decision::parse(&text).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "PermissionPolicy.default must be allow, deny or cancel (got {text:?})"
                ))
            })?
        }
    };
    let flag = |name: &str| -> PyResult<bool> {
        optional(name)?.map_or(Ok(false), |v| v.extract::<bool>())
    };
    let needs_matcher = !patterns.is_empty()
        || allow
            .iter()
            .chain(&deny)
            .any(|r| matches!(r.title, TitleRule::Folded(_)));
    Ok(PermissionPolicy {
        allowed_tool_kinds: strings(policy, "allowed_tool_kinds")?,
        allowed_title_prefixes: strings(policy, "allowed_title_prefixes")?,
        allow,
        deny,
        default,
        persist: flag("persist")?,
        remember: flag("remember")?,
        matcher: Matcher(
            needs_matcher
                .then(|| Arc::new(PyPatterns { search: patterns }) as Arc<dyn TitleMatcher>),
        ),
    })
}

/// `on_permission`'s answer as the facade passes it: ("reply", outcome, option id, option
/// kind), ("outcome", decision, option id, reason), or None.
pub(crate) fn observer_answer(answer: &Bound<'_, PyAny>) -> PyResult<Option<ObserverAnswer>> {
    let Some((tag, a, b, c)) = answer.extract::<Option<(String, String, String, String)>>()? else {
        return Ok(None);
    };
    let optional = |text: String| (!text.is_empty()).then_some(text);
    Ok(Some(match tag.as_str() {
        "reply" => ObserverAnswer::Reply(Selection {
            outcome: a,
            option_id: b,
            option_kind: c,
        }),
        _ => ObserverAnswer::Outcome {
            decision: Decision::parse(&a)
                .ok_or_else(|| PyTypeError::new_err(format!("not a PermissionDecision: {a:?}")))?,
            option_id: optional(b),
            reason: optional(c),
        },
    }))
}

// --- host requests: files (and terminals) served for the agent ------------------------------

/// The client's capability config as the facade passes it: None, or (read, write, terminal,
/// additional_directories, allow_any_path, terminal_output_bytes, read_missing_as_empty).
type ConfigTuple = (bool, bool, bool, Vec<String>, bool, u64, bool);

fn config_tuple(options: &Bound<'_, PyAny>) -> PyResult<Option<ConfigTuple>> {
    options.getattr("capabilities")?.extract()
}

/// What `initialize` advertises (`None`: `{}`, wave 1).
pub(crate) fn read_capabilities(options: &Bound<'_, PyAny>) -> PyResult<Option<HostCapabilities>> {
    Ok(
        config_tuple(options)?.map(|(read, write, terminal, ..)| HostCapabilities {
            read_text_file: read,
            write_text_file: write,
            terminal,
        }),
    )
}

/// The OS side of host requests: the settings and each session's roots.
#[derive(Default)]
pub(crate) struct Host {
    additional_directories: Vec<String>,
    allow_any_path: bool,
    read_missing_as_empty: bool,
    /// Per open session: its cwd, the config's and its own additional directories.
    roots: HashMap<String, Roots>,
}

impl Host {
    pub(crate) fn new(options: &Bound<'_, PyAny>) -> PyResult<Host> {
        let Some((_, _, _, additional, allow_any, _, missing_as_empty)) = config_tuple(options)?
        else {
            return Ok(Host::default());
        };
        Ok(Host {
            additional_directories: additional,
            allow_any_path: allow_any,
            read_missing_as_empty: missing_as_empty,
            roots: HashMap::new(),
        })
    }

    /// Runs a checked request (no GIL needed): confinement, then the operation.
    fn run(&self, session_id: &str, op: HostOp, request_bytes: usize) -> Result<HostOk, HostError> {
        let no_roots = Roots::default();
        let roots = self.roots.get(session_id).unwrap_or(&no_roots);
        match op {
            HostOp::Read { path, line, limit } => {
                let target = fs::confine(roots, &path, self.allow_any_path)
                    .map_err(|e| e.host_error(&path))?;
                fs::read_text_file(
                    &target,
                    line,
                    limit,
                    request_bytes,
                    self.read_missing_as_empty,
                )
                .map(HostOk::Content)
                .map_err(|e| e.host_error(&path))
            }
            HostOp::Write { path, content } => {
                let target = fs::confine(roots, &path, self.allow_any_path)
                    .map_err(|e| e.host_error(&path))?;
                fs::write_text_file(&target, &content)
                    .map(|()| HostOk::Empty)
                    .map_err(|e| e.host_error(&path))
            }
            HostOp::TerminalCreate { .. } | HostOp::Terminal { .. } => Err(HostError::failed(
                -32603,
                "terminals are not served by this build",
                None,
            )),
        }
    }
}

/// A host request as the driver hands it over: its id, session and checked operation.
pub(crate) type HostRequest = (HostId, String, Result<HostOp, HostError>);

/// Why serving a host request stopped the call.
pub(crate) enum HostFailure {
    /// `on_activity` raised: the client stops, the answer is not written.
    Activity(PyErr),
    Call(CallError),
}

impl From<AcpError> for HostFailure {
    fn from(error: AcpError) -> Self {
        HostFailure::Call(error.into())
    }
}

/// One host request: the operation without the GIL, the answer and its activity, then
/// `on_activity`, then the answer is queued (design/host.md §4).
pub(crate) fn serve(
    py: Python<'_>,
    driven: &mut Driven,
    request: HostRequest,
) -> Result<(), HostFailure> {
    let (host, session_id, op) = request;
    let request_bytes = driven.conn.config().limits.request_bytes;
    let result = match op {
        Err(refused) => Err(refused),
        Ok(op) => {
            let state = &driven.host;
            py.detach(|| state.run(&session_id, op, request_bytes))
        }
    };
    let answer = driven.conn.answer_host(host, result, None)?;
    if let Some(callback) = &driven.callbacks.on_activity {
        let a = &answer.activity;
        let record = (
            a.method,
            a.allowed,
            a.path.as_deref(),
            a.command.as_deref(),
            a.terminal_id.as_deref(),
            a.reason.as_deref(),
            a.session_id.as_str(),
            a.error_code,
        );
        if let Err(error) = callback.bind(py).call1((record,)) {
            return Err(HostFailure::Activity(error)); // dropping `answer` writes nothing
        }
    }
    driven.conn.send_host(answer);
    Ok(())
}

#[pymethods]
impl CoreClient {
    /// Sets a session's roots (design/host.md §2): its cwd, the config's and its own
    /// additional directories, each kept as given and as its realpath, taken now.
    fn host_roots(
        &self,
        py: Python<'_>,
        session_id: String,
        cwd: String,
        directories: Vec<String>,
    ) -> PyResult<()> {
        let mut driven = self.enter(py)?;
        let mut all = vec![cwd];
        all.extend(driven.host.additional_directories.iter().cloned());
        all.extend(directories);
        driven.host.roots.insert(session_id, Roots::new(all));
        Ok(())
    }

    /// Forgets a closed session's roots.
    fn host_forget(&self, session_id: String) {
        if let Ok(mut driven) = self.call.try_lock() {
            driven.host.roots.remove(&session_id);
        }
    }
}

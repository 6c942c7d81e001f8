//! The permission side of the binding (design/host.md §5): the policy compiled from its Python
//! object, the title patterns evaluated under the GIL, the observer's answer read. (Host
//! requests are served by `acp_client::host`.)

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use acp_proto::limits::PermissionPolicy;
use acp_proto::permission::ObserverAnswer;
use acp_proto::rules::{Decision, Matcher, NameRule, Rule, TitleMatcher, TitlePattern, TitleRule};

/// Python's `str.casefold` for non-ASCII titles (title patterns are compiled in the core).
struct PyPatterns;

impl TitleMatcher for PyPatterns {
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

/// A `re.Pattern` compiled for the core's linear-time engine, or why it cannot be.
fn pattern(title: &Bound<'_, PyAny>, name: &str, index: usize) -> PyResult<TitlePattern> {
    pattern_of(title, name, index, "title")
}

fn pattern_of(
    title: &Bound<'_, PyAny>,
    name: &str,
    index: usize,
    field: &str,
) -> PyResult<TitlePattern> {
    let source: String = title.getattr("pattern")?.extract()?;
    let flags: u32 = title.getattr("flags")?.extract()?;
    TitlePattern::compile(&source, flags).map_err(|why| {
        let shown = title
            .repr()
            .map_or_else(|_| format!("{source:?}"), |r| r.to_string());
        PyValueError::new_err(format!(
            "PermissionPolicy.{name}[{index}]: the {field} pattern {shown} cannot be used: {why}"
        ))
    })
}

fn rules(policy: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<Rule>> {
    let mut compiled = Vec::new();
    for (index, rule) in policy.getattr(name)?.try_iter()?.enumerate() {
        let rule = rule?;
        let kind: Option<String> = rule.getattr("kind")?.extract()?;
        let title = rule.getattr("title")?;
        let title = if title.is_none() {
            TitleRule::Any
        } else if let Ok(text) = title.cast::<PyString>() {
            // Case-folded once, here, as Python folds it.
            TitleRule::Folded(text.call_method0("casefold")?.extract()?)
        } else if title.hasattr("search")? {
            TitleRule::Pattern(pattern(&title, name, index)?)
        } else {
            return Err(PyTypeError::new_err(format!(
                "PermissionRule.title must be a str, a re.Pattern or None (got {})",
                title.repr()?
            )));
        };
        let name_rule = name_rule(&rule, name, index)?;
        compiled.push(Rule {
            kind,
            title,
            name: name_rule,
        });
    }
    Ok(compiled)
}

/// A rule's `name` (absent on a rule-like object without one: any name).
fn name_rule(rule: &Bound<'_, PyAny>, list: &str, index: usize) -> PyResult<NameRule> {
    if !rule.hasattr("name")? {
        return Ok(NameRule::Any);
    }
    let name = rule.getattr("name")?;
    if name.is_none() {
        Ok(NameRule::Any)
    } else if let Ok(text) = name.cast::<PyString>() {
        Ok(NameRule::Exact(text.extract()?))
    } else if name.hasattr("search")? {
        Ok(NameRule::Pattern(pattern_of(&name, list, index, "name")?))
    } else {
        Err(PyTypeError::new_err(format!(
            "PermissionRule.name must be a str, a re.Pattern or None (got {})",
            name.repr()?
        )))
    }
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
    let (allow, deny) = if policy.hasattr("allow")? {
        (rules(policy, "allow")?, rules(policy, "deny")?)
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
    let needs_matcher = allow
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
        matcher: Matcher(needs_matcher.then(|| Arc::new(PyPatterns) as Arc<dyn TitleMatcher>)),
    })
}

/// `on_permission`'s answer as the facade passes it: ("reply", outcome, option id, option
/// kind), ("outcome", decision, option id, reason), or None.
pub(crate) fn observer_answer(answer: &Bound<'_, PyAny>) -> PyResult<Option<ObserverAnswer>> {
    let Some((tag, a, b, c)) = answer.extract::<Option<(String, String, String, String)>>()? else {
        return Ok(None);
    };
    ObserverAnswer::from_parts(&tag, a, b, c)
        .map(Some)
        .map_err(PyTypeError::new_err)
}

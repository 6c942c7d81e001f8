//! A call read from its Python arguments once, for either driver: the blocking loop runs it to
//! its end, the asyncio driver starts it and completes a future when its answer arrives. Both
//! turn the outcome into the same Python value here.

use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::IntoPyObjectExt;

use acp_proto::error::AcpError;
use acp_proto::session::TurnOutcome;
use acp_proto::Outcome;

use crate::errors::CallError;
use crate::reply::ReplyBuilder;

pub(crate) use acp_client::call::Call as Owned;
use acp_client::call::Value;

/// A call read from its Python arguments once; its value made for Python.
pub(crate) struct Prepared(pub Owned);

impl std::ops::Deref for Prepared {
    type Target = Owned;

    fn deref(&self) -> &Owned {
        &self.0
    }
}

impl Prepared {
    /// The call's Python value: `None`, a session id, the listed sessions' JSON texts, the
    /// config options' JSON text, or a prompt's `("ok" | "late", turn tuple)` or
    /// `("timeout", None)` (given up after its timeout and grace: a status, not an error).
    pub fn value(
        &self,
        py: Python<'_>,
        reply: ReplyBuilder,
        outcome: Result<Option<Outcome>, AcpError>,
    ) -> Result<Py<PyAny>, CallError> {
        Ok(match self.0.value(outcome)? {
            Value::None => py.None(),
            Value::SessionId(id) => id.into_py_any(py)?,
            Value::Listed(sessions) => sessions.into_py_any(py)?,
            Value::ConfigOptions(options) => options.into_py_any(py)?,
            Value::Turn(turn) => {
                let late = turn.timed_out;
                let tuple = turn_record(py, reply, *turn)?;
                (if late { "late" } else { "ok" }, Some(tuple)).into_py_any(py)?
            }
            Value::TimedOut => ("timeout", py.None()).into_py_any(py)?,
            Value::Raw(raw) => raw.into_py_any(py)?,
        })
    }
}

/// A finished turn as the facade reads it (`acp_fast._session.turn_result`).
#[pyclass(module = "acp_fast._core", frozen, get_all)]
pub struct Turn {
    /// The reply: the turn's joined message chunks.
    response: Py<PyString>,
    stop_reason: String,
    /// `(kind, admitted bytes, admitted segments, withheld update sequence)`.
    overflow: Option<(&'static str, usize, usize, u64)>,
    session_id: String,
    /// Each tool call's final state, JSON object texts.
    tool_calls: Vec<String>,
    /// JSON texts, when the turn had them.
    plan: Option<String>,
    available_commands: Option<String>,
    usage: Option<String>,
    current_mode_id: String,
    /// The turn's `notice` updates and its compactions' final states, JSON object texts.
    notices: Vec<String>,
    compactions: Vec<String>,
    /// The prompt result's `usage` object, JSON text.
    prompt_usage: Option<String>,
}

fn turn_record(py: Python<'_>, reply: ReplyBuilder, turn: TurnOutcome) -> PyResult<Py<PyAny>> {
    let overflow = turn.overflow.map(|o| {
        (
            o.kind.as_str(),
            o.admitted_bytes,
            o.admitted_segments,
            o.withheld_update_sequence,
        )
    });
    // v1: the host's own chunk strings, joined once; v2: the connection folds the reply per
    // message (an upsert may replace what was streamed) and hands it over whole.
    let response = if turn.response.is_empty() {
        reply.finish(py)?
    } else {
        crate::reply::text_object(py, &turn.response, turn.response_ascii)?
    };
    let record = Turn {
        response,
        stop_reason: turn.stop_reason,
        overflow,
        session_id: turn.session_id,
        tool_calls: turn.tool_calls,
        plan: turn.plan,
        available_commands: turn.available_commands,
        usage: turn.usage,
        current_mode_id: turn.current_mode_id,
        notices: turn.notices,
        compactions: turn.compactions,
        prompt_usage: turn.prompt_usage,
    };
    Ok(Bound::new(py, record)?.into_any().unbind())
}

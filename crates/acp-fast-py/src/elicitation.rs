//! Elicitations in the binding: the pending request handed to the facade's `on_elicitation`
//! wrapper as a tuple (`acp_fast._elicitation.request_of` makes the `ElicitationRequest` of it),
//! the wrapper's answer read (an `_elicitation.CoreAnswer`: the content already checked against
//! the request's schema), and the asyncio driver's settling of an awaited one.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use acp_client::{Edge, Elicited, Error, Fail, Pump};
use acp_proto::elicitation::Answer;
use acp_proto::{AskId, Connection};

/// Asks the observer about elicitation `ask`: its answer, None (declined), or under an event
/// loop an awaitable the request waits on. A raising observer stops the client.
pub(crate) fn ask(
    py: Python<'_>,
    callback: Option<&Py<PyAny>>,
    conn: &Connection,
    ask: AskId,
    asynchronous: bool,
) -> Result<Elicited<Py<PyAny>>, Fail<PyErr>> {
    let (Some(callback), Some(record)) = (callback, conn.elicitation(ask)) else {
        return Ok(Elicited::NotAsked);
    };
    let row = (
        record.session_id.as_str(),
        record.mode.as_str(),
        record.message.as_str(),
        record.requested_schema.as_deref(),
        record.url.as_deref(),
        record.elicitation_id.as_deref(),
        record.tool_call_id.as_deref(),
        record.scope_request_id.as_deref(),
        record.request_id.as_str(),
        record.envelope.as_str(),
    );
    let asked = callback.bind(py).call1((row,)).and_then(|answer| {
        if answer.is_none() {
            return Ok(Elicited::Reply(None));
        }
        if asynchronous && answer.hasattr("__await__")? {
            return Ok(Elicited::Deferred(answer.unbind()));
        }
        read(&answer).map(Elicited::Reply)
    });
    asked.map_err(|error| Fail::Callback("on_elicitation", error))
}

/// The wrapper's answer: `("elicitation", action, content JSON or "", "")`, or None.
pub(crate) fn read(answer: &Bound<'_, PyAny>) -> PyResult<Option<Answer>> {
    let Some((_, action, content, _)) =
        answer.extract::<Option<(String, String, String, String)>>()?
    else {
        return Ok(None);
    };
    Answer::from_parts(&action, content)
        .map(Some)
        .map_err(PyTypeError::new_err)
}

/// An awaited `on_elicitation` finished: its answer is sent (`error`: it raised, or its answer
/// did not match the request, which stops the client as a raising callback does).
pub(crate) fn settle<E: Edge<Error = PyErr>>(
    pump: &mut Pump,
    edge: &mut E,
    ask: AskId,
    reply: Option<Bound<'_, PyAny>>,
    error: Option<Bound<'_, PyAny>>,
) -> Result<(), Error<PyErr>> {
    let answer = match error {
        Some(error) => Err(PyErr::from_value(error)),
        None => reply.map(|r| read(&r)).transpose(),
    };
    match answer {
        Ok(reply) => pump.answer_elicitation(edge, ask, reply.flatten()),
        Err(error) => Err(pump.elicitation_failed(edge, ask, error)),
    }
}

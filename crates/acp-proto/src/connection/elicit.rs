//! Elicitations in the connection (`elicitation/create`): the request read within its bounds,
//! its scope checked (an open session, or one of our calls in flight), the pending request while
//! the observer decides, and the answer, queued only after the driver recorded the decision
//! (`ElicitationDecided`, like a permission's `Decided`, writes nothing when dropped).
//!
//! A request the observer is not asked about is answered here at once: the schema's `decline`
//! when the client did not advertise elicitation or the mode is unknown, `cancel` when its
//! session's turn is being cancelled, a JSON-RPC error -32602 when it is malformed, oversized or
//! names an unknown session or request. `elicitation/complete` needs nothing from the client: it
//! is handed on like any notification (journaled, never matched against anything).

use serde_json::Value;

use super::*;
use crate::elicitation::{self, Action, Answer, ElicitationRecord, Refusal, WITHDRAWN};

#[derive(Debug, Default)]
pub(super) struct Elicitations {
    /// The observer answers elicitations: advertised in `initialize`.
    pub(super) advertised: bool,
    pending: Vec<(AskId, Pending)>,
}

#[derive(Debug)]
struct Pending {
    record: ElicitationRecord,
    /// The agent withdrew it (`$/cancel_request`) while the observer was deciding.
    withdrawn: bool,
}

/// A decided elicitation: the record (with its action) and the answer's bytes.
/// `Connection::send_elicitation` queues the answer; dropping it writes nothing.
#[derive(Debug)]
pub struct ElicitationDecided {
    pub record: ElicitationRecord,
    bytes: Vec<u8>,
}

impl Core {
    /// An `elicitation/create` request: `Event::Elicitation` when the observer is to be asked;
    /// otherwise answered here (`Event::Other`).
    pub(super) fn elicitation<'a>(
        &mut self,
        raw_id: &str,
        envelope: &'a str,
    ) -> Result<Event<'a>, AcpError> {
        let read = if self.elicitations.pending.len() >= elicitation::PENDING {
            Err(Refusal::Invalid(format!(
                "too many elicitations pending: {} wait for the user already",
                elicitation::PENDING
            )))
        } else if self.elicitations.advertised {
            elicitation::read(raw_id, envelope).and_then(|record| self.scope(record))
        } else {
            Err(Refusal::Decline("elicitation is not advertised".into()))
        };
        let bytes = match read {
            Ok(record) if self.latched(&record.session_id) => {
                elicitation::answer(raw_id, Action::Cancel, None)
            }
            Ok(record) => {
                let ask = AskId(self.next_ask);
                self.next_ask += 1;
                self.elicitations.pending.push((
                    ask,
                    Pending {
                        record,
                        withdrawn: false,
                    },
                ));
                return Ok(Event::Elicitation {
                    ask,
                    line: envelope,
                });
            }
            Err(Refusal::Decline(_)) => elicitation::answer(raw_id, Action::Decline, None),
            Err(Refusal::Invalid(why)) => elicitation::invalid_params(raw_id, &why),
        };
        let bytes = self.checked(bytes, "the elicitation/create answer")?;
        self.outbox.push_back(bytes);
        Ok(Event::Other { line: envelope })
    }

    /// The request's scope: an open session, or (no session) one of our calls in flight.
    fn scope(&self, record: ElicitationRecord) -> Result<ElicitationRecord, Refusal> {
        if !record.session_id.is_empty() {
            if self.session(&record.session_id).is_none() {
                return Err(Refusal::Invalid(format!(
                    "unknown session {:?}",
                    excerpt(record.session_id.as_bytes(), 64)
                )));
            }
            return Ok(record);
        }
        let live = record
            .scope_request_id
            .as_deref()
            .and_then(|id| serde_json::from_str::<i64>(id).ok())
            .is_some_and(|id| self.calls.iter().any(|c| c.wire_id == id));
        if live {
            Ok(record)
        } else {
            Err(Refusal::Invalid(
                "unknown request: requestId names no request of this client in flight".into(),
            ))
        }
    }

    /// `$/cancel_request` naming an elicitation still waiting for its answer: marked withdrawn,
    /// so it is answered `cancel`. Whether one matched.
    pub(super) fn withdraw_elicitation(&mut self, line: &str) -> bool {
        let Some(wanted) = requested_id(line) else {
            return false;
        };
        let found = self.elicitations.pending.iter_mut().find(|(_, p)| {
            serde_json::from_str::<Value>(&p.record.request_id).is_ok_and(|id| id == wanted)
        });
        match found {
            Some((_, pending)) => {
                pending.withdrawn = true;
                true
            }
            None => false,
        }
    }

    fn pending_elicitation(&self, ask: AskId) -> Option<&Pending> {
        self.elicitations
            .pending
            .iter()
            .find(|(id, _)| *id == ask)
            .map(|(_, p)| p)
    }

    fn decide_elicitation(
        &mut self,
        ask: AskId,
        answer: Option<Answer>,
    ) -> Result<ElicitationDecided, AcpError> {
        let index = self
            .elicitations
            .pending
            .iter()
            .position(|(id, _)| *id == ask)
            .ok_or_else(|| AcpError::Misuse("this elicitation was already answered".into()))?;
        let (_, pending) = self.elicitations.pending.remove(index);
        let mut record = pending.record;
        let (action, content, reason) = if self.latched(&record.session_id) {
            (Action::Cancel, None, "session cancelled")
        } else if pending.withdrawn {
            (Action::Cancel, None, WITHDRAWN)
        } else {
            match answer {
                Some(Answer { action, content }) => (action, content, "observer"),
                None => (Action::Decline, None, "the observer abstained"),
            }
        };
        let content = content.filter(|_| action == Action::Accept);
        let bytes = self.checked(
            elicitation::answer(&record.request_id, action, content.as_deref()),
            "the elicitation/create answer",
        )?;
        record.action = action.as_str().to_owned();
        record.content = content;
        record.reason = reason.to_owned();
        Ok(ElicitationDecided { record, bytes })
    }
}

impl Connection {
    /// Whether the client advertises elicitation (the observer answers them); set before
    /// `start()`. Without it every `elicitation/create` is declined.
    pub fn advertise_elicitation(&mut self, on: bool) {
        self.core.elicitations.advertised = on;
    }

    pub fn elicitation_advertised(&self) -> bool {
        self.core.elicitations.advertised
    }

    /// Whether `ask` is an elicitation still waiting for its answer.
    pub fn is_elicitation(&self, ask: AskId) -> bool {
        self.core.pending_elicitation(ask).is_some()
    }

    /// What the observer is shown of an elicitation not yet answered.
    pub fn elicitation(&self, ask: AskId) -> Option<&ElicitationRecord> {
        self.core.pending_elicitation(ask).map(|p| &p.record)
    }

    /// Whether an elicitation still waiting will be answered `cancel` whatever the observer
    /// says: its session's turn is being cancelled, or the agent withdrew it.
    pub fn elicitation_cancelled(&self, ask: AskId) -> bool {
        self.core
            .pending_elicitation(ask)
            .is_some_and(|p| p.withdrawn || self.core.latched(&p.record.session_id))
    }

    /// After a blocking observer returned: whether the agent withdrew the elicitation meanwhile,
    /// by a `$/cancel_request` among the complete lines read and not yet handled (bounded as
    /// `withdrawn_ahead`).
    pub fn elicitation_withdrawn_ahead(&mut self, ask: AskId) -> bool {
        let Some(index) = self
            .core
            .elicitations
            .pending
            .iter()
            .position(|(id, _)| *id == ask)
        else {
            return false;
        };
        let pending = &mut self.core.elicitations.pending[index].1;
        if pending.withdrawn {
            return true;
        }
        let bytes = self.reader.unhandled();
        let bytes = &bytes[..bytes.len().min(LOOK_AHEAD_BYTES)];
        if memchr::memmem::find(bytes, b"$/cancel_request").is_none() {
            return false;
        }
        let Ok(wanted) = serde_json::from_str::<Value>(&pending.record.request_id) else {
            return false;
        };
        let Some(last) = memchr::memrchr(b'\n', bytes) else {
            return false;
        };
        let found = bytes[..last]
            .split(|b| *b == b'\n')
            .filter(|line| memchr::memmem::find(line, b"$/cancel_request").is_some())
            .filter_map(|line| std::str::from_utf8(line).ok())
            .filter(|line| is_cancel_request(line))
            .any(|line| requested_id(line).is_some_and(|id| id == wanted));
        pending.withdrawn = found;
        found
    }

    /// The answer (the observer's, or `cancel` when withdrawn or its turn is being cancelled,
    /// or `decline` when the observer abstained) and the record. The answer must fit
    /// `request_bytes`.
    pub fn decide_elicitation(
        &mut self,
        ask: AskId,
        answer: Option<Answer>,
    ) -> Result<ElicitationDecided, AcpError> {
        self.core.decide_elicitation(ask, answer)
    }

    /// Queues a decided elicitation's answer (after the driver recorded the decision).
    pub fn send_elicitation(&mut self, decided: ElicitationDecided) {
        self.core.outbox.push_back(decided.bytes);
    }
}

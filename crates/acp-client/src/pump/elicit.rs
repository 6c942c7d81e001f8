//! Elicitations in the pump: the same ask as a permission request (`Edge::elicit` answers now,
//! abstains, or defers to an awaitable; `$/cancel_request` and the turn's cancel withdraw it),
//! then the answer, queued after the connection decided it. Only the reply's type differs.

use acp_proto::elicitation::Answer;
use acp_proto::AskId;

use super::{Pump, Stop};
use crate::edge::{Edge, Error, Fail};
use crate::elicited::Elicited;

impl Pump {
    /// An elicitation the observer is asked about: answered now, or the step stops at a
    /// deferred answer.
    pub(super) fn elicitation<E: Edge>(
        &mut self,
        edge: &mut E,
        ask: AskId,
    ) -> Result<Option<Stop<E::Deferred>>, Error<E::Error>> {
        match edge.elicit(&self.conn, ask) {
            Ok(Elicited::Reply(reply)) => {
                // Nothing was read while the observer ran: a cancel sent meanwhile wins.
                self.look_ahead(edge, ask);
                self.conn.elicitation_withdrawn_ahead(ask);
                self.answer_elicitation(edge, ask, reply)?;
                Ok(None)
            }
            Ok(Elicited::NotAsked) => {
                self.answer_elicitation(edge, ask, None)?;
                Ok(None)
            }
            Ok(Elicited::Deferred(deferred)) => {
                self.deferred.push((ask, false));
                Ok(Some(Stop::Deferred(ask, deferred)))
            }
            Err(fail) => {
                self.failed_session = self.elicitation_session(ask);
                Err(self.fail(edge, fail))
            }
        }
    }

    /// Decides an elicitation (a cancel from the agent or of its turn wins over `reply`) and
    /// queues the answer; the edge sees the line before it is written (`Edge::sent`: a journal
    /// records it first). Also settles a deferred one. An answer that cannot be sent (over
    /// `request_bytes`) stops the client: the agent is never sent half an answer.
    pub fn answer_elicitation<E: Edge>(
        &mut self,
        edge: &mut E,
        ask: AskId,
        reply: Option<Answer>,
    ) -> Result<(), Error<E::Error>> {
        self.deferred.retain(|(a, _)| *a != ask);
        self.controls.take_cancels(&mut self.conn);
        let session = self.elicitation_session(ask);
        match self.conn.decide_elicitation(ask, reply) {
            Ok(decided) => {
                self.conn.send_elicitation(decided);
                Ok(())
            }
            Err(error) => {
                self.failed_session = session;
                Err(self.fail(edge, Fail::Missing(error)))
            }
        }
    }

    /// A deferred elicitation's answer failed (the awaitable raised, or gave something that is
    /// not an `ElicitationReply` matching the request): the client stops as after a failing
    /// callback.
    pub fn elicitation_failed<E: Edge>(
        &mut self,
        edge: &mut E,
        ask: AskId,
        error: E::Error,
    ) -> Error<E::Error> {
        self.failed_session = self.elicitation_session(ask);
        self.deferred.retain(|(a, _)| *a != ask);
        self.fail(edge, Fail::Callback("on_elicitation", error))
    }

    fn elicitation_session(&self, ask: AskId) -> Option<String> {
        self.conn
            .elicitation(ask)
            .map(|record| record.session_id.clone())
            .filter(|session| !session.is_empty())
    }
}

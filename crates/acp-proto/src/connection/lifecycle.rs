//! ACP v2's turn lifecycle (design/protocol-now.md §4): the `session/prompt` answer only
//! acknowledges the prompt, and the turn ends at the session's `state_update` `idle` that follows
//! the turn's own `running` or `requires_action`. The same `TurnOutcome` as v1's comes out, so
//! every driver and the Python API see one kind of turn.

use serde_json::Value;

use super::*;

/// A `state_update`'s `stopReason`, when it is a string.
pub(super) fn idle_stop_reason(update: &Value) -> Option<String> {
    update
        .get("stopReason")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

impl Core {
    /// A v2 `state_update` of an open session: `running`/`requires_action` start the turn in
    /// flight; `idle` ends it once it started (or, from an agent that never says `running`, once
    /// the prompt was acknowledged and the idle names a stop reason). An `idle` before that is
    /// the agent reporting the session idle before it took the prompt (`simple_agent_v2` does).
    pub(super) fn state_changed(
        &mut self,
        session_id: &str,
        state: &str,
        stop_reason: Option<String>,
    ) {
        if self.version() != 2 {
            return; // not a v1 update: delivered, never a turn's end
        }
        let Some(session) = self.session_mut(session_id) else {
            return;
        };
        match (state, session.turn.as_mut()) {
            ("running" | "requires_action", Some(turn)) => turn.lifecycle.started = true,
            ("idle", Some(turn)) => {
                let lifecycle = turn.lifecycle;
                if lifecycle.started || (lifecycle.acknowledged && stop_reason.is_some()) {
                    let handle = turn.call;
                    self.finish_turn(session_id, handle, stop_reason);
                }
            }
            ("idle", None) if session.late_turn.is_some() => {
                // The end of a turn given up on (timed out): its requests are no longer
                // answered `cancelled`.
                session.late_turn = None;
                session.latched = false;
            }
            _ => {}
        }
    }

    /// The acknowledgement of a v2 prompt: the turn goes on until its `idle`. `Ok(None)` keeps
    /// the call waiting.
    pub(super) fn acknowledged(&mut self, call: &Call) -> Result<Option<Outcome>, AcpError> {
        let session_id = call.session.as_deref().unwrap_or("");
        let turn = self
            .session_mut(session_id)
            .and_then(|s| s.turn.as_mut())
            .filter(|t| t.call == call.handle);
        match turn {
            Some(turn) if turn.lifecycle.acknowledged => Err(AcpError::protocol(format!(
                "the agent answered session/prompt (id {}) a second time",
                call.wire_id
            ))),
            Some(turn) => {
                turn.lifecycle.acknowledged = true;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Ends a v2 turn at its `idle`: the call leaves the table (its acknowledgement, if still to
    /// come, is dropped as a late answer) and completes at the next `poll_event`.
    fn finish_turn(&mut self, session_id: &str, handle: CallId, stop_reason: Option<String>) {
        let Some(call) = self.calls.remove(handle) else {
            return;
        };
        let acknowledged = self
            .session(session_id)
            .and_then(|s| s.turn.as_ref())
            .is_some_and(|t| t.lifecycle.acknowledged);
        if !acknowledged {
            self.calls.tombstone(call.wire_id);
        }
        // The schema says an agent SHOULD give the reason; one that does not ended normally.
        let stop_reason = stop_reason.unwrap_or_else(|| "end_turn".to_owned());
        let outcome = self.turn_outcome(
            session_id.to_owned(),
            handle,
            stop_reason,
            None,
            call.timed_out,
        );
        self.done
            .push_back((handle, Ok(Outcome::Turn(Box::new(outcome)))));
    }
}

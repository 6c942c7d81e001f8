//! A blocking call's steps around `Pump::run_until`, in the order that makes a call see only
//! what belongs to it, and `start()`'s steps run one after another.

use std::time::Instant;

use acp_proto::calls::CallId;
use acp_proto::error::AcpError;
use acp_proto::{Connection, Outcome};

use crate::call::Call;
use crate::controls::lock;
use crate::edge::{Edge, Error};
use crate::pump::Pump;

/// A call's own outcome, or its own failure (a turn's timeout is a status, not an error).
pub type Outcomes = Result<Option<Outcome>, AcpError>;

impl Pump {
    /// Runs one call on the blocking driver: what the agent sent since the last call is handled
    /// first, the clock is passed in, `start` queues the call, `begun` tells the edge (a turn's
    /// reply starts), the pump runs until the call ends (or `until` passes), and `finish` makes
    /// the caller's value of its outcome. An error of the run itself (a callback raised, the
    /// pipes failed, another thread halted the client, `start` refused) is the `Err`.
    ///
    /// Cancels queued by `cancel()` before the call or as it ended are dropped: they targeted
    /// a turn that was not running. The pipes are let go once another thread closed the client.
    pub fn run_call<E: Edge, T>(
        &mut self,
        edge: &mut E,
        until: Option<Instant>,
        start: impl FnOnce(&mut Connection) -> Result<Option<CallId>, AcpError>,
        begun: impl FnOnce(&mut E),
        finish: impl FnOnce(&mut E, Outcomes) -> T,
    ) -> Result<T, Error<E::Error>> {
        // A cancel() queued while no turn ran has nothing to cancel.
        self.controls().clear_cancels();
        let result = self.run_call_inner(edge, until, start, begun, finish);
        // A cancel() that arrived as the call ended targeted a turn that is over.
        self.controls().clear_cancels();
        // Nor may a steer() wait on it.
        let controls = self.controls().clone();
        controls.end_steers(&mut self.conn);
        if self.controls().is_closed() {
            self.pipes = None;
            *lock(&self.controls().waker) = None;
        }
        result
    }

    fn run_call_inner<E: Edge, T>(
        &mut self,
        edge: &mut E,
        until: Option<Instant>,
        start: impl FnOnce(&mut Connection) -> Result<Option<CallId>, AcpError>,
        begun: impl FnOnce(&mut E),
        finish: impl FnOnce(&mut E, Outcomes) -> T,
    ) -> Result<T, Error<E::Error>> {
        // What the agent sent since the last call (updates after a response) is handled first,
        // so it is not taken for part of this call (a new turn's reply, say).
        self.run_until(edge, None, Some(Instant::now()))?;
        self.set_now();
        let call = start(&mut self.conn)?;
        begun(edge);
        // The call's own failure (a turn's timeout is its "timeout" status) goes to `finish`.
        let outcome = match self.run_until(edge, call, until) {
            Ok(outcome) => Ok(outcome),
            Err(Error::Acp(error)) => Err(error),
            Err(other) => return Err(other),
        };
        Ok(finish(edge, outcome))
    }
}

/// `start()`'s steps, each run to its end by `run` (`initialize`, then with `new_session`
/// `session/new`): the new session's id, or `None` when no session was asked for.
pub fn start_steps<X: From<AcpError>>(
    first: Call,
    mut run: impl FnMut(&Call) -> Result<Option<Outcome>, X>,
) -> Result<Option<String>, X> {
    let mut call = first;
    loop {
        let outcome =
            run(&call)?.ok_or_else(|| AcpError::protocol("start() ended without an answer"))?;
        if let Outcome::SessionOpened(id) = outcome {
            return Ok(Some(id));
        }
        match call.next_step(CallId(0), &Ok(outcome)) {
            Some(next) => call = next,
            None => return Ok(None),
        }
    }
}

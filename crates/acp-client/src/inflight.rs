//! The asyncio driver's calls in flight: a call is started and left waiting, and a later step
//! settles it. Here are the rules of which waiting call settles with what: an answer completes
//! its call (or starts `start()`'s next step, reported under the first step's id), and an error
//! in a step fails the calls it reaches (`route`). The binding makes each settled call a Python
//! value or exception; no rule is left to it.

use std::collections::BTreeMap;

use acp_proto::calls::{stop_reaches, CallId};
use acp_proto::error::AcpError;
use acp_proto::{AskId, Connection, Outcome};

use crate::call::Call;
use crate::edge::Error;
use crate::pump::Pump;

/// A call that left the calls in flight: the id its caller knows it by, the call, and how it
/// ended (`R`: its outcome, or why it failed).
pub struct Settled<R> {
    pub reported: CallId,
    pub call: Call,
    pub result: R,
}

/// Why a call failed when a step ended in error.
#[derive(Debug)]
pub enum Failure<X> {
    /// The error itself: the call it is for raises it.
    Error(Error<X>),
    /// Another call's error stopped the client: this one raises "the client stopped" (the
    /// reason; the binding sets the stopping exception as its cause).
    Stopped(String),
}

/// What an error in a step did to the calls in flight, for the binding to report.
pub struct Routed<X> {
    /// The calls it failed, oldest first (each abandoned: a late answer is dropped).
    pub failed: Vec<Settled<Failure<X>>>,
    /// No call took the error: the next call raises it.
    pub next: Option<Error<X>>,
    /// Permission requests that waited on a deferred answer, forgotten (the client stopped):
    /// whatever the loop awaits for them is cancelled.
    pub cancelled: Vec<AskId>,
    /// The client stopped: only `close()` is accepted.
    pub stopped: bool,
    /// Nothing more will be read (`close()` or `request_cancel()` from another thread).
    pub ended: bool,
    /// The step ends here; otherwise the other calls go on being served.
    pub end_step: bool,
}

impl<X> Routed<X> {
    fn new() -> Routed<X> {
        Routed {
            failed: Vec::new(),
            next: None,
            cancelled: Vec::new(),
            stopped: false,
            ended: false,
            end_step: true,
        }
    }
}

/// The calls in flight by id (ids grow, so the first is the oldest).
#[derive(Default)]
pub struct InFlight {
    calls: BTreeMap<CallId, Call>,
}

impl InFlight {
    /// Queues `call` on the connection (its timeout counts from now) and keeps it waiting: its
    /// id and the call; `None` when it finished at once (a session closed locally).
    pub fn begin(
        &mut self,
        pump: &mut Pump,
        call: Call,
    ) -> Result<Option<(CallId, &Call)>, AcpError> {
        pump.set_now();
        let Some(id) = call.start(&mut pump.conn)? else {
            return Ok(None);
        };
        Ok(Some((id, self.calls.entry(id).or_insert(call))))
    }

    /// An answer arrived for `call`: the call it settles, or `None` (not one of ours: it was
    /// forgotten; or `start()`'s next step is now waiting in its place).
    pub fn complete(
        &mut self,
        conn: &mut Connection,
        call: CallId,
        outcome: Result<Outcome, AcpError>,
    ) -> Option<Settled<Result<Outcome, AcpError>>> {
        let waiting = self.calls.remove(&call)?;
        let reported = waiting.reported(call);
        let outcome = match waiting.next_step(reported, &outcome) {
            None => outcome,
            Some(next) => match next.start(conn) {
                Ok(Some(id)) => {
                    self.calls.insert(id, next);
                    return None;
                }
                Ok(None) => Err(AcpError::protocol("start() ended without an answer")),
                Err(error) => Err(error),
            },
        };
        if waiting.handshake() {
            // The handshake is over (or failed): its deadline no longer applies.
            conn.set_start_deadline(None);
        }
        Some(Settled {
            reported,
            call: waiting,
            result: outcome,
        })
    }

    /// Gives up on a call whose caller gave up (its task was cancelled): a prompt's id is
    /// tombstoned; any other call's too, and the agent is told with `$/cancel_request`. The
    /// call, if it was waiting.
    pub fn abandon(&mut self, conn: &mut Connection, call: CallId) -> Option<Call> {
        conn.cancel_request(call);
        self.calls.remove(&call)
    }

    /// Whether no call waits.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// An error ended a step; which calls it fails, with what:
    /// - `close()` or `request_cancel()` from another thread (`Error::Halted`): every call
    ///   fails with it, and reading ends;
    /// - an error that stopped the client (a callback raised): the call about the failing
    ///   message's session (else the oldest) raises it and every other call raises "the client
    ///   stopped"; deferred permission requests are forgotten;
    /// - otherwise (a bad line, the output ending): the oldest call raises it, and the step goes
    ///   on unless that was the last call and the output has ended.
    ///
    /// With no call to take it, the next call raises it.
    pub fn route<X>(&mut self, pump: &mut Pump, error: Error<X>) -> Routed<X> {
        let mut routed = Routed::new();
        let conn = &mut pump.conn;
        if let Error::Halted(halted) = error {
            let message = halted.description().to_owned();
            for call in self.ids() {
                let why = Failure::Error(Error::Acp(AcpError::protocol(&message)));
                routed.failed.extend(self.fail(conn, call, why));
            }
            routed.ended = true;
            return routed;
        }
        let Some(reason) = conn.stopped().map(str::to_owned) else {
            match self.calls.keys().next().copied() {
                Some(oldest) => {
                    routed
                        .failed
                        .extend(self.fail(conn, oldest, Failure::Error(error)));
                    routed.end_step = conn.output_ended() && self.calls.is_empty();
                }
                None => routed.next = Some(error),
            }
            return routed;
        };
        routed.stopped = true;
        let waiting = self.calls.iter().map(|(id, call)| (*id, call.session()));
        let target = stop_reaches(waiting, pump.failed_session.as_deref());
        routed.cancelled = pump.take_deferred();
        let mut error = Some(error);
        for call in self.ids() {
            let why = match error.take_if(|_| Some(call) == target) {
                Some(error) => Failure::Error(error),
                None => Failure::Stopped(reason.clone()),
            };
            routed.failed.extend(self.fail(&mut pump.conn, call, why));
        }
        routed.next = error;
        routed
    }

    fn ids(&self) -> Vec<CallId> {
        self.calls.keys().copied().collect()
    }

    /// Fails one call (abandoned: a late answer is dropped).
    fn fail<R>(&mut self, conn: &mut Connection, call: CallId, why: R) -> Option<Settled<R>> {
        conn.abandon(call);
        let waiting = self.calls.remove(&call)?;
        if waiting.handshake() {
            conn.set_start_deadline(None);
        }
        Some(Settled {
            reported: waiting.reported(call),
            call: waiting,
            result: why,
        })
    }
}

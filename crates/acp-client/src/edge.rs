//! The callbacks the pump hands events to. The Python binding implements `Edge` with the
//! observer's callables and `Update` objects; the tests implement it in Rust. Whether a
//! permission request waits on something (an awaitable) is the edge's answer, not a question of
//! which driver runs.

use acp_proto::error::AcpError;
use acp_proto::host::Activity;
use acp_proto::permission::{ObserverAnswer, PermissionRecord};
use acp_proto::update::{Joined, UpdateEvent};
use acp_proto::{AskId, Connection};

/// What the edge answered a permission request with: a reply (or abstention) now, or a value
/// the caller waits on while reading goes on (`Pump::decide` settles it later).
pub enum Asked<D> {
    /// Nobody was asked (no observer takes requests): the policy decides.
    NotAsked,
    /// The observer's reply (None: it abstained; the policy decides).
    Reply(Option<ObserverAnswer>),
    Deferred(D),
}

/// Why a callback failed. `Callback` stops the client (the record of updates has a gap from
/// there); `Missing` too (a durable observer lacks the callback that records something).
pub enum Fail<X> {
    Callback(&'static str, X),
    Missing(AcpError),
    /// Failed without stopping the client (making a value for a callback failed, say).
    Other(X),
}

/// How a pump step ended in error.
#[derive(Debug)]
pub enum Error<X> {
    /// `close()` or `request_cancel()` from another thread: every call ends with this.
    Halted(AcpError),
    /// The protocol or the pipes failed.
    Acp(AcpError),
    /// A callback failed (the client is stopped when it was one whose failure stops it).
    Edge(X),
}

impl<X> From<AcpError> for Error<X> {
    fn from(error: AcpError) -> Self {
        Error::Acp(error)
    }
}

/// The callbacks of the pump, in the order it calls them for each event.
pub trait Edge {
    /// What a failing callback gives (a Python exception in the binding).
    type Error;
    /// What a deferred permission request waits on (an awaitable).
    type Deferred;

    /// An update, in arrival order: the journal, the observer, the reply of its session's turn
    /// (`joined`); `routed`: an open session took it. Whether `after_update` must run for it
    /// (a fold takes it).
    fn update(
        &mut self,
        update: &UpdateEvent<'_>,
        joined: Joined,
        routed: bool,
    ) -> Result<bool, Fail<Self::Error>>;

    /// After `update`, with the connection free again: `publish` (the update changed the
    /// session's published state, `acp_proto::update::UpdateKind::publishes`) and the fold
    /// (`fold`: `update` asked for it). Whether reading should pause (a full queue).
    fn after_update(
        &mut self,
        conn: &Connection,
        session_id: &str,
        publish: bool,
        fold: bool,
    ) -> Result<bool, Fail<Self::Error>>;

    /// A permission request the observer is asked about (not one already decided).
    fn ask(
        &mut self,
        conn: &Connection,
        ask: AskId,
    ) -> Result<Asked<Self::Deferred>, Fail<Self::Error>>;

    /// An elicitation (`elicitation/create`) the observer is asked about (`conn.elicitation`
    /// gives what to show). Without an observer that answers them: `NotAsked` (decline).
    fn elicit(
        &mut self,
        _conn: &Connection,
        _ask: AskId,
    ) -> Result<crate::elicited::Elicited<Self::Deferred>, Fail<Self::Error>> {
        Ok(crate::elicited::Elicited::NotAsked)
    }

    /// Records a decision before its answer is queued (commit before answer). `Ok(false)`: no
    /// callback records decisions (the pump checks the durable rule).
    fn commit(&mut self, record: &PermissionRecord) -> Result<bool, Fail<Self::Error>>;

    /// Whether the observer must record every update and decision (`durable=True`).
    fn durable(&self) -> bool {
        false
    }

    /// One record per host request (design/host.md §4), before its answer is queued.
    fn activity(&mut self, activity: &Activity) -> Result<(), Self::Error>;

    /// Every line the client writes, before it is written (journals).
    fn sent(&mut self, line: &[u8]) -> Result<(), Self::Error>;

    /// Every line the agent sent that is neither an update nor a permission request.
    fn received(&mut self, line: &str) -> Result<(), Self::Error>;

    /// Bytes were read from the agent (a journal stamps its batch).
    fn bytes_read(&mut self, _count: usize) {}

    /// Runs `work` (a wait, a file operation) with the host's other threads free to run (the
    /// binding releases the GIL).
    fn detach<R: Send, F: FnOnce() -> R + Send>(&mut self, work: F) -> R {
        work()
    }

    /// The signal check after each wait (Ctrl-C): an error stops the client.
    fn check_signals(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The client stops because `callback` raised `error`: the reason later calls are given
    /// (the edge keeps the error as their cause).
    fn stop_reason(&mut self, callback: &'static str, error: &Self::Error) -> String;

    /// The client stops for `error` (a durable observer lacks a callback): what the failing
    /// call raises (the edge keeps it as the cause of later calls' errors).
    fn missing(&mut self, error: AcpError) -> Self::Error;
}

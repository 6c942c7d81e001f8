//! The calls table: every request the client wrote and still awaits, by id, and the tombstones of
//! the ids it stopped waiting for (a late answer to one is dropped, not an error).

use std::collections::VecDeque;

/// How many abandoned ids are remembered; a response to an older one is an error again.
pub const TOMBSTONES: usize = 1024;

/// A call's handle: the id of its (first) request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub i64);

/// Which waiting call an error that stopped the client reaches: the call about the session
/// whose message stopped it, else the oldest (ids grow); every other waiting call ends with
/// "the client stopped" (async.md §3).
pub fn stop_reaches<'a>(
    waiting: impl IntoIterator<Item = (CallId, Option<&'a str>)>,
    failed_session: Option<&str>,
) -> Option<CallId> {
    let mut oldest = None;
    for (call, session) in waiting {
        if failed_session.is_some() && session == failed_session {
            return Some(call);
        }
        oldest = Some(oldest.map_or(call, |o: CallId| o.min(call)));
    }
    oldest
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    Initialize,
    SessionNew,
    SessionLoad,
    SessionResume,
    SessionList,
    SessionDelete,
    SessionClose,
    SetMode,
    SetConfigOption,
    SetModel,
    Authenticate,
    Logout,
    Prompt,
    /// Unstable (schema.unstable.json): `session/fork`, `session/set_title`, `session/status`.
    SessionFork,
    SetTitle,
    SessionStatus,
    /// The `_session/steering` extension (claude-agent-acp, codex-acp).
    Steer,
}

impl CallKind {
    pub fn method(self) -> &'static str {
        match self {
            CallKind::Initialize => "initialize",
            CallKind::SessionNew => "session/new",
            CallKind::SessionLoad => "session/load",
            CallKind::SessionResume => "session/resume",
            CallKind::SessionList => "session/list",
            CallKind::SessionDelete => "session/delete",
            CallKind::SessionClose => "session/close",
            CallKind::SetMode => "session/set_mode",
            CallKind::SetConfigOption => "session/set_config_option",
            CallKind::SetModel => "session/set_model",
            CallKind::Authenticate => "authenticate",
            CallKind::Logout => "logout",
            CallKind::Prompt => "session/prompt",
            CallKind::SessionFork => "session/fork",
            CallKind::SetTitle => "session/set_title",
            CallKind::SessionStatus => "session/status",
            CallKind::Steer => "_session/steering",
        }
    }
}

/// A `session/list` in progress: the pages read so far.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub cwd: Option<String>,
    pub sessions: Vec<String>,
    pub cursors: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Call {
    pub handle: CallId,
    /// The id of the request now awaited (a listing's later pages take new ids).
    pub wire_id: i64,
    pub kind: CallKind,
    pub session: Option<String>,
    /// The argument the answer applies (mode id, model id).
    pub argument: String,
    pub listing: Option<Listing>,
    /// A prompt's timeout (ms on the driver's clock); then its cancel grace.
    pub deadline_ms: Option<u64>,
    pub timed_out: bool,
}

#[derive(Default)]
pub struct Calls {
    live: Vec<Call>,
    tombstones: VecDeque<i64>,
}

impl Calls {
    pub fn insert(&mut self, call: Call) {
        self.live.push(call);
    }

    /// Removes and returns the call awaiting `wire_id`.
    pub fn take(&mut self, wire_id: i64) -> Option<Call> {
        let index = self.live.iter().position(|c| c.wire_id == wire_id)?;
        Some(self.live.remove(index))
    }

    pub fn get(&self, handle: CallId) -> Option<&Call> {
        self.live.iter().find(|c| c.handle == handle)
    }

    pub fn get_mut(&mut self, handle: CallId) -> Option<&mut Call> {
        self.live.iter_mut().find(|c| c.handle == handle)
    }

    pub fn remove(&mut self, handle: CallId) -> Option<Call> {
        let index = self.live.iter().position(|c| c.handle == handle)?;
        Some(self.live.remove(index))
    }

    pub fn oldest(&self) -> Option<&Call> {
        self.live.first()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Call> {
        self.live.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Call> {
        self.live.iter_mut()
    }

    pub fn tombstone(&mut self, wire_id: i64) {
        if self.tombstones.len() == TOMBSTONES {
            self.tombstones.pop_front();
        }
        self.tombstones.push_back(wire_id);
    }

    /// Forgets the tombstone of `wire_id` if there is one (its late answer arrived).
    pub fn bury(&mut self, wire_id: i64) -> bool {
        match self.tombstones.iter().position(|id| *id == wire_id) {
            Some(index) => {
                self.tombstones.remove(index);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reaches_the_call_about_the_failing_session_else_the_oldest() {
        let waiting = [
            (CallId(3), Some("b")),
            (CallId(2), None),
            (CallId(5), Some("a")),
        ];
        assert_eq!(stop_reaches(waiting, Some("a")), Some(CallId(5)));
        assert_eq!(stop_reaches(waiting, Some("z")), Some(CallId(2)));
        assert_eq!(stop_reaches(waiting, None), Some(CallId(2)));
        assert_eq!(stop_reaches([], Some("a")), None);
    }
}

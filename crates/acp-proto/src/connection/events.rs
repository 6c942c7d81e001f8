//! What the connection hands out and takes in: the events `poll_event` yields, the outcomes of
//! finished calls, the requests a driver makes, and the decisions it sends back.

use super::*;

/// A permission request waiting for `decide`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AskId(pub u64);

/// What a finished call returns.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Initialized,
    SessionOpened(String),
    /// Every page's sessions, raw JSON objects in the agent's order.
    Listed(Vec<String>),
    /// The `configOptions` array after `set_config_option` (raw JSON), when there is one.
    ConfigOptions(Option<String>),
    Turn(Box<TurnOutcome>),
    /// A result the facade reads itself (`session/set_title`, `session/status`): its JSON text.
    Raw(String),
    Done,
}

#[derive(Debug)]
pub enum Event<'a> {
    /// A numbered update; `joined`: what its text did to the reply of its session's turn;
    /// `routed`: an open session took it (the session fold applies it).
    Update {
        update: UpdateEvent<'a>,
        joined: Joined,
        routed: bool,
    },
    /// Ask the observer (unless `cancelled`; `preview` gives what to show it), then `decide`.
    Permission {
        ask: AskId,
        /// Decided without the observer (design/host.md §5 tiers 0–3): the session's cancel
        /// latch is tripped, a remembered answer or a rule matched. The observer is not asked.
        cancelled: bool,
    },
    /// An `elicitation/create` the observer is asked about (`Connection::elicitation` gives
    /// what to show it), then `decide_elicitation`; `line` is the request.
    Elicitation { ask: AskId, line: &'a str },
    /// A call finished (`line` is its response; "" when a timer ended it).
    Done {
        call: CallId,
        outcome: Result<Outcome, AcpError>,
        line: &'a str,
    },
    /// A host request (`fs/*`, `terminal/*`, design/host.md): `op` is what the OS side is asked
    /// to do, or the refusal of checks 1–2; then `answer_host`, `on_activity`, `send_host`.
    Host {
        host: HostId,
        method: crate::host::ClientMethod,
        session_id: String,
        op: Result<crate::host::HostOp, crate::host::HostError>,
        line: &'a str,
    },
    /// A line handled here: a notification dropped, a request answered "method not found", a
    /// late response to an abandoned call.
    Other { line: &'a str },
}

/// A decided permission request: the committed record and the answer. `send` queues the answer;
/// dropping it (the commit callback raised) writes nothing.
#[derive(Debug)]
pub struct Decided {
    pub record: PermissionRecord,
    pub(super) bytes: Vec<u8>,
}

/// The calls a host can make.
#[derive(Clone, Copy, Debug)]
pub enum Request<'a> {
    Initialize,
    NewSession {
        cwd: &'a str,
        additional_directories: &'a [String],
        mcp_servers: Option<&'a [McpServer]>,
        /// Written as `systemPrompt` only when given; checked against the agent's
        /// `sessionCapabilities.systemPrompt`.
        system_prompt: Option<&'a SystemPrompt>,
    },
    LoadSession {
        session_id: &'a str,
        cwd: &'a str,
        additional_directories: &'a [String],
        mcp_servers: Option<&'a [McpServer]>,
        resume: bool,
        system_prompt: Option<&'a SystemPrompt>,
        /// v2's `replayFrom: {"type": "start"}` on a resume: the replayed updates are routed to
        /// the session before the call returns, as `session/load`'s in v1.
        replay_from_start: bool,
    },
    ListSessions {
        cwd: Option<&'a str>,
    },
    DeleteSession {
        session_id: &'a str,
    },
    Authenticate {
        method_id: &'a str,
    },
    Logout,
    Prompt {
        session_id: &'a str,
        content: &'a [ContentBlock],
        /// Timeout in ms from now; the prompt capability gate applies when `gated`.
        timeout_ms: Option<u64>,
        gated: bool,
        /// `params._meta` as string pairs (e.g. `traceparent`, `tracestate`: ACP's
        /// meta-propagation convention); empty: no `_meta`.
        meta: &'a [(String, String)],
    },
    SetMode {
        session_id: &'a str,
        mode_id: &'a str,
    },
    SetConfigOption {
        session_id: &'a str,
        config_id: &'a str,
        value: ConfigValue<'a>,
    },
    SetModel {
        session_id: &'a str,
        model_id: &'a str,
    },
    /// Unstable `session/fork` of `session_id` (`sessionCapabilities.fork`): a new session,
    /// opened as `session/new`'s is.
    ForkSession {
        session_id: &'a str,
        cwd: &'a str,
        additional_directories: &'a [String],
        mcp_servers: Option<&'a [McpServer]>,
        system_prompt: Option<&'a SystemPrompt>,
    },
    /// Unstable `session/set_title` (`sessionCapabilities.title`).
    SetTitle {
        session_id: &'a str,
        title: &'a str,
    },
    /// Unstable `session/status` (`sessionCapabilities.status`).
    SessionStatus {
        session_id: &'a str,
    },
    /// The `_session/steering` extension (`initialize`'s `_meta.steering.supported`): a
    /// message into the session's running turn; `idleBehavior: "promptRequired"` always, so an
    /// idle agent answers that rather than starting a turn nobody waits for.
    Steer {
        session_id: &'a str,
        content: &'a [ContentBlock],
    },
}

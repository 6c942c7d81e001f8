//! The client's errors. Each message says what happened in a host developer's words: which limit,
//! its value, and what was seen. The Python layer maps each variant to the exception of the same
//! name in `acp_fast`.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum AcpError {
    InvalidLimits(String),
    CapacityOverflow(String),
    AgentTransportFailed(String),
    AgentProtocol(ProtocolError),
    MissingDurableObserver(String),
    RequestCapacityExceeded(String),
    UpdateCapacityExceeded(String),
    UpdateCountCapacityExceeded(String),
    ReaderMessageCapacityExceeded(String),
    /// A call the agent did not advertise (`capability` is the name in the message); nothing
    /// was written.
    Capability {
        capability: String,
        /// The client's `agent_id`, which the message names.
        agent_id: String,
        message: String,
    },
    /// An argument the connection refused before writing anything (Python: `ValueError`).
    InvalidArgument(String),
    /// A call that cannot run in this state: a closed or busy session (Python: `RuntimeError`).
    Misuse(String),
    /// A turn whose `cancel_grace` ran out after its timeout; its id is tombstoned.
    TurnTimeout {
        session_id: String,
    },
    /// The handshake's deadline (`Connection::set_start_deadline`) passed: the connection is
    /// stopped with this reason. (Python: `ConnectError`.)
    StartTimeout(String),
}

/// An `AgentProtocolError`, with the JSON-RPC error's fields when the agent answered with one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProtocolError {
    pub description: String,
    pub code: Option<i64>,
    pub message: Option<String>,
    /// The error's `data` as raw JSON text.
    pub data: Option<String>,
    /// The agent's output ended before the awaited response (hosts add the exit status and
    /// stderr they know of).
    pub output_ended: bool,
    /// The agent's `initialize` named another protocol version (or none).
    pub version_refused: bool,
}

impl AcpError {
    pub fn protocol(description: impl Into<String>) -> AcpError {
        AcpError::AgentProtocol(ProtocolError {
            description: description.into(),
            ..ProtocolError::default()
        })
    }

    /// Whether this error, failing a handshake call (`initialize`, the first `session/new`),
    /// means the client could not connect (design §6: an error answer, another protocol
    /// version, the output ending, the pipes failing, the deadline) rather than a fault in a
    /// line (invalid JSON, an unexpected message).
    pub fn fails_connect(&self) -> bool {
        match self {
            AcpError::AgentProtocol(p) => p.code.is_some() || p.output_ended || p.version_refused,
            AcpError::AgentTransportFailed(_) | AcpError::StartTimeout(_) => true,
            _ => false,
        }
    }

    /// The name of the matching Python exception class.
    pub fn class_name(&self) -> &'static str {
        match self {
            AcpError::InvalidLimits(_) => "InvalidLimits",
            AcpError::CapacityOverflow(_) => "CapacityOverflow",
            AcpError::AgentTransportFailed(_) => "AgentTransportFailed",
            AcpError::AgentProtocol(_) => "AgentProtocolError",
            AcpError::MissingDurableObserver(_) => "MissingDurableObserver",
            AcpError::RequestCapacityExceeded(_) => "RequestCapacityExceeded",
            AcpError::UpdateCapacityExceeded(_) => "UpdateCapacityExceeded",
            AcpError::UpdateCountCapacityExceeded(_) => "UpdateCountCapacityExceeded",
            AcpError::ReaderMessageCapacityExceeded(_) => "ReaderMessageCapacityExceeded",
            AcpError::Capability { .. } => "CapabilityError",
            AcpError::InvalidArgument(_) => "ValueError",
            AcpError::Misuse(_) => "RuntimeError",
            AcpError::TurnTimeout { .. } => "TurnTimeout",
            AcpError::StartTimeout(_) => "ConnectError",
        }
    }

    pub fn description(&self) -> &str {
        match self {
            AcpError::AgentProtocol(p) => &p.description,
            AcpError::InvalidLimits(m)
            | AcpError::CapacityOverflow(m)
            | AcpError::AgentTransportFailed(m)
            | AcpError::MissingDurableObserver(m)
            | AcpError::RequestCapacityExceeded(m)
            | AcpError::UpdateCapacityExceeded(m)
            | AcpError::UpdateCountCapacityExceeded(m)
            | AcpError::ReaderMessageCapacityExceeded(m)
            | AcpError::InvalidArgument(m)
            | AcpError::Misuse(m)
            | AcpError::StartTimeout(m) => m,
            AcpError::Capability { message, .. } => message,
            AcpError::TurnTimeout { .. } => "the turn timed out and its cancel grace ran out",
        }
    }
}

impl fmt::Display for AcpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class_name(), self.description())
    }
}

impl std::error::Error for AcpError {}

/// At most `limit` bytes of a line, for error messages (cut on a char boundary).
pub fn excerpt(line: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(line);
    if text.len() <= limit {
        return text.into_owned();
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..cut], line.len())
}

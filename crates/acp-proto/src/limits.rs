//! The connection's settings: transfer caps, the permission policy, and what the client says of
//! itself. Validated once, here, for every driver.

use crate::encode::{ClientInfo, McpServer};
use crate::error::AcpError;
use crate::host::{HostCapabilities, OptIns};
use crate::rules::{Decision, Matcher, Rule};

/// Caps on traffic; every one must be above zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferLimits {
    pub request_bytes: usize,
    pub response_bytes: usize,
    pub update_bytes: usize,
    pub update_count: u64,
    pub response_segment_count: usize,
}

impl TransferLimits {
    pub fn validate(&self, transport_epoch: u64) -> Result<(), AcpError> {
        let fields = [
            ("request_bytes", self.request_bytes as u64),
            ("response_bytes", self.response_bytes as u64),
            ("update_bytes", self.update_bytes as u64),
            ("update_count", self.update_count),
            ("response_segment_count", self.response_segment_count as u64),
        ];
        for (name, value) in fields {
            if value == 0 {
                return Err(AcpError::InvalidLimits(format!(
                    "transfer_limits.{name} must be above zero (got 0)"
                )));
            }
        }
        if transport_epoch == 0 {
            return Err(AcpError::InvalidLimits(
                "transport_epoch must be nonzero (got 0)".into(),
            ));
        }
        Ok(())
    }
}

/// The compiled permission policy (design/host.md §5). With the default value every answer is
/// wave 1's: no rules, the observer, the two lists, then deny.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionPolicy {
    pub allowed_tool_kinds: Vec<String>,
    pub allowed_title_prefixes: Vec<String>,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub default: Decision,
    pub persist: bool,
    pub remember: bool,
    /// Evaluates the host's title patterns (and non-ASCII case folds).
    pub matcher: Matcher,
}

impl PermissionPolicy {
    pub fn allows(&self, kind: Option<&str>, title: Option<&str>) -> bool {
        kind.is_some_and(|kind| self.allowed_tool_kinds.iter().any(|k| k == kind))
            || title.is_some_and(|title| {
                self.allowed_title_prefixes
                    .iter()
                    .any(|p| title.starts_with(p.as_str()))
            })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub limits: TransferLimits,
    pub transport_epoch: u64,
    pub client_info: ClientInfo,
    pub mcp_servers: Vec<McpServer>,
    pub policy: PermissionPolicy,
    /// Named in capability errors ("ACP agent '<agent_id>' did not advertise …").
    pub agent_id: String,
    /// How long a timed-out turn may take to answer after its `session/cancel`, in ms.
    pub cancel_grace_ms: u64,
    /// What the client advertises and serves (design/host.md §1); `None`: `{}`, wave 1.
    pub capabilities: Option<HostCapabilities>,
    /// What is advertised beyond the host side (`OptIns`); off by default. Its `elicitation`
    /// is not read from here: `Connection::advertise_elicitation` sets it.
    pub opt_ins: OptIns,
    /// Whether the connection assembles the reply text itself. A host that already holds each
    /// admitted chunk's text (as the Python binding does) assembles it once at the end instead,
    /// and `TurnOutcome::response` is then empty.
    pub collect_reply: bool,
    /// The ACP version offered in `initialize` (design/protocol-now.md §4).
    pub protocol: Protocol,
}

/// Which ACP versions a client offers: v1 alone, v2 alone, or v2 with a fall-back to v1 when the
/// agent answers 1 (the official SDKs' negotiation rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    V1,
    V2,
    Auto,
}

impl Protocol {
    pub fn from_name(name: &str) -> Option<Protocol> {
        match name {
            "v1" => Some(Protocol::V1),
            "v2" => Some(Protocol::V2),
            "auto" => Some(Protocol::Auto),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::V1 => "v1",
            Protocol::V2 => "v2",
            Protocol::Auto => "auto",
        }
    }

    /// The `protocolVersion` written in `initialize`.
    pub fn offered(self) -> i64 {
        match self {
            Protocol::V1 => 1,
            Protocol::V2 | Protocol::Auto => 2,
        }
    }
}

impl Config {
    pub fn new(limits: TransferLimits, transport_epoch: u64) -> Config {
        Config {
            limits,
            transport_epoch,
            client_info: ClientInfo::default(),
            mcp_servers: Vec::new(),
            policy: PermissionPolicy::default(),
            agent_id: "agent".into(),
            cancel_grace_ms: 5000,
            collect_reply: true,
            capabilities: None,
            opt_ins: OptIns::default(),
            protocol: Protocol::V1,
        }
    }

    pub fn validate(&self) -> Result<(), AcpError> {
        self.limits.validate(self.transport_epoch)?;
        if self.cancel_grace_ms == 0 {
            return Err(AcpError::InvalidLimits(
                "cancel_grace must be above zero".into(),
            ));
        }
        Ok(())
    }
}

//! Host requests in the connection: checks 1–2 of design/host.md §2 (capability, params,
//! unknown session, absolute path), the pending request while the OS side works, and the
//! answer with its activity record.

use serde_json::Value;

use super::*;
use crate::host::{self, Activity, ClientMethod, HostCapabilities, HostError, HostOk, HostOp};

/// A host request handed to the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostId(pub u64);

pub(super) struct PendingHost {
    id: HostId,
    raw_id: String,
    method: ClientMethod,
    session_id: String,
    path: Option<String>,
    command: Option<String>,
    terminal_id: Option<String>,
}

/// An answered host request: the activity to record, then `send_host` queues the bytes;
/// dropping it (`on_activity` raised) writes nothing.
#[derive(Debug)]
pub struct HostAnswer {
    pub activity: Activity,
    bytes: Vec<u8>,
}

impl Core {
    /// Checks 1–2; the event carries the operation for the OS side, or the refusal.
    pub(super) fn host_request<'a>(
        &mut self,
        method: ClientMethod,
        raw_id: &str,
        line: &'a str,
    ) -> Event<'a> {
        let (value, unreadable) = host::params_of(line);
        let session_id = host::session_of(value.as_ref());
        let op = if !HostCapabilities::advertises(self.config.capabilities.as_ref(), method) {
            Err(HostError::method_not_found(method))
        } else if let Some(refused) = unreadable {
            Err(refused)
        } else {
            host::decode(method, value.as_ref()).and_then(|op| {
                if self.session(&session_id).is_none() {
                    return Err(HostError::refused(
                        "unknown session",
                        "sessionId",
                        &session_id,
                    ));
                }
                op.check_absolute().map(|()| op)
            })
        };
        let params = value.as_ref();
        let text = |key: &str| {
            params
                .and_then(|p| p.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let command = match &op {
            Ok(HostOp::TerminalCreate { command, args, .. }) => {
                Some(host::shell_join(command, args))
            }
            _ if method == ClientMethod::TerminalCreate => text("command"),
            _ => None,
        };
        let path = match method {
            ClientMethod::ReadTextFile | ClientMethod::WriteTextFile => text("path"),
            ClientMethod::TerminalCreate => text("cwd"),
            _ => None,
        };
        let id = HostId(self.next_host);
        self.next_host += 1;
        self.hosts.push(PendingHost {
            id,
            raw_id: raw_id.to_owned(),
            method,
            session_id: session_id.clone(),
            path,
            command,
            terminal_id: text("terminalId"),
        });
        Event::Host {
            host: id,
            method,
            session_id,
            op,
            line,
        }
    }

    /// The answer to a host request and its activity. `path` replaces the activity's path
    /// (a terminal's effective cwd); `terminal_id` its terminal id (a created terminal's).
    pub(super) fn answer_host(
        &mut self,
        host: HostId,
        result: Result<HostOk, HostError>,
        path: Option<String>,
    ) -> Result<HostAnswer, AcpError> {
        let index = self
            .hosts
            .iter()
            .position(|h| h.id == host)
            .ok_or_else(|| AcpError::Misuse("this host request was already answered".into()))?;
        let pending = self.hosts.remove(index);
        let limit = self.config.limits.request_bytes;
        let mut result = result;
        let mut bytes = host::answer(&pending.raw_id, &result);
        if bytes.len() > limit && result.is_ok() {
            result = Err(HostError::failed(
                -32603,
                &format!(
                    "the answer would be {} bytes, more than transfer_limits.request_bytes ({limit})",
                    bytes.len()
                ),
                pending.path.as_deref(),
            ));
            bytes = host::answer(&pending.raw_id, &result);
        }
        let bytes = self.checked(bytes, &format!("the {} answer", pending.method.wire()))?;
        let terminal_id = match &result {
            Ok(HostOk::TerminalCreated(id)) => Some(id.clone()),
            _ if pending.method == ClientMethod::TerminalCreate => None,
            _ => pending.terminal_id,
        };
        let (allowed, reason, error_code) = match &result {
            Ok(_) => (true, None, None),
            Err(e) if e.refused => (false, Some(e.reason.clone()), Some(e.code)),
            Err(e) => (true, None, Some(e.code)),
        };
        Ok(HostAnswer {
            activity: Activity {
                method: pending.method.wire(),
                allowed,
                path: path.or(pending.path),
                command: pending.command,
                terminal_id,
                reason,
                session_id: pending.session_id,
                error_code,
            },
            bytes,
        })
    }

    /// `$/cancel_request` naming a host request still being served (a pending
    /// `terminal/wait_for_exit`): it is answered `-32800` (sessions.md §5). Anything else: None.
    pub(super) fn cancel_host<'a>(&mut self, line: &'a str) -> Option<Event<'a>> {
        let value: Value = serde_json::from_str(line).ok()?;
        let wanted = value.get("params")?.get("requestId")?;
        let pending = self
            .hosts
            .iter()
            .find(|h| serde_json::from_str::<Value>(&h.raw_id).is_ok_and(|id| &id == wanted))?;
        Some(Event::Host {
            host: pending.id,
            method: pending.method,
            session_id: pending.session_id.clone(),
            op: Err(HostError::failed(-32800, "request cancelled", None)),
            line,
        })
    }

    /// The raw id of a pending host request (`$/cancel_request` matching).
    pub(super) fn host_raw_id(&self, host: HostId) -> Option<&str> {
        self.hosts
            .iter()
            .find(|h| h.id == host)
            .map(|h| h.raw_id.as_str())
    }
}

impl Connection {
    /// Answers a host request (after the OS side's operation): the activity and the bytes.
    pub fn answer_host(
        &mut self,
        host: HostId,
        result: Result<HostOk, HostError>,
        path: Option<String>,
    ) -> Result<HostAnswer, AcpError> {
        self.core.answer_host(host, result, path)
    }

    /// Queues an answered host request's line.
    pub fn send_host(&mut self, answer: HostAnswer) {
        self.core.outbox.push_back(answer.bytes);
    }

    /// Milliseconds from the driver's last look at the clock to the earliest call deadline
    /// (a host operation that may take long ends by then, so the timeout fires on time).
    pub fn time_left(&self) -> Option<u64> {
        self.poll_timeout()
            .map(|deadline| deadline.saturating_sub(self.core.now_ms))
    }

    /// The agent's raw JSON id of a host request still being served.
    pub fn host_raw_id(&self, host: HostId) -> Option<&str> {
        self.core.host_raw_id(host)
    }

    /// The terminal answer cut (host.md §3): terminal output cut further from the front (on a
    /// character boundary, `truncated` set) until its answer fits `request_bytes`; other
    /// answers unchanged (`answer_host` checks them).
    pub fn fit_host_answer(
        &self,
        host: HostId,
        mut result: Result<HostOk, HostError>,
    ) -> Result<HostOk, HostError> {
        if !matches!(result, Ok(HostOk::Output { .. })) {
            return result;
        }
        let request_bytes = self.core.config.limits.request_bytes;
        let raw_id = self.host_raw_id(host).unwrap_or("0").to_owned();
        for _ in 0..8 {
            let size = host::answer(&raw_id, &result).len();
            let Ok(HostOk::Output {
                output, truncated, ..
            }) = &mut result
            else {
                break;
            };
            if size <= request_bytes || output.is_empty() {
                break;
            }
            let mut cut = (size - request_bytes).min(output.len());
            while !output.is_char_boundary(cut) {
                cut += 1;
            }
            output.drain(..cut);
            *truncated = true;
        }
        result
    }
}

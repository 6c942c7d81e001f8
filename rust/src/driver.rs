//! The call loop: writes a request, then reads lines into the bounded reader and feeds them to the
//! engine until the awaited response arrives. Where bytes come from is a `Transport`; what the
//! caller sees (observer callbacks, signal checks) is a `Host`. Both are traits, so the loop runs
//! the same over agent pipes, in-memory buffers, or with or without an interpreter.

use std::io;

use crate::encode::ContentBlock;
use crate::engine::{
    CallKind, Completion, Engine, PermissionRecord, PromptOutcome, Selection, Step, UpdateEvent,
};
use crate::error::AcpError;
use crate::reader::{Poll, Storage};

pub enum ReadOutcome {
    Data(usize),
    Eof,
    /// Nothing arrived within the transport's wait; the host gets a chance to check signals.
    Idle,
}

pub enum WriteOutcome {
    Wrote(usize),
    /// The peer is not taking bytes right now.
    Idle,
}

/// Bytes to and from the agent. Reads and writes may wait, but only briefly (the pipe transport
/// waits at most 100 ms), so the host can react to signals and cancellation.
pub trait Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome>;
    fn write(&mut self, bytes: &[u8]) -> io::Result<WriteOutcome>;
}

/// The caller's side: the observer and the checks run between reads.
pub trait Host {
    type Error: From<AcpError>;
    /// Called once per update, in arrival order, before its text joins the reply.
    fn on_update(&mut self, update: &UpdateEvent<'_>) -> Result<(), Self::Error>;
    /// Asked first on a permission request; `None` leaves the decision to the policy.
    fn on_permission(
        &mut self,
        preview: &PermissionRecord,
    ) -> Result<Option<Selection>, Self::Error>;
    /// Whether `on_permission` can answer at all (skips building the preview otherwise).
    fn asks_permission(&self) -> bool;
    /// Receives the decision and the exact line before the answer is sent; an error stops it.
    fn on_permission_commit(&mut self, record: &PermissionRecord) -> Result<(), Self::Error>;
    /// Called after every read or idle wait: the place to check signals and cancellation.
    fn tick(&mut self) -> Result<(), Self::Error>;
}

/// The conversation state that outlives one call: the engine and the reader's storage.
pub struct Conversation {
    pub engine: Engine,
    pub storage: Storage,
}

impl Conversation {
    pub fn new(engine: Engine, storage: Storage) -> Conversation {
        Conversation { engine, storage }
    }

    /// `initialize`, then `session/new` in `cwd`.
    pub fn start<T: Transport, H: Host>(
        &mut self,
        transport: &mut T,
        host: &mut H,
        cwd: &str,
    ) -> Result<(), H::Error> {
        let request = self.engine.begin_initialize()?;
        self.send(transport, host, &request, CallKind::Initialize)?;
        self.await_response(transport, host)?;
        let request = self.engine.begin_session_new(cwd)?;
        self.send(transport, host, &request, CallKind::SessionNew)?;
        self.await_response(transport, host)?;
        Ok(())
    }

    pub fn prompt<T: Transport, H: Host>(
        &mut self,
        transport: &mut T,
        host: &mut H,
        content: &[ContentBlock],
    ) -> Result<PromptOutcome, H::Error> {
        let request = self.engine.begin_prompt(content)?;
        self.send(transport, host, &request, CallKind::Prompt)?;
        match self.await_response(transport, host)? {
            Completion::Prompted(outcome) => Ok(outcome),
            other => unreachable!("a prompt completed as {other:?}"),
        }
    }

    fn send<T: Transport, H: Host>(
        &mut self,
        transport: &mut T,
        host: &mut H,
        mut bytes: &[u8],
        what: CallKind,
    ) -> Result<(), H::Error> {
        let result = write_all(transport, host, &mut bytes, what.method());
        if result.is_err() {
            self.engine.abandon();
        }
        result
    }

    fn await_response<T: Transport, H: Host>(
        &mut self,
        transport: &mut T,
        host: &mut H,
    ) -> Result<Completion, H::Error> {
        let result = self.read_until_response(transport, host);
        if result.is_err() {
            self.engine.abandon();
        }
        result
    }

    fn read_until_response<T: Transport, H: Host>(
        &mut self,
        transport: &mut T,
        host: &mut H,
    ) -> Result<Completion, H::Error> {
        loop {
            let range = match self.storage.poll() {
                Ok(Poll::Line(range)) => range,
                Ok(Poll::NeedInput) => {
                    match transport.read(self.storage.writable()) {
                        Ok(ReadOutcome::Data(count)) => self.storage.commit(count),
                        Ok(ReadOutcome::Eof) => self.storage.finish(),
                        Ok(ReadOutcome::Idle) => {}
                        Err(e) => {
                            return Err(AcpError::AgentTransportFailed(format!(
                                "reading the agent's stdout failed: {e}"
                            ))
                            .into())
                        }
                    }
                    host.tick()?;
                    continue;
                }
                Ok(Poll::End) => return Err(self.engine.output_ended().into()),
                Err(too_long) => {
                    return Err(AcpError::ReaderMessageCapacityExceeded(format!(
                        "the agent sent a line longer than reader_limits.message_bytes ({} bytes); reading from the agent has stopped, so this client can only be closed",
                        too_long.message_bytes
                    ))
                    .into())
                }
            };
            let line = self.storage.bytes(range);
            match self.engine.handle_line(line)? {
                Step::Nothing => {}
                Step::Send(answer) => {
                    write_all(transport, host, &mut answer.as_slice(), "an error answer")?
                }
                Step::Update(update) => {
                    host.on_update(&update)?;
                    if let Some(cancel) = self.engine.admit_update(&update)? {
                        write_all(transport, host, &mut cancel.as_slice(), "session/cancel")?;
                    }
                }
                Step::Permission(request) => {
                    let mut selection = None;
                    if host.asks_permission() {
                        selection = host.on_permission(&request.preview())?;
                    }
                    let selection =
                        selection.unwrap_or_else(|| self.engine.policy_selection(&request));
                    let record = request.record(&selection, true);
                    let answer = self.engine.permission_answer(&request, &selection)?;
                    host.on_permission_commit(&record)?;
                    write_all(
                        transport,
                        host,
                        &mut answer.as_slice(),
                        "a permission answer",
                    )?;
                }
                Step::Done(completion) => return Ok(completion),
            }
        }
    }
}

fn write_all<T: Transport, H: Host>(
    transport: &mut T,
    host: &mut H,
    bytes: &mut &[u8],
    what: &str,
) -> Result<(), H::Error> {
    while !bytes.is_empty() {
        match transport.write(bytes) {
            Ok(WriteOutcome::Wrote(count)) => *bytes = &bytes[count..],
            Ok(WriteOutcome::Idle) => host.tick()?,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                return Err(AcpError::AgentTransportFailed(format!(
                    "could not send {what} to the agent: its stdin is closed (the agent has exited or closed it)"
                ))
                .into())
            }
            Err(e) => {
                return Err(AcpError::AgentTransportFailed(format!(
                    "could not send {what} to the agent: {e}"
                ))
                .into())
            }
        }
    }
    Ok(())
}

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
    /// Called after `on_update` when the update's text joined the reply (for hosts that
    /// assemble the reply themselves; see `Config::collect_reply`).
    fn on_reply_text(&mut self, _update: &UpdateEvent<'_>) {}
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
                    let admission = self.engine.admit_update(&update)?;
                    if admission.joined {
                        host.on_reply_text(&update);
                    }
                    if let Some(cancel) = admission.cancel {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::ClientInfo;
    use crate::engine::{Config, PermissionPolicy, TransferLimits, UpdateKind};
    use crate::reader::Limits;
    use std::collections::VecDeque;

    type Respond = Box<dyn FnMut(&str) -> Vec<String>>;

    /// An in-memory agent: each complete line written to it is answered by `respond`.
    struct ScriptedAgent {
        respond: Respond,
        inbox: Vec<u8>,
        outbox: VecDeque<u8>,
        received: Vec<String>,
        /// Bytes handed out per read, to exercise lines split across reads.
        read_size: usize,
        closed_after_output: bool,
    }

    impl ScriptedAgent {
        fn new(respond: impl FnMut(&str) -> Vec<String> + 'static) -> ScriptedAgent {
            ScriptedAgent {
                respond: Box::new(respond),
                inbox: Vec::new(),
                outbox: VecDeque::new(),
                received: Vec::new(),
                read_size: 7,
                closed_after_output: false,
            }
        }
    }

    impl Transport for ScriptedAgent {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<ReadOutcome> {
            if self.outbox.is_empty() {
                return Ok(if self.closed_after_output {
                    ReadOutcome::Eof
                } else {
                    ReadOutcome::Idle
                });
            }
            let count = buf.len().min(self.read_size).min(self.outbox.len());
            for slot in buf.iter_mut().take(count) {
                *slot = self.outbox.pop_front().unwrap();
            }
            Ok(ReadOutcome::Data(count))
        }

        fn write(&mut self, bytes: &[u8]) -> io::Result<WriteOutcome> {
            // Take at most 5 bytes per write, to exercise partial writes.
            let count = bytes.len().min(5);
            self.inbox.extend_from_slice(&bytes[..count]);
            while let Some(end) = self.inbox.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.inbox.drain(..=end).collect();
                let line = String::from_utf8(line).unwrap().trim_end().to_owned();
                for out in (self.respond)(&line) {
                    self.outbox.extend(out.as_bytes());
                    self.outbox.push_back(b'\n');
                }
                self.received.push(line);
            }
            Ok(WriteOutcome::Wrote(count))
        }
    }

    #[derive(Default)]
    struct Recorder {
        events: Vec<String>,
        ticks: usize,
        fail_ticks_after: Option<usize>,
        answer: Option<Selection>,
    }

    impl Host for Recorder {
        type Error = AcpError;
        fn on_update(&mut self, update: &UpdateEvent<'_>) -> Result<(), AcpError> {
            self.events.push(format!(
                "update {} {} {:?} {}",
                update.transport_epoch, update.update_sequence, update.kind, update.text
            ));
            Ok(())
        }
        fn on_permission(
            &mut self,
            preview: &PermissionRecord,
        ) -> Result<Option<Selection>, AcpError> {
            self.events
                .push(format!("ask {} {}", preview.title, preview.outcome));
            Ok(self.answer.clone())
        }
        fn asks_permission(&self) -> bool {
            self.answer.is_some()
        }
        fn on_permission_commit(&mut self, record: &PermissionRecord) -> Result<(), AcpError> {
            self.events.push(format!(
                "commit {} {} {}",
                record.title, record.outcome, record.option_id
            ));
            Ok(())
        }
        fn tick(&mut self) -> Result<(), AcpError> {
            self.ticks += 1;
            if self.fail_ticks_after.is_some_and(|n| self.ticks > n) {
                return Err(AcpError::protocol("interrupted"));
            }
            Ok(())
        }
    }

    fn conversation(message_bytes: usize) -> Conversation {
        let engine = Engine::new(Config {
            limits: TransferLimits {
                request_bytes: 1 << 20,
                response_bytes: 1 << 20,
                update_bytes: 1 << 20,
                update_count: 1024,
                response_segment_count: 1024,
            },
            transport_epoch: 4,
            client_info: ClientInfo::default(),
            mcp_servers: vec![],
            policy: PermissionPolicy::default(),
            collect_reply: true,
        })
        .unwrap();
        let mut storage = Storage::new(Limits { message_bytes }).unwrap();
        storage.activate();
        Conversation::new(engine, storage)
    }

    fn standard_agent(line: &str) -> Vec<String> {
        if line.contains(r#""method":"initialize""#) {
            vec![r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#.into()]
        } else if line.contains(r#""method":"session/new""#) {
            vec![r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","modes":{"currentModeId":"ask","availableModes":[{"id":"ask","name":"Ask"}]}}}"#.into()]
        } else if line.contains(r#""method":"session/prompt""#) {
            vec![
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}}}"#.into(),
                "".into(),
                r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t","title":"run","kind":"execute"},"options":[{"optionId":"yes","kind":"allow_once"},{"optionId":"no","kind":"reject_once"}]}}"#.into(),
            ]
        } else if line.contains(r#""id":"p1""#) {
            vec![
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}"#.into(),
                r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#.into(),
            ]
        } else {
            vec![]
        }
    }

    #[test]
    fn a_whole_conversation_over_an_in_memory_transport() {
        let mut conversation = conversation(4096);
        let mut agent = ScriptedAgent::new(standard_agent);
        let mut host = Recorder::default();
        conversation.start(&mut agent, &mut host, "/work").unwrap();
        assert_eq!(conversation.engine.session_id(), Some("s"));
        assert_eq!(conversation.engine.modes().current, "ask");
        let outcome = conversation
            .prompt(&mut agent, &mut host, &[ContentBlock::Text("go".into())])
            .unwrap();
        assert_eq!(outcome.response, "done");
        assert_eq!(outcome.stop_reason, "end_turn");
        assert_eq!(
            host.events,
            vec![
                format!("update 4 1 {:?} hmm", UpdateKind::AgentThoughtChunk),
                "commit run selected no".to_owned(),
                format!("update 4 2 {:?} done", UpdateKind::AgentMessageChunk),
            ]
        );
        assert_eq!(
            agent.received.last().unwrap(),
            r#"{"jsonrpc":"2.0","id":"p1","result":{"outcome":{"outcome":"selected","optionId":"no"}}}"#
        );
    }

    #[test]
    fn the_observer_answers_before_the_policy() {
        let mut conversation = conversation(4096);
        let mut agent = ScriptedAgent::new(standard_agent);
        let mut host = Recorder {
            answer: Some(Selection {
                outcome: "selected".into(),
                option_id: "yes".into(),
                option_kind: "allow_once".into(),
            }),
            ..Recorder::default()
        };
        conversation.start(&mut agent, &mut host, "/work").unwrap();
        conversation.prompt(&mut agent, &mut host, &[]).unwrap();
        assert_eq!(host.events[1], "ask run pending");
        assert_eq!(host.events[2], "commit run selected yes");
    }

    #[test]
    fn the_end_of_output_fails_the_call() {
        let mut conversation = conversation(4096);
        let mut agent = ScriptedAgent::new(|_| vec![]);
        agent.closed_after_output = true;
        let error = conversation
            .start(&mut agent, &mut Recorder::default(), "/w")
            .unwrap_err();
        assert!(error
            .description()
            .contains("output ended before the response to initialize (id 0)"));
    }

    #[test]
    fn idle_waits_tick_the_host() {
        let mut conversation = conversation(4096);
        let mut agent = ScriptedAgent::new(|_| vec![]);
        let mut host = Recorder {
            fail_ticks_after: Some(3),
            ..Recorder::default()
        };
        let error = conversation.start(&mut agent, &mut host, "/w").unwrap_err();
        assert_eq!(error.description(), "interrupted");
        assert_eq!(host.ticks, 4);
        assert_eq!(
            conversation.engine.pending(),
            None,
            "the failed call is abandoned"
        );
    }

    #[test]
    fn an_overlong_line_stops_reading() {
        let mut conversation = conversation(32);
        let mut agent = ScriptedAgent::new(|_| vec!["x".repeat(100)]);
        let error = conversation
            .start(&mut agent, &mut Recorder::default(), "/w")
            .unwrap_err();
        assert!(
            matches!(error, AcpError::ReaderMessageCapacityExceeded(ref m) if m.contains("message_bytes (32 bytes)"))
        );
        let status = conversation.storage.status();
        assert_eq!(
            (
                status.buffered_bytes,
                status.rejected_message_count,
                status.terminal
            ),
            (33, 1, true)
        );
    }
}

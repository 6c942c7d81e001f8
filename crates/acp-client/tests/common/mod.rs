//! The harness of the pump's tests: a real agent process (a `sh` script that reads our lines
//! and writes scripted answers) and a Rust `Edge` that records what it is handed.
#![allow(dead_code)] // each test file uses part of it

use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_client::host::{Host, HostConfig};
use acp_client::{Asked, Controls, Edge, Fail, Pump, Reads, Stop};
use acp_os::process::{self, Agent, SpawnOptions, StderrMode};
use acp_proto::calls::CallId;
use acp_proto::encode::ContentBlock;
use acp_proto::error::AcpError;
use acp_proto::host::Activity;
use acp_proto::limits::{Config, PermissionPolicy, TransferLimits};
use acp_proto::permission::{ObserverAnswer, PermissionRecord, Selection};
use acp_proto::reader::Limits;
use acp_proto::update::UpdateEvent;
use acp_proto::{AskId, Connection, Outcome, Request};

pub const INIT: &str =
    r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
pub const SESSION: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#;
pub const END_TURN: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#;
pub const PERMISSION: &str = r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t","title":"edit","kind":"edit"},"options":[{"optionId":"y","kind":"allow_once"},{"optionId":"n","kind":"reject_once"}]}}"#;

pub fn chunk(text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
    )
}

pub fn mode(mode: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"current_mode_update","currentModeId":"{mode}"}}}}}}"#
    )
}

/// A shell script that answers initialize and session/new, then runs `turn` (after reading
/// the prompt), with `say LINE` writing one line.
pub fn script(turn: &str) -> String {
    format!(
        "say() {{ printf '%s\\n' \"$1\"; }}\nread -r l; say '{INIT}'\nread -r l; say '{SESSION}'\nread -r l\n{turn}\nsleep 30\n"
    )
}

pub struct Agented {
    pub pump: Pump,
    pub controls: Arc<Controls>,
    pub _agent: Agent,
}

pub fn start(turn: &str, configure: impl FnOnce(&mut Config)) -> Agented {
    let limits = TransferLimits {
        request_bytes: 1 << 20,
        response_bytes: 1 << 20,
        update_bytes: 1 << 20,
        update_count: 1 << 20,
        response_segment_count: 1 << 20,
    };
    let mut config = Config::new(limits, 7);
    config.cancel_grace_ms = 200;
    config.policy = PermissionPolicy::default();
    configure(&mut config);
    let conn = Connection::new(
        config,
        Limits {
            message_bytes: 1 << 20,
        },
    )
    .unwrap();
    let spawn = SpawnOptions {
        command: "sh".into(),
        args: vec!["-c".into(), script(turn).into()],
        cwd: None,
        env: None,
        stderr: StderrMode::Discard,
    };
    let (agent, pipes) = process::spawn(&spawn).expect("sh runs");
    let controls = Arc::new(Controls::new(None));
    let pump = Pump::new(
        conn,
        Some(pipes),
        Host::new(HostConfig::default()),
        Arc::clone(&controls),
    );
    Agented {
        pump,
        controls,
        _agent: agent,
    }
}

/// An edge that records everything, answers permission requests as told, and fails where told.
#[derive(Default)]
pub struct Recorder {
    pub events: Vec<String>,
    pub sent: Vec<String>,
    pub answer: Option<&'static str>,
    pub defer: bool,
    pub commits: bool,
    pub durable: bool,
    pub fail_update: bool,
    pub fold: bool,
    pub pause: bool,
    pub stops: Vec<String>,
}

impl Edge for Recorder {
    type Error = String;
    type Deferred = u32;

    fn update(
        &mut self,
        update: &UpdateEvent<'_>,
        _joined: acp_proto::update::Joined,
        _routed: bool,
    ) -> Result<bool, Fail<String>> {
        if self.fail_update {
            return Err(Fail::Callback("on_update", "boom".into()));
        }
        self.events
            .push(format!("update {} {}", update.update_sequence, update.text));
        Ok(self.fold)
    }

    fn after_update(
        &mut self,
        _conn: &Connection,
        session_id: &str,
        publish: bool,
        fold: bool,
    ) -> Result<bool, Fail<String>> {
        self.events
            .push(format!("after {session_id} publish={publish} fold={fold}"));
        Ok(self.pause)
    }

    fn ask(&mut self, conn: &Connection, ask: AskId) -> Result<Asked<u32>, Fail<String>> {
        let title = conn.preview(ask).map(|p| p.title).unwrap_or_default();
        self.events.push(format!("ask {title:?}"));
        if self.defer {
            return Ok(Asked::Deferred(7));
        }
        Ok(match self.answer {
            None => Asked::NotAsked,
            Some(option) => Asked::Reply(Some(ObserverAnswer::Reply(Selection {
                outcome: "selected".into(),
                option_id: option.into(),
                option_kind: "allow_once".into(),
            }))),
        })
    }

    fn commit(&mut self, record: &PermissionRecord) -> Result<bool, Fail<String>> {
        self.events.push(format!("commit {:?}", record.outcome));
        Ok(self.commits)
    }

    fn durable(&self) -> bool {
        self.durable
    }

    fn activity(&mut self, activity: &Activity) -> Result<(), String> {
        self.events.push(format!("activity {}", activity.method));
        Ok(())
    }

    fn sent(&mut self, line: &[u8]) -> Result<(), String> {
        self.sent.push(String::from_utf8_lossy(line).into_owned());
        Ok(())
    }

    fn received(&mut self, _line: &str) -> Result<(), String> {
        Ok(())
    }

    fn stop_reason(&mut self, callback: &'static str, error: &String) -> String {
        self.stops.push(format!("{callback}: {error}"));
        format!("stopped after {callback} raised {error}")
    }

    fn missing(&mut self, error: AcpError) -> String {
        error.description().to_owned()
    }
}

pub const WITHIN: Option<Instant> = None;

/// initialize and session/new, run to their end by the blocking driver.
pub fn open(agented: &mut Agented, edge: &mut Recorder) {
    let pump = &mut agented.pump;
    let init = pump.conn.request(Request::Initialize).unwrap();
    let outcome = pump.run_until(edge, Some(init), WITHIN).ok().flatten();
    assert_eq!(outcome, Some(Outcome::Initialized));
    let new = pump
        .conn
        .request(Request::NewSession {
            cwd: "/",
            additional_directories: &[],
            mcp_servers: None,
            system_prompt: None,
        })
        .unwrap();
    let outcome = pump.run_until(edge, Some(new), WITHIN).ok().flatten();
    assert_eq!(outcome, Some(Outcome::SessionOpened("s".into())));
}

pub fn prompt(pump: &mut Pump, timeout_ms: Option<u64>) -> CallId {
    pump.set_now();
    let content = [ContentBlock::Text("hi".into())];
    pump.conn
        .request(Request::Prompt {
            session_id: "s",
            content: &content,
            timeout_ms,
            gated: true,
            meta: &[],
        })
        .unwrap()
}

/// Steps (as an event loop would, polling the pipe) until `done` says so or 10 s pass.
pub fn step_until(
    pump: &mut Pump,
    edge: &mut Recorder,
    budget: usize,
    mut done: impl FnMut(&Stop<u32>) -> bool,
) -> Stop<u32> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = budget;
        let stop = pump.step(edge, &mut left, Reads::Once).expect("no error");
        if done(&stop) || Instant::now() > until {
            return stop;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

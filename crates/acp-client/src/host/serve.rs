//! Host requests served for the agent (design/host.md §2–4): each session's roots held open,
//! files through `acp_os::fs`, terminals through `acp_os::terminal`, then the edge's
//! `activity`, then the answer. A `wait_for_exit` on a running terminal, or a long read (`reads.rs`), is
//! answered later by `answer_waits`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_os::fs::{self, Roots};
use acp_os::terminal::{Spawn, Terminals};
use acp_proto::error::AcpError;
use acp_proto::host::{ClientMethod, HostError, HostOk, HostOp};
use acp_proto::{Connection, HostId};

use super::reads::{Reads, INLINE_SCAN};
use crate::edge::Edge;

/// The host's settings (`ClientCapabilityConfig`), read once by the binding.
#[derive(Clone, Debug, Default)]
pub struct HostConfig {
    /// The additional directories: (as given, realpath taken at construction).
    pub additional_directories: Vec<(String, String)>,
    pub allow_any_path: bool,
    pub terminal_output_bytes: u64,
    pub read_missing_as_empty: bool,
    /// The opt-in shell for a `terminal/create` without `args` (None: no shell, host.md §3).
    pub terminal_shell: Option<String>,
    /// Live (unreleased) terminals one session may have.
    pub max_terminals: usize,
    /// The terminals' base environment: the client's `env`, else the host's.
    pub env: Vec<(OsString, OsString)>,
}

/// The client's terminals, reachable without the call lock: `request_cancel()` and `close()`
/// kill them from any thread, and drop them, so their descriptors close with the client; and
/// the flag that gives up a file read in progress (`closing`).
#[derive(Clone, Default)]
pub struct KillSwitch {
    slot: Arc<Mutex<(bool, Option<Arc<Terminals>>)>>,
    closing: Arc<AtomicBool>,
    /// Per open session: its roots, held open (descriptors); `close()` drops them all, so no
    /// descriptor outlives it (a request in progress keeps its own reference until it ends).
    roots: Arc<Mutex<HashMap<String, Arc<Roots>>>>,
    /// The threads finishing long reads: `close()` stops and joins them, so none outlives it.
    readers: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>>,
}

impl KillSwitch {
    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, Option<Arc<Terminals>>)> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn kill_all(&self) {
        self.closing.store(true, Ordering::Relaxed); // a read in progress ends at its next chunk
        let roots = std::mem::take(&mut *self.roots.lock().unwrap_or_else(|e| e.into_inner()));
        drop(roots);
        let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(|e| e.into_inner()));
        for reader in readers {
            let _ = reader.join(); // each ends at its next 64 KiB chunk
        }
        let taken = {
            let mut slot = self.lock();
            slot.0 = true; // no terminal is started after this
            slot.1.take()
        };
        if let Some(terminals) = taken {
            terminals.close(); // kills, reaps, joins the drain thread; the drop closes the fds
        }
    }

    /// A session's roots (none: an unknown or closed session, whose requests are refused).
    fn roots(&self, session_id: &str) -> Arc<Roots> {
        let map = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        map.get(session_id).cloned().unwrap_or_default()
    }

    /// Sets (or, with None, forgets) a session's roots; its descriptors close when forgotten.
    pub fn set_roots(&self, session_id: String, roots: Option<Roots>) {
        let mut map = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        match roots {
            Some(roots) if !self.closing.load(Ordering::Relaxed) => {
                map.insert(session_id, Arc::new(roots));
            }
            _ => {
                map.remove(&session_id);
            }
        }
    }

    /// Forgets a closed session's roots and releases its terminals (no call lock needed).
    pub fn forget(&self, session_id: &str) {
        self.set_roots(session_id.to_owned(), None);
        if let Some(terminals) = self.get() {
            terminals.release_session(session_id);
        }
    }

    fn get(&self) -> Option<Arc<Terminals>> {
        self.lock().1.clone()
    }

    fn get_or_start(
        &self,
        notifier: Option<&Arc<acp_os::io::Notifier>>,
    ) -> std::io::Result<Arc<Terminals>> {
        let mut slot = self.lock();
        if slot.0 {
            return Err(std::io::Error::other("the client is closed"));
        }
        if let Some(terminals) = &slot.1 {
            return Ok(Arc::clone(terminals));
        }
        let made = Terminals::new()?;
        if let Some(notifier) = notifier {
            made.set_notifier(Arc::clone(notifier));
        }
        slot.1 = Some(Arc::clone(&made));
        Ok(made)
    }
}

/// The OS side of host requests: the settings, each session's roots, the terminals and the
/// `terminal/wait_for_exit` requests waiting for an exit.
#[derive(Default)]
pub struct Host {
    /// The config's additional directories: (as given, realpath taken at construction).
    additional_directories: Vec<(String, String)>,
    allow_any_path: bool,
    /// Live (unreleased) terminals one session may have (`max_terminals`).
    max_terminals: usize,
    read_missing_as_empty: bool,
    terminal_output_bytes: u64,
    /// The opt-in shell for a `terminal/create` without `args` (None: no shell, host.md §3).
    terminal_shell: Option<String>,
    /// The terminals' base environment: the client's `env`, else the host's at construction.
    env: Vec<(OsString, OsString)>,
    terminals: KillSwitch,
    waits: Vec<(HostId, String)>,
    /// Reads going on in threads of their own.
    reads: Reads,
    /// Wakes the client's driver when a terminal exits.
    notifier: Option<Arc<acp_os::io::Notifier>>,
}

/// What running a request gave: an answer now (and the activity's path, for a terminal's
/// effective cwd), or a wait for a terminal's exit.
enum Ran {
    Answer(Result<HostOk, HostError>, Option<String>),
    Wait(String),
    /// A read that examined `INLINE_SCAN` bytes without finishing: it goes on in a thread of
    /// its own (within its bound), so the driver (an event loop) is not held by it.
    Reading(Box<fs::Reading>, fs::ReadBound, String),
}

fn unknown_terminal(id: &str) -> HostError {
    HostError::refused("unknown terminal", "terminalId", id)
}

impl Host {
    pub fn new(config: HostConfig) -> Host {
        Host {
            additional_directories: config.additional_directories,
            allow_any_path: config.allow_any_path,
            max_terminals: config.max_terminals,
            read_missing_as_empty: config.read_missing_as_empty,
            terminal_output_bytes: config.terminal_output_bytes,
            terminal_shell: config.terminal_shell,
            env: config.env,
            terminals: KillSwitch::default(),
            waits: Vec::new(),
            reads: Reads::default(),
            notifier: None,
        }
    }

    /// A session's roots (design/host.md §2): its cwd, the config's and its own additional
    /// directories, each kept as given and as its realpath, opened now (it may block on a slow
    /// mount: the caller runs it detached).
    pub fn open_roots(&self, cwd: String, directories: Vec<String>) -> Roots {
        let mut all = vec![(cwd.clone(), cwd)];
        all.extend(self.additional_directories.iter().cloned());
        all.extend(directories.into_iter().map(|d| (d.clone(), d)));
        Roots::with_forms(all)
    }

    /// Whether the client serves files and terminals (`capabilities=` given).
    pub fn configured(&self) -> bool {
        self.terminal_output_bytes > 0
    }

    /// A terminal's exit wakes the driver through this (the client's waker).
    pub fn set_notifier(&mut self, notifier: Option<acp_os::io::Notifier>) {
        self.notifier = notifier.map(Arc::new);
    }

    pub fn kill_switch(&self) -> KillSwitch {
        self.terminals.clone()
    }

    fn terminals(&self) -> std::io::Result<Arc<Terminals>> {
        self.terminals.get_or_start(self.notifier.as_ref())
    }

    /// Whether a `wait_for_exit` may be answerable now (one atomic load per loop).
    #[inline]
    pub fn exits_pending(&self) -> bool {
        self.reads.any_done()
            || (!self.waits.is_empty() && self.terminals.get().is_some_and(|t| t.take_exits()))
    }

    /// A read's bound: the answer's bytes, the default scan bounds, the earliest call
    /// deadline (`time_left`, ms) when it comes first, and the client's closing flag.
    fn read_bound(&self, request_bytes: usize, time_left: Option<u64>) -> fs::ReadBound {
        let mut bound = fs::ReadBound::new(request_bytes);
        if let Some(ms) = time_left {
            let deadline = Instant::now() + Duration::from_millis(ms);
            if bound.deadline.is_none_or(|(own, _)| deadline < own) {
                bound.deadline = Some((
                    deadline,
                    "a call's timeout passed (answering it waits for the read)",
                ));
            }
        }
        bound.stop = Some(Arc::clone(&self.terminals.closing));
        bound
    }

    /// Runs a checked request (no GIL needed): confinement, then the operation.
    fn run(
        &self,
        session_id: &str,
        op: HostOp,
        request_bytes: usize,
        time_left: Option<u64>,
    ) -> Ran {
        let roots = self.terminals.roots(session_id);
        let roots = &*roots;
        let answer = |result| Ran::Answer(result, None);
        match op {
            HostOp::Read { path, line, limit } => {
                let bound = self.read_bound(request_bytes, time_left);
                let reading = fs::confine(roots, &path, self.allow_any_path).and_then(|target| {
                    fs::open_read(&target, line, limit, self.read_missing_as_empty)
                });
                match reading {
                    Err(error) => answer(Err(error.host_error(&path))),
                    Ok(mut reading) => match reading.run(&bound, INLINE_SCAN) {
                        Some(done) => {
                            answer(done.map(HostOk::Content).map_err(|e| e.host_error(&path)))
                        }
                        None => Ran::Reading(Box::new(reading), bound, path),
                    },
                }
            }
            HostOp::Write { path, content } => answer(
                fs::confine(roots, &path, self.allow_any_path)
                    .and_then(|target| fs::write_text_file(&target, &content))
                    .map(|()| HostOk::Empty)
                    .map_err(|e| e.host_error(&path)),
            ),
            HostOp::TerminalCreate {
                command,
                args,
                env,
                cwd,
                output_byte_limit,
            } => {
                let cwd = cwd.unwrap_or_else(|| {
                    roots
                        .cwd()
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_default()
                });
                let result = self.create(
                    session_id,
                    roots,
                    &cwd,
                    command,
                    args,
                    env,
                    output_byte_limit,
                );
                Ran::Answer(result, Some(cwd))
            }
            HostOp::Terminal { terminal_id } => answer(Err(unknown_terminal(&terminal_id))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        session_id: &str,
        roots: &Roots,
        cwd: &str,
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        output_byte_limit: Option<u64>,
    ) -> Result<HostOk, HostError> {
        let target = fs::confine(roots, cwd, self.allow_any_path).map_err(|e| e.host_error(cwd))?;
        let dir = fs::open_dir(&target).map_err(|e| e.host_error(cwd))?;
        let mut full = self.env.clone();
        for (name, value) in env {
            let name = OsString::from(name);
            full.retain(|(k, _)| *k != name);
            full.push((name, OsString::from(value)));
        }
        let limit = output_byte_limit
            .unwrap_or(self.terminal_output_bytes)
            .min(self.terminal_output_bytes);
        // A whole shell line (no `args`) runs through the shell only when the host opted in.
        let line = args.is_empty() && looks_like_shell_line(&command);
        let (command, args) = match &self.terminal_shell {
            Some(shell) if args.is_empty() => (shell.clone(), vec!["-c".to_owned(), command]),
            _ => (command, args),
        };
        let terminals = self
            .terminals()
            .map_err(|e| HostError::failed(-32603, &fs::strerror(&e), None))?;
        let live = terminals.live(session_id);
        if live >= self.max_terminals {
            return Err(HostError::failed(
                -32603,
                &format!(
                    "too many terminals: this session has {live}, the host's cap (ClientCapabilityConfig.max_terminals is {}); release one with terminal/release to free a slot",
                    self.max_terminals
                ),
                None,
            ));
        }
        let spawn = Spawn {
            command,
            args,
            env: full,
            cwd: dir,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        };
        let no_shell = line && self.terminal_shell.is_none();
        terminals
            .create(session_id, spawn)
            .map(HostOk::TerminalCreated)
            .map_err(|e| {
                let mut message = fs::strerror(&e);
                if no_shell {
                    message.push_str(NO_SHELL_HINT);
                }
                HostError::failed(-32603, &message, None)
            })
    }

    /// `terminal/output|wait_for_exit|kill|release` (quick: no GIL release needed).
    fn terminal(&self, method: ClientMethod, session_id: &str, id: &str) -> Ran {
        let Some(terminals) = self.terminals.get() else {
            return Ran::Answer(Err(unknown_terminal(id)), None);
        };
        let result = match method {
            ClientMethod::TerminalOutput => {
                terminals
                    .output(id, session_id)
                    .map(|(bytes, truncated, exit)| HostOk::Output {
                        output: String::from_utf8_lossy(&bytes).into_owned(),
                        truncated,
                        exit,
                    })
            }
            ClientMethod::TerminalWaitForExit => match terminals.exit_status(id, session_id) {
                Some(Some(status)) => Some(HostOk::Exit(status)),
                Some(None) => return Ran::Wait(id.to_owned()),
                None => None,
            },
            ClientMethod::TerminalKill => terminals.kill(id, session_id).then_some(HostOk::Empty),
            _ => terminals.release(id, session_id).then_some(HostOk::Empty),
        };
        Ran::Answer(result.ok_or_else(|| unknown_terminal(id)), None)
    }
}

/// Appended to a failed spawn's message when the command looks like a shell line.
const NO_SHELL_HINT: &str = " (the command was run without a shell; to run whole shell lines, \
    set ClientCapabilityConfig(terminal_shell=\"/bin/sh\") or acp-fast run --terminal-shell /bin/sh)";

/// A `command` with whitespace or shell syntax in it: meant for a shell, not a program name.
fn looks_like_shell_line(command: &str) -> bool {
    command
        .chars()
        .any(|c| c.is_whitespace() || "|&;<>()$`\\\"'*?[]#~{}".contains(c))
}

impl Drop for Host {
    fn drop(&mut self) {
        self.terminals.kill_all(); // garbage collection of the client
    }
}

/// A host request as the pump hands it over: its id, session and checked operation.
pub type HostRequest = (HostId, ClientMethod, String, Result<HostOp, HostError>);

/// Why serving a host request stopped the call.
pub enum HostFailure<X> {
    /// `on_activity` failed: the client stops, the answer is not written.
    Activity(X),
    Call(AcpError),
}

impl<X> From<AcpError> for HostFailure<X> {
    fn from(error: AcpError) -> Self {
        HostFailure::Call(error)
    }
}

/// One host request: the operation detached, the answer and its activity, then the edge's
/// `activity`, then the answer is queued (design/host.md §4). A `wait_for_exit` on a running
/// terminal waits in `Host::waits` and is answered by `answer_waits`.
pub fn serve<E: Edge>(
    edge: &mut E,
    conn: &mut Connection,
    state: &mut Host,
    request: HostRequest,
) -> Result<(), HostFailure<E::Error>> {
    let (host, method, session_id, op) = request;
    let request_bytes = conn.config().limits.request_bytes;
    let time_left = conn.time_left();
    let ran = match op {
        Err(refused) => Ran::Answer(Err(refused), None),
        Ok(HostOp::Terminal { terminal_id }) => state.terminal(method, &session_id, &terminal_id),
        Ok(op) => {
            let shared = &*state;
            edge.detach(|| shared.run(&session_id, op, request_bytes, time_left))
        }
    };
    match ran {
        Ran::Wait(terminal_id) => {
            state.waits.push((host, terminal_id));
            Ok(())
        }
        Ran::Reading(reading, bound, path) => {
            let shown = path.clone();
            let (notifier, readers) = (state.notifier.clone(), &state.terminals.readers);
            match state
                .reads
                .start(host, reading, bound, path, notifier, readers)
            {
                Ok(()) => Ok(()),
                Err(error) => {
                    let message = format!(
                        "the host could not start a thread to finish the read ({})",
                        fs::strerror(&error)
                    );
                    let failed = Err(HostError::failed(-32603, &message, Some(&shown)));
                    answer(edge, conn, host, failed, None)
                }
            }
        }
        Ran::Answer(result, path) => {
            let result = conn.fit_host_answer(host, result);
            answer(edge, conn, host, result, path)
        }
    }
}

fn answer<E: Edge>(
    edge: &mut E,
    conn: &mut Connection,
    host: HostId,
    result: Result<HostOk, HostError>,
    path: Option<String>,
) -> Result<(), HostFailure<E::Error>> {
    let answer = conn.answer_host(host, result, path)?;
    if let Err(error) = edge.activity(&answer.activity) {
        return Err(HostFailure::Activity(error)); // dropping `answer` writes nothing
    }
    conn.send_host(answer);
    Ok(())
}

/// Answers every `wait_for_exit` whose terminal has exited, and every read finished in a
/// thread of its own; drops those already answered (`$/cancel_request`).
pub fn answer_waits<E: Edge>(
    edge: &mut E,
    conn: &mut Connection,
    state: &mut Host,
) -> Result<(), HostFailure<E::Error>> {
    let mut failure = None;
    for (host, read) in state.reads.take_finished() {
        if conn.host_raw_id(host).is_none() {
            continue; // cancelled meanwhile
        }
        if failure.is_some() {
            state.reads.put_back(host, read); // kept for a later look
        } else if let Err(error) = answer(edge, conn, host, read, None) {
            failure = Some(error);
        }
    }
    if let Some(failure) = failure {
        return Err(failure);
    }
    let Some(terminals) = state.terminals.get() else {
        return Ok(());
    };
    let waits = std::mem::take(&mut state.waits);
    let mut left = Vec::new();
    let mut failure = None;
    for (host, terminal_id) in waits {
        if failure.is_some() || conn.host_raw_id(host).is_none() {
            if failure.is_some() {
                left.push((host, terminal_id));
            }
            continue;
        }
        match terminals.exit_of(&terminal_id) {
            Some(status) => {
                let exited = Ok(HostOk::Exit(status));
                if let Err(error) = answer(edge, conn, host, exited, None) {
                    failure = Some(error);
                }
            }
            None => left.push((host, terminal_id)),
        }
    }
    state.waits.extend(left);
    failure.map_or(Ok(()), Err)
}

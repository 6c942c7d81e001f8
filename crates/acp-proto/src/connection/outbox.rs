//! The lines queued for the agent, and how many bytes they hold.

use std::collections::VecDeque;

/// An agent that has not taken this much of what the client queued for it (more than twice
/// the largest request allowed, if that is more) is not reading its stdin: drivers that can
/// go on reading while a write waits (asyncio) stop reading its output until it does, so the
/// answers to what it keeps sending cannot pile up without bound.
pub const BACKLOG_BYTES: usize = 8 << 20;

#[derive(Debug, Default)]
pub(super) struct Outbox {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
}

impl Outbox {
    pub fn push_back(&mut self, line: Vec<u8>) {
        self.bytes += line.len();
        self.lines.push_back(line);
    }

    pub fn front(&self) -> Option<&Vec<u8>> {
        self.lines.front()
    }

    pub fn pop_front(&mut self) {
        if let Some(line) = self.lines.pop_front() {
            self.bytes -= line.len();
        }
    }

    pub fn clear(&mut self) {
        self.lines.clear();
        self.bytes = 0;
    }

    /// Bytes of every queued line, the front one whole.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

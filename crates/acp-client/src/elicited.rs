//! What the edge answers an elicitation with (`Edge::elicit`; `Pump` settles it). A leaf of its
//! own, so that `edge` and `pump` both name it without naming each other.

use acp_proto::elicitation::Answer;

/// What the edge answered an elicitation with.
pub enum Elicited<D> {
    /// Nobody was asked: the schema's `decline`.
    NotAsked,
    /// The observer's reply (None: it abstained, `decline`).
    Reply(Option<Answer>),
    /// A value the caller waits on while reading goes on (`Pump::answer_elicitation` settles
    /// it later).
    Deferred(D),
}

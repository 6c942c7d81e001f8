//! Why a journal call failed. Each kind is one variant, so the binding picks the Python
//! exception by kind (never by the text), and each text is written once, here.

use std::fmt;

/// A journal call's failure; `Display` is the text the binding raises (`JournalError(path,
/// text)` for the journal's own failures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// In a child made by fork(): the records belong to process `owner`, the parent.
    Foreign { owner: u32 },
    /// The journal was closed.
    Closed,
    /// A write failed before this call: nothing more is stored.
    Earlier(String),
    /// This call's write (or sync) failed.
    Write(String),
    /// At close(): records were lost to a failed write.
    Lost(String),
    /// A record kind over `max` bytes (a caller's mistake, not the journal's).
    Kind { kind: String, max: usize },
    /// The batch or sync thread could not be started.
    Start(String),
}

impl fmt::Display for Error {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Foreign { owner } => write!(out, "the journal belongs to process {owner}"),
            Error::Closed => write!(out, "the journal is closed"),
            Error::Earlier(failed) => write!(out, "an earlier write failed ({failed})"),
            Error::Write(failed) => write!(out, "cannot write: {failed}"),
            Error::Lost(failed) => write!(out, "records were lost: a write failed ({failed})"),
            Error::Kind { kind, max } => {
                write!(out, "a record kind is at most {max} bytes, not {kind:?}")
            }
            Error::Start(error) => write!(out, "cannot start: {error}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn each_kind_says_what_happened() {
        let said = [
            (
                Error::Foreign { owner: 7 },
                "the journal belongs to process 7",
            ),
            (Error::Closed, "the journal is closed"),
            (
                Error::Earlier("EIO".into()),
                "an earlier write failed (EIO)",
            ),
            (Error::Write("EIO".into()), "cannot write: EIO"),
            (
                Error::Lost("EIO".into()),
                "records were lost: a write failed (EIO)",
            ),
            (
                Error::Kind {
                    kind: "k\n".into(),
                    max: 32,
                },
                r#"a record kind is at most 32 bytes, not "k\n""#,
            ),
            (Error::Start("EAGAIN".into()), "cannot start: EAGAIN"),
        ];
        for (error, text) in said {
            assert_eq!(error.to_string(), text);
        }
    }
}

//! Permission rules (design/host.md §5): the compiled policy, the resolution tiers the
//! connection decides on its own (0–3, 5, 6) and the option choice. Title patterns (a Python
//! `re.Pattern` on the host) are compiled here for the `regex` crate, a linear-time engine:
//! a user's pattern such as `^(a+)+$` cannot stall the client on an agent's title, and no
//! pattern needs the GIL (`pattern`).

pub mod pattern;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// The decision of a tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Decision {
    Allow,
    #[default]
    Deny,
    Cancel,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Cancel => "cancel",
        }
    }

    pub fn parse(text: &str) -> Option<Decision> {
        match text {
            "allow" => Some(Decision::Allow),
            "deny" => Some(Decision::Deny),
            "cancel" => Some(Decision::Cancel),
            _ => None,
        }
    }

    /// The decision an option kind stands for (`allow_*`, `reject_*`).
    pub fn of_option_kind(kind: &str) -> Option<Decision> {
        if kind.starts_with("allow_") {
            Some(Decision::Allow)
        } else if kind.starts_with("reject_") {
            Some(Decision::Deny)
        } else {
            None
        }
    }
}

/// How a rule matches the title.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TitleRule {
    /// No title condition.
    Any,
    /// A case-insensitive substring, stored case-folded.
    Folded(String),
    /// A pattern, searched in the title's first `pattern::TITLE_BYTES` bytes.
    Pattern(TitlePattern),
}

pub use pattern::TitlePattern;

/// How a rule matches the tool call's `name` (schema 1.22: the agent's own tool name, e.g.
/// `Bash` or `mcp__github__create_issue`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NameRule {
    /// No name condition.
    #[default]
    Any,
    /// Exactly this name (case-sensitive: names are identifiers, and a looser match such as a
    /// substring would let `Bash` match `BashOutput`). Regex-looking text is plain text here.
    Exact(String),
    /// A pattern, searched in the name's first `pattern::TITLE_BYTES` bytes (as titles are).
    Pattern(TitlePattern),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub kind: Option<String>,
    pub title: TitleRule,
    /// A request without a name (an agent before schema 1.22) never matches a name rule.
    pub name: NameRule,
}

/// What the host evaluates for the connection: the full Unicode case fold of a non-ASCII
/// title (Python's `str.casefold`, which `char::to_lowercase` is not).
pub trait TitleMatcher: Send + Sync {
    fn casefold(&self, title: &str) -> String;
}

/// The host's matcher, compared by identity (a policy is compiled once per assignment).
#[derive(Clone, Default)]
pub struct Matcher(pub Option<Arc<dyn TitleMatcher>>);

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Matcher(host)"
        } else {
            "Matcher(none)"
        })
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Matcher) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Matcher {}

/// Case-folds `text`: ASCII here, anything else by the host (exactly as Python would).
pub fn casefold(text: &str, matcher: &Matcher) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    match &matcher.0 {
        Some(host) => host.casefold(text),
        None => text.to_lowercase(),
    }
}

/// What a request is matched on.
pub struct Subject<'a> {
    pub kind: Option<&'a str>,
    pub title: &'a str,
    /// The tool call's `name` (the request's own, else the one announced for its tool call).
    pub name: Option<&'a str>,
}

impl Rule {
    /// `folded` is the title case-folded, computed at most once per request. `unseen`: what a
    /// pattern answers for a title longer than it looks at (see `first_match`).
    fn matches(
        &self,
        subject: &Subject<'_>,
        folded: &mut Option<String>,
        matcher: &Matcher,
        unseen: bool,
    ) -> bool {
        if let Some(kind) = &self.kind {
            if subject.kind != Some(kind.as_str()) {
                return false;
            }
        }
        let name_matches = match (&self.name, subject.name) {
            (NameRule::Any, _) => true,
            (_, None) => false,
            (NameRule::Exact(wanted), Some(name)) => wanted == name,
            (NameRule::Pattern(pattern), Some(name)) => pattern.search(name).unwrap_or(unseen),
        };
        if !name_matches {
            return false;
        }
        match &self.title {
            TitleRule::Any => true,
            TitleRule::Folded(needle) => folded
                .get_or_insert_with(|| casefold(subject.title, matcher))
                .contains(needle.as_str()),
            TitleRule::Pattern(pattern) => pattern.search(subject.title).unwrap_or(unseen),
        }
    }
}

/// The first rule of `rules` that matches, by index. `unseen` is what a pattern rule answers
/// for a title longer than `pattern::TITLE_BYTES`, which it does not search: `true` for deny
/// rules and `false` for allow rules, so padding a title cannot slip past a deny pattern nor
/// earn an allow (fail closed).
pub fn first_match(
    rules: &[Rule],
    subject: &Subject<'_>,
    matcher: &Matcher,
    unseen: bool,
) -> Option<usize> {
    let mut folded = None;
    rules
        .iter()
        .position(|rule| rule.matches(subject, &mut folded, matcher, unseen))
}

/// The decision of a tier and why, kept on the record even when no option fitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ruling {
    pub decision: Decision,
    pub reason: String,
    /// An option id to select when offered and of an agreeing kind (the observer's).
    pub option_id: Option<String>,
    /// Try the `*_always` kind first.
    pub persist: bool,
    /// Tier 5: allowed with no allow option falls back to the reject choice (seed 000).
    pub reject_fallback: bool,
}

impl Ruling {
    pub fn new(decision: Decision, reason: impl Into<String>, persist: bool) -> Ruling {
        Ruling {
            decision,
            reason: reason.into(),
            option_id: None,
            persist,
            reject_fallback: false,
        }
    }
}

/// The option chosen for a ruling among the offered `(kind, optionId)` pairs: `None` means the
/// answer is `cancelled`.
pub fn choose<'a>(
    ruling: &Ruling,
    offered: &'a [(&'a str, &'a str)],
) -> Option<(&'a str, &'a str)> {
    if ruling.decision == Decision::Cancel {
        return None;
    }
    if let Some(wanted) = &ruling.option_id {
        if let Some(found) = offered.iter().find(|(kind, id)| {
            id == wanted && Decision::of_option_kind(kind) == Some(ruling.decision)
        }) {
            return Some(*found);
        }
    }
    let first = |wanted: &str| offered.iter().find(|(kind, _)| *kind == wanted).copied();
    let last = |wanted: &str| offered.iter().rfind(|(kind, _)| *kind == wanted).copied();
    let allow = || {
        if ruling.persist {
            first("allow_always").or_else(|| first("allow_once"))
        } else {
            first("allow_once").or_else(|| first("allow_always"))
        }
    };
    let reject = || {
        if ruling.persist {
            last("reject_always").or_else(|| first("reject_once"))
        } else {
            first("reject_once").or_else(|| last("reject_always"))
        }
    };
    match ruling.decision {
        Decision::Allow => allow().or_else(|| {
            if ruling.reject_fallback {
                reject()
            } else {
                None
            }
        }),
        Decision::Deny => reject(),
        Decision::Cancel => None,
    }
}

/// How many remembered answers a session keeps (oldest dropped).
pub const REMEMBERED: usize = 1024;

/// Answers remembered for one session: (kind, title) → decision (`remember=True`).
#[derive(Clone, Debug, Default)]
pub struct Remembered {
    entries: VecDeque<(String, String, Decision)>,
}

impl Remembered {
    pub fn get(&self, kind: &str, title: &str) -> Option<Decision> {
        self.entries
            .iter()
            .rev()
            .find(|(k, t, _)| k == kind && t == title)
            .map(|(_, _, d)| *d)
    }

    pub fn keep(&mut self, kind: &str, title: &str, decision: Decision) {
        self.entries.retain(|(k, t, _)| !(k == kind && t == title));
        if self.entries.len() >= REMEMBERED {
            self.entries.pop_front();
        }
        self.entries
            .push_back((kind.to_owned(), title.to_owned(), decision));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ruling(decision: Decision, persist: bool) -> Ruling {
        Ruling::new(decision, "t", persist)
    }

    const OFFERED: [(&str, &str); 4] = [
        ("reject_always", "ra1"),
        ("allow_always", "aa"),
        ("allow_once", "ao"),
        ("reject_always", "ra2"),
    ];

    #[test]
    fn option_choice_follows_the_order_and_persist() {
        assert_eq!(
            choose(&ruling(Decision::Allow, false), &OFFERED),
            Some(("allow_once", "ao"))
        );
        assert_eq!(
            choose(&ruling(Decision::Allow, true), &OFFERED),
            Some(("allow_always", "aa"))
        );
        // No reject_once: the last reject_always, as seed 000 does.
        assert_eq!(
            choose(&ruling(Decision::Deny, false), &OFFERED),
            Some(("reject_always", "ra2"))
        );
        assert_eq!(choose(&ruling(Decision::Cancel, false), &OFFERED), None);
        let only_reject = [("reject_once", "r")];
        assert_eq!(choose(&ruling(Decision::Allow, false), &only_reject), None);
        let mut tier5 = ruling(Decision::Allow, false);
        tier5.reject_fallback = true;
        assert_eq!(choose(&tier5, &only_reject), Some(("reject_once", "r")));
    }

    #[test]
    fn an_observer_option_is_taken_only_when_its_kind_agrees() {
        let mut r = ruling(Decision::Allow, false);
        r.option_id = Some("aa".into());
        assert_eq!(choose(&r, &OFFERED), Some(("allow_always", "aa")));
        r.option_id = Some("ra1".into());
        assert_eq!(choose(&r, &OFFERED), Some(("allow_once", "ao")));
    }

    #[test]
    fn rules_match_kind_and_folded_title() {
        let m = Matcher::default();
        let rules = [
            Rule {
                kind: Some("execute".into()),
                title: TitleRule::Any,
                name: NameRule::Any,
            },
            Rule {
                kind: None,
                title: TitleRule::Folded("rm -rf".into()),
                name: NameRule::Any,
            },
        ];
        let s = Subject {
            kind: Some("edit"),
            title: "Run RM -RF /",
            name: None,
        };
        assert_eq!(first_match(&rules, &s, &m, false), Some(1));
        let s = Subject {
            kind: Some("execute"),
            title: "",
            name: None,
        };
        assert_eq!(first_match(&rules, &s, &m, false), Some(0));
        let s = Subject {
            kind: None,
            title: "ls",
            name: None,
        };
        assert_eq!(first_match(&rules, &s, &m, false), None);
    }

    #[test]
    fn name_rules_match_exactly_or_by_pattern_and_never_without_a_name() {
        let m = Matcher::default();
        let exact = |name: &str| Rule {
            kind: None,
            title: TitleRule::Any,
            name: NameRule::Exact(name.into()),
        };
        let subject = |name: Option<&'static str>| Subject {
            kind: Some("execute"),
            title: "t",
            name,
        };
        let rules = [exact("Bash")];
        assert_eq!(
            first_match(&rules, &subject(Some("Bash")), &m, false),
            Some(0)
        );
        assert_eq!(
            first_match(&rules, &subject(Some("BashOutput")), &m, false),
            None
        );
        assert_eq!(first_match(&rules, &subject(Some("bash")), &m, false), None);
        assert_eq!(first_match(&rules, &subject(None), &m, true), None);
        // Regex-looking text is plain text.
        let rules = [exact(".*")];
        assert_eq!(first_match(&rules, &subject(Some("Bash")), &m, false), None);
        assert_eq!(
            first_match(&rules, &subject(Some(".*")), &m, false),
            Some(0)
        );
        let rules = [Rule {
            kind: None,
            title: TitleRule::Any,
            name: NameRule::Pattern(TitlePattern::compile("^mcp__", 0).unwrap()),
        }];
        assert_eq!(
            first_match(&rules, &subject(Some("mcp__gh__x")), &m, false),
            Some(0)
        );
        assert_eq!(first_match(&rules, &subject(None), &m, true), None);
        // A name longer than a pattern looks at: deny rules match it, allow rules do not.
        let long: &'static str =
            Box::leak(("mcp__".to_owned() + &"a".repeat(pattern::TITLE_BYTES)).into_boxed_str());
        assert_eq!(first_match(&rules, &subject(Some(long)), &m, true), Some(0));
        assert_eq!(first_match(&rules, &subject(Some(long)), &m, false), None);
    }

    #[test]
    fn remembered_answers_are_bounded_and_newest_wins() {
        let mut r = Remembered::default();
        for i in 0..(REMEMBERED + 5) {
            r.keep("k", &i.to_string(), Decision::Allow);
        }
        assert_eq!(r.len(), REMEMBERED);
        assert_eq!(r.get("k", "0"), None);
        r.keep("k", "7", Decision::Deny);
        assert_eq!(r.get("k", "7"), Some(Decision::Deny));
    }
}

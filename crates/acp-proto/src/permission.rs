//! Permission requests: the owned request the connection keeps while the host decides, the
//! record the observer sees, and the resolution tiers of design/host.md §5 applied to it.

use crate::limits::PermissionPolicy;
use crate::rules::{self, Decision, Ruling, Subject};
use crate::wire::Params;

/// The reason recorded for a request the agent cancelled (`$/cancel_request`) before it was
/// decided.
pub const WITHDRAWN: &str = "cancelled by the agent";

/// What `on_permission` answered (tier 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObserverAnswer {
    /// A `PermissionReply`: sent verbatim.
    Reply(Selection),
    /// A `PermissionOutcome`: a decision; its option id is taken when offered and agreeing.
    Outcome {
        decision: Decision,
        option_id: Option<String>,
        reason: Option<String>,
    },
}

impl ObserverAnswer {
    /// An answer as a binding passes it: `("reply", outcome, option id, option kind)` or
    /// `("outcome", decision, option id, reason)`, "" for an absent option id or reason.
    pub fn from_parts(
        tag: &str,
        a: String,
        b: String,
        c: String,
    ) -> Result<ObserverAnswer, String> {
        let optional = |text: String| (!text.is_empty()).then_some(text);
        Ok(match tag {
            "reply" => ObserverAnswer::Reply(Selection {
                outcome: a,
                option_id: b,
                option_kind: c,
            }),
            _ => ObserverAnswer::Outcome {
                decision: Decision::parse(&a)
                    .ok_or_else(|| format!("not a PermissionDecision: {a:?}"))?,
                option_id: optional(b),
                reason: optional(c),
            },
        })
    }
}

/// A decision on a permission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub outcome: String,
    pub option_id: String,
    pub option_kind: String,
}

impl Selection {
    pub fn cancelled() -> Selection {
        Selection {
            outcome: "cancelled".into(),
            option_id: String::new(),
            option_kind: String::new(),
        }
    }

    pub fn selected(kind: &str, id: &str) -> Selection {
        Selection {
            outcome: "selected".into(),
            option_id: id.into(),
            option_kind: kind.into(),
        }
    }
}

/// A permission request as the observer sees it (owned, so it can outlive the line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionRecord {
    pub session_id: String,
    pub tool_call_id: String,
    pub title: String,
    pub tool_kind: String,
    pub status: String,
    pub outcome: String,
    pub option_id: String,
    pub option_kind: String,
    /// (option_id, name, kind) of every object in `options`; absent fields are "".
    pub options: Vec<(String, String, String)>,
    pub envelope: String,
    /// The agent's id as raw JSON text.
    pub request_id: String,
    /// The deciding tier's decision and reason ("" in the preview).
    pub decision: String,
    pub reason: String,
    /// The tool call's `name` (schema 1.22): the request's own, else the one announced for
    /// its tool call; "" when neither.
    pub tool_name: String,
}

/// A permission request waiting for its decision.
#[derive(Clone, Debug)]
pub struct Ask {
    /// The request with outcome "pending" and its envelope.
    pub record: PermissionRecord,
    /// Whether `toolCall` was an object (the policy grants nothing otherwise).
    tool_present: bool,
    title: Option<String>,
    /// The request's own `toolCall.kind`, else the kind announced for its tool call id.
    tool_kind: Option<String>,
    /// The request's own `toolCall.name`, else the name announced for its tool call id.
    name: Option<String>,
    /// (kind, optionId) of each option object, each as present and a string.
    choices: Vec<(Option<String>, Option<String>)>,
    /// `None` when `options` is absent or not an array.
    has_options: bool,
    /// Tiers 0–3, decided on arrival: the observer is not asked.
    pub ruled: Option<Ruling>,
    /// Tiers 5–6 with the policy of arrival (a decision keeps the policy it started with).
    fallback: Ruling,
    remember: bool,
    /// The agent withdrew the request (`$/cancel_request`) while the host was deciding.
    pub withdrawn: bool,
}

/// A decided request: what to send and the record.
pub struct Resolved {
    pub selection: Selection,
    pub record: PermissionRecord,
    /// `(kind, title, decision)` to remember for the session (`remember=True`).
    pub remember: Option<(String, String, Decision)>,
}

impl Ask {
    pub fn new(
        raw_id: &str,
        envelope: &str,
        fields: &Params<'_>,
        announced: Option<String>,
        announced_name: Option<String>,
    ) -> Ask {
        let tool = fields.tool_call.0.as_deref();
        let name = tool
            .and_then(|t| t.name.as_str())
            .map(str::to_owned)
            .or(announced_name);
        let own_kind = tool.and_then(|t| t.kind.as_str()).map(str::to_owned);
        // v2 gives the request a title of its own (the prompt's): it is what rules match and
        // what the host is shown; v1 has only the tool call's.
        let title = fields
            .title
            .as_str()
            .or_else(|| tool.and_then(|t| t.title.as_str()));
        let tool_kind = own_kind.or(announced);
        let options = fields.options.0.as_deref();
        let items = options.unwrap_or(&[]).iter().filter_map(|o| o.0.as_ref());
        let record = PermissionRecord {
            session_id: fields.session_id.or_empty().to_owned(),
            tool_call_id: tool.map_or("", |t| t.tool_call_id.or_empty()).to_owned(),
            title: title.unwrap_or("").to_owned(),
            tool_kind: tool_kind.clone().unwrap_or_default(),
            status: tool.map_or("", |t| t.status.or_empty()).to_owned(),
            outcome: "pending".into(),
            option_id: String::new(),
            option_kind: String::new(),
            options: items
                .clone()
                .map(|o| {
                    (
                        o.option_id.or_empty().to_owned(),
                        o.name.or_empty().to_owned(),
                        o.kind.or_empty().to_owned(),
                    )
                })
                .collect(),
            envelope: envelope.to_owned(),
            request_id: raw_id.to_owned(),
            decision: String::new(),
            reason: String::new(),
            tool_name: name.clone().unwrap_or_default(),
        };
        Ask {
            record,
            tool_present: tool.is_some(),
            title: title.map(str::to_owned),
            tool_kind,
            name,
            choices: items
                .map(|o| {
                    (
                        o.kind.as_str().map(str::to_owned),
                        o.option_id.as_str().map(str::to_owned),
                    )
                })
                .collect(),
            has_options: options.is_some(),
            ruled: None,
            fallback: Ruling::new(Decision::Deny, "default", false),
            remember: false,
            withdrawn: false,
        }
    }

    /// The request's kind (own or announced) and title ("" when absent).
    fn subject(&self) -> Subject<'_> {
        Subject {
            kind: self.tool_kind.as_deref(),
            title: self.title.as_deref().unwrap_or(""),
            name: self.name.as_deref(),
        }
    }

    /// Tiers 0–3 on arrival, and tiers 5–6 kept for later, under `policy`.
    pub fn rule(&mut self, policy: &PermissionPolicy, latched: bool, remembered: Option<Decision>) {
        let persist = policy.persist;
        self.remember = policy.remember;
        let subject = self.subject();
        // The current policy's deny rules come before anything remembered: an answer kept
        // under an earlier policy never outranks an explicit refusal now (a remembered
        // `reject_always` still beats the allow rules, so a refusal is never undone by a grant).
        let ruled = if latched {
            Some(Ruling::new(Decision::Cancel, "session cancelled", false))
        } else if let Some(i) = rules::first_match(&policy.deny, &subject, &policy.matcher, true) {
            Some(Ruling::new(
                Decision::Deny,
                format!("deny rule {i}"),
                persist,
            ))
        } else if let Some(decision) = remembered.filter(|_| policy.remember) {
            Some(Ruling::new(decision, "remembered", true))
        } else {
            rules::first_match(&policy.allow, &subject, &policy.matcher, false)
                .map(|i| Ruling::new(Decision::Allow, format!("allow rule {i}"), persist))
        };
        let kind = subject.kind;
        let kind_allowed = self.tool_present
            && kind.is_some_and(|kind| policy.allowed_tool_kinds.iter().any(|k| k == kind));
        let prefix_allowed = self.tool_present
            && self.title.as_deref().is_some_and(|title| {
                policy
                    .allowed_title_prefixes
                    .iter()
                    .any(|p| title.starts_with(p.as_str()))
            });
        let fallback = if kind_allowed || prefix_allowed {
            let reason = if kind_allowed {
                "allowed_tool_kinds"
            } else {
                "allowed_title_prefixes"
            };
            let mut ruling = Ruling::new(Decision::Allow, reason, persist);
            ruling.reject_fallback = true; // seed 000: allowed but no allow option
            ruling
        } else {
            Ruling::new(policy.default, "default", persist)
        };
        self.ruled = ruled;
        self.fallback = fallback;
    }

    /// The answer: tier 0 when the session is cancelled now, else the tier that decided on
    /// arrival, else the observer's answer, else tiers 5–6. Consumes the request: the
    /// committed record is its own record, moved, not a copy.
    pub fn resolve(mut self, latched: bool, observer: Option<ObserverAnswer>) -> Resolved {
        if latched {
            // Tier 0 selects no option, so nothing is kept.
            let tier0 = Ruling::new(Decision::Cancel, "session cancelled", false);
            return self.finish(&tier0, false);
        }
        if self.withdrawn {
            // The agent cancelled its own request: whatever the observer said, the answer is the
            // schema's cancellation marker, and the record says why.
            let withdrawn = Ruling::new(Decision::Cancel, WITHDRAWN, false);
            return self.finish(&withdrawn, false);
        }
        if let Some(ruled) = self.ruled.take() {
            // Tier 1 is already remembered.
            let rememberable = ruled.reason != "remembered";
            return self.finish(&ruled, rememberable);
        }
        match observer {
            Some(ObserverAnswer::Reply(selection)) => self.replied(selection),
            Some(ObserverAnswer::Outcome {
                decision,
                option_id,
                reason,
            }) => {
                let mut ruling = Ruling::new(
                    decision,
                    reason.unwrap_or_else(|| "observer".into()),
                    self.fallback.persist,
                );
                ruling.option_id = option_id;
                self.finish(&ruling, true)
            }
            None => {
                let fallback = std::mem::replace(
                    &mut self.fallback,
                    Ruling::new(Decision::Deny, "default", false),
                );
                self.finish(&fallback, true)
            }
        }
    }

    fn offered(&self) -> Vec<(&str, &str)> {
        if !self.has_options {
            return Vec::new();
        }
        self.choices
            .iter()
            .filter_map(|(kind, id)| Some((kind.as_deref()?, id.as_deref()?)))
            .collect()
    }

    fn finish(self, ruling: &Ruling, rememberable: bool) -> Resolved {
        let offered = self.offered();
        let selection = match rules::choose(ruling, &offered) {
            Some((kind, id)) => Selection::selected(kind, id),
            None => Selection::cancelled(),
        };
        self.resolved(
            selection,
            ruling.decision.as_str(),
            &ruling.reason,
            rememberable,
        )
    }

    /// A `PermissionReply`, sent verbatim; its decision is read from the chosen option's kind.
    fn replied(self, selection: Selection) -> Resolved {
        let kind = self
            .choices
            .iter()
            .find(|(_, id)| id.as_deref() == Some(selection.option_id.as_str()))
            .and_then(|(kind, _)| kind.clone())
            .unwrap_or_else(|| selection.option_kind.clone());
        let decision = if selection.outcome == "cancelled" {
            Decision::Cancel.as_str()
        } else {
            Decision::of_option_kind(&kind).map_or("", Decision::as_str)
        };
        let mut resolved = self.resolved(selection, decision, "observer", true);
        if let Some((tool_kind, title, _)) = resolved.remember.take() {
            // Remember what the chosen option means, whatever kind the reply recorded.
            resolved.remember = Decision::of_option_kind(&kind)
                .filter(|_| kind.ends_with("_always"))
                .map(|d| (tool_kind, title, d));
        }
        resolved
    }

    fn resolved(
        self,
        selection: Selection,
        decision: &str,
        reason: &str,
        rememberable: bool,
    ) -> Resolved {
        let remember =
            (self.remember && rememberable && selection.option_kind.ends_with("_always"))
                .then(|| Decision::of_option_kind(&selection.option_kind))
                .flatten()
                .map(|d| (self.record.tool_kind.clone(), self.record.title.clone(), d));
        let mut record = self.record;
        record.outcome.clone_from(&selection.outcome);
        record.option_id.clone_from(&selection.option_id);
        record.option_kind.clone_from(&selection.option_kind);
        record.decision = decision.to_owned();
        record.reason = reason.to_owned();
        Resolved {
            selection,
            record,
            remember,
        }
    }

    /// What `on_permission` is shown: outcome "pending", no envelope (built only when the
    /// observer has an `on_permission` to show it to).
    pub fn preview(&self) -> PermissionRecord {
        let record = &self.record;
        PermissionRecord {
            session_id: record.session_id.clone(),
            tool_call_id: record.tool_call_id.clone(),
            title: record.title.clone(),
            tool_kind: record.tool_kind.clone(),
            status: record.status.clone(),
            outcome: "pending".into(),
            option_id: String::new(),
            option_kind: String::new(),
            options: record.options.clone(),
            envelope: String::new(),
            request_id: record.request_id.clone(),
            decision: String::new(),
            reason: String::new(),
            tool_name: record.tool_name.clone(),
        }
    }
}

/// The durable-observer check for a decision (`durable=True`): an observer that cannot record
/// it fails the call before the answer is written.
pub fn missing_commit(record: &PermissionRecord) -> crate::error::AcpError {
    crate::error::AcpError::MissingDurableObserver(format!(
        "a permission request ({:?}) arrived but the observer has no on_permission_commit to record the decision",
        record.title
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(tag: &str, a: &str, b: &str, c: &str) -> Result<ObserverAnswer, String> {
        ObserverAnswer::from_parts(tag, a.into(), b.into(), c.into())
    }

    #[test]
    fn an_observers_answer_is_a_reply_sent_verbatim_or_a_decision() {
        assert_eq!(
            parts("reply", "selected", "y", "allow_once"),
            Ok(ObserverAnswer::Reply(Selection::selected(
                "allow_once",
                "y"
            )))
        );
        assert_eq!(
            parts("outcome", "allow", "", "ok"),
            Ok(ObserverAnswer::Outcome {
                decision: Decision::Allow,
                option_id: None,
                reason: Some("ok".into()),
            })
        );
        assert_eq!(
            parts("outcome", "deny", "n", ""),
            Ok(ObserverAnswer::Outcome {
                decision: Decision::Deny,
                option_id: Some("n".into()),
                reason: None,
            })
        );
        assert_eq!(
            parts("outcome", "maybe", "", ""),
            Err("not a PermissionDecision: \"maybe\"".into())
        );
    }
}

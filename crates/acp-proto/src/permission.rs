//! Permission requests: the owned request the connection keeps while the host decides, the
//! record the observer sees, and the policy's choice in the behaviour reference's option order.

use crate::limits::PermissionPolicy;
use crate::wire::Params;

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

    fn pending() -> Selection {
        Selection {
            outcome: "pending".into(),
            option_id: String::new(),
            option_kind: String::new(),
        }
    }

    fn selected(kind: &str, id: &str) -> Selection {
        Selection {
            outcome: "selected".into(),
            option_id: id.into(),
            option_kind: kind.into(),
        }
    }
}

/// A permission request as the observer sees it (owned, so it can outlive the line).
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// (kind, optionId) of each option object, each as present and a string.
    choices: Vec<(Option<String>, Option<String>)>,
    /// `None` when `options` is absent or not an array.
    has_options: bool,
}

impl Ask {
    pub fn new(
        raw_id: &str,
        envelope: &str,
        fields: &Params<'_>,
        announced: Option<String>,
    ) -> Ask {
        let tool = fields.tool_call.0.as_deref();
        let own_kind = tool.and_then(|t| t.kind.as_str()).map(str::to_owned);
        let tool_kind = own_kind.or(announced);
        let options = fields.options.0.as_deref();
        let items = options.unwrap_or(&[]).iter().filter_map(|o| o.0.as_ref());
        let record = PermissionRecord {
            session_id: fields.session_id.or_empty().to_owned(),
            tool_call_id: tool.map_or("", |t| t.tool_call_id.or_empty()).to_owned(),
            title: tool.map_or("", |t| t.title.or_empty()).to_owned(),
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
        };
        Ask {
            record,
            tool_present: tool.is_some(),
            title: tool.and_then(|t| t.title.as_str()).map(str::to_owned),
            tool_kind,
            choices: items
                .map(|o| {
                    (
                        o.kind.as_str().map(str::to_owned),
                        o.option_id.as_str().map(str::to_owned),
                    )
                })
                .collect(),
            has_options: options.is_some(),
        }
    }

    /// What `on_permission` is shown: outcome "pending", no envelope.
    pub fn preview(&self) -> PermissionRecord {
        self.with(&Selection::pending(), false)
    }

    /// The committed record: the decision and the exact line.
    pub fn with(&self, selection: &Selection, with_envelope: bool) -> PermissionRecord {
        let mut record = self.record.clone();
        record.outcome = selection.outcome.clone();
        record.option_id = selection.option_id.clone();
        record.option_kind = selection.option_kind.clone();
        if !with_envelope {
            record.envelope.clear();
        }
        record
    }

    /// The policy's choice: first `allow_once`, else first `allow_always` when the policy grants
    /// the kind or title; else first `reject_once`, else the last `reject_always`, else
    /// `cancelled`.
    pub fn policy_selection(&self, policy: &PermissionPolicy) -> Selection {
        if !self.has_options {
            return Selection::cancelled();
        }
        let allowed =
            self.tool_present && policy.allows(self.tool_kind.as_deref(), self.title.as_deref());
        let candidates = || {
            self.choices
                .iter()
                .filter_map(|(kind, id)| Some((kind.as_deref()?, id.as_deref()?)))
        };
        let first = |wanted: &str| {
            candidates()
                .find(|(kind, _)| *kind == wanted)
                .map(|(kind, id)| Selection::selected(kind, id))
        };
        if allowed {
            if let Some(selection) = first("allow_once").or_else(|| first("allow_always")) {
                return selection;
            }
        }
        if let Some(selection) = first("reject_once") {
            return selection;
        }
        candidates()
            .rfind(|(kind, _)| *kind == "reject_always")
            .map(|(kind, id)| Selection::selected(kind, id))
            .unwrap_or_else(Selection::cancelled)
    }
}

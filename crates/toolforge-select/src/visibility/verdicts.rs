//! The answer of a resolution: each tool visible or hidden with the rule that hid it, by
//! position ([`Verdicts`]) or by name ([`Visible`]).

use std::collections::HashSet;
use std::fmt;

use super::channels::{Channel, ListKind};
use crate::catalog::{Catalog, ToolId};

/// Why a tool is hidden: the first rule that hid it, denies first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A disabled-tools list of this channel names it (as `name`).
    DisabledTool { channel: Channel, name: String },
    /// It carries a tag a disabled-tags list of this channel names.
    DisabledTag { channel: Channel, tag: String },
    /// The enabled list this channel supplied does not include it.
    NotEnabled { channel: Channel, list: ListKind },
    /// This channel's search query did not match it (and matched other tools).
    NoSearchMatch { channel: Channel },
    /// This channel's search query matched it, but `limit` better-ranked tools were kept.
    BeyondSearchLimit { channel: Channel, limit: usize },
    /// An operator channel is invalid: nothing is visible.
    OperatorChannelInvalid { channel: Channel },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::DisabledTool { channel, name } => {
                write!(f, "disabled by the {channel} channel (tool {name:?})")
            }
            Reason::DisabledTag { channel, tag } => {
                write!(f, "disabled by the {channel} channel (tag {tag:?})")
            }
            Reason::NotEnabled { channel, list } => {
                write!(f, "not in the {channel} channel's enabled {list}")
            }
            Reason::NoSearchMatch { channel } => {
                write!(f, "not among the matches of the {channel} channel's query")
            }
            Reason::BeyondSearchLimit { channel, limit } => write!(
                f,
                "matched the {channel} channel's query, below the {limit} best matches kept"
            ),
            Reason::OperatorChannelInvalid { channel } => {
                write!(f, "the {channel} channel is invalid, so nothing is visible")
            }
        }
    }
}

/// One hidden tool and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hidden {
    pub tool: ToolId,
    pub reason: Reason,
}

/// The answer of [`resolve`]: what one caller may see, explaining itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Visible {
    /// Visible tools, in catalog order.
    pub tools: Vec<ToolId>,
    /// Every other tool of the catalog, in catalog order, with the rule that hid it.
    pub hidden: Vec<Hidden>,
    /// Channels ignored because they did not parse (log these).
    pub warnings: Vec<String>,
    /// `None` without a query; `Some(false)` when a query matched nothing and was dropped.
    pub query_matched: Option<bool>,
}

impl Visible {
    /// True when the tool is visible (hidden tools are also uncallable).
    pub fn allows(&self, id: &ToolId) -> bool {
        self.tools.contains(id)
    }

    /// The catalog narrowed to the visible tools. Every server stays (priority order and
    /// aliases are unchanged); declared overlap groups keep only visible members.
    pub fn catalog(&self, base: &Catalog) -> Catalog {
        let visible: HashSet<&ToolId> = self.tools.iter().collect();
        base.narrowed(|_, t| visible.contains(&t.id()), |m| visible.contains(m))
    }
}

/// Each tool's verdict, in catalog order: what [`Visible`] says, by position.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdicts {
    /// `None` for a visible tool, else the rule that hid it.
    pub reasons: Vec<Option<Reason>>,
    /// Channels ignored because they did not parse (log these).
    pub warnings: Vec<String>,
    /// `None` without a query; `Some(false)` when a query matched nothing and was dropped.
    pub query_matched: Option<bool>,
}

impl Verdicts {
    /// True when the tool at catalog position `i` is visible.
    pub fn shows(&self, i: usize) -> bool {
        matches!(self.reasons.get(i), Some(None))
    }

    /// The verdicts with every tool named, for the catalog they were decided over.
    pub fn into_visible(self, catalog: &Catalog) -> Visible {
        let hidden = self.reasons.iter().filter(|r| r.is_some()).count();
        let mut visible = Visible {
            tools: Vec::with_capacity(self.reasons.len() - hidden),
            hidden: Vec::with_capacity(hidden),
            warnings: self.warnings,
            query_matched: self.query_matched,
        };
        for (tool, reason) in catalog.tools().zip(self.reasons) {
            match reason {
                None => visible.tools.push(tool.id()),
                Some(reason) => visible.hidden.push(Hidden {
                    tool: tool.id(),
                    reason,
                }),
            }
        }
        visible
    }
}

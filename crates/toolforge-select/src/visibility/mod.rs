//! Visibility: which tools of the catalog one caller may see (seed 001, DESIGN §3).
//!
//! Four channels feed it. The process environment and the CLI belong to the operator and are
//! parsed once at start-up; the query string and the headers of an HTTP request belong to the
//! caller and are parsed per request. [`resolve`] is the one pure function that merges them over
//! a catalog:
//!
//! * Precedence headers > query > CLI > env. An *enabled* list (tools and tags, separately) from
//!   a higher channel replaces a lower one's. *Disabled* lists of all channels add up, and a tool
//!   a disabled list names, or that carries a disabled tag, is never shown: deny always wins.
//! * Operator lock (the default): the request channels can only narrow what env and CLI allow.
//!   The request's enabled lists (header replacing query) are intersected with the operator's
//!   (CLI replacing env). [`Policy::allow_request_widening`] restores the seed's literal
//!   behaviour, where a request's list replaces the operator's.
//! * A query (`q`, `x-mcp-query`, ...) keeps the tools that passed every other filter and
//!   contain it (name, description, tags; case-insensitive), the best `search_limit` by BM25.
//!   No match leaves the set as it was without the query, and [`Visible::query_matched`] says so.
//! * Fail-safe means *available*, never *open*. A request channel that does not parse is
//!   ignored and reported in [`Visible::warnings`], but the well-formed names of its own disabled
//!   lists still apply, as do every other channel's denies. A malformed operator channel is an
//!   error from its parser: the binary refuses to start.
//!
//! [`resolve_with_index`] gives the same answer from a [`VisibilityIndex`] built once per
//! catalog (names, tags and BM25 postings), so a request costs about as much as listing the
//! catalog's ids; [`resolve`] builds what it needs per call.
//!
//! Decisions on what the seed leaves open (SEED-REQUIREMENTS Q1-*):
//!
//! * **Empty values.** An enabled key whose value is empty, or only commas and blanks
//!   (`?tools=`), is absent: that channel places no restriction and a lower channel's list still
//!   applies. The seed never says "empty means nothing"; replacement only by a non-empty value is
//!   the upstream reading (Q1-1), and a URL template with an unset variable must not blank the
//!   tool list. Items are trimmed, empties dropped, duplicates dropped keeping first order.
//! * **`all`** (any case) anywhere in an enabled list means "everything" from that channel: it
//!   still replaces lower channels' lists (`--tools all` lifts an env allow-list), and under the
//!   lock a request's `all` narrows nothing. In a disabled list `all` is an ordinary name.
//! * **Aliases and repeats add up within a channel**: `tools` and `toolsets`, a header sent
//!   twice, `MCP_ENABLED_TOOLS` and `MCP_ENABLED_COMPONENTS` all feed one list. One rule for every
//!   channel (Q1-16's "`_TOOLS` first" hint is not followed), and for deny lists the safe one.
//! * **Enabled tools and enabled tags together**: both must hold (intersection, Q1-3). The seed
//!   phrases both as "only"; a tool without tags fails a tag filter.
//! * **Names.** A listed name matches a tool when it equals the tool's plain name (so it matches
//!   that name on every server), `server/tool`, `server__tool`, the server's name (all its tools:
//!   the seed's "toolsets" and "components"), or the key of a declared overlap group (the name
//!   the group is exposed under: all its members). Names are case-sensitive, as MCP tool names
//!   are; tags compare ASCII case-insensitively, as the seed's lower-cased graph match does.
//! * **Search.** A tool matches when the query is a case-insensitive substring of its name,
//!   description or a tag (seed 001's `CONTAINS`), or, for a query of several words, when one
//!   of its content words is (Q1-6: example C asks for "logs analysis"). Matches are ranked by
//!   BM25 over the matches (those sharing no index term with the query last, in catalog order)
//!   and the best `search_limit` (at least 1) are kept; the others are hidden as
//!   [`Reason::BeyondSearchLimit`], so nothing vanishes silently. A positive `search_min_score`
//!   also drops matches scoring at or below it. A header query replaces a query-string one. The
//!   search runs over the tools that survived every other filter, so a query only narrows.
//! * **Sanitising** rejects rather than drops (Q1-12): at most [`MAX_VALUE_BYTES`] per value,
//!   [`MAX_NAMES`] distinct names per list, names and tags of at most [`MAX_NAME_CHARS`]
//!   characters from `[A-Za-z0-9_./:{}~@+%-]` (tool names, resource URIs and URI templates), a
//!   query of at most [`MAX_QUERY_CHARS`] characters without control characters. Unknown query
//!   parameters and headers are not ours and are ignored.
//! * **Components** (S1-61). Resources, resource templates and prompts follow the same lists
//!   through [`resolve_components`]: a prompt is named by its name, a resource by its URI or
//!   name, a template by its URI template or name, each also as `server/name`, `server__name` or
//!   by its server; tags are its server's and its `_meta`'s. An enabled list therefore hides
//!   every component it does not name (`MCP_ENABLED_COMPONENTS=read_file` leaves no prompt).
//!   The search query ranks tools only and does not narrow components.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use crate::catalog::{Catalog, ServerEntry, Tool, ToolId};
use crate::presentation::SEP;
pub use crate::visibility_index::VisibilityIndex;
use crate::visibility_index::{FastMap, FastSet, query_terms};

mod channels;
mod components;
mod matching;
mod search;

pub use channels::{Channel, ChannelInput, Channels, Enabled, Problem, VisibilityError};
pub use components::{Component, resolve_components};
pub(crate) use matching::splits;
use matching::*;
use search::*;

/// Longest accepted raw value of one key, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;
/// Most distinct names (or tags) one list of one channel may hold.
pub const MAX_NAMES: usize = 256;
/// Longest accepted tool name or tag, in characters.
pub const MAX_NAME_CHARS: usize = 128;
/// Longest accepted search query, in characters (after trimming and joining repeats).
pub const MAX_QUERY_CHARS: usize = 512;
/// Default for [`Policy::search_limit`].
pub const DEFAULT_SEARCH_LIMIT: usize = 20;

/// How the channels are merged.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `false` (default): operator lock, request channels only narrow env and CLI.
    /// `true`: the seed's literal precedence, a request's enabled list replaces the operator's.
    pub allow_request_widening: bool,
    /// At most this many search matches are kept (at least one).
    pub search_limit: usize,
    /// A search match needs a BM25 score above this (and above 0).
    pub search_min_score: f32,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allow_request_widening: false,
            search_limit: DEFAULT_SEARCH_LIMIT,
            search_min_score: 0.0,
        }
    }
}

/// Which enabled list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Tags,
}

impl fmt::Display for ListKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ListKind::Tools => "tools",
            ListKind::Tags => "tags",
        })
    }
}

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

/// Resolves what one caller may see: the one pure function of DESIGN §3.
///
/// A search query is ranked over the tools that survived the other filters, indexing only
/// those. A caller that resolves many requests over one catalog should build a
/// [`VisibilityIndex`] once and call [`resolve_with_index`]: same answer, without indexing
/// tools per request.
pub fn resolve(catalog: &Catalog, channels: &Channels, policy: &Policy) -> Visible {
    resolve_inner(catalog, None, channels, policy).into_visible(catalog)
}

/// [`resolve`] with a search index built once for `catalog` ([`VisibilityIndex::new`]): the
/// same answer, but a query only computes its term statistics over the surviving tools instead
/// of indexing them. An index whose length differs from the catalog's was not built for it and
/// is not used (the answer is then [`resolve`]'s, at its cost).
pub fn resolve_with_index(
    catalog: &Catalog,
    index: &VisibilityIndex,
    channels: &Channels,
    policy: &Policy,
) -> Visible {
    verdicts_with_index(catalog, index, channels, policy).into_visible(catalog)
}

/// [`resolve_with_index`] without naming the tools: each one's verdict by catalog position,
/// for a caller that keeps the catalog (the gateway, per request). The same decisions, without
/// the cost of building an id for every tool of a large catalog.
pub fn verdicts_with_index(
    catalog: &Catalog,
    index: &VisibilityIndex,
    channels: &Channels,
    policy: &Policy,
) -> Verdicts {
    let index = (index.len() == catalog.len()).then_some(index);
    resolve_inner(catalog, index, channels, policy)
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

fn resolve_inner<'a>(
    catalog: &'a Catalog,
    index: Option<&VisibilityIndex>,
    channels: &'a Channels,
    policy: &Policy,
) -> Verdicts {
    let tools: Vec<&Tool> = catalog.tools().collect();
    let mut warnings = Vec::new();
    let mut operator_invalid = None;
    for error in &channels.errors {
        let channel = error.channel;
        if channel.is_request() {
            warnings.push(format!(
                "{channel} channel ignored, its denies still apply: {error}"
            ));
        } else {
            operator_invalid.get_or_insert(channel);
            warnings.push(format!(
                "{channel} channel is invalid, nothing is visible: {error}"
            ));
        }
    }
    if let Some(channel) = operator_invalid {
        return Verdicts {
            reasons: vec![Some(Reason::OperatorChannelInvalid { channel }); tools.len()],
            warnings,
            query_matched: None,
        };
    }
    // A failed channel's enabled lists and query are ignored; its (salvaged) denies are not.
    let usable = |channel: Channel| {
        if channels.failed(channel) {
            None
        } else {
            channels.get(channel)
        }
    };

    // Deny lists in precedence order; empty ones are skipped (they deny nothing).
    let mut denies: Vec<(Channel, Option<Matcher>, Option<Matcher>)> = Vec::new();
    for channel in Channel::PRECEDENCE {
        let Some(input) = channels.get(channel) else {
            continue;
        };
        let list = |kind, list: &'a [String]| {
            (!list.is_empty()).then(|| Matcher::new(catalog, index, kind, list))
        };
        let by_name = list(ListKind::Tools, &input.disabled_tools);
        let by_tag = list(ListKind::Tags, &input.disabled_tags);
        if by_name.is_some() || by_tag.is_some() {
            denies.push((channel, by_name, by_tag));
        }
    }

    // Enabled lists: within a scope the highest channel that gave one wins. With the lock the
    // operator's and the request's scopes both apply (intersection); without it there is one.
    let scopes: &[&[Channel]] = if policy.allow_request_widening {
        &[&[Channel::Header, Channel::Query, Channel::Cli, Channel::Env]]
    } else {
        &[
            &[Channel::Cli, Channel::Env],
            &[Channel::Header, Channel::Query],
        ]
    };
    let mut constraints: Vec<(Channel, ListKind, Matcher)> = Vec::new();
    for scope in scopes {
        for kind in [ListKind::Tools, ListKind::Tags] {
            let winner = scope
                .iter()
                .find_map(|&c| usable(c).and_then(|i| i.enabled(kind)).map(|e| (c, e)));
            if let Some((channel, Enabled::Only(list))) = winner {
                constraints.push((channel, kind, Matcher::new(catalog, index, kind, list)));
            }
        }
    }

    let mut reasons: Vec<Option<Reason>> = tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            for (channel, by_name, by_tag) in &denies {
                if let Some(name) = by_name.as_ref().and_then(|m| m.hit(i, tool)) {
                    return Some(Reason::DisabledTool {
                        channel: *channel,
                        name: name.to_owned(),
                    });
                }
                if let Some(tag) = by_tag.as_ref().and_then(|m| m.hit(i, tool)) {
                    return Some(Reason::DisabledTag {
                        channel: *channel,
                        tag: tag.to_owned(),
                    });
                }
            }
            constraints
                .iter()
                .find(|(_, _, matcher)| matcher.hit(i, tool).is_none())
                .map(|(channel, list, _)| Reason::NotEnabled {
                    channel: *channel,
                    list: *list,
                })
        })
        .collect();

    // The query narrows what survived the filters; a query that matches nothing is dropped.
    let query = [Channel::Header, Channel::Query]
        .into_iter()
        .find_map(|c| usable(c).and_then(|i| i.query.as_deref()).map(|q| (c, q)));
    let mut query_matched = None;
    if let Some((channel, text)) = query {
        let allowed: Vec<usize> = (0..tools.len()).filter(|&i| reasons[i].is_none()).collect();
        let members = search_members(&tools, &allowed, text);
        let ranked = match index {
            Some(index) => index.search(&members, text, members.len()),
            // Index only the matching tools, and only the query's terms of them.
            None => VisibilityIndex::for_query(&tools, &members, &query_terms(text)).search(
                &members,
                text,
                members.len(),
            ),
        };
        let order = search_order(&members, &ranked, policy.search_min_score);
        query_matched = Some(!order.is_empty());
        apply_search(&mut reasons, &allowed, &order, channel, policy);
    }

    Verdicts {
        reasons,
        warnings,
        query_matched,
    }
}

#[cfg(test)]
mod equivalence_tests;
#[cfg(test)]
mod tests;

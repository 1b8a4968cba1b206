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

mod channels;
mod components;
mod matching;
mod policy;
mod resolve;
mod search;
mod verdicts;

pub use crate::visibility_index::VisibilityIndex;
pub use channels::{
    Channel, ChannelInput, Channels, Enabled, ListKind, MAX_NAME_CHARS, MAX_NAMES, MAX_QUERY_CHARS,
    MAX_VALUE_BYTES, Problem, VisibilityError,
};
pub use components::{Component, resolve_components};
pub use policy::{DEFAULT_SEARCH_LIMIT, Policy};
pub use resolve::{resolve, resolve_with_index, verdicts_with_index};
pub use verdicts::{Hidden, Reason, Verdicts, Visible};

#[cfg(test)]
mod equivalence_tests;
#[cfg(test)]
mod tests;

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

/// Where a visibility input came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// Process environment (operator, start-up).
    Env,
    /// Command-line flags (operator, start-up).
    Cli,
    /// HTTP query parameters (caller, per request).
    Query,
    /// HTTP request headers (caller, per request).
    Header,
}

impl Channel {
    /// Every channel, highest precedence first.
    pub const PRECEDENCE: [Channel; 4] =
        [Channel::Header, Channel::Query, Channel::Cli, Channel::Env];

    /// True for the channels a caller controls (query and headers).
    pub fn is_request(self) -> bool {
        matches!(self, Channel::Query | Channel::Header)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Env => "env",
            Channel::Cli => "cli",
            Channel::Query => "query",
            Channel::Header => "header",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An enabled list as a channel gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enabled {
    /// `all`: no restriction from this channel (it still replaces lower channels' lists).
    All,
    /// Only these names (or tags); never empty when it comes from a parser.
    Only(Vec<String>),
}

/// What one channel asks for. Lists are trimmed, deduplicated and in first-seen order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelInput {
    pub enabled_tools: Option<Enabled>,
    pub disabled_tools: Vec<String>,
    pub enabled_tags: Option<Enabled>,
    pub disabled_tags: Vec<String>,
    /// Search text; only the request channels have one.
    pub query: Option<String>,
}

/// Which list a key feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    EnabledTools,
    DisabledTools,
    EnabledTags,
    DisabledTags,
    Query,
}

impl Field {
    fn is_enabled(self) -> bool {
        matches!(self, Field::EnabledTools | Field::EnabledTags)
    }

    fn is_tags(self) -> bool {
        matches!(self, Field::EnabledTags | Field::DisabledTags)
    }
}

const ENV_KEYS: &[(&str, Field)] = &[
    ("MCP_ENABLED_TOOLS", Field::EnabledTools),
    ("MCP_ENABLED_COMPONENTS", Field::EnabledTools),
    ("MCP_DISABLED_TOOLS", Field::DisabledTools),
    ("MCP_DISABLED_COMPONENTS", Field::DisabledTools),
    ("MCP_ENABLED_TAGS", Field::EnabledTags),
    ("MCP_DISABLED_TAGS", Field::DisabledTags),
];

const CLI_KEYS: &[(&str, Field)] = &[
    ("--tools", Field::EnabledTools),
    ("--disabled-tools", Field::DisabledTools),
    ("--tags", Field::EnabledTags),
    ("--disabled-tags", Field::DisabledTags),
];

const QUERY_KEYS: &[(&str, Field)] = &[
    ("tools", Field::EnabledTools),
    ("toolsets", Field::EnabledTools),
    ("disabled_tools", Field::DisabledTools),
    ("disabled_toolsets", Field::DisabledTools),
    ("tags", Field::EnabledTags),
    ("disabled_tags", Field::DisabledTags),
    ("q", Field::Query),
    ("query", Field::Query),
    ("search", Field::Query),
];

const HEADER_KEYS: &[(&str, Field)] = &[
    ("x-mcp-enabled-tools", Field::EnabledTools),
    ("x-mcp-enabled-components", Field::EnabledTools),
    ("x-mcp-disabled-tools", Field::DisabledTools),
    ("x-mcp-disabled-components", Field::DisabledTools),
    ("x-mcp-enabled-tags", Field::EnabledTags),
    ("x-mcp-disabled-tags", Field::DisabledTags),
    ("x-mcp-query", Field::Query),
    ("x-mcp-search", Field::Query),
];

/// The list a key of a channel feeds; header names compare case-insensitively.
fn field_of(channel: Channel, key: &str) -> Option<Field> {
    let table = match channel {
        Channel::Env => ENV_KEYS,
        Channel::Cli => CLI_KEYS,
        Channel::Query => QUERY_KEYS,
        Channel::Header => HEADER_KEYS,
    };
    table
        .iter()
        .find(|(k, _)| match channel {
            Channel::Header => k.eq_ignore_ascii_case(key),
            _ => *k == key,
        })
        .map(|&(_, field)| field)
}

/// A visibility value that was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{channel} {key}: {problem}")]
pub struct VisibilityError {
    pub channel: Channel,
    /// The key as given (`MCP_DISABLED_TAGS`, `--tools`, `toolsets`, `X-MCP-Query`).
    pub key: String,
    pub problem: Problem,
}

/// What was wrong with a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("value is {bytes} bytes, at most {max} are accepted")]
    ValueTooLong { bytes: usize, max: usize },
    #[error("more than {max} distinct names")]
    TooManyNames { max: usize },
    #[error("name {name:?} is longer than {max} characters")]
    NameTooLong { name: String, max: usize },
    #[error("name {name:?} has a character outside [A-Za-z0-9_./:{{}}~@+%-]")]
    BadName { name: String },
    #[error("query is {chars} characters, at most {max} are accepted")]
    QueryTooLong { chars: usize, max: usize },
    #[error("query contains a control character")]
    BadQuery,
}

/// A short, printable prefix of a rejected name for messages (never the whole value).
fn excerpt(name: &str) -> String {
    const KEEP: usize = 32;
    if name.chars().count() <= KEEP {
        name.to_owned()
    } else {
        let mut short: String = name.chars().take(KEEP).collect();
        short.push('…');
        short
    }
}

fn valid_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            '_' | '.' | '/' | ':' | '-' | '{' | '}' | '~' | '@' | '+' | '%'
        )
}

fn check_name(name: &str) -> Result<(), Problem> {
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(Problem::NameTooLong {
            name: excerpt(name),
            max: MAX_NAME_CHARS,
        });
    }
    if !name.chars().all(valid_name_char) {
        return Err(Problem::BadName {
            name: excerpt(name),
        });
    }
    Ok(())
}

/// Comma-separated items, trimmed, empties dropped.
fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// One list being collected.
#[derive(Default)]
struct ListAcc {
    all: bool,
    names: Vec<String>,
}

impl ListAcc {
    fn contains(&self, item: &str, tags: bool) -> bool {
        self.names.iter().any(|n| {
            if tags {
                n.eq_ignore_ascii_case(item)
            } else {
                n == item
            }
        })
    }

    fn enabled(self) -> Option<Enabled> {
        if self.all {
            Some(Enabled::All)
        } else if self.names.is_empty() {
            None
        } else {
            Some(Enabled::Only(self.names))
        }
    }
}

#[derive(Default)]
struct InputAcc {
    enabled_tools: ListAcc,
    disabled_tools: ListAcc,
    enabled_tags: ListAcc,
    disabled_tags: ListAcc,
    query: Vec<String>,
}

impl InputAcc {
    fn list(&mut self, field: Field) -> &mut ListAcc {
        match field {
            Field::EnabledTools => &mut self.enabled_tools,
            Field::DisabledTools => &mut self.disabled_tools,
            Field::EnabledTags => &mut self.enabled_tags,
            // The query is not a list; callers handle it before asking for one.
            Field::DisabledTags | Field::Query => &mut self.disabled_tags,
        }
    }

    fn finish(self) -> ChannelInput {
        let query = self.query.join(" ");
        ChannelInput {
            enabled_tools: self.enabled_tools.enabled(),
            disabled_tools: self.disabled_tools.names,
            enabled_tags: self.enabled_tags.enabled(),
            disabled_tags: self.disabled_tags.names,
            query: (!query.is_empty()).then_some(query),
        }
    }
}

/// Parses a channel's raw key/value pairs strictly: any bad value is an error.
fn parse<'a>(
    channel: Channel,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<ChannelInput, VisibilityError> {
    let mut acc = InputAcc::default();
    for (key, value) in pairs {
        let Some(field) = field_of(channel, key) else {
            continue;
        };
        let fail = |problem| VisibilityError {
            channel,
            key: key.to_owned(),
            problem,
        };
        if value.len() > MAX_VALUE_BYTES {
            return Err(fail(Problem::ValueTooLong {
                bytes: value.len(),
                max: MAX_VALUE_BYTES,
            }));
        }
        if field == Field::Query {
            let text = value.trim();
            if text.chars().any(char::is_control) {
                return Err(fail(Problem::BadQuery));
            }
            if !text.is_empty() {
                acc.query.push(text.to_owned());
            }
            let chars = acc
                .query
                .iter()
                .map(|q| q.chars().count() + 1)
                .sum::<usize>();
            if chars.saturating_sub(1) > MAX_QUERY_CHARS {
                return Err(fail(Problem::QueryTooLong {
                    chars: chars - 1,
                    max: MAX_QUERY_CHARS,
                }));
            }
            continue;
        }
        let list = acc.list(field);
        for item in items(value) {
            if field.is_enabled() && item.eq_ignore_ascii_case("all") {
                list.all = true;
                continue;
            }
            check_name(item).map_err(fail)?;
            if list.contains(item, field.is_tags()) {
                continue;
            }
            if list.names.len() == MAX_NAMES {
                return Err(fail(Problem::TooManyNames { max: MAX_NAMES }));
            }
            list.names.push(item.to_owned());
        }
    }
    Ok(acc.finish())
}

/// The denies that can be kept from a channel that failed to parse: every well-formed name of
/// its disabled lists, without the size limits (a long deny list must not open anything).
fn salvage_denies<'a>(
    channel: Channel,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> ChannelInput {
    let mut acc = InputAcc::default();
    for (key, value) in pairs {
        let Some(field @ (Field::DisabledTools | Field::DisabledTags)) = field_of(channel, key)
        else {
            continue;
        };
        let list = acc.list(field);
        for item in items(value) {
            if check_name(item).is_ok() && !list.contains(item, field.is_tags()) {
                list.names.push(item.to_owned());
            }
        }
    }
    acc.finish()
}

fn str_pairs(pairs: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

impl ChannelInput {
    /// The env channel. `lookup` returns a variable's value (the binary passes `std::env::var`;
    /// this crate never reads the environment). An error means the process must not start.
    pub fn from_env(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ChannelInput, VisibilityError> {
        let values: Vec<(&str, String)> = ENV_KEYS
            .iter()
            .filter_map(|&(key, _)| lookup(key).map(|value| (key, value)))
            .collect();
        parse(Channel::Env, values.iter().map(|(k, v)| (*k, v.as_str())))
    }

    /// The CLI channel from `--tools`, `--disabled-tools`, `--tags`, `--disabled-tags`. An error
    /// means the process must not start.
    pub fn from_cli(
        tools: Option<&str>,
        disabled_tools: Option<&str>,
        tags: Option<&str>,
        disabled_tags: Option<&str>,
    ) -> Result<ChannelInput, VisibilityError> {
        let values = [tools, disabled_tools, tags, disabled_tags];
        let pairs = CLI_KEYS
            .iter()
            .zip(values)
            .filter_map(|(&(key, _), value)| value.map(|v| (key, v)));
        parse(Channel::Cli, pairs)
    }

    /// The query channel from URL-decoded query pairs; repeated keys and aliases add up,
    /// unknown keys are ignored.
    pub fn from_query(pairs: &[(String, String)]) -> Result<ChannelInput, VisibilityError> {
        parse(Channel::Query, str_pairs(pairs))
    }

    /// The header channel from header pairs (names case-insensitive); repeated headers and
    /// aliases add up, unknown headers are ignored.
    pub fn from_headers(pairs: &[(String, String)]) -> Result<ChannelInput, VisibilityError> {
        parse(Channel::Header, str_pairs(pairs))
    }

    /// True when the channel asks for nothing.
    pub fn is_empty(&self) -> bool {
        *self == ChannelInput::default()
    }

    fn enabled(&self, list: ListKind) -> Option<&Enabled> {
        match list {
            ListKind::Tools => self.enabled_tools.as_ref(),
            ListKind::Tags => self.enabled_tags.as_ref(),
        }
    }
}

/// The inputs of one resolution: each channel's input, and the request channels that failed to
/// parse (whose input then holds only the denies that could be salvaged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Channels {
    pub env: Option<ChannelInput>,
    pub cli: Option<ChannelInput>,
    pub query: Option<ChannelInput>,
    pub header: Option<ChannelInput>,
    /// Parse errors. A channel named here contributes only its disabled lists. An operator
    /// channel here (which the parsers' `Err` should have stopped at start-up) hides everything.
    pub errors: Vec<VisibilityError>,
}

impl Channels {
    /// The operator's channels, parsed at start-up.
    pub fn operator(env: ChannelInput, cli: ChannelInput) -> Self {
        Self {
            env: Some(env),
            cli: Some(cli),
            ..Self::default()
        }
    }

    /// Adds a request's query pairs. A bad value is recorded in `errors` and only the query's
    /// well-formed disabled names are kept.
    #[must_use]
    pub fn with_query_pairs(self, pairs: &[(String, String)]) -> Self {
        self.with_request(Channel::Query, pairs)
    }

    /// Adds a request's header pairs. A bad value is recorded in `errors` and only the headers'
    /// well-formed disabled names are kept.
    #[must_use]
    pub fn with_header_pairs(self, pairs: &[(String, String)]) -> Self {
        self.with_request(Channel::Header, pairs)
    }

    fn with_request(mut self, channel: Channel, pairs: &[(String, String)]) -> Self {
        let input = match parse(channel, str_pairs(pairs)) {
            Ok(input) => input,
            Err(error) => {
                self.errors.push(error);
                salvage_denies(channel, str_pairs(pairs))
            }
        };
        match channel {
            Channel::Query => self.query = Some(input),
            Channel::Header => self.header = Some(input),
            Channel::Env => self.env = Some(input),
            Channel::Cli => self.cli = Some(input),
        }
        self
    }

    /// A channel's input, if it gave one.
    pub fn get(&self, channel: Channel) -> Option<&ChannelInput> {
        match channel {
            Channel::Env => self.env.as_ref(),
            Channel::Cli => self.cli.as_ref(),
            Channel::Query => self.query.as_ref(),
            Channel::Header => self.header.as_ref(),
        }
    }

    fn failed(&self, channel: Channel) -> bool {
        self.errors.iter().any(|e| e.channel == channel)
    }
}

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

/// A list of tool names, ready to match without building a tool's name forms: a listed name
/// matches a tool when it equals the tool's plain name, its server, `server/tool`,
/// `server__tool`, or the key of a declared overlap group the tool belongs to.
struct NameMatcher<'a> {
    set: FastSet<&'a str>,
    /// What the list says about the tools of each server it concerns.
    servers: FastMap<&'a str, usize>,
    by_server: Vec<ServerNames<'a>>,
    /// The last server looked up and its entry: a catalog lists a server's tools together.
    last: Cell<Option<(&'a str, Option<usize>)>>,
}

/// What a list says about one server's tools, by tool name.
#[derive(Default)]
struct ServerNames<'a> {
    /// The list names the server itself.
    listed: bool,
    /// Tool -> the listed name that is `server/tool`.
    slash: FastMap<&'a str, &'a str>,
    /// Tool -> the listed name that is `server__tool`.
    sep: FastMap<&'a str, &'a str>,
    /// Tool -> the first listed key (catalog order) of an overlap group it belongs to.
    groups: FastMap<&'a str, &'a str>,
}

/// Every `(left, right)` split of `name` around an occurrence of `sep`, overlapping ones
/// included (`a___b` splits twice around `__`).
pub(crate) fn splits<'a>(
    name: &'a str,
    sep: &'static str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    (0..name.len())
        .filter(move |&i| name.is_char_boundary(i) && name[i..].starts_with(sep))
        .map(move |i| (&name[..i], &name[i + sep.len()..]))
}

impl<'a> NameMatcher<'a> {
    fn new(catalog: &'a Catalog, list: &'a [String]) -> Self {
        let set: FastSet<&str> = list.iter().map(String::as_str).collect();
        let mut servers: FastMap<&'a str, usize> = FastMap::default();
        let mut by_server: Vec<ServerNames<'a>> = Vec::new();
        let mut entry = |server: &'a str| -> usize {
            *servers.entry(server).or_insert_with(|| {
                by_server.push(ServerNames::default());
                by_server.len() - 1
            })
        };
        let mut add: Vec<(usize, u8, &'a str, &'a str)> = Vec::new();
        for name in list {
            add.push((entry(name), 0, "", name));
            for (server, tool) in splits(name, "/") {
                add.push((entry(server), 1, tool, name));
            }
            for (server, tool) in splits(name, SEP) {
                add.push((entry(server), 2, tool, name));
            }
        }
        for (key, members) in &catalog.overlaps {
            if set.contains(key.as_str()) {
                for member in members {
                    add.push((entry(&member.server), 3, &member.name, key));
                }
            }
        }
        for (i, form, tool, name) in add {
            let names = &mut by_server[i];
            let map = match form {
                0 => {
                    names.listed = true;
                    continue;
                }
                1 => &mut names.slash,
                2 => &mut names.sep,
                _ => &mut names.groups,
            };
            map.entry(tool).or_insert(name);
        }
        Self {
            set,
            servers,
            by_server,
            last: Cell::new(None),
        }
    }

    /// The first of the tool's names (plain, server, `server/tool`, `server__tool`, group keys
    /// in catalog order) that the list holds, if any.
    fn hit(&self, tool: &'a Tool) -> Option<&'a str> {
        if self.set.is_empty() {
            return None;
        }
        if self.set.contains(tool.name.as_str()) {
            return Some(&tool.name);
        }
        let server = match self.last.get() {
            Some((server, entry)) if server == tool.server => entry,
            _ => {
                let entry = self.servers.get(tool.server.as_str()).copied();
                self.last.set(Some((&tool.server, entry)));
                entry
            }
        };
        let names = &self.by_server[server?];
        if names.listed {
            return Some(&tool.server);
        }
        let name = tool.name.as_str();
        [&names.slash, &names.sep, &names.groups]
            .into_iter()
            .find_map(|map| map.get(name).copied())
    }
}

/// A list of tags, matched ASCII case-insensitively: a short one by scanning it, a longer one
/// through a set of its lower-cased tags.
struct TagMatcher {
    list: Vec<String>,
    set: FastSet<String>,
}

/// Up to this many tags a list is scanned rather than hashed.
const SCAN_TAGS: usize = 8;

impl TagMatcher {
    fn new(list: &[String]) -> Self {
        let list: Vec<String> = list.iter().map(|t| t.to_ascii_lowercase()).collect();
        let set = if list.len() > SCAN_TAGS {
            list.iter().cloned().collect()
        } else {
            FastSet::default()
        };
        Self { list, set }
    }

    /// The first of the tool's tags (as the tool spells it) that the list holds, if any.
    fn hit<'t>(&self, tool: &'t Tool) -> Option<&'t str> {
        if self.list.is_empty() {
            return None;
        }
        tool.tags.iter().map(String::as_str).find(|t| {
            if self.set.is_empty() {
                self.list.iter().any(|l| l.eq_ignore_ascii_case(t))
            } else if t.bytes().any(|b| b.is_ascii_uppercase()) {
                self.set.contains(&t.to_ascii_lowercase())
            } else {
                self.set.contains(*t)
            }
        })
    }
}

/// A list of names or tags, ready to match.
enum Matcher<'a> {
    Names(NameMatcher<'a>),
    Tags(TagMatcher),
    /// Each tool's hit, found through a [`VisibilityIndex`].
    IndexedNames(Vec<Option<&'a str>>),
    /// Each tool's first listed tag (its position), found through a [`VisibilityIndex`].
    IndexedTags(Vec<u32>),
}

impl<'a> Matcher<'a> {
    fn new(
        catalog: &'a Catalog,
        index: Option<&VisibilityIndex>,
        kind: ListKind,
        list: &'a [String],
    ) -> Self {
        match (kind, index) {
            (ListKind::Tools, None) => Matcher::Names(NameMatcher::new(catalog, list)),
            (ListKind::Tags, None) => Matcher::Tags(TagMatcher::new(list)),
            (ListKind::Tools, Some(index)) => Matcher::IndexedNames(index.name_hits(catalog, list)),
            (ListKind::Tags, Some(index)) => Matcher::IndexedTags(index.tag_hits(list)),
        }
    }

    /// The name or tag of the tool (the `i`th of the catalog) that the list holds, if any.
    fn hit(&self, i: usize, tool: &'a Tool) -> Option<&'a str> {
        match self {
            Matcher::Names(m) => m.hit(tool),
            Matcher::Tags(m) => m.hit(tool),
            Matcher::IndexedNames(hits) => hits[i],
            Matcher::IndexedTags(hits) => tool.tags.get(hits[i] as usize).map(String::as_str),
        }
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

/// The tools at `allowed` (catalog positions, ascending) a search query matches, as seed 001's
/// Knowledge Graph query does: the query is a case-insensitive substring of the tool's name,
/// description or one of its tags. A query of several words also matches a tool containing any
/// one of its content words (three letters or more, not a stop word), so "logs analysis" finds
/// the log tools instead of nothing.
fn search_members(tools: &[&Tool], allowed: &[usize], query: &str) -> Vec<usize> {
    let whole = query.trim().to_lowercase();
    let mut needles = vec![whole.clone()];
    let words: Vec<&str> = whole.split_whitespace().collect();
    if words.len() > 1 {
        for word in words {
            let content = word.chars().count() >= 3 && !crate::rank::terms(word).is_empty();
            if content && !needles.iter().any(|n| n == word) {
                needles.push(word.to_owned());
            }
        }
    }
    let contains = |text: &str| {
        let text = text.to_lowercase();
        needles.iter().any(|n| text.contains(n.as_str()))
    };
    allowed
        .iter()
        .copied()
        .filter(|&i| {
            let tool = tools[i];
            contains(&tool.name)
                || contains(&tool.description)
                || tool.tags.iter().any(|t| contains(t))
        })
        .collect()
}

/// The matching tools best first: by BM25 score over the matches (`ranked`: positions in
/// `members` with positive scores, best first), then the matches sharing no index term with the
/// query, in catalog order. A positive `min_score` keeps only matches scoring above it.
fn search_order(members: &[usize], ranked: &[(usize, f32)], min_score: f32) -> Vec<usize> {
    let floor = min_score.max(0.0);
    let mut order: Vec<usize> = ranked
        .iter()
        .filter(|&&(_, score)| score > floor)
        .map(|&(p, _)| members[p])
        .collect();
    if floor == 0.0 {
        let scored: HashSet<usize> = order.iter().copied().collect();
        order.extend(members.iter().copied().filter(|i| !scored.contains(i)));
    }
    order
}

/// Hides what a search left out: tools it did not match, and matches beyond the limit. A
/// search that matched nothing hides nothing (the caller marks it unmatched).
fn apply_search(
    reasons: &mut [Option<Reason>],
    allowed: &[usize],
    order: &[usize],
    channel: Channel,
    policy: &Policy,
) {
    if order.is_empty() {
        return;
    }
    let limit = policy.search_limit.max(1);
    let mut verdict: Vec<Option<Option<Reason>>> = vec![None; reasons.len()];
    for (rank, &i) in order.iter().enumerate() {
        verdict[i] = Some((rank >= limit).then_some(Reason::BeyondSearchLimit { channel, limit }));
    }
    for &i in allowed {
        reasons[i] = match verdict[i].take() {
            Some(kept_or_beyond) => kept_or_beyond,
            None => Some(Reason::NoSearchMatch { channel }),
        };
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

/// A resource, resource template or prompt, as visibility sees it (S1-61: the filters apply to
/// every component, not only tools).
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    /// The server that offers it.
    pub server: String,
    /// The names a list may use for it, any one of which enables it and any one of which, in a
    /// disabled list, hides it: a prompt's name (and the name the gateway exposes it under), a
    /// resource's URI and name, a template's URI template and name.
    pub names: Vec<String>,
    /// The server's configured tags and those in the component's `_meta` (`tags` or
    /// `_fastmcp.tags`).
    pub tags: Vec<String>,
}

impl Component {
    /// A component from the MCP object a server listed (`definition`, for its `_meta` tags),
    /// known by `names`, offered by `server` whose configuration gives it `server_tags`.
    pub fn from_mcp(
        server: &str,
        names: Vec<String>,
        definition: &serde_json::Value,
        server_tags: &[String],
    ) -> Self {
        let mut def = serde_json::Map::new();
        def.insert("name".into(), serde_json::Value::String(String::new()));
        if let Some(meta) = definition.get("_meta") {
            def.insert("_meta".into(), meta.clone());
        }
        let tags = Tool::from_mcp(server, def, server_tags)
            .map(|t| t.tags)
            .unwrap_or_default();
        Self {
            server: server.to_owned(),
            names,
            tags,
        }
    }
}

/// Which of `components` one caller may see, in order: the merge of [`resolve`] with every
/// channel's names and tags, but without a search query (search ranks tools; it does not
/// narrow resources or prompts). A component is hidden when a disabled list names any of its
/// names or tags, or when an enabled list holds none of them. Names match as tool names do:
/// plain, `server/name`, `server__name`, or the server's name for all its components.
pub fn resolve_components(
    components: &[Component],
    channels: &Channels,
    policy: &Policy,
) -> Vec<bool> {
    // One pseudo-tool per name form, grouped by server; `forms[i]` lists component i's.
    let mut servers: Vec<ServerEntry> = Vec::new();
    let mut forms: Vec<Vec<ToolId>> = Vec::with_capacity(components.len());
    for component in components {
        let entry = match servers.iter().position(|s| s.name == component.server) {
            Some(i) => i,
            None => {
                servers.push(ServerEntry {
                    name: component.server.clone(),
                    tags: Vec::new(),
                    aliases: Vec::new(),
                    tools: Vec::new(),
                });
                servers.len() - 1
            }
        };
        let mut ids = Vec::with_capacity(component.names.len());
        for name in &component.names {
            let tools = &mut servers[entry].tools;
            if !tools.iter().any(|t| t.name == *name) {
                let mut definition = serde_json::Map::new();
                definition.insert("name".into(), serde_json::Value::String(name.clone()));
                tools.push(Tool {
                    server: component.server.clone(),
                    name: name.clone(),
                    description: String::new(),
                    input_schema: serde_json::Value::Null,
                    tags: component.tags.clone(),
                    definition,
                });
            }
            ids.push(ToolId::new(&component.server, name));
        }
        forms.push(ids);
    }
    let catalog = Catalog {
        servers,
        overlaps: Vec::new(),
    };
    let mut channels = channels.clone();
    for input in [&mut channels.query, &mut channels.header]
        .into_iter()
        .flatten()
    {
        input.query = None;
    }
    let visible = resolve_inner(&catalog, None, &channels, policy).into_visible(&catalog);
    let denied: HashSet<&ToolId> = visible
        .hidden
        .iter()
        .filter(|h| {
            matches!(
                h.reason,
                Reason::DisabledTool { .. }
                    | Reason::DisabledTag { .. }
                    | Reason::OperatorChannelInvalid { .. }
            )
        })
        .map(|h| &h.tool)
        .collect();
    let shown: HashSet<&ToolId> = visible.tools.iter().collect();
    forms
        .iter()
        .map(|ids| {
            !ids.is_empty()
                && !ids.iter().any(|id| denied.contains(id))
                && ids.iter().any(|id| shown.contains(id))
        })
        .collect()
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    fn tool(server: &str, name: &str, description: &str, tags: &[&str]) -> Tool {
        let mut definition = Map::new();
        definition.insert("name".into(), Value::String(name.into()));
        Tool {
            server: server.into(),
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object"}),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            definition,
        }
    }

    fn server(name: &str, tools: Vec<Tool>) -> ServerEntry {
        ServerEntry {
            name: name.into(),
            tags: Vec::new(),
            aliases: Vec::new(),
            tools,
        }
    }

    /// Four tools on two servers, each with its own tag: the precedence matrix runs on it.
    fn matrix_catalog() -> Catalog {
        Catalog::new(
            vec![
                server(
                    "s1",
                    vec![
                        tool("s1", "a", "", &["ta", "shared"]),
                        tool("s1", "b", "", &["tb", "shared"]),
                    ],
                ),
                server(
                    "s2",
                    vec![tool("s2", "c", "", &["tc"]), tool("s2", "d", "", &[])],
                ),
            ],
            vec![(
                "grp".into(),
                vec![ToolId::new("s1", "a"), ToolId::new("s2", "d")],
            )],
        )
        .unwrap()
    }

    /// A catalog for the seed's examples and search.
    fn seed_catalog() -> Catalog {
        Catalog::new(
            vec![
                server(
                    "git",
                    vec![
                        tool(
                            "git",
                            "clone_repo",
                            "Clone a git repository",
                            &["git", "network"],
                        ),
                        tool(
                            "git",
                            "git_status",
                            "Show the working tree status",
                            &["git", "read-only"],
                        ),
                        tool(
                            "git",
                            "git_push",
                            "Push commits to a remote",
                            &["git", "network", "write"],
                        ),
                    ],
                ),
                server(
                    "files",
                    vec![
                        tool(
                            "files",
                            "view_file",
                            "View a file",
                            &["filesystem", "read-only"],
                        ),
                        tool(
                            "files",
                            "edit_file",
                            "Edit a file in place",
                            &["filesystem", "write"],
                        ),
                        tool(
                            "files",
                            "list_directories",
                            "List directories",
                            &["filesystem", "read-only"],
                        ),
                    ],
                ),
                server(
                    "logs",
                    vec![
                        tool(
                            "logs",
                            "read_logs",
                            "Read recent logs of a service",
                            &["logs", "read-only"],
                        ),
                        tool(
                            "logs",
                            "analyze_logs",
                            "Statistical analysis of logs: error rates, spikes",
                            &["logs", "read-only"],
                        ),
                        tool(
                            "logs",
                            "delete_logs",
                            "Delete old logs",
                            &["logs", "delete", "destructive"],
                        ),
                        tool(
                            "logs",
                            "write_log_entry",
                            "Append an entry to the logs",
                            &["logs", "write"],
                        ),
                    ],
                ),
                server(
                    "web",
                    vec![tool("web", "fetch", "Fetch a URL over HTTP", &["network"])],
                ),
            ],
            Vec::new(),
        )
        .unwrap()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Raw inputs of the four channels, parsed the way the binary and the gateway parse them.
    #[derive(Default, Clone)]
    struct Raw {
        env: Vec<(&'static str, String)>,
        cli: [Option<String>; 4],
        query: Vec<(String, String)>,
        header: Vec<(String, String)>,
    }

    impl Raw {
        /// Sets `field` on `channel` under that channel's first key for it.
        fn put(mut self, channel: Channel, field: Field, value: &str) -> Self {
            let key = |table: &[(&'static str, Field)]| {
                table.iter().find(|(_, f)| *f == field).unwrap().0
            };
            match channel {
                Channel::Env => self.env.push((key(ENV_KEYS), value.to_owned())),
                Channel::Cli => {
                    let i = CLI_KEYS.iter().position(|(_, f)| *f == field).unwrap();
                    self.cli[i] = Some(value.to_owned());
                }
                Channel::Query => self.query.push((key(QUERY_KEYS).into(), value.into())),
                Channel::Header => self.header.push((key(HEADER_KEYS).into(), value.into())),
            }
            self
        }

        /// Raw query pairs, as the gateway passes them.
        fn query(mut self, list: &[(&str, &str)]) -> Self {
            self.query = pairs(list);
            self
        }

        /// Raw header pairs, as the gateway passes them.
        fn header(mut self, list: &[(&str, &str)]) -> Self {
            self.header = pairs(list);
            self
        }

        fn channels(&self) -> Channels {
            let env = self.env.clone();
            let lookup =
                move |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
            let env = ChannelInput::from_env(&lookup).unwrap();
            let [t, dt, g, dg] = &self.cli;
            let cli =
                ChannelInput::from_cli(t.as_deref(), dt.as_deref(), g.as_deref(), dg.as_deref())
                    .unwrap();
            Channels::operator(env, cli)
                .with_query_pairs(&self.query)
                .with_header_pairs(&self.header)
        }
    }

    fn shown(catalog: &Catalog, channels: &Channels, policy: &Policy) -> Vec<String> {
        resolve(catalog, channels, policy)
            .tools
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn lock() -> Policy {
        Policy::default()
    }

    fn widen() -> Policy {
        Policy {
            allow_request_widening: true,
            ..Policy::default()
        }
    }

    const ALL4: [&str; 4] = ["s1/a", "s1/b", "s2/c", "s2/d"];

    /// Every ordered pair (lower, higher) of channels, both policies, for enabled tools and
    /// enabled tags: higher replaces lower, except that under the lock a request channel is
    /// intersected with an operator channel.
    #[test]
    fn precedence_matrix_for_enabled_lists() {
        let catalog = matrix_catalog();
        let order = [Channel::Env, Channel::Cli, Channel::Query, Channel::Header];
        let mut checked = 0;
        for (i, &lo) in order.iter().enumerate() {
            for &hi in &order[i + 1..] {
                for (policy, widening) in [(lock(), false), (widen(), true)] {
                    let cases = [
                        (Field::EnabledTools, "a,b", "b,c"),
                        (Field::EnabledTags, "ta,tb", "tb,tc"),
                    ];
                    for (field, lo_value, hi_value) in cases {
                        let raw = Raw::default()
                            .put(lo, field, lo_value)
                            .put(hi, field, hi_value);
                        let intersect = !widening && !lo.is_request() && hi.is_request();
                        let expect: &[&str] = if intersect {
                            &["s1/b"]
                        } else {
                            &["s1/b", "s2/c"]
                        };
                        assert_eq!(
                            shown(&catalog, &raw.channels(), &policy),
                            expect,
                            "{field:?}: {lo}={lo_value} {hi}={hi_value} widening={widening}"
                        );
                        // Each channel alone enables exactly its own list.
                        let alone = Raw::default().put(lo, field, lo_value);
                        assert_eq!(
                            shown(&catalog, &alone.channels(), &policy),
                            ["s1/a", "s1/b"]
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 24);
    }

    #[test]
    fn a_request_list_never_widens_under_the_lock_but_does_with_widening() {
        let catalog = matrix_catalog();
        for operator in [Channel::Env, Channel::Cli] {
            for request in [Channel::Query, Channel::Header] {
                let raw = Raw::default().put(operator, Field::EnabledTools, "a").put(
                    request,
                    Field::EnabledTools,
                    "c,d",
                );
                assert!(shown(&catalog, &raw.channels(), &lock()).is_empty());
                assert_eq!(shown(&catalog, &raw.channels(), &widen()), ["s2/c", "s2/d"]);
                let raw = Raw::default().put(operator, Field::EnabledTags, "ta").put(
                    request,
                    Field::EnabledTags,
                    "tc",
                );
                assert!(shown(&catalog, &raw.channels(), &lock()).is_empty());
                assert_eq!(shown(&catalog, &raw.channels(), &widen()), ["s2/c"]);
            }
        }
    }

    #[test]
    fn disabled_lists_of_every_pair_of_channels_add_up() {
        let catalog = matrix_catalog();
        for lo in Channel::PRECEDENCE {
            for hi in Channel::PRECEDENCE {
                for policy in [lock(), widen()] {
                    let raw = Raw::default().put(lo, Field::DisabledTools, "a").put(
                        hi,
                        Field::DisabledTags,
                        "tc",
                    );
                    let expect: &[&str] = &["s1/b", "s2/d"];
                    assert_eq!(
                        shown(&catalog, &raw.channels(), &policy),
                        expect,
                        "{lo} {hi}"
                    );
                }
            }
        }
        // All four at once.
        let raw = Raw::default()
            .put(Channel::Env, Field::DisabledTools, "a")
            .put(Channel::Cli, Field::DisabledTools, "b")
            .put(Channel::Query, Field::DisabledTools, "c")
            .put(Channel::Header, Field::DisabledTools, "d");
        assert!(shown(&catalog, &raw.channels(), &widen()).is_empty());
    }

    #[test]
    fn deny_wins_over_enable_at_every_level() {
        let catalog = matrix_catalog();
        for enabler in Channel::PRECEDENCE {
            for denier in Channel::PRECEDENCE {
                for policy in [lock(), widen()] {
                    for (deny_field, deny_value) in
                        [(Field::DisabledTools, "a"), (Field::DisabledTags, "ta")]
                    {
                        for (enable_field, enable_value) in
                            [(Field::EnabledTools, "a,b"), (Field::EnabledTags, "ta,tb")]
                        {
                            let raw = Raw::default()
                                .put(enabler, enable_field, enable_value)
                                .put(denier, deny_field, deny_value);
                            assert_eq!(
                                shown(&catalog, &raw.channels(), &policy),
                                ["s1/b"],
                                "{enabler} enables, {denier} denies"
                            );
                        }
                    }
                    // `all` enables everything, still not what is denied.
                    let raw = Raw::default().put(enabler, Field::EnabledTools, "all").put(
                        denier,
                        Field::DisabledTools,
                        "s1/a",
                    );
                    assert_eq!(
                        shown(&catalog, &raw.channels(), &policy),
                        ["s1/b", "s2/c", "s2/d"]
                    );
                }
            }
        }
    }

    #[test]
    fn nothing_from_any_channel_shows_everything() {
        let catalog = matrix_catalog();
        let visible = resolve(&catalog, &Raw::default().channels(), &lock());
        assert_eq!(visible.tools.len(), 4);
        assert!(visible.hidden.is_empty() && visible.warnings.is_empty());
        assert_eq!(visible.query_matched, None);
        let visible = resolve(&catalog, &Channels::default(), &lock());
        assert_eq!(visible.tools.len(), 4);
    }

    #[test]
    fn every_alias_is_accepted() {
        let lookup = |k: &str| match k {
            "MCP_ENABLED_COMPONENTS" => Some("a".to_owned()),
            "MCP_DISABLED_COMPONENTS" => Some("b".to_owned()),
            "MCP_ENABLED_TAGS" => Some("ta".to_owned()),
            "MCP_DISABLED_TAGS" => Some("tb".to_owned()),
            _ => None,
        };
        let env = ChannelInput::from_env(&lookup).unwrap();
        assert_eq!(env.enabled_tools, Some(Enabled::Only(vec!["a".into()])));
        assert_eq!(env.disabled_tools, ["b"]);
        assert_eq!(env.enabled_tags, Some(Enabled::Only(vec!["ta".into()])));
        assert_eq!(env.disabled_tags, ["tb"]);

        let cli = ChannelInput::from_cli(Some("a"), Some("b"), Some("ta"), Some("tb")).unwrap();
        assert_eq!(cli, env);

        for (tools, disabled, query) in [
            ("tools", "disabled_tools", "q"),
            ("toolsets", "disabled_toolsets", "query"),
            ("toolsets", "disabled_tools", "search"),
        ] {
            let input = ChannelInput::from_query(&pairs(&[
                (tools, "a"),
                (disabled, "b"),
                ("tags", "ta"),
                ("disabled_tags", "tb"),
                (query, "logs"),
                ("session", "unrelated"),
            ]))
            .unwrap();
            assert_eq!(input.enabled_tools, env.enabled_tools);
            assert_eq!(input.disabled_tools, ["b"]);
            assert_eq!(input.enabled_tags, env.enabled_tags);
            assert_eq!(input.disabled_tags, ["tb"]);
            assert_eq!(input.query.as_deref(), Some("logs"));
        }

        for (tools, disabled, query) in [
            ("x-mcp-enabled-tools", "x-mcp-disabled-tools", "x-mcp-query"),
            (
                "x-mcp-enabled-components",
                "x-mcp-disabled-components",
                "x-mcp-search",
            ),
            (
                "X-MCP-Enabled-Tools",
                "X-Mcp-Disabled-Components",
                "X-MCP-SEARCH",
            ),
        ] {
            let input = ChannelInput::from_headers(&pairs(&[
                (tools, "a"),
                (disabled, "b"),
                ("X-Mcp-Enabled-Tags", "ta"),
                ("x-mcp-disabled-tags", "tb"),
                (query, "logs"),
                ("authorization", "Bearer x"),
            ]))
            .unwrap();
            assert_eq!(input.enabled_tools, env.enabled_tools);
            assert_eq!(input.disabled_tools, ["b"]);
            assert_eq!(input.enabled_tags, env.enabled_tags);
            assert_eq!(input.query.as_deref(), Some("logs"));
        }
        // Query keys and env names are case-sensitive.
        assert!(
            ChannelInput::from_query(&pairs(&[("Tools", "a")]))
                .unwrap()
                .is_empty()
        );
        assert!(
            ChannelInput::from_env(&|k| (k == "mcp_enabled_tools").then(|| "a".into()))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn aliases_and_repeats_add_up_within_a_channel() {
        let input = ChannelInput::from_query(&pairs(&[
            ("tools", "a"),
            ("toolsets", "b,a"),
            ("tools", "c"),
            ("disabled_tools", "x"),
            ("disabled_toolsets", "y"),
            ("q", "read"),
            ("search", "logs"),
        ]))
        .unwrap();
        assert_eq!(
            input.enabled_tools,
            Some(Enabled::Only(vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(input.disabled_tools, ["x", "y"]);
        assert_eq!(input.query.as_deref(), Some("read logs"));

        let input = ChannelInput::from_headers(&pairs(&[
            ("x-mcp-disabled-tags", "write"),
            ("X-MCP-Disabled-Tags", "delete, WRITE"),
        ]))
        .unwrap();
        assert_eq!(input.disabled_tags, ["write", "delete"]);

        let env = ChannelInput::from_env(&|k| match k {
            "MCP_ENABLED_TOOLS" => Some("a".into()),
            "MCP_ENABLED_COMPONENTS" => Some("b".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(
            env.enabled_tools,
            Some(Enabled::Only(vec!["a".into(), "b".into()]))
        );
    }

    #[test]
    fn all_means_no_restriction_from_that_channel() {
        let catalog = matrix_catalog();
        for value in ["all", "ALL", " All ", "a,all"] {
            let input = ChannelInput::from_query(&pairs(&[("tools", value)])).unwrap();
            assert_eq!(input.enabled_tools, Some(Enabled::All), "{value:?}");
        }
        // `--tools all` lifts an env allow-list (CLI replaces env).
        let raw = Raw::default()
            .put(Channel::Env, Field::EnabledTools, "a")
            .put(Channel::Cli, Field::EnabledTools, "all");
        assert_eq!(shown(&catalog, &raw.channels(), &lock()), ALL4);
        // Under the lock a request's `all` narrows nothing and widens nothing.
        let raw = Raw::default()
            .put(Channel::Env, Field::EnabledTags, "ta")
            .put(Channel::Header, Field::EnabledTags, "all");
        assert_eq!(shown(&catalog, &raw.channels(), &lock()), ["s1/a"]);
        assert_eq!(shown(&catalog, &raw.channels(), &widen()), ALL4);
        // In a disabled list `all` is just a name.
        let input = ChannelInput::from_query(&pairs(&[("disabled_tools", "all")])).unwrap();
        assert_eq!(input.disabled_tools, ["all"]);
        let raw = Raw::default().put(Channel::Query, Field::DisabledTools, "all");
        assert_eq!(shown(&catalog, &raw.channels(), &lock()), ALL4);
    }

    #[test]
    fn whitespace_empties_and_duplicates_are_dropped() {
        let input =
            ChannelInput::from_cli(Some(" a , ,b,a ,, "), Some(""), None, Some(" ")).unwrap();
        assert_eq!(
            input.enabled_tools,
            Some(Enabled::Only(vec!["a".into(), "b".into()]))
        );
        assert!(input.disabled_tools.is_empty() && input.disabled_tags.is_empty());
        let input = ChannelInput::from_query(&pairs(&[("tags", "Git, git ,GIT,fs")])).unwrap();
        assert_eq!(
            input.enabled_tags,
            Some(Enabled::Only(vec!["Git".into(), "fs".into()]))
        );
        let input = ChannelInput::from_query(&pairs(&[("q", "   ")])).unwrap();
        assert_eq!(input.query, None);
    }

    /// `?tools=` is absent, not "nothing": the lower channel's list still applies.
    #[test]
    fn an_empty_enabled_value_is_absent() {
        let catalog = matrix_catalog();
        for value in ["", " ", ",", " , ,"] {
            let input = ChannelInput::from_query(&pairs(&[("tools", value)])).unwrap();
            assert_eq!(input.enabled_tools, None, "{value:?}");
            let raw = Raw::default()
                .put(Channel::Env, Field::EnabledTools, "a,b")
                .put(Channel::Query, Field::EnabledTools, value);
            assert_eq!(shown(&catalog, &raw.channels(), &widen()), ["s1/a", "s1/b"]);
            let raw = Raw::default().put(Channel::Header, Field::EnabledTools, value);
            assert_eq!(shown(&catalog, &raw.channels(), &lock()), ALL4);
        }
        let env =
            ChannelInput::from_env(&|k| (k == "MCP_ENABLED_TOOLS").then(String::new)).unwrap();
        assert!(env.is_empty());
    }

    #[test]
    fn bad_values_are_errors_naming_channel_and_key() {
        let long_value = "a,".repeat(MAX_VALUE_BYTES / 2 + 1);
        let too_many = (0..=MAX_NAMES)
            .map(|i| format!("t{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let exactly_enough = (0..MAX_NAMES)
            .map(|i| format!("t{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let long_name = "n".repeat(MAX_NAME_CHARS + 1);
        let ok_name = "n".repeat(MAX_NAME_CHARS);
        let long_query = "q".repeat(MAX_QUERY_CHARS + 1);
        let cases: Vec<(&str, String, Option<Problem>)> = vec![
            (
                "x-mcp-enabled-tools",
                long_value.clone(),
                Some(Problem::ValueTooLong {
                    bytes: long_value.len(),
                    max: MAX_VALUE_BYTES,
                }),
            ),
            (
                "X-MCP-Disabled-Tools",
                too_many.clone(),
                Some(Problem::TooManyNames { max: MAX_NAMES }),
            ),
            ("x-mcp-disabled-tools", exactly_enough, None),
            (
                "x-mcp-enabled-tags",
                long_name.clone(),
                Some(Problem::NameTooLong {
                    name: format!("{}…", "n".repeat(32)),
                    max: MAX_NAME_CHARS,
                }),
            ),
            ("x-mcp-enabled-tags", ok_name, None),
            (
                "x-mcp-enabled-tools",
                "read file".into(),
                Some(Problem::BadName {
                    name: "read file".into(),
                }),
            ),
            (
                "x-mcp-disabled-tags",
                "a;rm -rf".into(),
                Some(Problem::BadName {
                    name: "a;rm -rf".into(),
                }),
            ),
            (
                "x-mcp-enabled-tools",
                "<script>".into(),
                Some(Problem::BadName {
                    name: "<script>".into(),
                }),
            ),
            (
                "x-mcp-enabled-tools",
                "fs/read_file,fs__x,ns:t.v-1".into(),
                None,
            ),
            (
                "x-mcp-enabled-tools",
                "café".into(),
                Some(Problem::BadName {
                    name: "café".into(),
                }),
            ),
            (
                "x-mcp-query",
                long_query.clone(),
                Some(Problem::QueryTooLong {
                    chars: MAX_QUERY_CHARS + 1,
                    max: MAX_QUERY_CHARS,
                }),
            ),
            ("x-mcp-query", "q".repeat(MAX_QUERY_CHARS), None),
            (
                "x-mcp-search",
                "logs\nx-evil: 1".into(),
                Some(Problem::BadQuery),
            ),
            ("x-mcp-query", "logs, analysis — café".into(), None),
        ];
        for (key, value, expect) in cases {
            let result = ChannelInput::from_headers(&pairs(&[(key, &value)]));
            match expect {
                None => assert!(result.is_ok(), "{key}: {result:?}"),
                Some(problem) => {
                    let error = result.unwrap_err();
                    assert_eq!(error.channel, Channel::Header);
                    assert_eq!(error.key, key);
                    assert_eq!(error.problem, problem);
                    let message = error.to_string();
                    assert!(message.starts_with(&format!("header {key}: ")), "{message}");
                    assert!(message.len() < 200, "messages never echo whole values");
                }
            }
        }
        // Repeated query values add up to the limit.
        let half = "q".repeat(MAX_QUERY_CHARS / 2);
        let error =
            ChannelInput::from_query(&pairs(&[("q", &half), ("search", &half)])).unwrap_err();
        assert!(
            matches!(error.problem, Problem::QueryTooLong { chars, .. } if chars == MAX_QUERY_CHARS + 1)
        );
        // Each channel names itself and its key.
        let error = ChannelInput::from_cli(Some("a b"), None, None, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cli --tools: name \"a b\" has a character outside [A-Za-z0-9_./:{}~@+%-]"
        );
        let error =
            ChannelInput::from_query(&pairs(&[("disabled_toolsets", &too_many)])).unwrap_err();
        assert_eq!(
            (error.channel, error.key.as_str()),
            (Channel::Query, "disabled_toolsets")
        );
    }

    #[test]
    fn a_malformed_operator_channel_is_an_error_at_start_up() {
        let error = ChannelInput::from_env(&|k| {
            (k == "MCP_DISABLED_COMPONENTS").then(|| "ok,not ok".to_owned())
        })
        .unwrap_err();
        assert_eq!(error.channel, Channel::Env);
        assert_eq!(error.key, "MCP_DISABLED_COMPONENTS");
        assert!(ChannelInput::from_cli(None, None, Some(&long_tag()), None).is_err());
        // Should one reach `resolve` anyway, it fails closed.
        let catalog = matrix_catalog();
        let channels = Channels {
            errors: vec![error],
            ..Channels::default()
        };
        let visible = resolve(&catalog, &channels, &lock());
        assert!(visible.tools.is_empty());
        assert_eq!(visible.hidden.len(), 4);
        assert_eq!(
            visible.hidden[0].reason,
            Reason::OperatorChannelInvalid {
                channel: Channel::Env
            }
        );
        assert_eq!(visible.warnings.len(), 1);
    }

    fn long_tag() -> String {
        "t".repeat(MAX_NAME_CHARS + 1)
    }

    /// A bad header drops the header's narrowing, never a deny: its own well-formed denies and
    /// every other channel's still apply.
    #[test]
    fn a_bad_request_channel_is_ignored_but_denies_still_apply() {
        let catalog = matrix_catalog();
        let raw = Raw::default()
            .put(Channel::Env, Field::DisabledTools, "d")
            .put(Channel::Query, Field::DisabledTags, "tc")
            .header(&[
                ("x-mcp-enabled-tools", "b,not allowed!"),
                ("x-mcp-disabled-tools", "a, bad name ,zz"),
                ("x-mcp-query", "zzz"),
            ]);
        let channels = raw.channels();
        assert_eq!(channels.errors.len(), 1);
        assert_eq!(
            channels.header.as_ref().unwrap().disabled_tools,
            ["a", "zz"]
        );
        let visible = resolve(&catalog, &channels, &lock());
        assert_eq!(visible.tools, [ToolId::new("s1", "b")]);
        assert_eq!(
            visible.query_matched, None,
            "the failed channel's query is ignored"
        );
        assert_eq!(visible.warnings.len(), 1);
        assert!(
            visible.warnings[0].starts_with(
                "header channel ignored, its denies still apply: header x-mcp-enabled-tools"
            ),
            "{}",
            visible.warnings[0]
        );
        let reasons: Vec<String> = visible
            .hidden
            .iter()
            .map(|h| format!("{}: {}", h.tool, h.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                "s1/a: disabled by the header channel (tool \"a\")",
                "s2/c: disabled by the query channel (tag \"tc\")",
                "s2/d: disabled by the env channel (tool \"d\")",
            ]
        );

        // A failed header falls back to the query's enabled list (the header is as if absent).
        let raw = Raw::default()
            .put(Channel::Query, Field::EnabledTools, "c")
            .header(&[("x-mcp-enabled-tools", &"x".repeat(MAX_VALUE_BYTES + 1))]);
        assert_eq!(shown(&catalog, &raw.channels(), &lock()), ["s2/c"]);

        // An oversized deny list is still applied in full.
        let mut names: Vec<String> = (0..MAX_NAMES).map(|i| format!("t{i}")).collect();
        names.push("b".into());
        let raw = Raw::default().query(&[("disabled_tools", &names.join(","))]);
        let channels = raw.channels();
        assert_eq!(channels.errors.len(), 1);
        assert_eq!(
            shown(&catalog, &channels, &lock()),
            ["s1/a", "s2/c", "s2/d"]
        );
    }

    #[test]
    fn names_match_plain_qualified_namespaced_server_and_group() {
        let catalog = Catalog::new(
            vec![
                server(
                    "fs",
                    vec![tool("fs", "read", "", &[]), tool("fs", "write", "", &[])],
                ),
                server(
                    "gh",
                    vec![tool("gh", "read", "", &[]), tool("gh", "issue", "", &[])],
                ),
            ],
            vec![(
                "reader".into(),
                vec![ToolId::new("fs", "write"), ToolId::new("gh", "issue")],
            )],
        )
        .unwrap();
        let cases: &[(&str, &[&str])] = &[
            ("read", &["fs/read", "gh/read"]),
            ("fs/read", &["fs/read"]),
            ("gh__read", &["gh/read"]),
            ("fs", &["fs/read", "fs/write"]),
            ("reader", &["fs/write", "gh/issue"]),
            ("gh/issue,fs__write", &["fs/write", "gh/issue"]),
            ("Read", &[]),
            ("nope", &[]),
            ("fs/nope", &[]),
        ];
        for (names, expect) in cases {
            let raw = Raw::default().put(Channel::Header, Field::EnabledTools, names);
            assert_eq!(
                shown(&catalog, &raw.channels(), &lock()),
                *expect,
                "enable {names}"
            );
            let raw = Raw::default().put(Channel::Header, Field::DisabledTools, names);
            let rest: Vec<&str> = ["fs/read", "fs/write", "gh/read", "gh/issue"]
                .into_iter()
                .filter(|t| !expect.contains(t))
                .collect();
            assert_eq!(
                shown(&catalog, &raw.channels(), &lock()),
                rest,
                "disable {names}"
            );
        }
    }

    #[test]
    fn tools_and_tags_together_intersect_and_tags_ignore_case() {
        let catalog = matrix_catalog();
        let raw = Raw::default()
            .put(Channel::Query, Field::EnabledTools, "a,c,d")
            .put(Channel::Query, Field::EnabledTags, "SHARED,tc");
        assert_eq!(shown(&catalog, &raw.channels(), &lock()), ["s1/a", "s2/c"]);
        // An untagged tool fails any tag filter.
        let raw = Raw::default().put(Channel::Cli, Field::EnabledTags, "ta,tb,tc");
        assert_eq!(
            shown(&catalog, &raw.channels(), &lock()),
            ["s1/a", "s1/b", "s2/c"]
        );
        // Tools from one channel and tags from another both apply.
        let raw = Raw::default()
            .put(Channel::Env, Field::EnabledTools, "a,b,c")
            .put(Channel::Header, Field::EnabledTags, "Shared");
        for policy in [lock(), widen()] {
            assert_eq!(shown(&catalog, &raw.channels(), &policy), ["s1/a", "s1/b"]);
        }
        let raw = Raw::default().put(Channel::Env, Field::DisabledTags, "TA");
        assert_eq!(
            shown(&catalog, &raw.channels(), &lock()),
            ["s1/b", "s2/c", "s2/d"]
        );
    }

    #[test]
    fn hidden_tools_say_which_channel_and_rule_hid_them() {
        let catalog = matrix_catalog();
        let raw = Raw::default()
            .put(Channel::Env, Field::EnabledTools, "a,b,c")
            .put(Channel::Query, Field::EnabledTools, "b,c")
            .put(Channel::Header, Field::EnabledTags, "tc,ta")
            .put(Channel::Cli, Field::DisabledTools, "grp");
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.tools, [ToolId::new("s2", "c")]);
        assert_eq!(
            visible.hidden,
            [
                Hidden {
                    tool: ToolId::new("s1", "a"),
                    reason: Reason::DisabledTool {
                        channel: Channel::Cli,
                        name: "grp".into()
                    }
                },
                Hidden {
                    tool: ToolId::new("s1", "b"),
                    reason: Reason::NotEnabled {
                        channel: Channel::Header,
                        list: ListKind::Tags
                    }
                },
                Hidden {
                    tool: ToolId::new("s2", "d"),
                    reason: Reason::DisabledTool {
                        channel: Channel::Cli,
                        name: "grp".into()
                    }
                },
            ]
        );
        let raw = Raw::default().put(Channel::Env, Field::EnabledTools, "a");
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(
            visible.hidden[0].reason.to_string(),
            "not in the env channel's enabled tools"
        );
    }

    #[test]
    fn visible_narrows_a_catalog_and_answers_allows() {
        let catalog = matrix_catalog();
        let raw = Raw::default().put(Channel::Header, Field::DisabledTools, "s1/a,c");
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert!(visible.allows(&ToolId::new("s1", "b")));
        assert!(!visible.allows(&ToolId::new("s1", "a")));
        assert!(!visible.allows(&ToolId::new("s9", "b")));
        let narrowed = visible.catalog(&catalog);
        assert_eq!(narrowed.servers.len(), 2);
        let ids: Vec<String> = narrowed.tools().map(|t| t.id().to_string()).collect();
        assert_eq!(ids, ["s1/b", "s2/d"]);
        assert_eq!(
            narrowed.overlaps,
            [("grp".to_owned(), vec![ToolId::new("s2", "d")])]
        );
        // Resolving again over the narrowed catalog changes nothing.
        assert_eq!(
            resolve(&narrowed, &raw.channels(), &lock()).tools,
            visible.tools
        );
    }

    #[test]
    fn search_matches_substrings_and_names_what_the_limit_left_out() {
        let catalog = seed_catalog();
        // Part of a word matches (seed 001's CONTAINS), in any case.
        let raw = Raw::default().query(&[("q", "ANALY")]);
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.query_matched, Some(true));
        assert!(
            visible.allows(&ToolId::new("logs", "analyze_logs")),
            "{visible:?}"
        );
        // Matches beyond the limit are hidden with a reason of their own.
        let raw = Raw::default().query(&[("q", "logs")]);
        let policy = Policy {
            search_limit: 1,
            ..lock()
        };
        let visible = resolve(&catalog, &raw.channels(), &policy);
        assert_eq!(visible.tools.len(), 1);
        let beyond = visible
            .hidden
            .iter()
            .filter(|h| {
                h.reason
                    == Reason::BeyondSearchLimit {
                        channel: Channel::Query,
                        limit: 1,
                    }
            })
            .count();
        assert_eq!(beyond, 3, "{visible:?}");
        // Nothing contains it: the query is dropped and said to be.
        let raw = Raw::default().query(&[("q", "zzqx")]);
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.query_matched, Some(false));
        assert_eq!(visible.tools.len(), catalog.len());
    }

    #[test]
    fn search_keeps_the_matches_within_the_other_filters() {
        let catalog = seed_catalog();
        let raw = Raw::default().query(&[("q", "logs")]);
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.query_matched, Some(true));
        assert_eq!(
            visible
                .tools
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "logs/read_logs",
                "logs/analyze_logs",
                "logs/delete_logs",
                "logs/write_log_entry"
            ]
        );
        assert!(visible.hidden.iter().all(|h| h.reason
            == Reason::NoSearchMatch {
                channel: Channel::Query
            }));

        // Limit: the best few only, still in catalog order.
        let policy = Policy {
            search_limit: 2,
            ..lock()
        };
        let visible = resolve(&catalog, &raw.channels(), &policy);
        assert_eq!(visible.tools.len(), 2);
        let zero = Policy {
            search_limit: 0,
            ..lock()
        };
        assert_eq!(
            resolve(&catalog, &raw.channels(), &zero).tools.len(),
            1,
            "the limit is at least 1"
        );

        // Floor: above every score, nothing matches, so the query is dropped.
        let policy = Policy {
            search_min_score: 1e6,
            ..lock()
        };
        let visible = resolve(&catalog, &raw.channels(), &policy);
        assert_eq!(visible.query_matched, Some(false));
        assert_eq!(visible.tools.len(), catalog.len());

        // The query only ranks what the other filters let through.
        let raw = Raw::default()
            .put(Channel::Cli, Field::EnabledTools, "git,fetch")
            .query(&[("search", "logs")]);
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.query_matched, Some(false));
        assert_eq!(visible.tools.len(), 4);
        let raw = raw.query(&[("search", "network")]);
        let ids: Vec<String> = resolve(&catalog, &raw.channels(), &lock())
            .tools
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(ids, ["git/clone_repo", "git/git_push", "web/fetch"]);

        // No match: the set without the query.
        let raw = Raw::default()
            .put(Channel::Env, Field::DisabledTags, "write")
            .header(&[("x-mcp-search", "kubernetes")]);
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.query_matched, Some(false));
        assert_eq!(visible.tools.len(), catalog.len() - 3);
        assert!(visible.warnings.is_empty());

        // A header query replaces the query string's.
        let raw = Raw::default()
            .query(&[("q", "logs")])
            .header(&[("x-mcp-query", "directories")]);
        let ids: Vec<String> = resolve(&catalog, &raw.channels(), &lock())
            .tools
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(ids, ["files/list_directories"]);
    }

    /// Seed 001 example A: `--tools clone_repo,git_status` exposes only those two.
    #[test]
    fn seed_example_a_cli_tools() {
        let catalog = seed_catalog();
        let raw = Raw::default().put(Channel::Cli, Field::EnabledTools, "clone_repo,git_status");
        assert_eq!(
            shown(&catalog, &raw.channels(), &lock()),
            ["git/clone_repo", "git/git_status"]
        );
    }

    /// Seed 001 example B: `/sse?tools=view_file,edit_file` sees only those two.
    #[test]
    fn seed_example_b_query_tools() {
        let catalog = seed_catalog();
        let raw = Raw::default().query(&[("tools", "view_file,edit_file")]);
        assert_eq!(
            shown(&catalog, &raw.channels(), &lock()),
            ["files/view_file", "files/edit_file"]
        );
    }

    /// Seed 001 example C: `x-mcp-query: logs analysis` and `x-mcp-disabled-tags: write,delete`
    /// return only log-related, non-destructive tools.
    #[test]
    fn seed_example_c_headers_query_and_disabled_tags() {
        let catalog = seed_catalog();
        let raw = Raw::default().header(&[
            ("x-mcp-query", "logs analysis"),
            ("x-mcp-disabled-tags", "write,delete"),
        ]);
        let visible = resolve(&catalog, &raw.channels(), &lock());
        assert_eq!(visible.query_matched, Some(true));
        assert_eq!(
            visible
                .tools
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["logs/read_logs", "logs/analyze_logs"]
        );
        let delete = visible
            .hidden
            .iter()
            .find(|h| h.tool.name == "delete_logs")
            .unwrap();
        assert_eq!(
            delete.reason,
            Reason::DisabledTag {
                channel: Channel::Header,
                tag: "delete".into()
            }
        );
    }

    // ---- properties ----

    const NAME_POOL: &[&str] = &[
        "a", "b", "c", "d", "s1", "s2", "s1/a", "s2__c", "grp", "all", "zz",
    ];
    const TAG_POOL: &[&str] = &["ta", "TB", "tc", "shared", "all", "zz"];
    const QUERY_POOL: &[&str] = &["a", "tc shared", "zzz", "the"];

    fn pool_list(pool: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
        proptest::sample::subsequence(pool, 0..=pool.len())
            .prop_map(|v| v.into_iter().map(str::to_owned).collect())
    }

    /// Deny lists are short: long random ones would hide everything and prove nothing.
    fn deny_list(pool: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(proptest::sample::select(pool), 0..3)
            .prop_map(|v| v.into_iter().map(str::to_owned).collect())
    }

    fn enabled(pool: &'static [&'static str]) -> impl Strategy<Value = Option<Enabled>> {
        prop_oneof![
            Just(None),
            Just(Some(Enabled::All)),
            pool_list(pool).prop_map(|v| Some(Enabled::Only(v))),
        ]
    }

    fn input() -> impl Strategy<Value = ChannelInput> {
        (
            enabled(NAME_POOL),
            deny_list(NAME_POOL),
            enabled(TAG_POOL),
            deny_list(TAG_POOL),
            proptest::option::of(proptest::sample::select(QUERY_POOL)),
        )
            .prop_map(|(et, dt, eg, dg, q)| ChannelInput {
                enabled_tools: et,
                disabled_tools: dt,
                enabled_tags: eg,
                disabled_tags: dg,
                query: q.map(str::to_owned),
            })
    }

    fn channels() -> impl Strategy<Value = Channels> {
        let maybe = || proptest::option::of(input());
        (
            maybe(),
            maybe(),
            maybe(),
            maybe(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(env, cli, query, header, query_failed, header_failed)| {
                let error = |channel| VisibilityError {
                    channel,
                    key: "k".into(),
                    problem: Problem::BadQuery,
                };
                let mut errors = Vec::new();
                if query_failed {
                    errors.push(error(Channel::Query));
                }
                if header_failed {
                    errors.push(error(Channel::Header));
                }
                Channels {
                    env,
                    cli,
                    query,
                    header,
                    errors,
                }
            })
    }

    fn policy() -> impl Strategy<Value = Policy> {
        (
            any::<bool>(),
            1usize..5,
            prop_oneof![Just(0.0f32), Just(0.5), Just(100.0)],
        )
            .prop_map(
                |(allow_request_widening, search_limit, search_min_score)| Policy {
                    allow_request_widening,
                    search_limit,
                    search_min_score,
                },
            )
    }

    /// An independent statement of "this list names this tool".
    fn names_tool(catalog: &Catalog, tool: &Tool, name: &str) -> bool {
        name == tool.name
            || name == tool.server
            || name == format!("{}/{}", tool.server, tool.name)
            || name == format!("{}__{}", tool.server, tool.name)
            || catalog
                .overlaps
                .iter()
                .any(|(k, m)| k == name && m.contains(&tool.id()))
    }

    proptest! {
        #[test]
        fn deny_always_wins(channels in channels(), policy in policy()) {
            let catalog = matrix_catalog();
            let visible = resolve(&catalog, &channels, &policy);
            for channel in Channel::PRECEDENCE {
                let Some(input) = channels.get(channel) else { continue };
                for tool in catalog.tools() {
                    let denied = input.disabled_tools.iter().any(|n| names_tool(&catalog, tool, n))
                        || input.disabled_tags.iter().any(|d| tool.tags.iter().any(|t| t.eq_ignore_ascii_case(d)));
                    prop_assert!(!(denied && visible.allows(&tool.id())), "{channel} denies {}", tool.id());
                }
            }
        }

        #[test]
        fn with_the_lock_request_channels_never_add_a_tool(channels in channels(), policy in policy()) {
            let policy = Policy { allow_request_widening: false, ..policy };
            let catalog = matrix_catalog();
            let operator_only = Channels { env: channels.env.clone(), cli: channels.cli.clone(), ..Channels::default() };
            let bound = resolve(&catalog, &operator_only, &policy);
            let visible = resolve(&catalog, &channels, &policy);
            for id in &visible.tools {
                prop_assert!(bound.allows(id), "{id} shown only because of a request channel");
            }
        }

        #[test]
        fn resolution_is_deterministic_and_partitions_the_catalog(channels in channels(), policy in policy()) {
            let catalog = matrix_catalog();
            let first = resolve(&catalog, &channels, &policy);
            prop_assert_eq!(&first, &resolve(&catalog, &channels.clone(), &policy));
            let mut all: Vec<&ToolId> = first.tools.iter().chain(first.hidden.iter().map(|h| &h.tool)).collect();
            all.sort();
            let mut ids: Vec<ToolId> = catalog.tools().map(Tool::id).collect();
            ids.sort();
            prop_assert_eq!(all, ids.iter().collect::<Vec<_>>());
            let order: Vec<ToolId> = catalog.tools().map(Tool::id).filter(|id| first.allows(id)).collect();
            prop_assert_eq!(&first.tools, &order, "visible tools keep catalog order");
        }

        #[test]
        fn parsers_never_panic_and_keep_their_invariants(
            raw in proptest::collection::vec(
                (proptest::sample::select(vec!["tools", "toolsets", "disabled_tools", "tags", "q", "X-MCP-Enabled-Tools", "x-mcp-disabled-tags", "x-mcp-search"]),
                 "[ -~\\t\\n,é\u{0}]{0,40}"),
                0..6,
            )
        ) {
            let pairs: Vec<(String, String)> = raw.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            for result in [ChannelInput::from_query(&pairs), ChannelInput::from_headers(&pairs)] {
                let Ok(input) = result else { continue };
                let mut lists = vec![&input.disabled_tools, &input.disabled_tags];
                if let Some(Enabled::Only(v)) = &input.enabled_tools { lists.push(v); }
                if let Some(Enabled::Only(v)) = &input.enabled_tags { lists.push(v); }
                for list in lists {
                    prop_assert!(list.len() <= MAX_NAMES);
                    for name in list {
                        prop_assert!(!name.is_empty() && check_name(name).is_ok());
                    }
                }
                if let Some(q) = &input.query {
                    prop_assert!(!q.chars().any(char::is_control) && q.chars().count() <= MAX_QUERY_CHARS);
                }
            }
            let channels = Channels::default().with_query_pairs(&pairs).with_header_pairs(&pairs);
            let _ = resolve(&matrix_catalog(), &channels, &Policy::default());
        }
    }

    /// Components of two servers: a prompt and a resource on `fs` (tagged `files` in config),
    /// a template on `web` whose `_meta` tags it `remote`.
    fn components() -> Vec<Component> {
        let files = ["files".to_owned()];
        vec![
            Component::from_mcp("fs", vec!["summarise".into()], &json!({}), &files),
            Component::from_mcp(
                "fs",
                vec!["file:///notes.txt".into(), "notes".into()],
                &json!({}),
                &files,
            ),
            Component::from_mcp(
                "web",
                vec!["https://example.com/{path}".into(), "page".into()],
                &json!({"_meta": {"tags": ["remote"]}}),
                &[],
            ),
        ]
    }

    fn components_shown(raw: &Raw, policy: &Policy) -> Vec<bool> {
        resolve_components(&components(), &raw.channels(), policy)
    }

    #[test]
    fn components_follow_the_tool_rules() {
        let open = Policy::default();
        let all = vec![true, true, true];
        assert_eq!(components_shown(&Raw::default(), &open), all);
        // An enabled list holds components by any of their names, or by their server.
        let raw = Raw::default().put(Channel::Env, Field::EnabledTools, "summarise,page");
        assert_eq!(components_shown(&raw, &open), [true, false, true]);
        let raw = Raw::default().put(Channel::Cli, Field::EnabledTools, "fs");
        assert_eq!(components_shown(&raw, &open), [true, true, false]);
        let raw = Raw::default().put(Channel::Env, Field::EnabledTools, "fs/notes");
        assert_eq!(components_shown(&raw, &open), [false, true, false]);
        // A disabled list naming any one name hides the component, even when another is enabled.
        let raw = Raw::default()
            .put(Channel::Env, Field::EnabledTools, "notes,summarise")
            .put(Channel::Header, Field::DisabledTools, "file:///notes.txt");
        assert_eq!(components_shown(&raw, &open), [true, false, false]);
        // Tags come from the server's config and the component's `_meta`.
        let raw = Raw::default().put(Channel::Query, Field::EnabledTags, "remote");
        assert_eq!(components_shown(&raw, &open), [false, false, true]);
        let raw = Raw::default().put(Channel::Cli, Field::DisabledTags, "FILES");
        assert_eq!(components_shown(&raw, &open), [false, false, true]);
        // A search query narrows tools only.
        let raw = Raw::default().query(&[("q", "summarise")]);
        assert_eq!(components_shown(&raw, &open), all);
        // The operator lock holds: a request cannot see what the operator did not enable.
        let raw = Raw::default()
            .put(Channel::Env, Field::EnabledTools, "summarise")
            .put(Channel::Header, Field::EnabledTools, "page");
        assert_eq!(components_shown(&raw, &open), [false, false, false]);
        let widening = Policy {
            allow_request_widening: true,
            ..Policy::default()
        };
        assert_eq!(components_shown(&raw, &widening), [false, false, true]);
        // A request channel that fails to parse keeps only its denies.
        let raw = Raw::default().header(&[
            ("x-mcp-enabled-tools", "bad name!"),
            ("x-mcp-disabled-tools", "summarise"),
        ]);
        assert_eq!(components_shown(&raw, &open), [false, true, true]);
    }

    #[test]
    fn a_component_without_names_is_hidden() {
        let nameless = Component {
            server: "fs".into(),
            names: Vec::new(),
            tags: Vec::new(),
        };
        assert_eq!(
            resolve_components(&[nameless], &Channels::default(), &Policy::default()),
            [false]
        );
    }
}

/// The optimised [`resolve`] and [`resolve_with_index`] against the straightforward
/// implementation they replaced (kept here verbatim as the reference): same answer, reasons
/// included, on a catalog whose names split ambiguously around `/` and `__`.
#[cfg(test)]
mod equivalence_tests {
    use super::*;
    use crate::rank::Bm25Index;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};
    use std::collections::HashMap;

    /// Every name a tool answers to in a list: plain name, server, `server/tool`, `server__tool`,
    /// and the keys of the declared overlap groups it belongs to.
    fn tool_names(catalog: &Catalog) -> Vec<Vec<String>> {
        let mut groups: HashMap<ToolId, Vec<&str>> = HashMap::new();
        for (key, members) in &catalog.overlaps {
            for member in members {
                groups.entry(member.clone()).or_default().push(key);
            }
        }
        catalog
            .tools()
            .map(|t| {
                let mut names = vec![
                    t.name.clone(),
                    t.server.clone(),
                    format!("{}/{}", t.server, t.name),
                    format!("{}{SEP}{}", t.server, t.name),
                ];
                if let Some(keys) = groups.get(&t.id()) {
                    names.extend(keys.iter().map(|k| (*k).to_owned()));
                }
                names
            })
            .collect()
    }

    /// A list of names or tags, ready to match.
    enum RefMatcher<'a> {
        Names(HashSet<&'a str>),
        /// Lower-cased tags.
        Tags(HashSet<String>),
    }

    impl<'a> RefMatcher<'a> {
        fn new(kind: ListKind, list: &'a [String]) -> Self {
            match kind {
                ListKind::Tools => RefMatcher::Names(list.iter().map(String::as_str).collect()),
                ListKind::Tags => {
                    RefMatcher::Tags(list.iter().map(|t| t.to_ascii_lowercase()).collect())
                }
            }
        }

        /// The name or tag of the tool that the list holds, if any.
        fn hit<'t>(&self, tool: &'t Tool, names: &'t [String]) -> Option<&'t str> {
            match self {
                RefMatcher::Names(set) => {
                    names.iter().map(String::as_str).find(|n| set.contains(n))
                }
                RefMatcher::Tags(set) => tool
                    .tags
                    .iter()
                    .map(String::as_str)
                    .find(|t| set.contains(&t.to_ascii_lowercase())),
            }
        }
    }

    /// `resolve` as it was before the matching and the search index were optimised.
    pub fn reference_resolve(catalog: &Catalog, channels: &Channels, policy: &Policy) -> Visible {
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
            return Visible {
                tools: Vec::new(),
                hidden: tools
                    .iter()
                    .map(|t| Hidden {
                        tool: t.id(),
                        reason: Reason::OperatorChannelInvalid { channel },
                    })
                    .collect(),
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

        let mut denies: Vec<(Channel, RefMatcher, RefMatcher)> = Vec::new();
        for channel in Channel::PRECEDENCE {
            let Some(input) = channels.get(channel) else {
                continue;
            };
            denies.push((
                channel,
                RefMatcher::new(ListKind::Tools, &input.disabled_tools),
                RefMatcher::new(ListKind::Tags, &input.disabled_tags),
            ));
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
        let mut constraints: Vec<(Channel, ListKind, RefMatcher)> = Vec::new();
        for scope in scopes {
            for kind in [ListKind::Tools, ListKind::Tags] {
                let winner = scope
                    .iter()
                    .find_map(|&c| usable(c).and_then(|i| i.enabled(kind)).map(|e| (c, e)));
                if let Some((channel, Enabled::Only(list))) = winner {
                    constraints.push((channel, kind, RefMatcher::new(kind, list)));
                }
            }
        }

        let names = tool_names(catalog);
        let mut reasons: Vec<Option<Reason>> = tools
            .iter()
            .zip(&names)
            .map(|(tool, names)| {
                for (channel, by_name, by_tag) in &denies {
                    if let Some(name) = by_name.hit(tool, names) {
                        return Some(Reason::DisabledTool {
                            channel: *channel,
                            name: name.to_owned(),
                        });
                    }
                    if let Some(tag) = by_tag.hit(tool, names) {
                        return Some(Reason::DisabledTag {
                            channel: *channel,
                            tag: tag.to_owned(),
                        });
                    }
                }
                constraints
                    .iter()
                    .find(|(_, _, matcher)| matcher.hit(tool, names).is_none())
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
            let docs: Vec<&Tool> = members.iter().map(|&i| tools[i]).collect();
            let ranked = Bm25Index::from_tools(&docs).search(text, members.len());
            let order = search_order(&members, &ranked, policy.search_min_score);
            query_matched = Some(!order.is_empty());
            apply_search(&mut reasons, &allowed, &order, channel, policy);
        }

        let mut visible = Visible {
            warnings,
            query_matched,
            ..Visible::default()
        };
        for (tool, reason) in tools.iter().zip(reasons) {
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

    fn tool(server: &str, name: &str, description: &str, tags: &[&str], params: &[&str]) -> Tool {
        let mut definition = Map::new();
        definition.insert("name".into(), Value::String(name.into()));
        let properties: Map<String, Value> = params
            .iter()
            .map(|p| ((*p).to_owned(), json!({"type": "string"})))
            .collect();
        Tool {
            server: server.into(),
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object", "properties": properties}),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            definition,
        }
    }

    fn server(name: &str, tools: Vec<Tool>) -> ServerEntry {
        ServerEntry {
            name: name.into(),
            tags: Vec::new(),
            aliases: Vec::new(),
            tools,
        }
    }

    /// Names that split more than one way (`x__y__z`, `p/q/r`, `a___b`), repeated plain names,
    /// tags in several cases, overlap groups sharing members, descriptions for search.
    fn tricky_catalog() -> Catalog {
        Catalog::new(
            vec![
                server(
                    "x",
                    vec![
                        tool(
                            "x",
                            "y__z",
                            "Read files from a disk",
                            &["Net", "fs"],
                            &["path"],
                        ),
                        tool(
                            "x",
                            "z",
                            "Write files",
                            &["fs", "write"],
                            &["path", "content"],
                        ),
                        tool("x", "_b", "Underscore tool reads", &[], &[]),
                    ],
                ),
                server(
                    "x__y",
                    vec![
                        tool(
                            "x__y",
                            "z",
                            "Search the web for pages",
                            &["NET"],
                            &["query"],
                        ),
                        tool(
                            "x__y",
                            "read",
                            "Read a page",
                            &["net", "read-only"],
                            &["url"],
                        ),
                    ],
                ),
                server(
                    "p",
                    vec![
                        tool("p", "q/r", "List open issues", &["Ta"], &["repo"]),
                        tool("p", "r", "Get one issue", &["ta", "TA"], &["repo", "id"]),
                    ],
                ),
                server(
                    "p/q",
                    vec![
                        tool(
                            "p/q",
                            "r",
                            "Create an issue in a repository",
                            &["write"],
                            &[],
                        ),
                        tool(
                            "p/q",
                            "readFile",
                            "Read a file of the repository",
                            &["fs"],
                            &["path"],
                        ),
                    ],
                ),
                server(
                    "a_",
                    vec![tool(
                        "a_",
                        "_b",
                        "Files and issues and pages",
                        &["zz"],
                        &["limit"],
                    )],
                ),
                server("empty", vec![]),
            ],
            vec![
                (
                    "grp".into(),
                    vec![ToolId::new("x", "z"), ToolId::new("p", "r")],
                ),
                (
                    "read".into(),
                    vec![ToolId::new("p", "r"), ToolId::new("x", "y__z")],
                ),
                (
                    "grp2".into(),
                    vec![ToolId::new("p", "r"), ToolId::new("nope", "r")],
                ),
            ],
        )
        .unwrap()
    }

    const NAME_POOL: &[&str] = &[
        "x__y__z", "p/q/r", "a___b", "x__y", "p/q", "y__z", "q/r", "z", "r", "x", "p", "read",
        "grp", "grp2", "x/z", "p__r", "a_/_b", "readFile", "nope", "all", "_b", "a__",
    ];
    const TAG_POOL: &[&str] = &["net", "NET", "Ta", "fs", "FS", "write", "zz", "all", "none"];
    const QUERY_POOL: &[&str] = &[
        "read files",
        "issue",
        "issues repository",
        "z",
        "the",
        "zzz",
        "net page",
        "path",
        "read read file",
    ];

    fn list(pool: &'static [&'static str], max: usize) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(proptest::sample::select(pool), 0..max)
            .prop_map(|v| v.into_iter().map(str::to_owned).collect())
    }

    fn enabled(pool: &'static [&'static str]) -> impl Strategy<Value = Option<Enabled>> {
        prop_oneof![
            Just(None),
            Just(Some(Enabled::All)),
            list(pool, 6).prop_map(|v| Some(Enabled::Only(v))),
        ]
    }

    fn input() -> impl Strategy<Value = ChannelInput> {
        (
            enabled(NAME_POOL),
            list(NAME_POOL, 4),
            enabled(TAG_POOL),
            list(TAG_POOL, 3),
            proptest::option::of(proptest::sample::select(QUERY_POOL)),
        )
            .prop_map(|(et, dt, eg, dg, q)| ChannelInput {
                enabled_tools: et,
                disabled_tools: dt,
                enabled_tags: eg,
                disabled_tags: dg,
                query: q.map(str::to_owned),
            })
    }

    fn channels() -> impl Strategy<Value = Channels> {
        let maybe = || proptest::option::of(input());
        (maybe(), maybe(), maybe(), maybe(), 0u8..8).prop_map(
            |(env, cli, query, header, failed)| {
                let error = |channel| VisibilityError {
                    channel,
                    key: "k".into(),
                    problem: Problem::BadQuery,
                };
                let mut errors = Vec::new();
                if failed & 1 != 0 {
                    errors.push(error(Channel::Query));
                }
                if failed & 2 != 0 {
                    errors.push(error(Channel::Header));
                }
                if failed == 7 {
                    errors.push(error(Channel::Cli));
                }
                Channels {
                    env,
                    cli,
                    query,
                    header,
                    errors,
                }
            },
        )
    }

    fn policy() -> impl Strategy<Value = Policy> {
        (
            any::<bool>(),
            1usize..6,
            prop_oneof![Just(0.0f32), Just(0.3), Just(1.0), Just(100.0)],
        )
            .prop_map(
                |(allow_request_widening, search_limit, search_min_score)| Policy {
                    allow_request_widening,
                    search_limit,
                    search_min_score,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn optimised_resolve_answers_as_the_reference(channels in channels(), policy in policy()) {
            let catalog = tricky_catalog();
            let index = VisibilityIndex::new(&catalog);
            let expect = reference_resolve(&catalog, &channels, &policy);
            prop_assert_eq!(&resolve(&catalog, &channels, &policy), &expect);
            prop_assert_eq!(&resolve_with_index(&catalog, &index, &channels, &policy), &expect);
        }

        #[test]
        fn index_search_ranks_as_a_bm25_index_over_the_allowed_tools(
            mask in proptest::collection::vec(any::<bool>(), 11),
            query in proptest::sample::select(QUERY_POOL),
            k in 1usize..12,
        ) {
            let catalog = tricky_catalog();
            let tools: Vec<&Tool> = catalog.tools().collect();
            let allowed: Vec<usize> = (0..tools.len()).filter(|&i| mask[i]).collect();
            let docs: Vec<&Tool> = allowed.iter().map(|&i| tools[i]).collect();
            let expect = Bm25Index::from_tools(&docs).search(query, k);
            let index = VisibilityIndex::new(&catalog);
            let scores = |hits: Vec<(usize, f32)>| -> Vec<(usize, u32)> {
                hits.into_iter().map(|(i, s)| (i, s.to_bits())).collect()
            };
            prop_assert_eq!(scores(index.search(&allowed, query, k)), scores(expect.clone()));
            let partial = VisibilityIndex::for_query(&tools, &allowed, &query_terms(query));
            prop_assert_eq!(scores(partial.search(&allowed, query, k)), scores(expect));
        }
    }

    proptest! {
        #[test]
        fn per_query_tokenising_matches_the_rank_tokenizer(
            texts in proptest::collection::vec(
                "((read|File|files|readFile|the|getIssues|ISSUE|é|İ|ß|x1|2b)[ _./:-]?){0,6}|[a-zA-Z0-9 _éİ-]{0,16}",
                4,
            ),
            query in "((read|file|files|issue|issues|get|the|only|é|x1|2b) ?){0,4}",
            mask in proptest::collection::vec(any::<bool>(), 4),
        ) {
            let catalog = Catalog::new(
                vec![server(
                    "s",
                    texts
                        .iter()
                        .enumerate()
                        .map(|(i, text)| {
                            let name = format!("{}{i}", text.split_whitespace().next().unwrap_or("t"));
                            tool("s", &name, text, &[text.as_str(), "Read-Only"], &[text.as_str()])
                        })
                        .collect(),
                )],
                Vec::new(),
            )
            .unwrap();
            let tools: Vec<&Tool> = catalog.tools().collect();
            let allowed: Vec<usize> = (0..tools.len()).filter(|&i| mask[i]).collect();
            let docs: Vec<&Tool> = allowed.iter().map(|&i| tools[i]).collect();
            let bits = |hits: Vec<(usize, f32)>| -> Vec<(usize, u32)> {
                hits.into_iter().map(|(i, s)| (i, s.to_bits())).collect()
            };
            let expect = bits(Bm25Index::from_tools(&docs).search(&query, 10));
            let partial = VisibilityIndex::for_query(&tools, &allowed, &query_terms(&query));
            prop_assert_eq!(bits(partial.search(&allowed, &query, 10)), expect.clone());
            let full = VisibilityIndex::new(&catalog);
            prop_assert_eq!(bits(full.search(&allowed, &query, 10)), expect);
        }
    }

    #[test]
    fn an_index_of_another_catalog_is_not_used() {
        let catalog = tricky_catalog();
        let other = VisibilityIndex::new(&Catalog::default());
        assert!(other.is_empty());
        let channels = Channels {
            header: Some(ChannelInput {
                query: Some("issue".into()),
                ..ChannelInput::default()
            }),
            ..Channels::default()
        };
        let policy = Policy::default();
        let expect = reference_resolve(&catalog, &channels, &policy);
        assert_eq!(expect.query_matched, Some(true));
        assert_eq!(
            resolve_with_index(&catalog, &other, &channels, &policy),
            expect
        );
        assert_eq!(VisibilityIndex::new(&catalog).len(), catalog.len());
    }
}

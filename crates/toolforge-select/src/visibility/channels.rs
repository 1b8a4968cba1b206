//! The four channels' inputs (env, CLI, query string, headers): which keys each reads, how a
//! value is sanitised and parsed into enabled and disabled lists, and [`Channels`], the four
//! together for one request.

use std::fmt;

/// Longest accepted raw value of one key, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;
/// Most distinct names (or tags) one list of one channel may hold.
pub const MAX_NAMES: usize = 256;
/// Longest accepted tool name or tag, in characters.
pub const MAX_NAME_CHARS: usize = 128;
/// Longest accepted search query, in characters (after trimming and joining repeats).
pub const MAX_QUERY_CHARS: usize = 512;
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
pub(super) enum Field {
    EnabledTools,
    DisabledTools,
    EnabledTags,
    DisabledTags,
    Query,
}

impl Field {
    pub(super) fn is_enabled(self) -> bool {
        matches!(self, Field::EnabledTools | Field::EnabledTags)
    }

    pub(super) fn is_tags(self) -> bool {
        matches!(self, Field::EnabledTags | Field::DisabledTags)
    }
}

pub(super) const ENV_KEYS: &[(&str, Field)] = &[
    ("MCP_ENABLED_TOOLS", Field::EnabledTools),
    ("MCP_ENABLED_COMPONENTS", Field::EnabledTools),
    ("MCP_DISABLED_TOOLS", Field::DisabledTools),
    ("MCP_DISABLED_COMPONENTS", Field::DisabledTools),
    ("MCP_ENABLED_TAGS", Field::EnabledTags),
    ("MCP_DISABLED_TAGS", Field::DisabledTags),
];

pub(super) const CLI_KEYS: &[(&str, Field)] = &[
    ("--tools", Field::EnabledTools),
    ("--disabled-tools", Field::DisabledTools),
    ("--tags", Field::EnabledTags),
    ("--disabled-tags", Field::DisabledTags),
];

pub(super) const QUERY_KEYS: &[(&str, Field)] = &[
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

pub(super) const HEADER_KEYS: &[(&str, Field)] = &[
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
pub(super) fn field_of(channel: Channel, key: &str) -> Option<Field> {
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
pub(super) fn excerpt(name: &str) -> String {
    const KEEP: usize = 32;
    if name.chars().count() <= KEEP {
        name.to_owned()
    } else {
        let mut short: String = name.chars().take(KEEP).collect();
        short.push('…');
        short
    }
}

pub(super) fn valid_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            '_' | '.' | '/' | ':' | '-' | '{' | '}' | '~' | '@' | '+' | '%'
        )
}

pub(super) fn check_name(name: &str) -> Result<(), Problem> {
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
pub(super) fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// One list being collected.
#[derive(Default)]
pub(super) struct ListAcc {
    all: bool,
    names: Vec<String>,
}

impl ListAcc {
    pub(super) fn contains(&self, item: &str, tags: bool) -> bool {
        self.names.iter().any(|n| {
            if tags {
                n.eq_ignore_ascii_case(item)
            } else {
                n == item
            }
        })
    }

    pub(super) fn enabled(self) -> Option<Enabled> {
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
pub(super) struct InputAcc {
    enabled_tools: ListAcc,
    disabled_tools: ListAcc,
    enabled_tags: ListAcc,
    disabled_tags: ListAcc,
    query: Vec<String>,
}

impl InputAcc {
    pub(super) fn list(&mut self, field: Field) -> &mut ListAcc {
        match field {
            Field::EnabledTools => &mut self.enabled_tools,
            Field::DisabledTools => &mut self.disabled_tools,
            Field::EnabledTags => &mut self.enabled_tags,
            // The query is not a list; callers handle it before asking for one.
            Field::DisabledTags | Field::Query => &mut self.disabled_tags,
        }
    }

    pub(super) fn finish(self) -> ChannelInput {
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
pub(super) fn parse<'a>(
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
pub(super) fn salvage_denies<'a>(
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

pub(super) fn str_pairs(pairs: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
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

    pub(super) fn enabled(&self, list: ListKind) -> Option<&Enabled> {
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

    pub(super) fn with_request(mut self, channel: Channel, pairs: &[(String, String)]) -> Self {
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

    pub(super) fn failed(&self, channel: Channel) -> bool {
        self.errors.iter().any(|e| e.channel == channel)
    }
}

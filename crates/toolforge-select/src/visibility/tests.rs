use super::channels::*;
use super::*;
use crate::catalog::{Catalog, ServerEntry, Tool, ToolId};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn tool(server: &str, name: &str, description: &str, tags: &[&str]) -> Tool {
    let mut definition = Map::new();
    definition.insert("name".into(), Value::String(name.into()));
    Tool {
        server: server.into(),
        name: name.into(),
        description: description.into(),
        input_schema: crate::InputSchema::empty_object(),
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
        let key =
            |table: &[(&'static str, Field)]| table.iter().find(|(_, f)| *f == field).unwrap().0;
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
        let lookup = move |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
        let env = ChannelInput::from_env(&lookup).unwrap();
        let [t, dt, g, dg] = &self.cli;
        let cli = ChannelInput::from_cli(t.as_deref(), dt.as_deref(), g.as_deref(), dg.as_deref())
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
    let input = ChannelInput::from_cli(Some(" a , ,b,a ,, "), Some(""), None, Some(" ")).unwrap();
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
    let env = ChannelInput::from_env(&|k| (k == "MCP_ENABLED_TOOLS").then(String::new)).unwrap();
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
    let error = ChannelInput::from_query(&pairs(&[("q", &half), ("search", &half)])).unwrap_err();
    assert!(
        matches!(error.problem, Problem::QueryTooLong { chars, .. } if chars == MAX_QUERY_CHARS + 1)
    );
    // Each channel names itself and its key.
    let error = ChannelInput::from_cli(Some("a b"), None, None, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cli --tools: name \"a b\" has a character outside [A-Za-z0-9_./:{}~@+%-]"
    );
    let error = ChannelInput::from_query(&pairs(&[("disabled_toolsets", &too_many)])).unwrap_err();
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

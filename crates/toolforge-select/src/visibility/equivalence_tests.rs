//! The optimised [`resolve`] and [`resolve_with_index`] against the straightforward
//! implementation they replaced (kept here verbatim as the reference): same answer, reasons
//! included, on a catalog whose names split ambiguously around `/` and `__`.

use super::search::{apply_search, search_members, search_order};
use super::*;
use crate::catalog::{Catalog, ServerEntry, Tool, ToolId};
use crate::presentation::SEP;
use crate::rank::Bm25Index;
use crate::visibility_index::query_terms;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

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
            RefMatcher::Names(set) => names.iter().map(String::as_str).find(|n| set.contains(n)),
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
        input_schema: crate::InputSchema::from_value(
            &json!({"type": "object", "properties": properties}),
        ),
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
    "x__y__z", "p/q/r", "a___b", "x__y", "p/q", "y__z", "q/r", "z", "r", "x", "p", "read", "grp",
    "grp2", "x/z", "p__r", "a_/_b", "readFile", "nope", "all", "_b", "a__",
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
    (maybe(), maybe(), maybe(), maybe(), 0u8..8).prop_map(|(env, cli, query, header, failed)| {
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
    })
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

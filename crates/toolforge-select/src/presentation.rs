//! Presentation: the tool list a model sees, built from the catalog and its overlap groups.
//!
//! * A tool keeps its own name when nothing else claims it.
//! * An overlap group is exposed as one tool named by the group; its input schema is the union
//!   of the members' properties (first member in config order wins a property's definition),
//!   `required` is what every member requires, and its description names the providing servers.
//! * A name claimed twice (a standalone tool named like a group, or two declared groups under
//!   one key) stays reachable: the group keeps the bare name, colliding standalone tools are
//!   exposed as `server__tool`.
//! * `Namespace::Always` exposes every tool as `server__tool` (no groups).
//! * `server__tool` resolves in every mode.
//! * Names sent to a model must match `^[a-zA-Z0-9_-]{1,64}$`; other names are shortened to a
//!   sanitized prefix plus `_` and 8 hex digits of SHA-256 of the exposed name (stable,
//!   reversible through [`Presentation::resolve_model_name`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::catalog::{Catalog, InputSchema, ToolId};
use crate::overlap::overlap_groups;

/// How tool names are exposed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Namespace {
    /// Bare names, overlap groups merged, `server__tool` only where a name collides.
    #[default]
    Auto,
    /// Every tool as `server__tool`.
    Always,
}

/// One tool as exposed to a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ExposedTool {
    pub name: String,
    pub members: Vec<ToolId>,
    pub description: String,
    /// A lone tool's schema is its catalog tool's (shared); a group's is built once here.
    pub input_schema: InputSchema,
}

/// What an exposed or namespaced name resolves to.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolved<'a> {
    Group(&'a ExposedTool),
    Direct(ToolId),
}

/// The exposed tool list with name lookups.
#[derive(Clone, Debug)]
pub struct Presentation {
    tools: Vec<ExposedTool>,
    by_name: BTreeMap<String, usize>,
    model_names: Vec<String>,
    by_model_name: BTreeMap<String, usize>,
    known: BTreeSet<ToolId>,
}

/// The separator in namespaced names.
pub const SEP: &str = "__";

/// `server__tool`.
pub fn namespaced(id: &ToolId) -> String {
    format!("{}{SEP}{}", id.server, id.name)
}

impl Presentation {
    pub fn new(catalog: &Catalog, namespace: Namespace) -> Self {
        let known: BTreeSet<ToolId> = catalog.tools().map(|t| t.id()).collect();
        let order: BTreeMap<ToolId, usize> = catalog
            .tools()
            .enumerate()
            .map(|(i, t)| (t.id(), i))
            .collect();
        let mut tools: Vec<(usize, ExposedTool)> = Vec::new();
        match namespace {
            Namespace::Always => {
                for (i, tool) in catalog.tools().enumerate() {
                    tools.push((
                        i,
                        ExposedTool {
                            name: namespaced(&tool.id()),
                            members: vec![tool.id()],
                            description: tool.description.clone(),
                            input_schema: tool.input_schema.clone(),
                        },
                    ));
                }
            }
            Namespace::Auto => {
                let groups = overlap_groups(catalog);
                let grouped: BTreeSet<&ToolId> =
                    groups.iter().flat_map(|g| g.members.iter()).collect();
                let mut group_names: BTreeSet<String> = BTreeSet::new();
                for group in &groups {
                    let mut name = group.name.clone();
                    if !group_names.insert(name.clone()) {
                        // Two groups under one key: the later one is namespaced by its first member.
                        name = namespaced(&group.members[0]);
                        group_names.insert(name.clone());
                    }
                    tools.push((order[&group.members[0]], expose_group(catalog, name, group)));
                }
                let mut standalone_counts: BTreeMap<&str, usize> = BTreeMap::new();
                for tool in catalog.tools().filter(|t| !grouped.contains(&t.id())) {
                    *standalone_counts.entry(tool.name.as_str()).or_default() += 1;
                }
                for tool in catalog.tools().filter(|t| !grouped.contains(&t.id())) {
                    let id = tool.id();
                    let name = if group_names.contains(&tool.name)
                        || standalone_counts[tool.name.as_str()] > 1
                    {
                        namespaced(&id)
                    } else {
                        tool.name.clone()
                    };
                    tools.push((
                        order[&id],
                        ExposedTool {
                            name,
                            members: vec![id],
                            description: tool.description.clone(),
                            input_schema: tool.input_schema.clone(),
                        },
                    ));
                }
            }
        }
        tools.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
        let tools: Vec<ExposedTool> = tools.into_iter().map(|(_, t)| t).collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let model_names: Vec<String> = tools.iter().map(|t| model_safe_name(&t.name)).collect();
        let by_model_name = model_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Self {
            tools,
            by_name,
            model_names,
            by_model_name,
            known,
        }
    }

    /// The exposed tools: config order of their first member, then name.
    pub fn tools(&self) -> &[ExposedTool] {
        &self.tools
    }

    /// Resolves an exposed name, or `server__tool` in every mode.
    pub fn resolve(&self, name: &str) -> Option<Resolved<'_>> {
        if let Some(&i) = self.by_name.get(name) {
            let tool = &self.tools[i];
            return Some(if tool.members.len() == 1 {
                Resolved::Direct(tool.members[0].clone())
            } else {
                Resolved::Group(tool)
            });
        }
        // `server__tool`: try every split point so servers or tools containing `__` still work.
        let mut start = 0;
        while let Some(pos) = name[start..].find(SEP) {
            let at = start + pos;
            let id = ToolId::new(&name[..at], &name[at + SEP.len()..]);
            if self.known.contains(&id) {
                return Some(Resolved::Direct(id));
            }
            start = at + 1;
        }
        None
    }

    /// The name sent to a model for an exposed tool (valid `^[a-zA-Z0-9_-]{1,64}$`).
    pub fn model_name<'a>(&'a self, exposed: &'a ExposedTool) -> &'a str {
        match self.by_name.get(&exposed.name) {
            Some(&i) => &self.model_names[i],
            None => &exposed.name,
        }
    }

    /// Maps a model-facing name back to its exposed tool (or a `server__tool` call).
    pub fn resolve_model_name(&self, model_name: &str) -> Option<Resolved<'_>> {
        match self.by_model_name.get(model_name) {
            Some(&i) => self.resolve(&self.tools[i].name),
            None => self.resolve(model_name),
        }
    }
}

fn expose_group(
    catalog: &Catalog,
    name: String,
    group: &crate::overlap::OverlapGroup,
) -> ExposedTool {
    let members: Vec<_> = group
        .members
        .iter()
        .filter_map(|m| catalog.get(m))
        .collect();
    let mut properties = Map::new();
    let mut required: Option<BTreeSet<String>> = None;
    for tool in &members {
        let schema = tool.input_schema.to_object();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                properties.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let req: BTreeSet<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        required = Some(match required {
            None => req,
            Some(prev) => prev.intersection(&req).cloned().collect(),
        });
    }
    // Keep required in the first member's property order for stable output.
    let required: Vec<Value> = properties
        .keys()
        .filter(|k| required.as_ref().is_some_and(|r| r.contains(*k)))
        .map(|k| Value::String(k.clone()))
        .collect();
    let servers: Vec<&str> = group.members.iter().map(|m| m.server.as_str()).collect();
    let first = members
        .first()
        .map(|t| t.description.as_str())
        .unwrap_or("");
    let description = if first.is_empty() {
        format!("Provided by: {}.", servers.join(", "))
    } else {
        format!("{first} (provided by: {})", servers.join(", "))
    };
    ExposedTool {
        name,
        members: group.members.clone(),
        description,
        input_schema: InputSchema::from_object(&Map::from_iter([
            ("type".to_owned(), Value::String("object".to_owned())),
            ("properties".to_owned(), Value::Object(properties)),
            ("required".to_owned(), Value::Array(required)),
        ])),
    }
}

fn is_model_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Makes a name model-safe: unchanged if valid, else a sanitized prefix plus a hash suffix.
pub fn model_safe_name(name: &str) -> String {
    if is_model_safe(name) {
        return name.to_string();
    }
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    let prefix: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(55)
        .collect();
    format!("{prefix}_{}", &digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ServerEntry, Tool};
    use serde_json::json;

    fn tool(server: &str, name: &str, props: &[&str], required: &[&str]) -> Tool {
        let properties: Map<String, Value> = props
            .iter()
            .map(|p| ((*p).to_string(), json!({"type": "string"})))
            .collect();
        Tool {
            server: server.into(),
            name: name.into(),
            description: format!("{name} on {server}"),
            input_schema: InputSchema::from_value(
                &json!({"type": "object", "properties": properties, "required": required}),
            ),
            tags: vec![],
            definition: Map::new(),
        }
    }

    fn server(name: &str, tools: Vec<Tool>) -> ServerEntry {
        ServerEntry {
            name: name.into(),
            tags: vec![],
            aliases: vec![],
            tools,
        }
    }

    fn catalog(overlaps: Vec<(String, Vec<ToolId>)>) -> Catalog {
        Catalog::new(
            vec![
                server(
                    "fs",
                    vec![
                        tool("fs", "read_file", &["path", "encoding"], &["path"]),
                        tool("fs", "search", &["q"], &["q"]),
                    ],
                ),
                server(
                    "gh",
                    vec![
                        tool(
                            "gh",
                            "get_file_contents",
                            &["path", "repo"],
                            &["path", "repo"],
                        ),
                        tool("gh", "search", &["q"], &["q"]),
                        tool("gh", "read_file_group", &[], &[]),
                    ],
                ),
                server("misc", vec![tool("misc", "read_file_group", &[], &[])]),
            ],
            overlaps,
        )
        .unwrap()
    }

    fn names(p: &Presentation) -> Vec<&str> {
        p.tools().iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn exposed_names_table() {
        let declared = vec![(
            "read_file_group".to_string(),
            vec![
                ToolId::new("fs", "read_file"),
                ToolId::new("gh", "get_file_contents"),
            ],
        )];
        let cases: Vec<(&str, Catalog, Namespace, Vec<&str>)> = vec![
            (
                "same-name groups, no declared",
                catalog(vec![]),
                Namespace::Auto,
                vec![
                    "read_file",
                    "search",
                    "get_file_contents",
                    "read_file_group",
                ],
            ),
            (
                "declared group keeps its key; same-named group is namespaced",
                catalog(declared.clone()),
                Namespace::Auto,
                vec!["read_file_group", "search", "gh__read_file_group"],
            ),
            (
                "always",
                catalog(declared),
                Namespace::Always,
                vec![
                    "fs__read_file",
                    "fs__search",
                    "gh__get_file_contents",
                    "gh__search",
                    "gh__read_file_group",
                    "misc__read_file_group",
                ],
            ),
        ];
        for (label, cat, ns, want) in cases {
            let p = Presentation::new(&cat, ns);
            assert_eq!(names(&p), want, "{label}");
        }
    }

    #[test]
    fn same_name_across_servers_is_a_group_after_declared_merge() {
        // read_file_group standalone on gh and misc: same name -> one group named by the name.
        let p = Presentation::new(&catalog(vec![]), Namespace::Auto);
        match p.resolve("read_file_group") {
            Some(Resolved::Group(t)) => assert_eq!(t.members.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tools_that_link_an_app_are_not_grouped_by_their_name() {
        let app = |server: &str| {
            let mut t = tool(server, "show_card", &["title"], &[]);
            t.definition.insert(
                "_meta".into(),
                json!({"ui": {"resourceUri": "ui://widget/card.html"}}),
            );
            t
        };
        let cat = Catalog::new(
            vec![
                server(
                    "alpha",
                    vec![app("alpha"), tool("alpha", "plain", &[], &[])],
                ),
                server("beta", vec![app("beta"), tool("beta", "plain", &[], &[])]),
            ],
            vec![],
        )
        .unwrap();
        let p = Presentation::new(&cat, Namespace::Auto);
        assert_eq!(
            names(&p),
            ["alpha__show_card", "plain", "beta__show_card"],
            "each app tool stays its server's; plain tools still group"
        );
        assert_eq!(
            p.resolve("beta__show_card"),
            Some(Resolved::Direct(ToolId::new("beta", "show_card")))
        );
    }

    #[test]
    fn group_schema_merges_and_requires_common() {
        let declared = vec![(
            "read".to_string(),
            vec![
                ToolId::new("fs", "read_file"),
                ToolId::new("gh", "get_file_contents"),
            ],
        )];
        let p = Presentation::new(&catalog(declared), Namespace::Auto);
        let Some(Resolved::Group(g)) = p.resolve("read") else {
            panic!("group expected")
        };
        assert_eq!(
            g.input_schema.parameter_names(),
            ["path", "encoding", "repo"]
        );
        assert_eq!(g.input_schema.to_value()["required"], json!(["path"]));
        assert!(g.description.contains("fs, gh"), "{}", g.description);
    }

    #[test]
    fn namespaced_resolves_in_every_mode() {
        for ns in [Namespace::Auto, Namespace::Always] {
            let p = Presentation::new(&catalog(vec![]), ns);
            assert_eq!(
                p.resolve("gh__search"),
                Some(Resolved::Direct(ToolId::new("gh", "search")))
            );
            assert_eq!(p.resolve("nope__search"), None);
        }
    }

    #[test]
    fn model_names_are_valid_and_reversible() {
        let long = "x".repeat(80);
        let cases = [
            ("ok-name_1", true),
            ("has.dot", false),
            (long.as_str(), false),
            ("", false),
        ];
        for (name, unchanged) in cases {
            let safe = model_safe_name(name);
            assert!(is_model_safe(&safe), "{name} -> {safe}");
            assert_eq!(safe == name, unchanged, "{name}");
            assert_eq!(model_safe_name(name), safe, "stable");
        }
        let cat = Catalog::new(
            vec![server("s.v", vec![tool("s.v", "a.b", &[], &[])])],
            vec![],
        )
        .unwrap();
        let p = Presentation::new(&cat, Namespace::Always);
        let exposed = &p.tools()[0];
        let m = p.model_name(exposed).to_string();
        assert!(is_model_safe(&m));
        assert_eq!(
            p.resolve_model_name(&m),
            Some(Resolved::Direct(ToolId::new("s.v", "a.b")))
        );
    }

    proptest::proptest! {
        #[test]
        fn order_is_stable_and_names_reversible(
            specs in proptest::collection::vec(("[a-c]{1,2}", proptest::collection::vec("[a-c.]{1,3}|x{70}", 0..4)), 1..5),
        ) {
            let mut servers: Vec<ServerEntry> = Vec::new();
            for (name, tools) in specs {
                if servers.iter().any(|s| s.name == name) { continue; }
                let mut ts: Vec<Tool> = Vec::new();
                for t in tools {
                    if ts.iter().all(|x| x.name != t) { ts.push(tool(&name, &t, &[], &[])); }
                }
                servers.push(server(&name, ts));
            }
            let cat = Catalog::new(servers, vec![]).unwrap();
            for ns in [Namespace::Auto, Namespace::Always] {
                let a = Presentation::new(&cat, ns);
                let b = Presentation::new(&cat, ns);
                proptest::prop_assert_eq!(names(&a), names(&b));
                let mut covered = 0;
                for t in a.tools() {
                    let m = a.model_name(t);
                    proptest::prop_assert!(is_model_safe(m));
                    let back = a.resolve_model_name(m);
                    let members = match back {
                        Some(Resolved::Group(g)) => g.members.clone(),
                        Some(Resolved::Direct(id)) => vec![id],
                        None => vec![],
                    };
                    proptest::prop_assert_eq!(&members, &t.members);
                    covered += members.len();
                }
                proptest::prop_assert_eq!(covered, cat.len());
            }
        }
    }

    #[test]
    fn a_lone_tool_shares_its_catalog_schema() {
        let cat = catalog(vec![]);
        for ns in [Namespace::Auto, Namespace::Always] {
            let p = Presentation::new(&cat, ns);
            for exposed in p.tools().iter().filter(|t| t.members.len() == 1) {
                let tool = cat.get(&exposed.members[0]).unwrap();
                assert!(InputSchema::ptr_eq(
                    &exposed.input_schema,
                    &tool.input_schema
                ));
            }
        }
    }
}

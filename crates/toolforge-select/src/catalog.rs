//! The catalog: every tool of every configured server, in priority order.
//!
//! Identity is `server/name`. Server order is the order of `mcp.servers.json`, and it is the
//! priority order the selector falls back on. Each tool keeps the MCP `Tool` object as its
//! server sent it (`definition` and `input_schema`; `Tool::mcp_definition` joins them), so it
//! can be re-exposed faithfully, plus the few fields selection reads, parsed once.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::schema::InputSchema;

/// The identity of one tool: the server that provides it and the tool's own name there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId {
    pub server: String,
    pub name: String,
}

impl ToolId {
    pub fn new(server: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            name: name.into(),
        }
    }

    /// Parses `server/tool`. The split is at the first `/`: server names never contain one,
    /// tool names may.
    pub fn parse(text: &str) -> Option<Self> {
        let (server, name) = text.split_once('/')?;
        if server.is_empty() || name.is_empty() {
            return None;
        }
        Some(Self::new(server, name))
    }
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.server, self.name)
    }
}

impl Serialize for ToolId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ToolId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("expected \"server/tool\", got {text:?}"))
        })
    }
}

/// Why a catalog could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("tool definition from server {server:?} has no string \"name\"")]
    MissingName { server: String },
    #[error("server {server:?} is listed twice")]
    DuplicateServer { server: String },
    #[error("overlap group {group:?} names {member}, which is not in the catalog")]
    UnknownOverlapMember { group: String, member: ToolId },
    #[error("invalid catalog snapshot: {0}")]
    Snapshot(#[from] serde_json::Error),
}

/// One tool as its server listed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub server: String,
    pub name: String,
    /// The description, or "" when the server gave none.
    pub description: String,
    /// The `inputSchema` as the server gave it (any JSON Schema draft), as compact text shared
    /// with the pool's copy of the definition.
    pub input_schema: InputSchema,
    /// Tags from the server's config, from the tool's `_meta`, and derived from its MCP
    /// annotations (`read-only`, `destructive`, `idempotent`, `open-world`), deduplicated, in that
    /// order.
    pub tags: Vec<String>,
    /// The MCP `Tool` object as the server sent it, less its `inputSchema`: that is kept once,
    /// in `input_schema`.
    /// [`Tool::mcp_definition`] puts the two back together.
    pub definition: Map<String, Value>,
}

impl Tool {
    /// Builds a tool from the MCP `Tool` object a server listed. `server_tags` are the tags the
    /// configuration gives the whole server.
    pub fn from_mcp(
        server: &str,
        mut definition: Map<String, Value>,
        server_tags: &[String],
    ) -> Result<Self, CatalogError> {
        let input_schema = definition
            .shift_remove("inputSchema")
            .map_or_else(InputSchema::empty_object, |s| InputSchema::from_value(&s));
        Self::from_parts(server, definition, input_schema, server_tags)
    }

    /// Builds a tool from the MCP `Tool` object a server listed, its `inputSchema` apart:
    /// `definition` holds the rest, and the schema is shared, not copied.
    pub fn from_parts(
        server: &str,
        mut definition: Map<String, Value>,
        input_schema: InputSchema,
        server_tags: &[String],
    ) -> Result<Self, CatalogError> {
        definition.shift_remove("inputSchema");
        let Some(name) = definition
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(CatalogError::MissingName {
                server: server.to_owned(),
            });
        };
        let description = definition
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut tags: Vec<String> = Vec::new();
        let mut push = |tag: &str| {
            let tag = tag.trim();
            if !tag.is_empty() && !tags.iter().any(|t| t == tag) {
                tags.push(tag.to_owned());
            }
        };
        for tag in server_tags {
            push(tag);
        }
        for tag in meta_tags(&definition) {
            push(tag);
        }
        for tag in annotation_tags(&definition) {
            push(tag);
        }
        tags.shrink_to_fit();
        // Kept as long as the catalog: at its size, not as the parser or serializer grew it.
        crate::compact_json::shrink_object(&mut definition);
        Ok(Self {
            server: server.to_owned(),
            name,
            description,
            input_schema,
            tags,
            definition,
        })
    }

    pub fn id(&self) -> ToolId {
        ToolId::new(&self.server, &self.name)
    }

    /// The whole MCP `Tool` object: `definition` with `inputSchema` back in the place MCP SDKs
    /// write it (after `name`, `title` and `description`).
    pub fn mcp_definition(&self) -> Map<String, Value> {
        let at = self
            .definition
            .keys()
            .rposition(|k| matches!(k.as_str(), "name" | "title" | "description"))
            .map_or(0, |i| i + 1);
        let mut out = Map::with_capacity(self.definition.len() + 1);
        for (i, (key, value)) in self.definition.iter().enumerate() {
            if i == at {
                out.insert("inputSchema".to_owned(), self.input_schema.to_value());
            }
            out.insert(key.clone(), value.clone());
        }
        if at == self.definition.len() {
            out.insert("inputSchema".to_owned(), self.input_schema.to_value());
        }
        out
    }

    /// The MCP annotations object, when the server gave one.
    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.definition
            .get("annotations")
            .and_then(Value::as_object)
    }

    /// Names of the top-level input parameters, in schema order.
    pub fn parameter_names(&self) -> Vec<String> {
        self.input_schema.parameter_names()
    }
}

/// Tags a tool declares in `_meta`: `_meta.tags` or FastMCP's `_meta._fastmcp.tags`.
fn meta_tags(definition: &Map<String, Value>) -> Vec<&str> {
    let Some(meta) = definition.get("_meta").and_then(Value::as_object) else {
        return Vec::new();
    };
    let lists = [
        meta.get("tags"),
        meta.get("_fastmcp").and_then(|f| f.get("tags")),
    ];
    lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Tags derived from MCP annotations. Only hints the server states as `true` count: MCP's
/// defaults (`destructiveHint` and `openWorldHint` default to true) are not facts about the tool.
fn annotation_tags(definition: &Map<String, Value>) -> Vec<&'static str> {
    let Some(annotations) = definition.get("annotations").and_then(Value::as_object) else {
        return Vec::new();
    };
    let hint = |key: &str| annotations.get(key).and_then(Value::as_bool) == Some(true);
    let mut tags = Vec::new();
    if hint("readOnlyHint") {
        tags.push("read-only");
    }
    if hint("destructiveHint") {
        tags.push("destructive");
    }
    if hint("idempotentHint") {
        tags.push("idempotent");
    }
    if hint("openWorldHint") {
        tags.push("open-world");
    }
    tags
}

/// One configured server and the tools it listed.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerEntry {
    pub name: String,
    pub tags: Vec<String>,
    /// Other names a user may call this server by (for `explicit-mention`).
    pub aliases: Vec<String>,
    pub tools: Vec<Tool>,
}

/// Every tool of every server, in priority order, plus the overlap groups declared in config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    pub servers: Vec<ServerEntry>,
    /// Declared overlap groups: group name and members, in declaration order.
    pub overlaps: Vec<(String, Vec<ToolId>)>,
}

impl Catalog {
    /// Builds a catalog, checking that server names are unique.
    pub fn new(
        servers: Vec<ServerEntry>,
        overlaps: Vec<(String, Vec<ToolId>)>,
    ) -> Result<Self, CatalogError> {
        for (i, server) in servers.iter().enumerate() {
            if servers[..i].iter().any(|s| s.name == server.name) {
                return Err(CatalogError::DuplicateServer {
                    server: server.name.clone(),
                });
            }
        }
        Ok(Self { servers, overlaps })
    }

    /// All tools, in server order and then in the order each server listed them.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.servers.iter().flat_map(|s| s.tools.iter())
    }

    pub fn len(&self) -> usize {
        self.servers.iter().map(|s| s.tools.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of a server in priority order.
    pub fn server_index(&self, server: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.name == server)
    }

    pub fn server(&self, server: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.name == server)
    }

    pub fn get(&self, id: &ToolId) -> Option<&Tool> {
        self.server(&id.server)?
            .tools
            .iter()
            .find(|t| t.name == id.name)
    }

    /// The catalog with only the tools `keep` accepts (given each one's position in catalog
    /// order). Every server stays (priority order and aliases are unchanged); declared overlap
    /// groups keep the members `keep_member` accepts (it must agree with `keep`) and go when
    /// none is left.
    pub fn narrowed(
        &self,
        keep: impl Fn(usize, &Tool) -> bool,
        keep_member: impl Fn(&ToolId) -> bool,
    ) -> Catalog {
        let mut position = 0;
        let servers = self
            .servers
            .iter()
            .map(|s| ServerEntry {
                name: s.name.clone(),
                tags: s.tags.clone(),
                aliases: s.aliases.clone(),
                tools: s
                    .tools
                    .iter()
                    .filter(|t| {
                        position += 1;
                        keep(position - 1, t)
                    })
                    .cloned()
                    .collect(),
            })
            .collect();
        let overlaps = self
            .overlaps
            .iter()
            .filter_map(|(key, members)| {
                let members: Vec<ToolId> =
                    members.iter().filter(|m| keep_member(m)).cloned().collect();
                (!members.is_empty()).then(|| (key.clone(), members))
            })
            .collect();
        Catalog { servers, overlaps }
    }

    /// Parses a catalog snapshot (the format `toolforge tools snapshot` writes).
    pub fn from_snapshot_json(text: &str) -> Result<Self, CatalogError> {
        let file: SnapshotFile = serde_json::from_str(text)?;
        let mut servers = Vec::with_capacity(file.servers.len());
        for server in file.servers {
            let tools = server
                .tools
                .into_iter()
                .map(|definition| Tool::from_mcp(&server.name, definition, &server.tags))
                .collect::<Result<Vec<_>, _>>()?;
            servers.push(ServerEntry {
                name: server.name,
                tags: server.tags,
                aliases: server.aliases,
                tools,
            });
        }
        let overlaps = file.overlaps.into_iter().collect();
        Self::new(servers, overlaps)
    }

    /// Renders the catalog as a snapshot (tools as their servers sent them).
    pub fn to_snapshot_json(&self) -> Value {
        let file = SnapshotFile {
            servers: self
                .servers
                .iter()
                .map(|s| SnapshotServer {
                    name: s.name.clone(),
                    tags: s.tags.clone(),
                    aliases: s.aliases.clone(),
                    tools: s.tools.iter().map(Tool::mcp_definition).collect(),
                })
                .collect(),
            overlaps: self.overlaps.iter().cloned().collect(),
        };
        serde_json::to_value(file).unwrap_or(Value::Null)
    }
}

/// The catalog snapshot file format (DESIGN §8), version-free and stable: other tools read it.
#[derive(Debug, Serialize, Deserialize)]
struct SnapshotFile {
    servers: Vec<SnapshotServer>,
    #[serde(default, skip_serializing_if = "OrderedGroups::is_empty")]
    overlaps: OrderedGroups,
}

#[derive(Debug, Serialize, Deserialize)]
struct SnapshotServer {
    name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    aliases: Vec<String>,
    tools: Vec<Map<String, Value>>,
}

/// A JSON object of group name to members that keeps its key order.
#[derive(Debug, Default)]
struct OrderedGroups(Vec<(String, Vec<ToolId>)>);

impl OrderedGroups {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl IntoIterator for OrderedGroups {
    type Item = (String, Vec<ToolId>);
    type IntoIter = std::vec::IntoIter<Self::Item>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl FromIterator<(String, Vec<ToolId>)> for OrderedGroups {
    fn from_iter<I: IntoIterator<Item = (String, Vec<ToolId>)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl Serialize for OrderedGroups {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, members) in &self.0 {
            map.serialize_entry(name, members)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for OrderedGroups {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // serde_json is built with `preserve_order`, so a Map keeps the file's key order.
        let map = Map::<String, Value>::deserialize(deserializer)?;
        let mut groups = Vec::with_capacity(map.len());
        for (name, members) in map {
            let members: Vec<ToolId> =
                serde_json::from_value(members).map_err(serde::de::Error::custom)?;
            groups.push((name, members));
        }
        Ok(Self(groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn tags_come_from_config_meta_and_annotations_without_duplicates() {
        let tool = Tool::from_mcp(
            "fs",
            def(json!({
                "name": "read_file",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true},
                "_meta": {"tags": ["files", "local"], "_fastmcp": {"tags": ["files"]}}
            })),
            &["local".to_owned(), "disk".to_owned()],
        )
        .unwrap();
        assert_eq!(
            tool.tags,
            ["local", "disk", "files", "read-only", "open-world"]
        );
        assert_eq!(tool.description, "");
    }

    #[test]
    fn the_schema_is_kept_once_and_the_definition_comes_back_whole_and_in_order() {
        let sent = json!({
            "name": "read_file",
            "title": "Read a file",
            "description": "Reads a file.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
            "_meta": {"tags": ["files"]}
        });
        let tool = Tool::from_mcp("fs", def(sent.clone()), &[]).unwrap();
        assert!(!tool.definition.contains_key("inputSchema"));
        assert_eq!(tool.input_schema.to_value(), sent["inputSchema"]);
        let whole = tool.mcp_definition();
        assert_eq!(Value::Object(whole.clone()), sent);
        let keys: Vec<&str> = whole.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
                "_meta"
            ]
        );
        // A server that sent no schema gets the empty object one, placed after the name.
        let bare = Tool::from_mcp("fs", def(json!({"name": "ping", "_meta": {}})), &[]).unwrap();
        let keys: Vec<String> = bare.mcp_definition().keys().cloned().collect();
        assert_eq!(keys, ["name", "inputSchema", "_meta"]);
    }

    #[test]
    fn a_tool_without_a_name_is_an_error() {
        let err = Tool::from_mcp("fs", def(json!({"description": "x"})), &[]).unwrap_err();
        assert!(err.to_string().contains("no string \"name\""), "{err}");
    }

    #[test]
    fn snapshot_round_trips_and_keeps_overlap_order() {
        let text = r#"{"servers": [
            {"name": "filesystem", "aliases": ["fs"], "tools": [{"name": "read_file", "description": "Read", "inputSchema": {"type": "object"}}]},
            {"name": "github", "tools": [{"name": "get_file_contents", "inputSchema": {"type": "object"}}]}
          ],
          "overlaps": {"zz": ["filesystem/read_file"], "aa": ["github/get_file_contents"]}}"#;
        let catalog = Catalog::from_snapshot_json(text).unwrap();
        assert_eq!(catalog.len(), 2);
        assert_eq!(catalog.server_index("github"), Some(1));
        assert_eq!(catalog.overlaps[0].0, "zz");
        let again = Catalog::from_snapshot_json(&catalog.to_snapshot_json().to_string()).unwrap();
        assert_eq!(again, catalog);
    }

    #[test]
    fn tool_ids_parse_at_the_first_slash() {
        assert_eq!(ToolId::parse("git/a/b"), Some(ToolId::new("git", "a/b")));
        assert_eq!(ToolId::parse("nope"), None);
        assert_eq!(ToolId::parse("/x"), None);
    }
}

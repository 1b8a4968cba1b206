//! Resources, resource templates and prompts under the same lists as tools (S1-61).

use std::collections::HashSet;

use super::channels::Channels;
use super::policy::Policy;
use super::resolve::resolve_inner;
use super::verdicts::Reason;
use crate::catalog::{Catalog, ServerEntry, Tool, ToolId};

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
                    input_schema: crate::schema::InputSchema::empty_object(),
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

//! The pool's merged view: every enabled server's tools as one [`Catalog`], and the servers'
//! own definitions of listed tools for faithful re-exposure.

use std::collections::HashMap;
use std::sync::Arc;

use toolforge_select::{Catalog, ServerEntry, Tool, ToolId};

use crate::listed_tool::ListedTool;
use crate::upstream::Upstream;

/// The merged catalog of the enabled servers (last known tools of servers that are down).
pub(crate) fn build(servers: &[Arc<Upstream>], overlaps: &[(String, Vec<ToolId>)]) -> Catalog {
    let servers = servers
        .iter()
        .filter(|u| !u.cfg.disabled)
        .map(|u| ServerEntry {
            name: u.cfg.name.clone(),
            tags: u.cfg.tags.clone(),
            aliases: u.cfg.aliases.clone(),
            tools: catalog_tools(u),
        })
        .collect();
    Catalog::new(servers, overlaps.to_vec()).unwrap_or_default()
}

/// One server's listed tools as catalog tools, in a `Vec` of their number (kept as long as the
/// catalog; one grown by doubling held up to twice that).
fn catalog_tools(up: &Upstream) -> Vec<Tool> {
    let lists = up.lists.read();
    let mut tools = Vec::with_capacity(lists.tools.len());
    for listed in &lists.tools {
        // The schema is shared with the pool's copy, not converted again.
        let Ok(serde_json::Value::Object(def)) = serde_json::to_value(listed.without_schema())
        else {
            continue;
        };
        if let Ok(tool) = Tool::from_parts(&up.cfg.name, def, listed.schema().clone(), &up.cfg.tags)
        {
            tools.push(tool);
        }
    }
    tools
}

/// The definitions of `ids`, in order: one lock and one pass per server, so listing a
/// server's thousands of tools stays linear.
pub(crate) fn definitions(servers: &[Arc<Upstream>], ids: &[&ToolId]) -> Vec<Option<ListedTool>> {
    let mut out: Vec<Option<ListedTool>> = vec![None; ids.len()];
    let mut by_server: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        by_server.entry(id.server.as_str()).or_default().push(i);
    }
    for (server, wanted) in by_server {
        let Some(up) = servers.iter().find(|u| u.cfg.name == server) else {
            continue;
        };
        let lists = up.lists.read();
        let find = |name: &str| lists.tools.iter().find(|t| t.name() == name);
        // A few names are found by scanning; many through a map built once.
        if wanted.len() * 32 < lists.tools.len() {
            for i in wanted {
                out[i] = find(&ids[i].name).cloned();
            }
            continue;
        }
        let index: HashMap<&str, &ListedTool> = lists
            .tools
            .iter()
            .rev() // the first of duplicate names wins, as in `Pool::tool_definition`
            .map(|t| (t.name(), t))
            .collect();
        for i in wanted {
            out[i] = index.get(ids[i].name.as_str()).map(|t| (*t).clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::{ElicitationFallback, Relay};
    use rmcp::model::Tool as McpTool;
    use serde_json::json;

    #[test]
    fn the_catalog_shares_the_pools_schema_and_gives_back_the_whole_definition() {
        let text = json!({"mcpServers": {"fs": {"command": "unused"}}});
        let cfg = crate::config::parse(&text.to_string(), &|_| None)
            .expect("config")
            .servers
            .remove(0);
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        let up = Arc::new(Upstream::new(
            cfg,
            Relay::new("fs", events, ElicitationFallback::Decline),
            None,
        ));
        let sent = json!({
            "name": "read_file",
            "title": "Read a file",
            "description": "Reads a file.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}
        });
        let listed: McpTool = serde_json::from_value(sent.clone()).unwrap();
        up.lists.write().tools = vec![ListedTool::new(listed)];

        let catalog = build(std::slice::from_ref(&up), &[]);
        let tool = catalog.tools().next().expect("the tool");
        let lists = up.lists.read();
        assert!(
            toolforge_select::InputSchema::ptr_eq(&tool.input_schema, lists.tools[0].schema()),
            "one copy of the schema, held by the pool and the catalog"
        );
        assert_eq!(serde_json::Value::Object(tool.mcp_definition()), sent);
        assert_eq!(tool.tags, ["read-only"]);
    }
}

//! Every exposed tool of one catalog as an MCP definition, kept per catalog generation so that
//! `tools/list`, a scoped list and `get_tool` read it instead of rebuilding definitions.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::Tool as McpTool;
use toolforge_mcp::ListedTool;
use toolforge_select::presentation::Presentation;

/// Every exposed tool of one catalog as an MCP definition, in presentation order, with a
/// name index (built once per catalog; see `Shared::listed_tools`).
pub(super) struct ListedTools {
    pub(super) catalog: Arc<toolforge_select::Catalog>,
    pub(super) presentation: Arc<Presentation>,
    /// Each definition with its exposed tool's index in `presentation`: the pool's own,
    /// shared, unless the tool is renamed or a group's.
    tools: Vec<(usize, ListedTool)>,
    by_name: HashMap<String, usize>,
}

impl ListedTools {
    pub(super) fn new(
        catalog: Arc<toolforge_select::Catalog>,
        presentation: Arc<Presentation>,
        tools: Vec<(usize, ListedTool)>,
    ) -> Self {
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, (_, t))| (t.name().to_owned(), i))
            .collect();
        Self {
            catalog,
            presentation,
            tools,
            by_name,
        }
    }

    /// Every definition.
    pub(super) fn all(&self) -> Vec<ListedTool> {
        self.tools.iter().map(|(_, t)| t.clone()).collect()
    }

    /// The definitions whose exposed tool (by its index in the presentation) `keep` accepts.
    pub(super) fn filtered(&self, keep: impl Fn(usize) -> bool) -> Vec<ListedTool> {
        self.tools
            .iter()
            .filter(|(k, _)| keep(*k))
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// The definition of the tool exposed as `name`, whole (its schema parsed).
    pub(super) fn get(&self, name: &str) -> Option<McpTool> {
        self.by_name
            .get(name)
            .map(|&i| self.tools[i].1.definition())
    }
}

//! A selected tool, and the short form a summarized one is sent as.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::Tool;

/// One selected tool. Cheap to clone: the tool is shared with the registry.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedTool {
    /// The tool.
    pub tool: Arc<Tool>,
    /// True when only a `summarize` rule brought it in: send [`SelectedTool::summary`] instead
    /// of the full definition; the override block tells the model to use `request_tools`.
    pub summarized: bool,
}

impl SelectedTool {
    /// The short form of the tool (what a summarized tool is sent as).
    pub fn summary(&self) -> ToolSummary {
        ToolSummary::of(&self.tool)
    }
}

/// The short form of a tool (the seed's `ToolSummary`): server, name and the first sentence of
/// the description, no input schema. `summarize` rules exist to send this instead of the full
/// definition; the model gets the full one through `request_tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSummary {
    /// The server.
    pub server: String,
    /// The tool name.
    pub name: String,
    /// The description up to its first sentence end (`.`, `!` or `?` then a space) or line
    /// break, trimmed.
    pub description: String,
}

impl ToolSummary {
    /// The summary of `tool`.
    pub fn of(tool: &Tool) -> Self {
        let d = tool.description.trim();
        let mut end = d.find('\n').unwrap_or(d.len());
        for (i, c) in d.char_indices() {
            if i >= end {
                break;
            }
            let next = d[i + c.len_utf8()..].chars().next();
            if matches!(c, '.' | '!' | '?') && next.is_some_and(char::is_whitespace) {
                end = i + c.len_utf8();
                break;
            }
        }
        Self {
            server: tool.server.clone(),
            name: tool.name.clone(),
            description: d[..end].trim().to_owned(),
        }
    }

    /// An MCP `Tool` object for the summary: name, description and an open object schema.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": {"type": "object"}
        })
    }
}

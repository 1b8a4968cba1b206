//! What a decision is about: an action on a tool, a resource or a prompt.

use std::fmt;

use serde_json::Value;

/// The five actions of the schema (`Action::"list"` and so on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A tool appears in `tools/list`, `GET /tools` or the agent's offer.
    List,
    /// A tool is called (`tools/call`, search mode's `call_tool`, an agent step).
    Call,
    /// A tool appears in search mode's `search_tools` results.
    Search,
    /// A resource is listed, read or subscribed to.
    Read,
    /// A prompt is listed or fetched.
    Prompt,
}

impl Action {
    /// Every action, in schema order.
    pub const ALL: [Action; 5] = [
        Action::List,
        Action::Call,
        Action::Search,
        Action::Read,
        Action::Prompt,
    ];

    /// The action's id in policies (`Action::"<id>"`).
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::Call => "call",
            Action::Search => "search",
            Action::Read => "read",
            Action::Prompt => "prompt",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A tool's MCP annotations as policies see them (`resource.annotations.readOnly` ...).
/// Absent hints take the MCP defaults: not read-only, destructive, not idempotent, open-world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl Default for Annotations {
    fn default() -> Self {
        Self {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        }
    }
}

impl Annotations {
    /// From an MCP `Tool` object's `annotations` (the MCP defaults for absent hints).
    #[must_use]
    pub fn from_mcp(definition: &serde_json::Map<String, Value>) -> Self {
        let hints = definition.get("annotations").and_then(Value::as_object);
        let hint = |key: &str, default: bool| {
            hints
                .and_then(|h| h.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        let defaults = Self::default();
        Self {
            read_only: hint("readOnlyHint", defaults.read_only),
            destructive: hint("destructiveHint", defaults.destructive),
            idempotent: hint("idempotentHint", defaults.idempotent),
            open_world: hint("openWorldHint", defaults.open_world),
        }
    }
}

/// A tool as policies see it: `Tool::"server/name"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRef<'a> {
    pub server: &'a str,
    pub name: &'a str,
    pub tags: &'a [String],
    pub annotations: Annotations,
}

/// What an action applies to.
#[derive(Clone, Debug, PartialEq)]
pub enum Target<'a> {
    /// `Tool::"server/name"`.
    Tool(ToolRef<'a>),
    /// `Resource::"<uri>"`, offered by `server`.
    Resource { server: &'a str, uri: &'a str },
    /// `Prompt::"server/name"`.
    Prompt { server: &'a str, name: &'a str },
}

/// One question for the policy: may `principal` do `action` on `target` (with these call
/// arguments)?
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub principal: &'a str,
    pub action: Action,
    pub target: Target<'a>,
    /// The call's `arguments` (`context.arguments`), for [`Action::Call`]; `None` otherwise.
    pub arguments: Option<&'a Value>,
}

//! Progressive discovery: how a model reaches the tools its first offer leaves out.
//!
//! The first offer is small (the broker's best few, plus pins). When it leaves visible tools
//! out, the model is also offered `search_tools` (`{"query": string, "limit"?: integer}`),
//! answered by [`toolforge_select::search`], the matcher of the gateway's search mode, over the
//! tools the request may see and the policy lets it `search` (never one an exclude rule of the
//! broker denies). What a search finds joins the offer from the next model call on, appended
//! after the tools already offered, so the prompt prefix the first call cached stays the same;
//! at most [`Discovery::max_found`] tools join in one run. A provider with a tool search of its
//! own (Anthropic's, opt-in) gets the same searchable tools as deferred definitions instead.

use serde_json::json;
use toolforge_llm::ToolSpec;

/// The search tool's name, unless an offered tool already has it.
pub const SEARCH_TOOL: &str = toolforge_llm::mock::SEARCH_TOOLS;
/// Its name when a server already offers a `search_tools`.
pub const SEARCH_TOOL_FALLBACK: &str = toolforge_llm::mock::SEARCH_TOOLS_FALLBACK;

/// Tools the first offer ranks in when search is on (`AGENT_MAX_TOOLS`): chosen from
/// `benchmarks/agent` (the discovery table), the largest offer with which, on both
/// development sets, at least 95 % of tasks have every tool they need within one search per
/// missing tool, with at least 85 % fewer tool-definition tokens than the whole catalog (in the
/// static tables and through the mock end to end): a larger offer saves more search turns.
pub const DEFAULT_FIRST_OFFER: usize = 8;

/// Results of a search that names no `limit`.
pub const DEFAULT_SEARCH_LIMIT: usize = 3;
/// Most results one search may ask for.
pub const MAX_SEARCH_LIMIT: usize = 10;
/// Most tools searches add to one run's offer (`AGENT_MAX_FOUND_TOOLS`).
pub const DEFAULT_MAX_FOUND: usize = 24;

/// How a run reaches tools beyond its first offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discovery {
    /// Offer a search when the first offer leaves tools out (`AGENT_TOOL_SEARCH`, on by
    /// default); off, the first offer is all the model ever sees.
    pub search: bool,
    /// Results of a search that names no limit.
    pub search_limit: usize,
    /// Most tools searches add in one run.
    pub max_found: usize,
}

impl Default for Discovery {
    fn default() -> Self {
        Self {
            search: true,
            search_limit: DEFAULT_SEARCH_LIMIT,
            max_found: DEFAULT_MAX_FOUND,
        }
    }
}

/// The search tool as the model sees it, under `name`.
#[must_use]
pub fn search_tool_spec(name: &str, default_limit: usize) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: "Find tools you have not been offered yet, by what you want to do or by a tool's name in words. The best matches join your tools from your next turn on; call them then, with arguments that match their input schemas.".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, or the name of the tool you need, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "default": default_limit, "description": "Most tools to add."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

//! Token estimation and pruning to a budget.
//!
//! Estimate: `ceil((len(name) + len(description) + len(compact JSON input schema)) / 4) + 10`
//! bytes-per-token 4 is the usual English/JSON rule of thumb; 10 covers framing. Pruning keeps
//! order and drops from the end, and the kept total never exceeds the budget.

use crate::catalog::Tool;

/// Share of the context window the tool list may use, in percent.
pub const DEFAULT_TOKEN_BUDGET_PCT: u32 = 10;
/// Context window assumed when none is given.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u32 = 128_000;

/// Estimated tokens one tool definition costs in a prompt.
pub fn estimate_tokens(tool: &Tool) -> u32 {
    let schema = tool.input_schema.as_json().len();
    let bytes = tool.name.len() + tool.description.len() + schema;
    u32::try_from(bytes.div_ceil(4))
        .unwrap_or(u32::MAX)
        .saturating_add(10)
}

/// Estimated tokens of several tool definitions together (the seed's `EstimateToolTokens`).
pub fn estimate_tools_tokens<'a>(tools: impl IntoIterator<Item = &'a Tool>) -> u64 {
    tools
        .into_iter()
        .map(|t| u64::from(estimate_tokens(t)))
        .sum()
}

/// The default budget: `DEFAULT_TOKEN_BUDGET_PCT` of `context_window`.
pub fn default_budget(context_window: u32) -> u32 {
    u32::try_from(u64::from(context_window) * u64::from(DEFAULT_TOKEN_BUDGET_PCT) / 100)
        .unwrap_or(u32::MAX)
}

/// Keeps the longest prefix of `tools` whose estimated total fits in `budget`.
pub fn prune_to_budget<T>(tools: &mut Vec<T>, budget: u32, tool: impl Fn(&T) -> &Tool) {
    if budget == u32::MAX {
        return; // unbounded: nothing to estimate
    }
    let mut used: u64 = 0;
    let keep = tools
        .iter()
        .take_while(|t| {
            used += u64::from(estimate_tokens(tool(t)));
            used <= u64::from(budget)
        })
        .count();
    tools.truncate(keep);
}

//! The broker (seed 004): a tool registry plus rules that decide, per intent, which tools a
//! request sees, pruned to a token budget, with a rationale naming the rules that fired.
//!
//! Decision on Q4-1 (the seed's quick start vs "exclusions always win"): deny always wins. An
//! exclude rule that applies to the intent removes a tool whatever its priority; priority only
//! orders included tools. See `docs/broker.md`.

pub mod budget;
pub mod intent;
pub mod pattern;
pub mod rules;

use std::sync::Arc;

use parking_lot::RwLock;

pub use budget::{
    DEFAULT_CONTEXT_WINDOW_TOKENS, DEFAULT_TOKEN_BUDGET_PCT, estimate_tokens, prune_to_budget,
};
pub use rules::{Action, Match, Rule, Rules, RulesError};

use crate::catalog::Tool;

/// One selected tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedTool {
    /// The tool.
    pub tool: Tool,
    /// True when only a `summarize` rule brought it in.
    pub summarized: bool,
}

/// What a selection returns.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectResult {
    /// Selected tools, in order.
    pub tools: Vec<SelectedTool>,
    /// `tools.len()`.
    pub count: usize,
    /// Registered tools.
    pub total: usize,
    /// Which rules fired and what the budget dropped.
    pub rationale: Vec<String>,
    /// Markdown "## Tool Overrides" block (empty when there is nothing to say).
    pub override_block: String,
}

/// Thread-safe broker: registration, rule reload and selection may run concurrently.
#[derive(Debug, Default)]
pub struct LocalBroker {
    tools: RwLock<Vec<Tool>>,
    rules: RwLock<Arc<Rules>>,
}

impl LocalBroker {
    /// A broker with `rules` and no tools.
    pub fn new(rules: Rules) -> Self {
        Self {
            tools: RwLock::default(),
            rules: RwLock::new(Arc::new(rules)),
        }
    }

    /// Adds or replaces (same server and name) tools.
    pub fn register(&self, tools: impl IntoIterator<Item = Tool>) {
        let mut reg = self.tools.write();
        for t in tools {
            match reg
                .iter_mut()
                .find(|r| r.server == t.server && r.name == t.name)
            {
                Some(slot) => *slot = t,
                None => reg.push(t),
            }
        }
    }

    /// Replaces the rule set atomically.
    pub fn reload_rules(&self, rules: Rules) {
        *self.rules.write() = Arc::new(rules);
    }

    /// Selects tools for `intent` within `budget` estimated tokens.
    pub fn select(&self, intent: &str, budget: u32) -> SelectResult {
        let rules = Arc::clone(&self.rules.read());
        let tools = self.tools.read();
        select(&tools, &rules, intent, budget)
    }
}

/// The pure selection function behind [`LocalBroker::select`].
///
/// Applicable rules (intent glob matches) are taken in priority order (ties: file order). A tool
/// matched by any applicable exclude is dropped. If any include/summarize rule applies, only
/// tools they match are kept, ordered by the highest-priority rule matching them, then registry
/// order; otherwise every non-excluded tool is kept in registry order. Then budget pruning.
pub fn select(tools: &[Tool], rules: &Rules, intent: &str, budget: u32) -> SelectResult {
    let mut applicable: Vec<(usize, &Rule)> = rules
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.applies_to(intent))
        .collect();
    applicable.sort_by_key(|(i, r)| (std::cmp::Reverse(r.priority), *i));
    let has_include = applicable.iter().any(|(_, r)| r.action != Action::Exclude);
    let mut fired: Vec<(&str, usize)> = applicable
        .iter()
        .map(|(_, r)| (r.name.as_str(), 0))
        .collect();
    let mut picked: Vec<(usize, usize, SelectedTool)> = Vec::new();
    for (ti, tool) in tools.iter().enumerate() {
        let mut first_include = None;
        let mut excluded = false;
        for (ri, (_, rule)) in applicable.iter().enumerate() {
            if !rule.matches_tool(tool) {
                continue;
            }
            fired[ri].1 += 1;
            match rule.action {
                Action::Exclude => excluded = true,
                _ if first_include.is_none() => first_include = Some((ri, rule.action)),
                _ => {}
            }
        }
        if excluded {
            continue;
        }
        match first_include {
            Some((ri, action)) => picked.push((
                ri,
                ti,
                SelectedTool {
                    tool: tool.clone(),
                    summarized: action == Action::Summarize,
                },
            )),
            None if !has_include => picked.push((
                0,
                ti,
                SelectedTool {
                    tool: tool.clone(),
                    summarized: false,
                },
            )),
            None => {}
        }
    }
    picked.sort_by_key(|(ri, ti, _)| (*ri, *ti));
    let mut selected: Vec<SelectedTool> = picked.into_iter().map(|(_, _, s)| s).collect();
    let mut rationale: Vec<String> = applicable
        .iter()
        .zip(&fired)
        .filter(|(_, (_, n))| *n > 0)
        .map(|((_, r), (_, n))| {
            format!(
                "rule {:?} ({:?}, priority {}) matched {n} tool(s)",
                r.name, r.action, r.priority
            )
        })
        .collect();
    let before = selected.len();
    prune_to_budget(&mut selected, budget, |s| &s.tool);
    if selected.len() < before {
        rationale.push(format!(
            "budget of {budget} tokens dropped {} tool(s) from the end",
            before - selected.len()
        ));
    }
    SelectResult {
        count: selected.len(),
        total: tools.len(),
        tools: selected,
        rationale,
        override_block: String::new(),
    }
}

#[cfg(test)]
mod tests;

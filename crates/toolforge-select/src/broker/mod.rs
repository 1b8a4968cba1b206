//! The broker (seed 004): a tool registry plus rules that decide, per intent, which tools a
//! request sees, pruned to a token budget, with a rationale naming the rules that fired.
//!
//! Also: per-tool hints and the "## Tool Overrides" block ([`hints`]), and progressive
//! discovery through the `request_tools` meta-tool ([`discovery`]). [`LocalBroker`] keeps each
//! rule's matches precomputed (module `registry`), so a selection over 10,000 tools takes well
//! under a millisecond.
//!
//! Decision on Q4-1 (the seed's quick start vs "exclusions always win"): deny always wins. An
//! exclude rule that applies to the intent removes a tool whatever its priority; priority only
//! orders included tools. See `docs/broker.md`.

pub mod budget;
pub mod discovery;
pub mod hints;
pub mod intent;
pub mod pattern;
mod registry;
pub mod rules;
mod selected;

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

pub use budget::{
    DEFAULT_CONTEXT_WINDOW_TOKENS, DEFAULT_TOKEN_BUDGET_PCT, estimate_tokens,
    estimate_tools_tokens, prune_to_budget,
};
pub use discovery::{
    DEFAULT_MAX_RESULTS, FoundTool, MAX_RESULTS_LIMIT, MIN_KEYWORD_SCORE, MatchedBy, REQUEST_TOOLS,
    RequestTools, RequestToolsAnswer, RequestToolsError, find_by_names, intent_keywords,
    request_tools_schema, score_by_intent, score_by_keywords, tokenize_intent,
};
pub use hints::{
    EnrichError, Enricher, Hints, NopEnricher, OVERRIDE_HEADING, compose_override_block,
    override_block,
};
pub use rules::{Action, Match, Rule, Rules, RulesError};
pub use selected::{SelectedTool, ToolSummary};

use crate::catalog::Tool;
use crate::rank::Bm25Index;
use registry::{Registry, ToolSet};

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
    /// Markdown "## Tool Overrides" block: hints of the selected tools and the summarized
    /// ones (see [`hints`]). Empty when there is nothing to say.
    pub override_block: String,
    /// Set when the enricher failed: the override block is then empty and the rationale says
    /// so. Selection itself still succeeded (the seed logs and swallows this; this crate does
    /// not log, so the caller decides).
    pub override_error: Option<EnrichError>,
}

/// A broker (the seed's `Broker` interface): a selection for an intent within a token budget
/// (`u32::MAX`: none), and every registered tool. [`LocalBroker`] is the in-process one.
pub trait Broker: Send + Sync {
    /// Selects tools for `intent` within `budget` estimated tokens.
    fn select(&self, intent: &str, budget: u32) -> SelectResult;
    /// Every registered tool, in registration order.
    fn all_tools(&self) -> Vec<Arc<Tool>>;
}

impl Broker for LocalBroker {
    fn select(&self, intent: &str, budget: u32) -> SelectResult {
        LocalBroker::select(self, intent, budget)
    }

    fn all_tools(&self) -> Vec<Arc<Tool>> {
        LocalBroker::all_tools(self)
    }
}

/// What the rules applying to one intent decide about one tool (see [`LocalBroker::verdicts`]).
/// Rule numbers index the broker's [`Rules::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleVerdict {
    /// Kept: by this include or summarize rule, or by none when no include rule applies (then
    /// every tool not excluded is kept).
    Included {
        /// The highest-priority include/summarize rule matching the tool.
        rule: Option<usize>,
        /// Only a `summarize` rule brought it in.
        summarized: bool,
    },
    /// Dropped by this exclude rule (the highest-priority one matching the tool).
    Excluded(usize),
    /// Include rules apply and none matches the tool.
    NotIncluded,
}

/// Thread-safe broker: registration, rule reload and selection may run concurrently. A
/// selection holds the lock only to take the current snapshot and then runs unlocked; writers
/// update a copy when a selection still holds the old snapshot (copy on write).
#[derive(Default)]
pub struct LocalBroker {
    registry: RwLock<Arc<Registry>>,
    enricher: Option<Arc<dyn Enricher>>,
}

impl fmt::Debug for LocalBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registry = self.snapshot();
        f.debug_struct("LocalBroker")
            .field("tools", &registry.tools.len())
            .field("rules", &registry.rules.rules.len())
            .field("enricher", &self.enricher.is_some())
            .finish()
    }
}

impl LocalBroker {
    /// A broker with `rules` and no tools.
    pub fn new(rules: Rules) -> Self {
        Self {
            registry: RwLock::new(Arc::new(Registry::new(rules))),
            enricher: None,
        }
    }

    /// Uses `enricher` for the hints of the override block (the seed's `WithEnricher`).
    #[must_use]
    pub fn with_enricher(mut self, enricher: Arc<dyn Enricher>) -> Self {
        self.enricher = Some(enricher);
        self
    }

    /// Adds or replaces (same server and name, in place) tools.
    pub fn register(&self, tools: impl IntoIterator<Item = impl Into<Arc<Tool>>>) {
        let mut guard = self.registry.write();
        Arc::make_mut(&mut guard).register(tools.into_iter().map(Into::into));
    }

    /// Replaces the rule set atomically.
    pub fn reload_rules(&self, rules: Rules) {
        let mut guard = self.registry.write();
        Arc::make_mut(&mut guard).set_rules(rules);
    }

    /// Every registered tool, in registration order.
    pub fn all_tools(&self) -> Vec<Arc<Tool>> {
        self.snapshot().tools.clone()
    }

    /// The current rule set.
    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&self.snapshot().rules)
    }

    /// Selects tools for `intent` within `budget` estimated tokens (`u32::MAX`: no budget).
    pub fn select(&self, intent: &str, budget: u32) -> SelectResult {
        let r = self.snapshot();
        select_sets(
            &r.tools,
            &r.rules,
            &r.sets,
            intent,
            budget,
            |i| r.tokens[i],
            self.enricher.as_deref().unwrap_or(&NopEnricher),
        )
    }

    /// Each registered tool's verdict (registration order) under the rules applying to
    /// `intent`: the decisions of [`LocalBroker::select`] without the budget, tool by tool, so a
    /// caller can say why a tool was left out.
    pub fn verdicts(&self, intent: &str) -> Vec<RuleVerdict> {
        let r = self.snapshot();
        let applicable = applicable_rules(&r.rules, intent);
        let (excludes, includes): (Vec<usize>, Vec<usize>) = applicable
            .iter()
            .partition(|&&ri| r.rules.rules[ri].action == Action::Exclude);
        (0..r.tools.len())
            .map(|i| {
                if let Some(&ri) = excludes.iter().find(|&&ri| r.sets[ri].contains(i)) {
                    return RuleVerdict::Excluded(ri);
                }
                if includes.is_empty() {
                    return RuleVerdict::Included {
                        rule: None,
                        summarized: false,
                    };
                }
                match includes.iter().find(|&&ri| r.sets[ri].contains(i)) {
                    Some(&ri) => RuleVerdict::Included {
                        rule: Some(ri),
                        summarized: r.rules.rules[ri].action == Action::Summarize,
                    },
                    None => RuleVerdict::NotIncluded,
                }
            })
            .collect()
    }

    /// The override block for `selected` with this broker's enricher (see [`hints`]).
    pub fn override_block(&self, selected: &[SelectedTool]) -> Result<String, EnrichError> {
        override_block(selected, self.enricher.as_deref().unwrap_or(&NopEnricher))
    }

    /// Answers a `request_tools` call made during a turn routed to `turn_intent`: tools
    /// excluded by a rule applying to `turn_intent` are withheld. See [`discovery`].
    pub fn request_tools(
        &self,
        turn_intent: &str,
        arguments: &Value,
    ) -> Result<RequestToolsAnswer, RequestToolsError> {
        let request = RequestTools::from_arguments(arguments)?;
        let r = self.snapshot();
        let applicable = applicable_rules(&r.rules, turn_intent);
        let denied = excluded(&r.rules, &r.sets, &applicable, r.tools.len());
        Ok(discovery::answer(
            &r.tools,
            |i| contains(&denied, i),
            r.bm25(),
            &request,
        ))
    }

    fn snapshot(&self) -> Arc<Registry> {
        Arc::clone(&self.registry.read())
    }
}

/// The pure selection function behind [`LocalBroker::select`] (without an enricher: the
/// override block only lists summarized tools; see [`override_block`] to add hints).
///
/// Applicable rules (intent glob matches) are taken in priority order (ties: file order). A tool
/// matched by any applicable exclude is dropped. If any include/summarize rule applies, only
/// tools they match are kept, ordered by the highest-priority rule matching them, then registry
/// order; otherwise every non-excluded tool is kept in registry order. Then budget pruning.
///
/// This matches every tool against every applicable rule on each call; [`LocalBroker`] keeps
/// those matches precomputed and is the fast path.
pub fn select(tools: &[Arc<Tool>], rules: &Rules, intent: &str, budget: u32) -> SelectResult {
    let applicable = applicable_rules(rules, intent);
    let mut sets = vec![ToolSet::default(); rules.rules.len()];
    for &ri in &applicable {
        sets[ri] = ToolSet::of_rule(&rules.rules[ri], tools);
    }
    select_sets(
        tools,
        rules,
        &sets,
        intent,
        budget,
        |i| estimate_tokens(&tools[i]),
        &NopEnricher,
    )
}

/// Answers a `request_tools` call (`arguments` as the model sent them) from `tools`, withholding
/// tools excluded by a rule that applies to `turn_intent`. Builds a BM25 index per call;
/// [`LocalBroker::request_tools`] caches it.
pub fn answer_request_tools(
    tools: &[Arc<Tool>],
    rules: &Rules,
    turn_intent: &str,
    arguments: &Value,
) -> Result<RequestToolsAnswer, RequestToolsError> {
    let request = RequestTools::from_arguments(arguments)?;
    let applicable = applicable_rules(rules, turn_intent);
    let mut sets = vec![ToolSet::default(); rules.rules.len()];
    for &ri in &applicable {
        if rules.rules[ri].action == Action::Exclude {
            sets[ri] = ToolSet::of_rule(&rules.rules[ri], tools);
        }
    }
    let denied = excluded(rules, &sets, &applicable, tools.len());
    let refs: Vec<&Tool> = tools.iter().map(|t| &**t).collect();
    Ok(discovery::answer(
        tools,
        |i| contains(&denied, i),
        &Bm25Index::from_tools(&refs),
        &request,
    ))
}

/// Indexes of the rules applying to `intent`, by priority (high first), ties in file order.
fn applicable_rules(rules: &Rules, intent: &str) -> Vec<usize> {
    let mut applicable: Vec<usize> = rules
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.applies_to(intent))
        .map(|(i, _)| i)
        .collect();
    applicable.sort_by_key(|&i| (std::cmp::Reverse(rules.rules[i].priority), i));
    applicable
}

/// The union of the applicable exclude rules' sets, as a bitset over `n` tools.
fn excluded(rules: &Rules, sets: &[ToolSet], applicable: &[usize], n: usize) -> Vec<u64> {
    let mut words = vec![0u64; n.div_ceil(64)];
    for &ri in applicable {
        if rules.rules[ri].action == Action::Exclude {
            for (w, word) in words.iter_mut().enumerate() {
                *word |= sets[ri].word(w);
            }
        }
    }
    words
}

fn contains(words: &[u64], i: usize) -> bool {
    words.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

/// Selection over precomputed per-rule tool sets (`sets[i]` = tools rule `i` matches; rules
/// that do not apply may hold an empty set). `tokens(i)` is tool `i`'s estimate.
///
/// Equivalent to visiting each tool and each applicable rule, but word-parallel: the excluded
/// tools are the OR of the applicable excludes; then each applicable include/summarize rule, in
/// priority order, claims the tools of its set not yet claimed or excluded, in index order. So
/// tools come out ordered by (first including rule, registry index), exactly as specified.
fn select_sets(
    tools: &[Arc<Tool>],
    rules: &Rules,
    sets: &[ToolSet],
    intent: &str,
    budget: u32,
    tokens: impl Fn(usize) -> u32,
    enricher: &dyn Enricher,
) -> SelectResult {
    let applicable = applicable_rules(rules, intent);
    let n = tools.len();
    let mut claimed = excluded(rules, sets, &applicable, n);
    let mut picked: Vec<(usize, bool)> = Vec::new();
    let mut push_bits = |base: usize, mut bits: u64, summarized: bool| {
        while bits != 0 {
            picked.push((base + bits.trailing_zeros() as usize, summarized));
            bits &= bits - 1;
        }
    };
    let includes: Vec<usize> = applicable
        .iter()
        .copied()
        .filter(|&ri| rules.rules[ri].action != Action::Exclude)
        .collect();
    if includes.is_empty() {
        for (w, &taken) in claimed.iter().enumerate() {
            let valid = if (w + 1) * 64 <= n {
                u64::MAX
            } else {
                (1u64 << (n % 64)) - 1
            };
            push_bits(w * 64, !taken & valid, false);
        }
    } else {
        for &ri in &includes {
            let summarized = rules.rules[ri].action == Action::Summarize;
            for (w, taken) in claimed.iter_mut().enumerate() {
                let new = sets[ri].word(w) & !*taken;
                *taken |= new;
                push_bits(w * 64, new, summarized);
            }
        }
    }
    let mut rationale: Vec<String> = applicable
        .iter()
        .map(|&ri| (&rules.rules[ri], sets[ri].len()))
        .filter(|(_, count)| *count > 0)
        .map(|(r, count)| {
            format!(
                "rule {:?} ({:?}, priority {}) matched {count} tool(s)",
                r.name, r.action, r.priority
            )
        })
        .collect();
    if budget != u32::MAX {
        let mut used: u64 = 0;
        let keep = picked
            .iter()
            .take_while(|(i, _)| {
                used += u64::from(tokens(*i));
                used <= u64::from(budget)
            })
            .count();
        if keep < picked.len() {
            rationale.push(format!(
                "budget of {budget} tokens dropped {} tool(s) from the end",
                picked.len() - keep
            ));
            picked.truncate(keep);
        }
    }
    let selected: Vec<SelectedTool> = picked
        .into_iter()
        .map(|(i, summarized)| SelectedTool {
            tool: Arc::clone(&tools[i]),
            summarized,
        })
        .collect();
    let (override_block, override_error) = match override_block(&selected, enricher) {
        Ok(block) => (block, None),
        Err(e) => {
            rationale.push(format!("override block omitted: {e}"));
            (String::new(), Some(e))
        }
    };
    SelectResult {
        count: selected.len(),
        total: n,
        tools: selected,
        rationale,
        override_block,
        override_error,
    }
}

#[cfg(test)]
mod tests;

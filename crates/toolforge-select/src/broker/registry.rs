//! The broker's registry: the tools, the rules, and what selection would otherwise recompute on
//! every call.
//!
//! Why precompute: a selection over 10,000 tools and 50 rules used to match every tool against
//! every applicable rule's patterns (a million glob matches) and deep-clone every selected tool.
//! Rules and tools change rarely and selection runs every turn, so the registry keeps, per rule,
//! the set of tools it matches (a bitset over tool indexes) and per tool its token estimate. A
//! selection then only combines the applicable rules' sets word by word and hands out
//! `Arc<Tool>`s. Registering tools updates the sets for those tools only; reloading rules
//! rebuilds them all. The BM25 index `request_tools` searches is built on first use and dropped
//! on any change.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::budget::estimate_tokens;
use super::rules::{Rule, Rules};
use crate::catalog::{Tool, ToolId};
use crate::rank::Bm25Index;

/// A set of tool indexes (bit `i` of word `i / 64` is tool `i`), with its size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ToolSet {
    words: Vec<u64>,
    len: usize,
}

impl ToolSet {
    /// The tools `rule` matches.
    pub(super) fn of_rule<T: Borrow<Tool>>(rule: &Rule, tools: &[T]) -> Self {
        let mut set = Self {
            words: vec![0; tools.len().div_ceil(64)],
            len: 0,
        };
        let matches = rule.tool_matcher();
        for (i, t) in tools.iter().enumerate() {
            if matches(t.borrow()) {
                set.insert(i);
            }
        }
        set
    }

    /// Word `w` (zero past the end, so sets of different capacities combine).
    pub(super) fn word(&self, w: usize) -> u64 {
        self.words.get(w).copied().unwrap_or(0)
    }

    /// True when tool `i` is in the set.
    pub(super) fn contains(&self, i: usize) -> bool {
        self.word(i / 64) >> (i % 64) & 1 == 1
    }

    /// Number of tools in the set.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn insert(&mut self, i: usize) {
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.len += 1;
        }
    }

    fn remove(&mut self, i: usize) {
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        if let Some(word) = self.words.get_mut(w)
            && *word & bit != 0
        {
            *word &= !bit;
            self.len -= 1;
        }
    }
}

/// One consistent state of a [`super::LocalBroker`]; selections work on a shared snapshot while
/// writers build the next one (copy on write).
#[derive(Debug, Clone, Default)]
pub(super) struct Registry {
    /// Registered tools, in registration order (a re-registered tool keeps its place).
    pub(super) tools: Vec<Arc<Tool>>,
    /// `estimate_tokens` of each tool, by index.
    pub(super) tokens: Vec<u32>,
    /// The rule set.
    pub(super) rules: Arc<Rules>,
    /// Per rule (file order): the tools it matches.
    pub(super) sets: Vec<ToolSet>,
    positions: HashMap<ToolId, usize>,
    bm25: OnceLock<Bm25Index>,
}

impl Registry {
    pub(super) fn new(rules: Rules) -> Self {
        let mut registry = Self::default();
        registry.set_rules(rules);
        registry
    }

    /// Adds tools, replacing any with the same server and name in place.
    pub(super) fn register(&mut self, tools: impl IntoIterator<Item = Arc<Tool>>) {
        let mut changed = false;
        for tool in tools {
            changed = true;
            let tokens = estimate_tokens(&tool);
            let i = match self.positions.get(&tool.id()) {
                Some(&i) => {
                    self.tools[i] = tool;
                    self.tokens[i] = tokens;
                    i
                }
                None => {
                    let i = self.tools.len();
                    self.positions.insert(tool.id(), i);
                    self.tools.push(tool);
                    self.tokens.push(tokens);
                    i
                }
            };
            for (rule, set) in self.rules.rules.iter().zip(&mut self.sets) {
                if rule.matches_tool(&self.tools[i]) {
                    set.insert(i);
                } else {
                    set.remove(i);
                }
            }
        }
        if changed {
            self.bm25 = OnceLock::new();
        }
    }

    /// Installs a rule set and rebuilds every rule's tool set.
    pub(super) fn set_rules(&mut self, rules: Rules) {
        self.sets = rules
            .rules
            .iter()
            .map(|r| ToolSet::of_rule(r, &self.tools))
            .collect();
        self.rules = Arc::new(rules);
    }

    /// The BM25 index over the tools (built on first use).
    pub(super) fn bm25(&self) -> &Bm25Index {
        self.bm25.get_or_init(|| {
            let refs: Vec<&Tool> = self.tools.iter().map(|t| &**t).collect();
            Bm25Index::from_tools(&refs)
        })
    }
}

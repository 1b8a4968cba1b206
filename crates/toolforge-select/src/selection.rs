//! One selection pipeline: every decision a request needs about tools, made in one place over
//! one catalog generation.
//!
//! A [`Selection`] is built once per catalog generation (whenever a server's tool list changes)
//! and answers three questions, all pure:
//!
//! * [`Selection::visible`]: the request's channels → the tools this caller may see (seed 001,
//!   [`crate::visibility`]).
//! * [`Selection::offer`]: for one request, which of those tools to show: the broker's rules
//!   for the request's intent (seed 004, [`crate::broker`]), then ranking against the request
//!   (BM25, fused with embeddings when vectors are given, [`crate::rank`]), a cap on the number
//!   of tools, a token budget, and the override block (hints). It names every tool it leaves
//!   out and why.
//! * [`Selection::route`]: for one call to an overlap group, which server runs it (the five
//!   rules of [`crate::selector`]), with every rule's evidence. Grading ([`crate::grade`]) is a
//!   loop over it.
//!
//! Embeddings are inputs like everything else: the caller embeds the texts this type lists
//! ([`Selection::rank_texts`], [`Selection::route_texts`], [`Selection::query_texts`]) with
//! whatever embedder it runs and hands the vectors back; without them ranking is BM25 alone and
//! `cosine-similarity` abstains.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;

use crate::broker::{self, LocalBroker, RuleVerdict, Rules, estimate_tokens, intent};
use crate::catalog::{Catalog, Tool, ToolId};
use crate::overlap::overlap_groups;
use crate::pins::Pin;
use crate::rank::{self, Bm25Index, Document};
use crate::selector::{Candidate, Context, Decision};
use crate::visibility::{Channels, Policy, VisibilityIndex, Visible, resolve_with_index};

/// Default cap on the tools one offer shows (`AGENT_MAX_TOOLS`).
pub const DEFAULT_MAX_TOOLS: usize = 32;

/// Most left-out tools an offer's summary names (the rest are counted).
pub const LEFT_OUT_NAMED: usize = 20;

/// Most tools (an overlap group counts once) pins bring into one offer: a `server/*` pin of a
/// server with hundreds of tools must not undo the cap. The rest are left out, and say so.
pub const MAX_PINNED: usize = 64;

/// How offers are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most tools (an overlap group counts once) one offer ranks in; 0 offers only pins (a
    /// caller that lets the model search for the rest).
    pub max_tools: usize,
    /// Estimated tokens the offered definitions may take (`u32::MAX`: no budget).
    pub token_budget: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tools: DEFAULT_MAX_TOOLS,
            token_budget: u32::MAX,
        }
    }
}

/// One request to [`Selection::offer`].
#[derive(Clone, Copy)]
pub struct OfferRequest<'a> {
    /// The request in plain words (ranking, and the intent when none is given).
    pub message: &'a str,
    /// The intent the broker's rules apply to; detected from `message` when `None`.
    pub intent: Option<&'a str>,
    /// The tools this caller may see; every tool of the catalog when `None`.
    pub visible: Option<&'a HashSet<ToolId>>,
    /// Vectors of [`Selection::query_texts`] of `message`, in that order.
    pub query_vectors: Option<&'a [Vec<f32>]>,
    /// Tools to offer whatever their rank (first matching pin wins), within `visible` and the
    /// exclude rules ([`crate::pins`]).
    pub pins: &'a [Pin],
}

impl<'a> OfferRequest<'a> {
    /// A request for `message` over every tool, intent detected, BM25 ranking.
    #[must_use]
    pub fn new(message: &'a str) -> Self {
        Self {
            message,
            intent: None,
            visible: None,
            query_vectors: None,
            pins: &[],
        }
    }
}

/// Why an offer left a visible tool out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum LeftOutReason {
    /// An exclude rule applying to the intent matched it.
    ExcludedByRule { rule: String },
    /// Include rules apply to the intent and none matched it.
    NotIncluded,
    /// It ranked below the cap.
    BelowCap { rank: usize, cap: usize },
    /// The tools ranked above it filled the token budget.
    OverBudget { budget: u32 },
    /// A pin named it, but pins had already brought in [`MAX_PINNED`] tools.
    PinLimit { limit: usize },
}

impl fmt::Display for LeftOutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ExcludedByRule { rule } => write!(f, "excluded by rule {rule:?}"),
            Self::NotIncluded => f.write_str("no include rule for the intent matches it"),
            Self::BelowCap { rank, cap } => {
                write!(f, "ranked {rank}, below the cap of {cap} tools")
            }
            Self::OverBudget { budget } => write!(f, "over the budget of {budget} tokens"),
            Self::PinLimit { limit } => write!(f, "pinned, but pins already bring {limit} tools"),
        }
    }
}

/// One tool an offer left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    pub tool: ToolId,
    #[serde(flatten)]
    pub reason: LeftOutReason,
}

/// Why an offer shows a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum OfferedBy {
    /// It ranked `rank` (1 is best) against the request, within the cap.
    Rank { rank: usize },
    /// A pin brought it in; `rule` says which ([`Pin::rule`]).
    Pin { rule: String },
}

/// One offered tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offered {
    pub tool: ToolId,
    /// Only a `summarize` rule brought it in.
    pub summarized: bool,
    #[serde(flatten)]
    pub by: OfferedBy,
}

/// What [`Selection::offer`] decided for one request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    /// The intent the rules were applied for (`*` when none was given or detected).
    pub intent: String,
    /// The offered tools, in catalog order.
    pub tools: Vec<Offered>,
    /// Visible tools considered.
    pub visible: usize,
    /// Every visible tool not offered, in catalog order, with why.
    pub left_out: Vec<LeftOut>,
    /// What decided, in order: intent, rules that fired, ranking, cap, budget.
    pub rationale: Vec<String>,
    /// The "## Tool Overrides" block for the offered tools (empty when nothing to say).
    pub override_block: String,
}

impl Offer {
    /// The offered tool ids, in catalog order.
    #[must_use]
    pub fn ids(&self) -> Vec<ToolId> {
        self.tools.iter().map(|t| t.tool.clone()).collect()
    }

    /// One line for people: the rationale, the pinned tools with the pin that brought each in,
    /// then the left-out tools (at most [`LEFT_OUT_NAMED`] named, the rest counted).
    #[must_use]
    pub fn summary(&self) -> String {
        let mut out = self.rationale.join("; ");
        let pinned: Vec<String> = self
            .tools
            .iter()
            .filter_map(|t| match &t.by {
                OfferedBy::Pin { rule } => Some(format!("{} ({rule})", t.tool)),
                OfferedBy::Rank { .. } => None,
            })
            .collect();
        if !pinned.is_empty() {
            out.push_str(&format!("; pinned: {}", pinned.join(", ")));
        }
        if !self.left_out.is_empty() {
            let named: Vec<String> = self
                .left_out
                .iter()
                .take(LEFT_OUT_NAMED)
                .map(|l| format!("{} ({})", l.tool, l.reason))
                .collect();
            let more = self.left_out.len().saturating_sub(LEFT_OUT_NAMED);
            out.push_str(&format!("; left out: {}", named.join(", ")));
            if more > 0 {
                out.push_str(&format!(" and {more} more"));
            }
        }
        out
    }
}

/// One call to route.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    /// The tools that could run it: the overlap group's members the caller shows (any order),
    /// or the one tool called. Tools not in the catalog are ignored.
    pub candidates: &'a [ToolId],
    /// The request in plain words (`explicit-mention`, `cosine-similarity`).
    pub prompt: &'a str,
    /// The call's arguments (`argument-type`).
    pub arguments: &'a Value,
    /// Earlier executed calls of the session, oldest first (`session-recency`).
    pub session: &'a [ToolId],
    /// The prompt's vector from the embedder of [`Selection::with_route_vectors`].
    pub prompt_vector: Option<&'a [f32]>,
}

/// The decisions of one catalog generation. Cheap to share (`Arc`); every method takes `&self`.
pub struct Selection {
    catalog: Catalog,
    /// Catalog tools, first occurrence of each id, in catalog order.
    tools: Vec<Arc<Tool>>,
    positions: HashMap<ToolId, usize>,
    /// Each grouped tool's group, members in configuration order.
    groups: HashMap<ToolId, Arc<[ToolId]>>,
    /// The broker over `tools` (same order).
    broker: LocalBroker,
    limits: Limits,
    documents: Vec<Document>,
    bm25: Bm25Index,
    /// Each server's document (name, description), in catalog order, and its index.
    server_documents: Vec<Document>,
    server_bm25: Bm25Index,
    /// The server of each tool (index into `server_documents`).
    server_of: Vec<usize>,
    rank_vectors: Option<Vec<Vec<f32>>>,
    server_vectors: Option<Vec<Vec<f32>>>,
    route_vectors: HashMap<ToolId, Vec<f32>>,
    validators: Vec<OnceLock<Option<jsonschema::Validator>>>,
    visibility_index: OnceLock<VisibilityIndex>,
}

impl fmt::Debug for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Selection")
            .field("tools", &self.tools.len())
            .field("groups", &self.groups.len())
            .field("limits", &self.limits)
            .field("rank_vectors", &self.rank_vectors.is_some())
            .finish_non_exhaustive()
    }
}

impl Selection {
    /// Prepares `catalog` with the broker's `rules`.
    #[must_use]
    pub fn new(catalog: Catalog, rules: Rules, limits: Limits) -> Self {
        let mut positions = HashMap::new();
        let mut tools = Vec::new();
        for tool in catalog.tools() {
            if let std::collections::hash_map::Entry::Vacant(slot) = positions.entry(tool.id()) {
                slot.insert(tools.len());
                tools.push(Arc::new(tool.clone()));
            }
        }
        let mut groups = HashMap::new();
        for group in overlap_groups(&catalog) {
            let mut members = group.members.clone();
            members.sort_by_key(|m| {
                (
                    catalog.server_index(&m.server).unwrap_or(usize::MAX),
                    m.name.clone(),
                )
            });
            let members: Arc<[ToolId]> = members.into();
            for m in members.iter() {
                groups.insert(m.clone(), Arc::clone(&members));
            }
        }
        let broker = LocalBroker::new(rules);
        broker.register(tools.iter().cloned());
        let documents: Vec<Document> = tools.iter().map(|t| Document::from_tool(t)).collect();
        let bm25 = Bm25Index::new(&documents);
        let server_documents: Vec<Document> = catalog
            .servers
            .iter()
            .map(|s| Document {
                name: s.name.clone(),
                ..Document::default()
            })
            .collect();
        let server_bm25 = Bm25Index::new(&server_documents);
        let server_of = tools
            .iter()
            .map(|t| catalog.server_index(&t.server).unwrap_or(0))
            .collect();
        let validators = (0..tools.len()).map(|_| OnceLock::new()).collect();
        Self {
            catalog,
            tools,
            positions,
            groups,
            broker,
            limits,
            documents,
            bm25,
            server_documents,
            server_bm25,
            server_of,
            rank_vectors: None,
            server_vectors: None,
            route_vectors: HashMap::new(),
            validators,
            visibility_index: OnceLock::new(),
        }
    }

    /// Adds each server's description (its purpose) to the documents of its tools, so a
    /// request that names what a server is for finds its tools. Clears rank vectors: embed
    /// [`Selection::rank_texts`] again.
    #[must_use]
    pub fn with_server_descriptions(mut self, descriptions: &HashMap<String, String>) -> Self {
        for (doc, tool) in self.documents.iter_mut().zip(&self.tools) {
            doc.server_description = descriptions.get(&tool.server).cloned().unwrap_or_default();
        }
        for doc in &mut self.server_documents {
            doc.description = descriptions.get(&doc.name).cloned().unwrap_or_default();
        }
        self.bm25 = Bm25Index::new(&self.documents);
        self.server_bm25 = Bm25Index::new(&self.server_documents);
        self.rank_vectors = None;
        self.server_vectors = None;
        self
    }

    /// The catalog this selection was built over.
    #[must_use]
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The limits offers keep to.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The broker (rules and registered tools).
    #[must_use]
    pub fn broker(&self) -> &LocalBroker {
        &self.broker
    }

    /// The tool with this id.
    #[must_use]
    pub fn tool(&self, id: &ToolId) -> Option<&Tool> {
        self.positions.get(id).map(|&i| &*self.tools[i])
    }

    /// The overlap group of `id` in configuration order, or `id` alone.
    #[must_use]
    pub fn group(&self, id: &ToolId) -> Vec<ToolId> {
        self.groups
            .get(id)
            .map_or_else(|| vec![id.clone()], |g| g.to_vec())
    }

    // ---- visibility ----------------------------------------------------------------------

    /// The tools the request's `channels` let this caller see (seed 001).
    #[must_use]
    pub fn visible(&self, channels: &Channels, policy: &Policy) -> Visible {
        let index = self
            .visibility_index
            .get_or_init(|| VisibilityIndex::new(&self.catalog));
        resolve_with_index(&self.catalog, index, channels, policy)
    }

    // ---- embeddings ------------------------------------------------------------------------

    /// The texts to embed for ranking ([`rank::embedding_text`]): one per tool in catalog
    /// order, then one per server; hand the vectors to [`Selection::with_rank_vectors`].
    #[must_use]
    pub fn rank_texts(&self) -> Vec<String> {
        self.documents
            .iter()
            .chain(&self.server_documents)
            .map(rank::embedding_text)
            .collect()
    }

    /// Uses `vectors` (of [`Selection::rank_texts`], same order) for hybrid ranking. Ignored
    /// when the count does not match.
    #[must_use]
    pub fn with_rank_vectors(mut self, mut vectors: Vec<Vec<f32>>) -> Self {
        if vectors.len() == self.tools.len() + self.server_documents.len() {
            self.server_vectors = Some(vectors.split_off(self.tools.len()));
            self.rank_vectors = Some(vectors);
        } else {
            self.rank_vectors = None;
            self.server_vectors = None;
        }
        self
    }

    /// True when offers rank with embeddings too.
    #[must_use]
    pub fn ranks_with_vectors(&self) -> bool {
        self.rank_vectors.is_some()
    }

    /// The texts to embed for `cosine-similarity`: the description of every tool in an overlap
    /// group; hand the vectors to [`Selection::with_route_vectors`].
    #[must_use]
    pub fn route_texts(&self) -> Vec<(ToolId, String)> {
        self.tools
            .iter()
            .filter(|t| self.groups.contains_key(&t.id()))
            .map(|t| (t.id(), t.description.clone()))
            .collect()
    }

    /// Uses `vectors` (of [`Selection::route_texts`]) for `cosine-similarity`.
    #[must_use]
    pub fn with_route_vectors(mut self, vectors: HashMap<ToolId, Vec<f32>>) -> Self {
        self.route_vectors = vectors;
        self
    }

    /// [`Selection::with_route_vectors`] with a synchronous embedder (grading, the CLI).
    #[must_use]
    pub fn with_route_embedder(self, embed: &dyn Fn(&str) -> Vec<f32>) -> Self {
        let vectors = self
            .route_texts()
            .into_iter()
            .map(|(id, text)| (id, embed(&text)))
            .collect();
        self.with_route_vectors(vectors)
    }

    /// The texts of a request to embed for ranking: the whole message, then each of its
    /// sentences that asks for something of its own ([`rank::query_parts`]).
    #[must_use]
    pub fn query_texts(message: &str) -> Vec<String> {
        std::iter::once(message.to_owned())
            .chain(rank::query_parts(message).into_iter().map(str::to_owned))
            .collect()
    }

    /// Every tool's ranking score for `message` (catalog order): [`rank::hybrid_scores`], with
    /// embeddings when both the tools' and the request's vectors are there.
    #[must_use]
    pub fn scores(&self, message: &str, query_vectors: Option<&[Vec<f32>]>) -> Vec<f32> {
        let vectors = self.rank_vectors.as_deref().zip(query_vectors);
        let servers = rank::Servers {
            index: &self.server_bm25,
            of_doc: &self.server_of,
            vectors: self.server_vectors.as_deref(),
        };
        rank::hybrid_scores(&self.bm25, message, vectors, Some(&servers))
    }

    // ---- offer -----------------------------------------------------------------------------

    /// The tools to show for one request, and why (module docs).
    #[must_use]
    pub fn offer(&self, request: &OfferRequest<'_>) -> Offer {
        let (intent, intent_note) = match request.intent.map(str::trim) {
            Some(i) if !i.is_empty() => (i.to_owned(), format!("intent {i:?} (given)")),
            _ => match intent::detect(request.message).first() {
                Some((i, _)) => (
                    (*i).to_owned(),
                    format!("intent {i:?} (detected from the request)"),
                ),
                None => (
                    "*".to_owned(),
                    "no intent detected: rules for \"*\"".to_owned(),
                ),
            },
        };
        let mut rationale = vec![intent_note];
        let shown = |i: usize| {
            request
                .visible
                .is_none_or(|v| v.contains(&self.tools[i].id()))
        };
        let visible: Vec<usize> = (0..self.tools.len()).filter(|&i| shown(i)).collect();
        let mut left_out: Vec<(usize, LeftOutReason)> = Vec::new();

        // 1. The broker's rules for the intent.
        let verdicts = self.broker.verdicts(&intent);
        let rules = self.broker.rules();
        let mut fired: Vec<(usize, usize)> = Vec::new(); // (rule, visible tools decided)
        let mut kept: Vec<(usize, bool)> = Vec::new();
        let pin_of = |i: usize| {
            let id = self.tools[i].id();
            request.pins.iter().position(|p| p.pattern.matches(&id))
        };
        for &i in &visible {
            match &verdicts[i] {
                // A pin wins over "no include rule matches it", never over an exclusion.
                RuleVerdict::NotIncluded if pin_of(i).is_some() => kept.push((i, false)),
                RuleVerdict::Excluded(r) => {
                    count(&mut fired, *r);
                    left_out.push((
                        i,
                        LeftOutReason::ExcludedByRule {
                            rule: rules.rules[*r].name.clone(),
                        },
                    ));
                }
                RuleVerdict::NotIncluded => left_out.push((i, LeftOutReason::NotIncluded)),
                RuleVerdict::Included { rule, summarized } => {
                    if let Some(r) = rule {
                        count(&mut fired, *r);
                    }
                    kept.push((i, *summarized));
                }
            }
        }
        fired.sort_by_key(|&(r, _)| (std::cmp::Reverse(rules.rules[r].priority), r));
        for (r, n) in fired {
            let rule = &rules.rules[r];
            rationale.push(format!(
                "rule {:?} ({}, priority {}) decided {n} tool(s)",
                rule.name,
                rule.action.as_str(),
                rule.priority
            ));
        }

        // 2. Ranking, by unit: an overlap group is offered whole and counts once.
        let scores = self.scores(request.message, request.query_vectors);
        let mut units: Vec<(ToolId, Vec<(usize, bool)>)> = Vec::new();
        let mut unit_of: HashMap<ToolId, usize> = HashMap::new();
        for &(i, summarized) in &kept {
            let id = self.tools[i].id();
            let key = self.groups.get(&id).map_or(id, |g| g[0].clone());
            let u = *unit_of.entry(key.clone()).or_insert_with(|| {
                units.push((key, Vec::new()));
                units.len() - 1
            });
            units[u].1.push((i, summarized));
        }
        let unit_scores: Vec<f32> = units
            .iter()
            .map(|(_, members)| {
                members
                    .iter()
                    .map(|&(i, _)| scores[i])
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .collect();
        let order = rank::ranking(&unit_scores);
        // Pinned units first (each by its first member's pin), outside the ranking and the cap.
        let unit_pin: Vec<Option<usize>> = units
            .iter()
            .map(|(_, members)| members.iter().find_map(|&(i, _)| pin_of(i)))
            .collect();
        let mut pinned_units = 0;
        let mut offered_by: HashMap<usize, OfferedBy> = HashMap::new();
        let mut offered: Vec<(usize, bool)> = Vec::new();
        let mut used: u64 = 0;
        for (u, pin) in unit_pin.iter().enumerate() {
            let Some(pin) = pin else { continue };
            let members = &units[u].1;
            if pinned_units >= MAX_PINNED {
                for &(i, _) in members {
                    left_out.push((i, LeftOutReason::PinLimit { limit: MAX_PINNED }));
                }
                continue;
            }
            pinned_units += 1;
            for &(i, _) in members {
                used += u64::from(estimate_tokens(&self.tools[i]));
                offered_by.insert(
                    i,
                    OfferedBy::Pin {
                        rule: request.pins[*pin].rule(),
                    },
                );
            }
            offered.extend(members.iter().copied());
        }
        if pinned_units > 0 {
            rationale.push(format!("{pinned_units} tool(s) pinned"));
        }
        let order: Vec<usize> = order
            .into_iter()
            .filter(|&u| unit_pin[u].is_none())
            .collect();
        let cap = self.limits.max_tools;
        let ranker = if self.rank_vectors.is_some() && request.query_vectors.is_some() {
            "BM25 + embeddings"
        } else {
            "BM25"
        };
        let ranked = order.len();
        if ranked > cap {
            rationale.push(format!(
                "{cap} of {ranked} tools, ranked against the request ({ranker})"
            ));
        } else if cap == usize::MAX {
            rationale.push(format!("all {ranked} tools the rules keep"));
        } else {
            rationale.push(format!(
                "all {ranked} tools the rules keep (at most {cap} are shown)"
            ));
        }
        let mut over_budget = 0;
        for (rank_no, &u) in order.iter().enumerate() {
            let members = &units[u].1;
            if rank_no >= cap {
                for &(i, _) in members {
                    left_out.push((
                        i,
                        LeftOutReason::BelowCap {
                            rank: rank_no + 1,
                            cap,
                        },
                    ));
                }
                continue;
            }
            let budget = self.limits.token_budget;
            let cost: u64 = members
                .iter()
                .map(|&(i, _)| u64::from(estimate_tokens(&self.tools[i])))
                .sum();
            if budget != u32::MAX && (over_budget > 0 || used + cost > u64::from(budget)) {
                over_budget += 1;
                for &(i, _) in members {
                    left_out.push((i, LeftOutReason::OverBudget { budget }));
                }
                continue;
            }
            used += cost;
            for &(i, _) in members {
                offered_by.insert(i, OfferedBy::Rank { rank: rank_no + 1 });
            }
            offered.extend(members.iter().copied());
        }
        if over_budget > 0 {
            rationale.push(format!(
                "the budget of {} tokens left out {over_budget} more",
                self.limits.token_budget
            ));
        }
        offered.sort_unstable();
        left_out.sort_by_key(|(i, _)| *i);
        let selected: Vec<broker::SelectedTool> = offered
            .iter()
            .map(|&(i, summarized)| broker::SelectedTool {
                tool: Arc::clone(&self.tools[i]),
                summarized,
            })
            .collect();
        let override_block = self.broker.override_block(&selected).unwrap_or_else(|e| {
            rationale.push(format!("override block omitted: {e}"));
            String::new()
        });
        Offer {
            intent,
            tools: offered
                .into_iter()
                .map(|(i, summarized)| Offered {
                    tool: self.tools[i].id(),
                    summarized,
                    by: offered_by
                        .remove(&i)
                        .unwrap_or(OfferedBy::Rank { rank: usize::MAX }),
                })
                .collect(),
            visible: visible.len(),
            left_out: left_out
                .into_iter()
                .map(|(i, reason)| LeftOut {
                    tool: self.tools[i].id(),
                    reason,
                })
                .collect(),
            rationale,
            override_block,
        }
    }

    // ---- route -----------------------------------------------------------------------------

    /// Which of `call.candidates` runs the call, and why (the five rules); `None` when no
    /// candidate is in the catalog.
    #[must_use]
    pub fn route(&self, call: &Call<'_>) -> Option<Decision> {
        let mut members: Vec<&ToolId> = call
            .candidates
            .iter()
            .filter(|m| self.positions.contains_key(m))
            .collect();
        members.sort_by_key(|m| {
            (
                self.catalog.server_index(&m.server).unwrap_or(usize::MAX),
                m.name.as_str(),
            )
        });
        members.dedup();
        let candidates: Vec<Candidate<'_>> = members
            .iter()
            .map(|m| Candidate {
                id: (*m).clone(),
                aliases: self
                    .catalog
                    .server(&m.server)
                    .map_or(&[] as &[String], |s| s.aliases.as_slice()),
                validator: self.validator(m),
                embedding: self.route_vectors.get(*m).map(Vec::as_slice),
            })
            .collect();
        let group: Vec<ToolId> = members.into_iter().cloned().collect();
        let ctx = Context {
            prompt: call.prompt,
            arguments: call.arguments,
            session: call.session,
            group: &group,
            prompt_embedding: call.prompt_vector,
        };
        crate::selector::select(&ctx, &candidates)
    }

    /// [`Selection::route`] for a call to `called` decided among its whole overlap group.
    #[must_use]
    pub fn route_tool(&self, called: &ToolId, call: &Call<'_>) -> Option<Decision> {
        self.tool(called)?;
        let group = self.group(called);
        self.route(&Call {
            candidates: &group,
            ..*call
        })
    }

    /// The schema problems of `arguments` for tool `id` (at most three, each with where it
    /// is), or `None` when they fit (or the tool has no usable schema).
    #[must_use]
    pub fn argument_errors(&self, id: &ToolId, arguments: &Value) -> Option<String> {
        let validator = self.validator(id)?;
        let errors: Vec<String> = validator
            .iter_errors(arguments)
            .take(3)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        (!errors.is_empty()).then(|| errors.join("; "))
    }

    fn validator(&self, id: &ToolId) -> Option<&jsonschema::Validator> {
        let &i = self.positions.get(id)?;
        self.validators[i]
            .get_or_init(|| jsonschema::validator_for(&self.tools[i].input_schema.to_value()).ok())
            .as_ref()
    }
}

fn count(fired: &mut Vec<(usize, usize)>, rule: usize) {
    match fired.iter_mut().find(|(r, _)| *r == rule) {
        Some((_, n)) => *n += 1,
        None => fired.push((rule, 1)),
    }
}

#[cfg(test)]
mod tests;

//! Progressive discovery: scoring helpers and the `request_tools` meta-tool contract.
//!
//! A turn shows the model a small subset of the registry. When none of those fits, the model
//! calls `request_tools` with exact names, keywords, or a few words of intent, and gets back
//! full tool definitions it may call from its next step. Answering is pure: the caller hands in
//! the registry (or uses [`super::LocalBroker::request_tools`]) and puts the returned
//! definitions into the next request.
//!
//! Scoring reuses the crate's BM25 ([`crate::rank`]): names (counted twice), descriptions, tags
//! and parameter names, stop words dropped, light stemming, ties in registry order. Why BM25 and
//! not a keyword count: with thousands of tools a word such as "file" is in half of them, and
//! IDF weighs it down where a count would not. Deny still wins: a tool excluded by a rule that
//! applies to the turn's intent is never returned, so discovery is no way around an exclude.

use std::borrow::Borrow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use thiserror::Error;

use super::intent;
use crate::catalog::Tool;
use crate::rank::{self, Bm25Index};

/// A tool counts as a keyword match only with a score above this. BM25 scores are positive as
/// soon as one query term occurs in the tool, so this keeps exactly the tools sharing a term.
pub const MIN_KEYWORD_SCORE: f32 = 0.0;

/// The meta-tool's name.
pub const REQUEST_TOOLS: &str = "request_tools";
/// Results when the request gives no `max_results`.
pub const DEFAULT_MAX_RESULTS: usize = 5;
/// Most results one request may get (larger `max_results` are clamped to it).
pub const MAX_RESULTS_LIMIT: usize = 20;

/// The seed's `TokenizeIntent`: the intent's index terms (lowercase words split on anything not
/// alphanumeric and on camelCase, English stop words dropped, lightly stemmed), first occurrence
/// order, no duplicates. `"run_build"` gives `["run", "build"]`.
pub fn tokenize_intent(intent: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in rank::terms(intent) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The keywords an intent searches with: [`tokenize_intent`], plus the catalogue keywords of any
/// word that names an intent of [`intent::INTENTS`] (`"review_pr"` adds review, pr, pull,
/// approve, comment).
pub fn intent_keywords(text: &str) -> Vec<String> {
    let mut out = tokenize_intent(text);
    for word in intent::tokenize(text) {
        let Some((_, kws)) = intent::INTENTS.iter().find(|(name, _)| *name == word) else {
            continue;
        };
        for kw in *kws {
            if !out.iter().any(|o| o == kw) {
                out.push((*kw).to_owned());
            }
        }
    }
    out
}

/// The seed's `ScoreByKeywords`: the `max_results` best tools for `keywords` as (index into
/// `tools`, BM25 score), best first, ties in `tools` order, scores above [`MIN_KEYWORD_SCORE`].
pub fn score_by_keywords<T: Borrow<Tool>>(
    tools: &[T],
    keywords: &[impl AsRef<str>],
    max_results: usize,
) -> Vec<(usize, f32)> {
    let refs: Vec<&Tool> = tools.iter().map(Borrow::borrow).collect();
    search(&Bm25Index::from_tools(&refs), keywords, max_results)
}

/// The seed's `ScoreByIntent`: [`score_by_keywords`] with [`intent_keywords`]`(intent)`.
pub fn score_by_intent<T: Borrow<Tool>>(
    tools: &[T],
    intent: &str,
    max_results: usize,
) -> Vec<(usize, f32)> {
    score_by_keywords(tools, &intent_keywords(intent), max_results)
}

/// The seed's `FindByNames`: indexes of the tools answering to `names`, in the order of `names`
/// (a name several servers share gives each of them, in `tools` order). A name matches a tool's
/// own name, `server/name` or `server__name`. Unknown names are skipped; no index repeats.
pub fn find_by_names<T: Borrow<Tool>>(tools: &[T], names: &[impl AsRef<str>]) -> Vec<usize> {
    let mut out = Vec::new();
    for name in names {
        for (i, t) in tools.iter().enumerate() {
            if answers_to(t.borrow(), name.as_ref()) && !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

fn answers_to(tool: &Tool, name: &str) -> bool {
    if tool.name == name {
        return true;
    }
    let Some(rest) = name.strip_prefix(tool.server.as_str()) else {
        return false;
    };
    rest.strip_prefix('/')
        .or_else(|| rest.strip_prefix("__"))
        .is_some_and(|n| n == tool.name)
}

fn search(index: &Bm25Index, keywords: &[impl AsRef<str>], max: usize) -> Vec<(usize, f32)> {
    let query = keywords
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(" ");
    let mut hits = index.search(&query, max);
    hits.retain(|(_, s)| *s > MIN_KEYWORD_SCORE);
    hits
}

/// The `request_tools` tool as an MCP `Tool` object (`name`, `description`, `inputSchema`),
/// ready to add to a tool list. At least one of `names`, `keywords`, `intent` must be given
/// (checked when answering: some providers reject `anyOf` at the top of a schema).
pub fn request_tools_schema() -> Value {
    json!({
        "name": REQUEST_TOOLS,
        "description": "Ask for more tools when none of the tools you have fits the task. \
            Give exact tool names you already know, keywords, or a few words saying what you \
            need to do. Returns the full definitions of the matching tools; you can call them \
            from your next step.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Exact tool names (as `name`, `server/name` or `server__name`)."
                },
                "keywords": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Words the tool's name or description should contain."
                },
                "intent": {
                    "type": "string",
                    "description": "What you are trying to do, in a few words."
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS_LIMIT,
                    "default": DEFAULT_MAX_RESULTS,
                    "description": "How many tools to return at most."
                }
            },
            "additionalProperties": false
        }
    })
}

/// The arguments of one `request_tools` call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestTools {
    /// Exact names, answered first, in this order.
    #[serde(default)]
    pub names: Vec<String>,
    /// Search keywords.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Free-text intent, searched with [`intent_keywords`].
    #[serde(default)]
    pub intent: String,
    /// Result cap; `None` is [`DEFAULT_MAX_RESULTS`], values are clamped to
    /// `1..=MAX_RESULTS_LIMIT`.
    #[serde(default)]
    pub max_results: Option<u64>,
}

impl RequestTools {
    /// Parses the model's arguments (a JSON object; `null` counts as `{}`).
    pub fn from_arguments(arguments: &Value) -> Result<Self, RequestToolsError> {
        let request: Self = if arguments.is_null() {
            Self::default()
        } else {
            Self::deserialize(arguments).map_err(RequestToolsError::Arguments)?
        };
        let blank = |v: &[String]| v.iter().all(|s| s.trim().is_empty());
        if blank(&request.names) && blank(&request.keywords) && request.intent.trim().is_empty() {
            return Err(RequestToolsError::Empty);
        }
        Ok(request)
    }

    /// The effective result cap.
    pub fn limit(&self) -> usize {
        self.max_results.map_or(DEFAULT_MAX_RESULTS, |n| {
            usize::try_from(n)
                .unwrap_or(MAX_RESULTS_LIMIT)
                .clamp(1, MAX_RESULTS_LIMIT)
        })
    }
}

/// Why a `request_tools` call could not be answered; the caller returns it to the model as a
/// tool error (`isError`), so the message speaks to the model.
#[derive(Debug, Error)]
pub enum RequestToolsError {
    /// Not an object of the documented shape.
    #[error("invalid request_tools arguments: {0}")]
    Arguments(serde_json::Error),
    /// No names, keywords or intent.
    #[error("request_tools needs at least one of `names`, `keywords` or `intent`")]
    Empty,
}

/// How a returned tool was found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MatchedBy {
    /// One of the requested names.
    Name,
    /// The keyword/intent search, with its BM25 score.
    Search(f32),
}

/// One returned tool.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundTool {
    /// The tool (its `definition` is what the model gets).
    pub tool: Arc<Tool>,
    /// How it was found.
    pub matched_by: MatchedBy,
}

/// The answer to one `request_tools` call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestToolsAnswer {
    /// Named tools first (request order), then search hits (best first); at most the limit.
    pub tools: Vec<FoundTool>,
    /// Requested names no registered tool answers to.
    pub not_found: Vec<String>,
    /// Requested names whose every tool is excluded by a rule for this turn's intent.
    pub denied: Vec<String>,
}

impl RequestToolsAnswer {
    /// The tool result the model reads (serialize it as the text content):
    /// `{"tools": [{"server", "matched_by": "name"|"search", "score"?, "definition"}],
    /// "not_found": [...], "denied": [...]}`. `score` (search hits only) is rounded to 3
    /// decimals so the text is stable.
    pub fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|f| {
                let mut o = serde_json::Map::new();
                o.insert("server".into(), json!(f.tool.server));
                match f.matched_by {
                    MatchedBy::Name => {
                        o.insert("matched_by".into(), json!("name"));
                    }
                    MatchedBy::Search(score) => {
                        o.insert("matched_by".into(), json!("search"));
                        let rounded = (f64::from(score) * 1000.0).round() / 1000.0;
                        o.insert("score".into(), json!(rounded));
                    }
                }
                o.insert("definition".into(), Value::Object(f.tool.mcp_definition()));
                Value::Object(o)
            })
            .collect();
        json!({"tools": tools, "not_found": self.not_found, "denied": self.denied})
    }
}

/// Answers a request against `tools`, where `denied(i)` says tool `i` is excluded this turn
/// and `index` is the BM25 index over the same `tools`.
pub(super) fn answer(
    tools: &[Arc<Tool>],
    denied: impl Fn(usize) -> bool,
    index: &Bm25Index,
    request: &RequestTools,
) -> RequestToolsAnswer {
    let limit = request.limit();
    let mut out = RequestToolsAnswer::default();
    let mut picked: Vec<usize> = Vec::new();
    for name in request
        .names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    {
        let hits = find_by_names(tools, &[name]);
        if hits.is_empty() {
            out.not_found.push(name.to_owned());
            continue;
        }
        let allowed: Vec<usize> = hits.into_iter().filter(|&i| !denied(i)).collect();
        if allowed.is_empty() {
            out.denied.push(name.to_owned());
        }
        for i in allowed {
            if picked.len() < limit && !picked.contains(&i) {
                picked.push(i);
                out.tools.push(FoundTool {
                    tool: Arc::clone(&tools[i]),
                    matched_by: MatchedBy::Name,
                });
            }
        }
    }
    // BM25 de-duplicates query terms, so keywords and intent words simply add up.
    let mut keywords = request.keywords.clone();
    keywords.extend(intent_keywords(&request.intent));
    if picked.len() < limit && !keywords.is_empty() {
        for (i, score) in search(index, &keywords, tools.len()) {
            if picked.len() == limit {
                break;
            }
            if denied(i) || picked.contains(&i) {
                continue;
            }
            picked.push(i);
            out.tools.push(FoundTool {
                tool: Arc::clone(&tools[i]),
                matched_by: MatchedBy::Search(score),
            });
        }
    }
    out
}

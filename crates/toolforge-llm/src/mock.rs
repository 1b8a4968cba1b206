//! The deterministic offline model (`LLM_PROVIDER=mock`, the default).
//!
//! It needs no key and no network, and the same request always gets the same answer. It plans
//! from the request like a small rule-based agent:
//!
//! * **The reference task** of seed 002 ("look up customer X's orders, sum their total, and tell
//!   me if it exceeds $N"): one `sql_query` call with the seed's SQL and `page_size` 25 (more
//!   pages are fetched while `has_more` says so), then it sums the completed orders' line totals
//!   itself and answers with `key_facts`.
//! * **Anything else**: the request is split into sequential parts (on `;` and "then"); for each
//!   part in turn it calls the tool that ranks best for that part (BM25 over names,
//!   descriptions and parameter names, the broker's lexical ranker) and fills the arguments from
//!   the tool's input schema: paths, URLs, quoted strings, numbers, `owner/repo` pairs, enum
//!   values named in the text. After the last part it answers with what the tools returned.
//! * Nothing ranks: it answers that no available tool matches.
//!
//! Final answers are one JSON object `{"answer": "...", "key_facts": {...}}`, the shape the agent
//! asks every model for. Usage is counted like a real provider would bill it: input tokens from
//! [`estimate_input_tokens`], the tools and system prompt written to the prompt cache on the first
//! call of a request and read from it afterwards (when the request asks for caching), and output
//! tokens from the answer's length, never above `max_tokens` (a longer answer is cut and the stop
//! reason is `max_tokens`).

use std::sync::LazyLock;

use futures::future::BoxFuture;
use regex::Regex;
use serde_json::{Map, Value, json};
use toolforge_select::rank::{Bm25Index, Document, terms};

use crate::model::{
    Content, InputBound, Model, ModelError, ModelRequest, ModelResponse, Role, StopReason,
    ToolSpec, Usage, counted_bound, estimate_input_tokens,
};

/// The mock's model id (priced like `claude-sonnet-4-6` in the default price table).
pub const MOCK_MODEL: &str = "mock";

/// The deterministic offline model.
#[derive(Debug, Clone, Default)]
pub struct MockModel;

impl MockModel {
    #[must_use]
    pub fn new() -> Self {
        Self
    }
}

impl Model for MockModel {
    fn provider(&self) -> &'static str {
        "mock"
    }

    fn model(&self) -> &str {
        MOCK_MODEL
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move { Ok(respond(request)) })
    }

    /// The mock knows what it will bill: [`estimate_input_tokens`], counted.
    fn input_bound<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, InputBound> {
        Box::pin(std::future::ready(counted_bound(
            request,
            estimate_input_tokens(request),
        )))
    }
}

/// One earlier call and what it returned.
struct Observation<'a> {
    tool: &'a str,
    input: &'a Value,
    result: &'a str,
    is_error: bool,
    /// A dry run planned the call and executed nothing: there is no result.
    planned_only: bool,
}

/// The agent's stand-in result for a call a dry run planned but did not execute.
fn is_planned_only(result: &str) -> bool {
    serde_json::from_str::<Value>(result)
        .is_ok_and(|v| v["dry_run"] == json!(true) && v["executed"] == json!(false))
}

/// The request being worked on: the latest user turn made of text only (earlier turns of the
/// conversation come before it; tool results come after it).
fn task_of(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|m| {
            m.role == Role::User && m.content.iter().all(|c| matches!(c, Content::Text { .. }))
        })
        .map(|m| {
            m.content
                .iter()
                .filter_map(|c| match c {
                    Content::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The search tool the agent offers when it leaves tools out ([`crate::model`] has no notion of
/// it: the mock recognises it by name, as a model reads its description).
pub const SEARCH_TOOLS: &str = "search_tools";
/// Its name when a server already offers a `search_tools`.
pub const SEARCH_TOOLS_FALLBACK: &str = "toolforge_search_tools";

fn observations(request: &ModelRequest) -> Vec<Observation<'_>> {
    let mut uses = std::collections::HashMap::new();
    let mut out = Vec::new();
    for m in &request.messages {
        for c in &m.content {
            match c {
                Content::ToolUse { id, name, input } => {
                    uses.insert(id.as_str(), (name.as_str(), input));
                }
                Content::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    if let Some((tool, input)) = uses.get(tool_use_id.as_str()) {
                        out.push(Observation {
                            tool,
                            input,
                            result: content,
                            is_error: *is_error,
                            planned_only: is_planned_only(content),
                        });
                    }
                }
                Content::Text { .. }
                | Content::ProviderSearch { .. }
                | Content::ProviderSearchResult { .. } => {}
            }
        }
    }
    out
}

enum Turn {
    Call(String, Value, String),
    Answer(Value),
}

fn respond(request: &ModelRequest) -> ModelResponse {
    let task = task_of(request);
    let seen = observations(request);
    let turn = match ReferenceTask::parse(&task) {
        Some(reference) => reference.next(&request.tools, &seen),
        None => generic(&task, &request.tools, &seen),
    };
    let (content, stop) = match turn {
        Turn::Call(name, input, why) => (
            vec![
                Content::text(why),
                Content::ToolUse {
                    id: format!("toolu_mock_{:02}", seen.len() + 1),
                    name,
                    input,
                },
            ],
            StopReason::ToolUse,
        ),
        Turn::Answer(answer) => (vec![Content::text(answer.to_string())], StopReason::EndTurn),
    };
    finish(request, content, stop)
}

/// Bills the turn like a provider would and cuts the answer at `max_tokens`.
fn finish(
    request: &ModelRequest,
    mut content: Vec<Content>,
    mut stop: StopReason,
) -> ModelResponse {
    let out_bytes: usize = content
        .iter()
        .map(|c| match c {
            Content::Text { text } => text.len(),
            Content::ToolUse { name, input, .. } => name.len() + input.to_string().len() + 16,
            Content::ToolResult { content, .. } => content.len(),
            // The mock runs no search of its own.
            Content::ProviderSearch { .. } | Content::ProviderSearchResult { .. } => 0,
        })
        .sum();
    let wanted = (out_bytes as u64).div_ceil(4).max(1);
    let max = u64::from(request.max_tokens.max(1));
    let output_tokens = if wanted > max {
        // Cut: keep the first text block, shortened, and drop any tool call.
        let keep = usize::try_from(max * 4).unwrap_or(usize::MAX);
        let text: String = content
            .iter()
            .find_map(|c| match c {
                Content::Text { text } => Some(text.chars().take(keep).collect()),
                _ => None,
            })
            .unwrap_or_default();
        content = vec![Content::text(text)];
        stop = StopReason::MaxTokens;
        max
    } else {
        wanted
    };
    let total_in = estimate_input_tokens(request);
    let mut usage = Usage {
        input_tokens: total_in,
        output_tokens,
        ..Usage::default()
    };
    if request.cache {
        let prefix = estimate_input_tokens(&ModelRequest {
            system: request.system.clone(),
            tools: request.tools.clone(),
            ..ModelRequest::default()
        })
        .min(total_in);
        // The first call of a request writes the prefix; later calls (more than one message)
        // read it back, only the first offer's part of it once tools have joined (the rest is
        // written again: conservative, the provider writes it once).
        let stable = request.stable_tools;
        let read = if request.messages.len() <= 1 {
            0
        } else if stable > 0 && stable < request.tools.len() {
            estimate_input_tokens(&ModelRequest {
                tools: request.tools[..stable].to_vec(),
                ..ModelRequest::default()
            })
            .min(prefix)
        } else {
            prefix
        };
        usage.cache_read_input_tokens = read;
        usage.cache_creation_input_tokens = prefix - read;
        usage.input_tokens = total_in - prefix;
    }
    ModelResponse {
        content,
        stop_reason: stop,
        usage,
        model: MOCK_MODEL.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// The reference task.

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)customer\s+(?P<name>[\p{L}][\p{L}.'\- ]*?)(?:'s|’s|s')?\s+orders\b.*?\bexceeds?\s+(?:\$\s*|USD\s*)?(?P<n>\d[\d,]*(?:\.\d+)?)",
    )
    .expect("static regex")
});

/// Seed 002's reference task, parsed.
struct ReferenceTask {
    customer: String,
    threshold: f64,
}

fn find_tool<'t>(tools: &'t [ToolSpec], name: &str) -> Option<&'t ToolSpec> {
    tools.iter().find(|t| t.name == name).or_else(|| {
        tools
            .iter()
            .find(|t| t.name.ends_with(&format!("__{name}")))
    })
}

impl ReferenceTask {
    fn parse(task: &str) -> Option<Self> {
        let c = REFERENCE.captures(task)?;
        let customer = c["name"].trim().to_owned();
        let threshold = c["n"].replace(',', "").parse().ok()?;
        Some(Self {
            customer,
            threshold,
        })
    }

    fn sql(&self) -> String {
        format!(
            "SELECT c.name AS customer_name, o.order_id, o.quantity, p.unit_price, (o.quantity * p.unit_price) AS line_total, o.status FROM orders o JOIN customers c ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id WHERE c.name = '{}'",
            self.customer.replace('\'', "''")
        )
    }

    fn next(&self, tools: &[ToolSpec], seen: &[Observation<'_>]) -> Turn {
        let Some(sql_tool) = find_tool(tools, "sql_query") else {
            // Not offered: a model that knows the tool it needs asks for it by name.
            if let Some(search) = search_tool(tools)
                && !seen.iter().any(|o| o.tool == search.name)
            {
                return search_call(search, "sql query");
            }
            return Turn::Answer(json!({
                "answer": format!("I cannot look up {}'s orders: no sql_query tool is available.", self.customer),
                "key_facts": {"customer_name": self.customer, "threshold": self.threshold},
            }));
        };
        if seen
            .iter()
            .any(|o| o.tool == sql_tool.name && o.planned_only)
        {
            return Turn::Answer(json!({
                "answer": format!(
                    "Dry run: I would look up {}'s orders with one read-only {} query, add up the line totals of the completed orders and compare the sum with ${:.2}. Nothing was executed, so the total is not known.",
                    self.customer, sql_tool.name, self.threshold
                ),
                "key_facts": {
                    "customer_name": self.customer,
                    "threshold": self.threshold,
                    "planned_calls": [sql_tool.name],
                    "executed": false,
                },
            }));
        }
        let mut rows: Vec<Value> = Vec::new();
        let mut next_offset = Some(0u64);
        for o in seen.iter().filter(|o| o.tool == sql_tool.name) {
            if o.is_error {
                return Turn::Answer(json!({
                    "answer": format!("The order lookup failed: {}", o.result),
                    "key_facts": {"customer_name": self.customer, "threshold": self.threshold},
                }));
            }
            let page: Value = serde_json::from_str(o.result).unwrap_or(Value::Null);
            rows.extend(page["rows"].as_array().cloned().unwrap_or_default());
            next_offset = if page["has_more"] == json!(true) {
                page["next_offset"].as_u64()
            } else {
                None
            };
        }
        if let Some(offset) = next_offset {
            let mut input = json!({"sql": self.sql(), "page_size": 25});
            if offset > 0 {
                input["offset"] = json!(offset);
            }
            return Turn::Call(
                sql_tool.name.clone(),
                input,
                format!(
                    "Looking up {}'s orders with one read-only query.",
                    self.customer
                ),
            );
        }
        let completed: Vec<&Value> = rows
            .iter()
            .filter(|r| r["status"].as_str() == Some("completed"))
            .collect();
        let total_cents: i64 = completed
            .iter()
            .map(|r| (r["line_total"].as_f64().unwrap_or(0.0) * 100.0).round() as i64)
            .sum();
        let total = total_cents as f64 / 100.0;
        let exceeds = total > self.threshold;
        let verdict = if exceeds {
            "exceeds"
        } else {
            "does not exceed"
        };
        Turn::Answer(json!({
            "answer": format!(
                "{}'s completed orders total ${total:.2}, which {verdict} ${:.2}.",
                self.customer, self.threshold
            ),
            "key_facts": {
                "customer_name": self.customer,
                "order_total": total,
                "threshold": self.threshold,
                "exceeds_threshold": exceeds,
                "num_completed_orders": completed.len(),
            },
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Any other request.

static SPLIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\s*(?:;|,?\s+and\s+then\s+|,?\s+then\s+|\.\s+then\s+)\s*")
        .expect("static regex")
});

fn parts(task: &str) -> Vec<&str> {
    SPLIT
        .split(task)
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// The best-ranked tool for `text`, if any term matches at all.
fn best_tool<'t>(tools: &'t [ToolSpec], text: &str) -> Option<&'t ToolSpec> {
    let docs: Vec<Document> = tools
        .iter()
        .map(|t| Document {
            name: t.name.clone(),
            description: t.description.clone(),
            tags: Vec::new(),
            params: t
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            ..Document::default()
        })
        .collect();
    let index = Bm25Index::new(&docs);
    index
        .search(text, 1)
        .first()
        .filter(|(_, score)| *score > 0.0)
        .map(|(i, _)| &tools[*i])
}

/// The agent's search tool (`search_tools`, or its namespaced name when a server already has
/// one), when it is offered.
fn search_tool(tools: &[ToolSpec]) -> Option<&ToolSpec> {
    tools
        .iter()
        .find(|t| t.name == SEARCH_TOOLS || t.name == SEARCH_TOOLS_FALLBACK)
}

/// True when every word of the tool's own name (its server's prefix aside) is in `text`: a
/// model calls a tool whose name says what it wants, and otherwise looks for a better one.
fn name_fits(tool: &ToolSpec, text: &str) -> bool {
    let own = tool.name.rsplit("__").next().unwrap_or(&tool.name);
    let wanted = terms(own);
    let said = terms(text);
    !wanted.is_empty() && wanted.iter().all(|w| said.contains(w))
}

/// A call of the search tool.
fn search_call(search: &ToolSpec, query: &str) -> Turn {
    Turn::Call(
        search.name.clone(),
        json!({"query": query}),
        format!("Looking for a tool for: {query}"),
    )
}

fn generic(task: &str, tools: &[ToolSpec], seen: &[Observation<'_>]) -> Turn {
    let parts = parts(task);
    let search = search_tool(tools);
    let is_search = |o: &Observation<'_>| search.is_some_and(|s| s.name == o.tool);
    // Searches are not steps of the plan: the part worked on is the one after the last call.
    let searched_now = seen.last().is_some_and(is_search);
    let seen: Vec<&Observation<'_>> = seen.iter().filter(|o| !is_search(o)).collect();
    let callable: Vec<ToolSpec> = tools
        .iter()
        .filter(|t| search.is_none_or(|s| s.name != t.name))
        .cloned()
        .collect();
    if let Some(part) = parts.get(seen.len()) {
        let best = best_tool(&callable, part);
        // Search first unless the best tool's name says it fits, or a search just ran.
        let settle = search.is_none() || searched_now || best.is_some_and(|t| name_fits(t, part));
        if let (Some(tool), true) = (best, settle) {
            let input = fill_arguments(&tool.input_schema, part);
            return Turn::Call(
                tool.name.clone(),
                input,
                format!("Calling {} for: {part}", tool.name),
            );
        }
        if let (Some(search), false) = (search, searched_now) {
            return search_call(search, part);
        }
        if seen.is_empty() {
            return Turn::Answer(json!({
                "answer": "None of the available tools matches this request.",
                "key_facts": {"tools_available": callable.len()},
            }));
        }
    }
    if !seen.is_empty() && seen.iter().all(|o| o.planned_only) {
        let plan: Vec<String> = seen
            .iter()
            .map(|o| format!("call {} with {}", o.tool, o.input))
            .collect();
        return Turn::Answer(json!({
            "answer": format!(
                "Dry run: I would {}. Nothing was executed, so there are no results yet.",
                plan.join(", then ")
            ),
            "key_facts": {
                "planned_calls": seen.iter().map(|o| o.tool).collect::<Vec<_>>(),
                "executed": false,
            },
        }));
    }
    let mut lines = Vec::new();
    let mut failed = 0;
    for o in &seen {
        let result = shorten(o.result, 400);
        if o.is_error {
            failed += 1;
            lines.push(format!("{} failed: {result}", o.tool));
        } else {
            lines.push(format!("{} returned: {result}", o.tool));
        }
    }
    Turn::Answer(json!({
        "answer": lines.join("\n"),
        "key_facts": {
            "tool_calls": seen.len(),
            "failed_calls": failed,
            "tools": seen.iter().map(|o| o.tool).collect::<Vec<_>>(),
            "last_arguments": seen.last().map(|o| o.input.clone()),
        },
    }))
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max_chars).collect();
    format!("{cut}…")
}

static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([^"]+)"|'([^']+)'|`([^`]+)`"#).expect("static regex"));
static URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"https?://[^\s"'`<>)]+"#).expect("static regex"));
static OWNER_REPO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+[A-Za-z0-9_])\b")
        .expect("static regex")
});
static OWNER_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bowner\s+([A-Za-z0-9][A-Za-z0-9-]*)").expect("static regex")
});
static REPO_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\brepo(?:sitory)?\s+([A-Za-z0-9._-]+[A-Za-z0-9_])").expect("static regex")
});
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|[\s(])((?:~|\.{1,2})?/?(?:[\w.-]+/)*[\w-]+(?:\.[A-Za-z0-9]{1,6})|/(?:[\w.-]+/?)+)",
    )
    .expect("static regex")
});
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[\s$(])(-?\d+(?:\.\d+)?)\b").expect("static regex"));
static CURRENCY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[A-Z]{3}\b").expect("static regex"));
static CODE_AFTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)\b(?:python|code)\s*:\s*(.+?)\s*$").expect("static regex"));
static TIMEZONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:[A-Z][a-z]+(?:_[A-Z][a-z]+)*/[A-Z][A-Za-z_]+|UTC)\b").expect("static regex")
});

/// Values found in a request, by kind.
struct Evidence<'a> {
    text: &'a str,
    quoted: Vec<String>,
    urls: Vec<String>,
    paths: Vec<String>,
    numbers: Vec<f64>,
    owner_repo: Option<(String, String)>,
    /// Three-letter upper-case codes (`USD`, `EUR`), in order.
    currencies: Vec<String>,
}

impl<'a> Evidence<'a> {
    fn gather(text: &'a str) -> Self {
        let quoted = QUOTED
            .captures_iter(text)
            .filter_map(|c| {
                c.iter()
                    .skip(1)
                    .flatten()
                    .next()
                    .map(|m| m.as_str().to_owned())
            })
            .collect();
        let urls: Vec<String> = URL.find_iter(text).map(|m| m.as_str().to_owned()).collect();
        let without_urls = URL.replace_all(text, " ");
        let paths = PATH
            .captures_iter(&without_urls)
            .map(|c| c[1].trim_end_matches('.').to_owned())
            .filter(|p| !p.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .collect();
        // Numbers inside quoted text or code are part of those values, not values of their own.
        let bare = QUOTED.replace_all(&without_urls, " ");
        let bare = CODE_AFTER.replace_all(&bare, " ");
        let numbers = NUMBER
            .captures_iter(&bare)
            .filter_map(|c| c[1].parse().ok())
            .collect();
        let owner_repo = OWNER_REPO
            .captures_iter(&without_urls)
            .find(|c| !c[2].contains('.') || c[2].ends_with("-python") || !c[0].contains(".md"))
            .map(|c| (c[1].to_owned(), c[2].to_owned()))
            .or_else(|| {
                let o = OWNER_WORD.captures(text)?;
                let r = REPO_WORD.captures(text)?;
                Some((o[1].to_owned(), r[1].to_owned()))
            });
        let currencies = CURRENCY
            .find_iter(text)
            .map(|m| m.as_str().to_owned())
            .filter(|c| !["SQL", "API", "URL", "CSV", "JSON"].contains(&c.as_str()))
            .collect();
        Self {
            text,
            quoted,
            urls,
            paths,
            numbers,
            owner_repo,
            currencies,
        }
    }
}

/// Arguments for a tool with `schema`, filled from `text`: every required property, and the
/// optional ones the text clearly names a value for.
#[must_use]
pub fn fill_arguments(schema: &Value, text: &str) -> Value {
    let ev = Evidence::gather(text);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(out);
    };
    let mut quoted = ev.quoted.iter();
    let mut numbers = ev.numbers.iter();
    for (name, prop) in props {
        let is_required = required.contains(&name.as_str());
        if let Some(v) = value_for(name, prop, &ev, &mut quoted, &mut numbers, is_required) {
            out.insert(name.clone(), v);
        }
    }
    Value::Object(out)
}

fn value_for<'q>(
    name: &str,
    prop: &Value,
    ev: &Evidence<'_>,
    quoted: &mut impl Iterator<Item = &'q String>,
    numbers: &mut impl Iterator<Item = &'q f64>,
    required: bool,
) -> Option<Value> {
    let lname = name.to_ascii_lowercase();
    // `"type": ["integer", "null"]` counts as its first non-null type.
    let ty = match prop.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ => "string",
    };
    if let Some(options) = prop.get("enum").and_then(Value::as_array) {
        let text = ev.text.to_lowercase();
        let named = options
            .iter()
            .find(|o| o.as_str().is_some_and(|s| text.contains(&s.to_lowercase())));
        return named
            .cloned()
            .or_else(|| required.then(|| options.first().cloned()).flatten());
    }
    match ty {
        "integer" | "number" => {
            let n = numbers.next().copied();
            match (n, ty) {
                (Some(n), "integer") => Some(json!(n as i64)),
                (Some(n), _) if n.fract() == 0.0 && n.abs() < 1e15 => Some(json!(n as i64)),
                (Some(n), _) => Some(json!(n)),
                (None, _) if required => prop.get("default").cloned().or(Some(json!(0))),
                _ => None,
            }
        }
        "boolean" => required.then(|| prop.get("default").cloned().unwrap_or(json!(false))),
        "array" => {
            let item = ev.paths.first().or(ev.quoted.first()).cloned();
            match item {
                Some(i) if lname.contains("path") || lname.contains("file") => Some(json!([i])),
                _ if required => Some(json!([])),
                _ => None,
            }
        }
        "object" => required.then(|| json!({})),
        _ => string_for(&lname, ev, quoted, required),
    }
}

fn string_for<'q>(
    lname: &str,
    ev: &Evidence<'_>,
    quoted: &mut impl Iterator<Item = &'q String>,
    required: bool,
) -> Option<Value> {
    let found = if lname == "owner" {
        ev.owner_repo.as_ref().map(|(o, _)| o.clone())
    } else if lname == "repo" || lname == "repository" {
        ev.owner_repo.as_ref().map(|(_, r)| r.clone())
    } else if lname.contains("url") || lname == "uri" {
        ev.urls.first().cloned()
    } else if lname.contains("path") || lname.contains("file") || lname == "source" {
        ev.paths
            .iter()
            .find(|p| {
                ev.owner_repo
                    .as_ref()
                    .is_none_or(|(o, r)| **p != format!("{o}/{r}"))
            })
            .cloned()
    } else if lname.contains("timezone") || lname == "tz" {
        TIMEZONE
            .find(ev.text)
            .map(|m| m.as_str().to_owned())
            .or_else(|| Some("UTC".to_owned()))
    } else if let Some(i) = currency_slot(lname) {
        ev.currencies.get(i).cloned()
    } else if ["code", "script", "source_code"].contains(&lname) {
        ev.quoted
            .iter()
            .find(|q| q.contains('(') || q.contains('='))
            .cloned()
            .or_else(|| CODE_AFTER.captures(ev.text).map(|c| c[1].to_owned()))
    } else if lname == "sql" {
        let upper = ev.text.to_ascii_uppercase();
        upper
            .find("SELECT ")
            .map(|i| ev.text[i..].trim_end_matches(['.', '?']).to_owned())
    } else {
        quoted.next().cloned()
    };
    found
        .or_else(|| {
            let free_text = [
                "query", "q", "text", "message", "content", "pattern", "prompt", "input",
            ];
            (required || free_text.contains(&lname)).then(|| ev.text.to_owned())
        })
        .map(Value::String)
}

/// Which currency code of the request a property takes: the first for `base`/`from`, the
/// second for `target`/`to`.
fn currency_slot(lname: &str) -> Option<usize> {
    match lname {
        "base" | "from" | "from_currency" | "base_currency" | "currency" | "source_currency" => {
            Some(0)
        }
        "target" | "to" | "to_currency" | "target_currency" | "quote" | "quote_currency" => Some(1),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

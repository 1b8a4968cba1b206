//! `GET /metrics`: the replica's counters in the Prometheus text format (version 0.0.4), for the
//! scrapers people already run.
//!
//! | name | type | labels |
//! | --- | --- | --- |
//! | `toolforge_http_requests_total` | counter | `route`, `method`, `status` |
//! | `toolforge_http_request_duration_seconds` | histogram | `route` (time to the response head) |
//! | `toolforge_http_requests_in_flight` | gauge | |
//! | `toolforge_tool_calls_total` | counter | `server`, `tool`, `outcome` = `ok`, `error` |
//! | `toolforge_tool_call_duration_seconds` | histogram | `server`, `tool` |
//! | `toolforge_errors_total` | counter | `kind` = `http_5xx`, `tool`, `model` |
//! | `toolforge_agent_runs_total` | counter | `model`, `halted` |
//! | `toolforge_model_calls_total` | counter | `model` |
//! | `toolforge_cost_usd_total` | counter | `model` (what the agent's trace records bill) |
//! | `toolforge_tokens_total` | counter | `model`, `type` = `input`, `output` |
//! | `toolforge_catalog_cache_total` | counter | `result` = `hit`, `stale`, `miss` |
//! | `toolforge_sessions` | gauge | (open `/mcp` sessions of earlier revisions) |
//! | `toolforge_legacy_sse_sessions` | gauge | (open `/sse` sessions) |
//! | `toolforge_quarantined_tools` | gauge | |
//! | `toolforge_draining` | gauge | 1 while the replica drains |
//!
//! Label sets are bounded: routes are the router's patterns (anything else is `unmatched`),
//! tools are the catalog's (recorded only once routed to a server), models are the
//! configuration's, and past [`MAX_SERIES`] label sets a family records new ones under
//! `_other`, so no client can grow the number of series.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use toolforge_agent::RunResult;

/// Label sets one family keeps at most; later ones are counted under `_other`.
pub const MAX_SERIES: usize = 2_000;

/// The label value standing for "past the series cap" or "outside the known set".
const OTHER: &str = "_other";

/// Upper bounds (seconds) of every latency histogram's buckets.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, n) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *n += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// A series' label values as a map key, so a family finds a series by the `&[&str]` it is
/// given without building a key of owned strings first (a counter update on every request).
trait LabelSet {
    fn count(&self) -> usize;
    fn label(&self, i: usize) -> &str;
}

impl LabelSet for Vec<String> {
    fn count(&self) -> usize {
        self.len()
    }
    fn label(&self, i: usize) -> &str {
        &self[i]
    }
}

impl LabelSet for &[&str] {
    fn count(&self) -> usize {
        self.len()
    }
    fn label(&self, i: usize) -> &str {
        self[i]
    }
}

impl<'a> std::borrow::Borrow<dyn LabelSet + 'a> for Vec<String> {
    fn borrow(&self) -> &(dyn LabelSet + 'a) {
        self
    }
}

/// The order of `Vec<String>`: element by element, then the shorter first.
impl Ord for dyn LabelSet + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let mine = (0..self.count()).map(|i| self.label(i));
        mine.cmp((0..other.count()).map(|i| other.label(i)))
    }
}

impl PartialOrd for dyn LabelSet + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn LabelSet + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for dyn LabelSet + '_ {}

/// A family of series keyed by their label values, capped at [`MAX_SERIES`].
#[derive(Debug)]
struct Family<V> {
    series: Mutex<BTreeMap<Vec<String>, V>>,
}

impl<V: Default + Clone> Family<V> {
    fn new() -> Self {
        Self {
            series: Mutex::new(BTreeMap::new()),
        }
    }

    fn update(&self, labels: &[&str], f: impl FnOnce(&mut V)) {
        let mut series = self.series.lock();
        if let Some(v) = series.get_mut(&labels as &dyn LabelSet) {
            f(v);
            return;
        }
        let key = if series.len() >= MAX_SERIES {
            vec![OTHER.to_owned(); labels.len()]
        } else {
            labels.iter().map(|s| (*s).to_owned()).collect()
        };
        f(series.entry(key).or_default());
    }

    fn snapshot(&self) -> Vec<(Vec<String>, V)> {
        self.series
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// What the scrape reads from elsewhere at the moment it happens.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Open `/mcp` sessions.
    pub sessions: u64,
    /// Open legacy `/sse` sessions.
    pub legacy_sessions: u64,
    /// Requests being answered.
    pub in_flight: u64,
    /// The replica is draining.
    pub draining: bool,
    /// The catalog cache's counters (`hits`, `stale_served`, `misses`), as the pool reports them.
    pub cache: serde_json::Value,
}

/// The replica's counters. Cheap to update from any task; [`Metrics::render`] writes them out.
#[derive(Debug)]
pub struct Metrics {
    http: Family<u64>,
    http_latency: Family<Histogram>,
    tool_calls: Family<u64>,
    tool_latency: Family<Histogram>,
    errors: Family<u64>,
    runs: Family<u64>,
    model_calls: Family<u64>,
    cost: Family<f64>,
    tokens: Family<u64>,
    quarantined: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    #[must_use]
    pub fn new() -> Self {
        Self {
            http: Family::new(),
            http_latency: Family::new(),
            tool_calls: Family::new(),
            tool_latency: Family::new(),
            errors: Family::new(),
            runs: Family::new(),
            model_calls: Family::new(),
            cost: Family::new(),
            tokens: Family::new(),
            quarantined: AtomicU64::new(0),
        }
    }

    /// One answered HTTP request: its route pattern, method, status and time to the head.
    pub fn http_request(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let method = match method {
            "GET" | "POST" | "DELETE" | "HEAD" | "OPTIONS" | "PUT" | "PATCH" => method,
            _ => OTHER,
        };
        // The code's text without formatting it (the status line's digits).
        let code = axum::http::StatusCode::from_u16(status);
        let status_text = match &code {
            Ok(code) => std::borrow::Cow::Borrowed(code.as_str()),
            Err(_) => std::borrow::Cow::Owned(status.to_string()),
        };
        self.http
            .update(&[route, method, &status_text], |n| *n += 1);
        self.http_latency
            .update(&[route], |h| h.observe(elapsed.as_secs_f64()));
        if status >= 500 {
            self.errors.update(&["http_5xx"], |n| *n += 1);
        }
    }

    /// One tool call that reached `server` (its own name of the tool), and how it ended.
    pub fn tool_call(&self, server: &str, tool: &str, ok: bool, elapsed: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.tool_calls
            .update(&[server, tool, outcome], |n| *n += 1);
        self.tool_latency
            .update(&[server, tool], |h| h.observe(elapsed.as_secs_f64()));
        if !ok {
            self.errors.update(&["tool"], |n| *n += 1);
        }
    }

    /// One finished agent run: its executed tool calls, model calls, tokens and cost (the
    /// figures its trace records carry).
    pub fn agent_run(&self, run: &RunResult) {
        let model = run.model.as_str();
        let halted = if run.halted { "true" } else { "false" };
        self.runs.update(&[model, halted], |n| *n += 1);
        self.model_calls
            .update(&[model], |n| *n += u64::from(run.model_calls));
        if run.cost_usd.is_finite() && run.cost_usd > 0.0 {
            self.cost.update(&[model], |c| *c += run.cost_usd);
        }
        self.tokens
            .update(&[model, "input"], |n| *n += run.tokens_in);
        self.tokens
            .update(&[model, "output"], |n| *n += run.tokens_out);
        if run.halt_reason == Some(toolforge_agent::halt::HaltReason::ModelError) {
            self.errors.update(&["model"], |n| *n += 1);
        }
        for step in run.steps.iter().filter(|s| s.executed) {
            let (Some(server), Some(tool)) = (&step.server, &step.server_tool) else {
                continue;
            };
            let elapsed = Duration::from_secs_f64((step.latency_ms.max(0.0)) / 1000.0);
            self.tool_call(server, tool, step.success, elapsed);
        }
    }

    /// Sets the number of quarantined tools (governance owns the figure; this only shows it).
    pub fn set_quarantined_tools(&self, n: u64) {
        self.quarantined.store(n, Ordering::Relaxed);
    }

    /// Everything, in the Prometheus text format.
    #[must_use]
    pub fn render(&self, live: &Live) -> String {
        let mut out = String::new();
        counter(
            &mut out,
            "toolforge_http_requests_total",
            "HTTP requests answered, by route pattern, method and status.",
            &["route", "method", "status"],
            &self.http.snapshot(),
        );
        histogram(
            &mut out,
            "toolforge_http_request_duration_seconds",
            "Time from a request's arrival to its response head, by route pattern.",
            &["route"],
            &self.http_latency.snapshot(),
        );
        gauge(
            &mut out,
            "toolforge_http_requests_in_flight",
            "Requests being answered now (listening streams not counted).",
            live.in_flight as f64,
        );
        counter(
            &mut out,
            "toolforge_tool_calls_total",
            "Tool calls sent to a backend server, by server, tool and outcome.",
            &["server", "tool", "outcome"],
            &self.tool_calls.snapshot(),
        );
        histogram(
            &mut out,
            "toolforge_tool_call_duration_seconds",
            "Latency of tool calls sent to a backend server, retries included.",
            &["server", "tool"],
            &self.tool_latency.snapshot(),
        );
        counter(
            &mut out,
            "toolforge_errors_total",
            "Errors: HTTP 5xx answers, failed tool calls, runs halted by a model error.",
            &["kind"],
            &self.errors.snapshot(),
        );
        counter(
            &mut out,
            "toolforge_agent_runs_total",
            "Finished agent runs (/chat, /chat/stream, /agent/run).",
            &["model", "halted"],
            &self.runs.snapshot(),
        );
        counter(
            &mut out,
            "toolforge_model_calls_total",
            "Model calls made by agent runs.",
            &["model"],
            &self.model_calls.snapshot(),
        );
        counter(
            &mut out,
            "toolforge_cost_usd_total",
            "Model cost of agent runs in US dollars, as their trace records bill it.",
            &["model"],
            &self.cost.snapshot(),
        );
        counter(
            &mut out,
            "toolforge_tokens_total",
            "Model tokens of agent runs.",
            &["model", "type"],
            &self.tokens.snapshot(),
        );
        let cache = |key: &str| live.cache.get(key).and_then(serde_json::Value::as_u64);
        let lookups: Vec<(Vec<String>, u64)> = [
            ("hit", cache("hits")),
            ("stale", cache("stale_served")),
            ("miss", cache("misses")),
        ]
        .into_iter()
        .filter_map(|(result, n)| Some((vec![result.to_owned()], n?)))
        .collect();
        counter(
            &mut out,
            "toolforge_catalog_cache_total",
            "Catalog cache lookups, by result.",
            &["result"],
            &lookups,
        );
        gauge(
            &mut out,
            "toolforge_sessions",
            "Open /mcp sessions (earlier protocol revisions).",
            live.sessions as f64,
        );
        gauge(
            &mut out,
            "toolforge_legacy_sse_sessions",
            "Open /sse sessions (the legacy HTTP+SSE transport).",
            live.legacy_sessions as f64,
        );
        gauge(
            &mut out,
            "toolforge_quarantined_tools",
            "Tools quarantined by governance (not offered, not callable).",
            self.quarantined.load(Ordering::Relaxed) as f64,
        );
        gauge(
            &mut out,
            "toolforge_draining",
            "1 while the replica drains (SIGTERM): it accepts no new connections.",
            if live.draining { 1.0 } else { 0.0 },
        );
        out
    }
}

/// The metrics a request carries (the HTTP layer puts them in its extensions), from the
/// request's head as rmcp hands it to a handler.
#[must_use]
pub(crate) fn of_request(parts: Option<&http::request::Parts>) -> Option<std::sync::Arc<Metrics>> {
    parts?.extensions.get::<std::sync::Arc<Metrics>>().cloned()
}

/// A sample value as Prometheus writes it.
trait Sample {
    fn text(&self) -> String;
}

impl Sample for u64 {
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Sample for f64 {
    fn text(&self) -> String {
        number(*self)
    }
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

/// `value` escaped for a label (backslash, double quote and line feed).
fn escape(value: &str) -> String {
    let mut s = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn labels(names: &[&str], values: &[String], extra: Option<(&str, &str)>) -> String {
    let mut pairs: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
        .collect();
    if let Some((n, v)) = extra {
        pairs.push(format!("{n}=\"{}\"", escape(v)));
    }
    if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    }
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn counter<V: Sample>(
    out: &mut String,
    name: &str,
    help: &str,
    names: &[&str],
    series: &[(Vec<String>, V)],
) {
    head(out, name, help, "counter");
    for (values, v) in series {
        let _ = writeln!(out, "{name}{} {}", labels(names, values, None), v.text());
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    head(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {}", number(value));
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    names: &[&str],
    series: &[(Vec<String>, Histogram)],
) {
    head(out, name, help, "histogram");
    for (values, h) in series {
        for (bound, n) in BUCKETS.iter().zip(h.counts) {
            let le = number(*bound);
            let _ = writeln!(
                out,
                "{name}_bucket{} {n}",
                labels(names, values, Some(("le", &le)))
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{} {}",
            labels(names, values, Some(("le", "+Inf"))),
            h.count
        );
        let _ = writeln!(
            out,
            "{name}_sum{} {}",
            labels(names, values, None),
            number(h.sum)
        );
        let _ = writeln!(
            out,
            "{name}_count{} {}",
            labels(names, values, None),
            h.count
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_are_written_with_escaped_labels() {
        let m = Metrics::new();
        m.http_request("/mcp", "POST", 200, Duration::from_millis(30));
        m.http_request("/mcp", "POST", 200, Duration::from_millis(700));
        m.tool_call("srv", "say \"hi\"\n", false, Duration::from_millis(3));
        m.set_quarantined_tools(2);
        let text = m.render(&Live {
            sessions: 3,
            legacy_sessions: 2,
            cache: serde_json::json!({"hits": 5, "misses": 1}),
            ..Live::default()
        });
        assert!(text.contains(
            "toolforge_http_requests_total{route=\"/mcp\",method=\"POST\",status=\"200\"} 2\n"
        ));
        assert!(text.contains(
            "toolforge_http_request_duration_seconds_bucket{route=\"/mcp\",le=\"0.05\"} 1\n"
        ));
        assert!(text.contains(
            "toolforge_http_request_duration_seconds_bucket{route=\"/mcp\",le=\"+Inf\"} 2\n"
        ));
        assert!(text.contains(
            "toolforge_tool_calls_total{server=\"srv\",tool=\"say \\\"hi\\\"\\n\",outcome=\"error\"} 1\n"
        ));
        assert!(text.contains("toolforge_errors_total{kind=\"tool\"} 1\n"));
        assert!(text.contains("toolforge_catalog_cache_total{result=\"hit\"} 5\n"));
        assert!(text.contains("toolforge_sessions 3\n"));
        assert!(text.contains("toolforge_legacy_sse_sessions 2\n"));
        assert!(text.contains("toolforge_quarantined_tools 2\n"));
    }

    #[test]
    fn label_sets_past_the_cap_are_counted_under_other() {
        let m = Metrics::new();
        for i in 0..MAX_SERIES + 10 {
            m.tool_call("s", &format!("t{i}"), true, Duration::ZERO);
        }
        let calls = m.tool_calls.snapshot();
        assert_eq!(calls.len(), MAX_SERIES + 1);
        let other = calls.iter().find(|(k, _)| k[0] == OTHER).map(|(_, n)| *n);
        assert_eq!(other, Some(10));
    }

    #[test]
    fn a_label_set_finds_its_series_among_many() {
        // Looked up by borrowed labels, a series must be found wherever the map keeps it: the
        // borrowed order has to be the stored keys' own.
        let family: Family<u64> = Family::new();
        let sets: Vec<Vec<String>> = (0..300_u32)
            .map(|i| {
                let n = 1 + (i % 3) as usize;
                (0..n)
                    .map(|j| format!("{}", i.wrapping_mul(7919).wrapping_add(j as u32) % 97))
                    .collect()
            })
            .collect();
        for _ in 0..2 {
            for set in &sets {
                let labels: Vec<&str> = set.iter().map(String::as_str).collect();
                family.update(&labels, |n| *n += 1);
            }
        }
        let snapshot = family.snapshot();
        let mut distinct = sets.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(snapshot.len(), distinct.len(), "one series per label set");
        for (key, n) in snapshot {
            let times = sets.iter().filter(|s| **s == key).count() as u64;
            assert_eq!(n, 2 * times, "{key:?}");
        }
        // The update's borrowed lookup finds each (not only the owned entry after it).
        let series = family.series.lock();
        for set in &sets {
            let labels: Vec<&str> = set.iter().map(String::as_str).collect();
            let labels: &[&str] = &labels;
            assert!(series.get(&labels as &dyn LabelSet).is_some(), "{set:?}");
        }
        drop(series);
        // A prefix is another label set.
        family.update(&["a"], |n| *n += 1);
        family.update(&["a", ""], |n| *n += 1);
        let a = family.snapshot();
        assert!(a.iter().any(|(k, n)| k == &["a"] && *n == 1));
        assert!(a.iter().any(|(k, n)| k == &["a", ""] && *n == 1));
    }
}

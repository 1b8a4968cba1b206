//! Learned pins: the tools a principal called in its recent runs, offered in its next first
//! offer whatever their rank (`AGENT_LEARNED_PINS`, off by default).
//!
//! Kept in memory, bounded: the last [`RECENT_CALLS`] executed, successful calls of each of at
//! most [`MAX_PRINCIPALS`] principals (the one seen longest ago is forgotten first). Seeded at
//! start-up from the trace ([`LearnedPins::seed`] reads its `tool_call` records), then fed by
//! every executed call. Dry runs never feed it. A pin names the tool and how often it was
//! called, which the offer's explanation quotes.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use toolforge_select::ToolId;
use toolforge_select::pins::Pin;

use crate::trace::{RecordKind, TraceRecord, reads_schema};

/// Calls remembered per principal.
pub const RECENT_CALLS: usize = 100;
/// Principals remembered.
pub const MAX_PRINCIPALS: usize = 10_000;

#[derive(Debug, Default)]
struct Recent {
    calls: VecDeque<ToolId>,
    /// When it was last fed (a counter), to forget the stalest principal first.
    seen: u64,
}

/// The recent calls of each principal.
#[derive(Debug, Default)]
pub struct LearnedPins {
    inner: Mutex<(HashMap<String, Recent>, u64)>,
}

impl LearnedPins {
    /// Remembers an executed, successful call of `tool` by `principal`.
    pub fn record(&self, principal: &str, tool: ToolId) {
        let mut guard = self.inner.lock();
        let (map, clock) = &mut *guard;
        *clock += 1;
        if !map.contains_key(principal) && map.len() >= MAX_PRINCIPALS {
            let stalest = map
                .iter()
                .min_by_key(|(_, r)| r.seen)
                .map(|(p, _)| p.clone());
            if let Some(p) = stalest {
                map.remove(&p);
            }
        }
        let recent = map.entry(principal.to_owned()).or_default();
        recent.seen = *clock;
        if recent.calls.len() == RECENT_CALLS {
            recent.calls.pop_front();
        }
        recent.calls.push_back(tool);
    }

    /// At most `max` pins for `principal`: its most called tools, the most recent first among
    /// equals.
    #[must_use]
    pub fn pins(&self, principal: &str, max: usize) -> Vec<Pin> {
        if max == 0 {
            return Vec::new();
        }
        let guard = self.inner.lock();
        let Some(recent) = guard.0.get(principal) else {
            return Vec::new();
        };
        // (calls, last position) per tool.
        let mut counts: HashMap<&ToolId, (u32, usize)> = HashMap::new();
        for (i, tool) in recent.calls.iter().enumerate() {
            let entry = counts.entry(tool).or_insert((0, i));
            entry.0 += 1;
            entry.1 = i;
        }
        let mut ranked: Vec<(&ToolId, (u32, usize))> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(b.1.1.cmp(&a.1.1)));
        ranked
            .into_iter()
            .take(max)
            .map(|(tool, (calls, _))| Pin::learned(tool.clone(), calls))
            .collect()
    }

    /// Feeds the executed, successful tool calls of trace lines (oldest first; lines that are
    /// not such records of a schema this build reads are skipped). Returns how many it fed.
    pub fn seed<'a>(&self, lines: impl IntoIterator<Item = &'a str>) -> usize {
        let mut fed = 0;
        for line in lines {
            let Ok(record) = serde_json::from_str::<TraceRecord>(line) else {
                continue;
            };
            let called = record.kind == RecordKind::ToolCall
                && record.executed
                && record.success
                && !record.dry_run
                && reads_schema(&record.schema_version);
            if let (true, Some(server)) = (called, record.server.as_deref()) {
                self.record(&record.principal, ToolId::new(server, &record.tool));
                fed += 1;
            }
        }
        fed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolforge_select::pins::PinSource;

    fn id(s: &str) -> ToolId {
        ToolId::parse(s).unwrap()
    }

    #[test]
    fn the_most_called_come_first_then_the_most_recent() {
        let learned = LearnedPins::default();
        for t in ["a/x", "a/y", "a/x", "a/z", "a/y", "a/w"] {
            learned.record("alice", id(t));
        }
        learned.record("bob", id("b/q"));
        let pins = learned.pins("alice", 3);
        let got: Vec<(String, PinSource)> = pins
            .iter()
            .map(|p| (p.pattern.to_string(), p.source))
            .collect();
        assert_eq!(
            got,
            [
                ("a/y".to_owned(), PinSource::Learned { calls: 2 }),
                ("a/x".to_owned(), PinSource::Learned { calls: 2 }),
                ("a/w".to_owned(), PinSource::Learned { calls: 1 }),
            ]
        );
        assert!(learned.pins("alice", 0).is_empty());
        assert!(learned.pins("carol", 5).is_empty());
        assert_eq!(learned.pins("bob", 5).len(), 1);
    }

    #[test]
    fn memory_is_bounded_per_principal_and_in_principals() {
        let learned = LearnedPins::default();
        for i in 0..RECENT_CALLS + 10 {
            learned.record("p", id(&format!("s/t{i}")));
        }
        let pins = learned.pins("p", usize::MAX);
        assert_eq!(pins.len(), RECENT_CALLS);
        assert!(!pins.iter().any(|p| p.pattern.to_string() == "s/t0"));
        for i in 0..=MAX_PRINCIPALS {
            learned.record(&format!("u{i}"), id("s/t"));
        }
        assert!(
            learned.pins("p", 1).is_empty(),
            "the stalest principal went first"
        );
        assert_eq!(learned.pins(&format!("u{MAX_PRINCIPALS}"), 1).len(), 1);
    }

    #[test]
    fn seeding_reads_executed_successful_calls_only() {
        let line = |kind: &str, executed: bool, success: bool, dry: bool| {
            serde_json::json!({
                "schema_version": "1", "kind": kind, "timestamp": "2026-01-01T00:00:00.000Z",
                "session_id": "s", "step": 1, "server": "github", "tool": "list_commits",
                "arguments_hash": "", "latency_ms": 1.0, "success": success,
                "executed": executed, "dry_run": dry, "tokens_in": 1, "tokens_out": 1,
                "cost_usd": 0.0, "selection_rule": null, "alternatives": [], "attempt": 1,
                "retries": 0, "retry_reason": null, "error": null, "corrective_retry": false,
                "principal": "alice"
            })
            .to_string()
        };
        let lines = [
            line("tool_call", true, true, false),
            line("tool_call", true, false, false),
            line("tool_call", false, true, true),
            line("model_call", false, true, false),
            "not json".to_owned(),
        ];
        let learned = LearnedPins::default();
        assert_eq!(learned.seed(lines.iter().map(String::as_str)), 1);
        assert_eq!(
            learned.pins("alice", 5)[0].source,
            PinSource::Learned { calls: 1 }
        );
    }
}

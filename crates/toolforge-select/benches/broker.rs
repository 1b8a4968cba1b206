//! Broker selection over 10,000 tools and 50 rules (target: <= 1 ms on a 2-core machine).
//!
//! Baseline in the same run: a deep clone of the 10,000 tools, what the first broker paid on
//! every call (it cloned each selected tool). Report figures as ratios to it, since the shared
//! machine's load moves absolute times. Measured:
//! - `local_broker_select_*`: `LocalBroker::select`, the registry path (per-rule match sets
//!   precomputed at registration / rule reload), unbounded and with a 40,000-token budget;
//! - `select_pure_*`: the free function, which matches every tool against every applicable rule
//!   on each call;
//! - `local_broker_request_tools_*`: a `request_tools` keyword search (BM25 index cached).

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;

use toolforge_select::Tool;
use toolforge_select::broker::{self, Action, LocalBroker, Match, Rule, Rules};

fn tools() -> Vec<Tool> {
    (0..10_000)
        .map(|i| {
            let def = serde_json::json!({
                "name": format!("{}_{i}", ["read", "write", "build", "git", "search"][i % 5]),
                "description": "a tool", "inputSchema": {"type": "object"}
            });
            let serde_json::Value::Object(def) = def else {
                unreachable!()
            };
            Tool::from_mcp(&format!("srv{}", i % 40), def, &[]).expect("valid tool")
        })
        .collect()
}

fn rules() -> Rules {
    let actions = [Action::Include, Action::Exclude, Action::Summarize];
    Rules {
        rules: (0..50)
            .map(|i| Rule {
                name: format!("r{i}"),
                intent: if i % 2 == 0 {
                    "*".into()
                } else {
                    "code*".into()
                },
                priority: i,
                matcher: Match {
                    tools: vec![format!(
                        "{}_{}*",
                        ["read", "write", "build", "git", "search"][i as usize % 5],
                        i % 10
                    )],
                    servers: vec![format!("srv{}", i % 40)],
                    ..Match::default()
                },
                action: actions[i as usize % 3],
            })
            .collect(),
    }
}

fn bench(c: &mut Criterion) {
    let (tools, rules) = (tools(), rules());
    let shared: Vec<Arc<Tool>> = tools.iter().cloned().map(Arc::new).collect();
    let local = LocalBroker::new(rules.clone());
    local.register(shared.iter().cloned());
    let request = serde_json::json!({"keywords": ["build", "git"], "intent": "search code"});
    let _ = local.request_tools("code_review", &request); // builds the cached index
    c.bench_function("baseline_clone_10k_tools", |b| {
        b.iter(|| black_box(tools.clone()))
    });
    c.bench_function("local_broker_select_10k_tools_50_rules", |b| {
        b.iter(|| local.select(black_box("code_review"), u32::MAX))
    });
    c.bench_function("local_broker_select_10k_tools_50_rules_budget_40k", |b| {
        b.iter(|| local.select(black_box("code_review"), 40_000))
    });
    c.bench_function("select_pure_10k_tools_50_rules", |b| {
        b.iter(|| broker::select(black_box(&shared), &rules, "code_review", u32::MAX))
    });
    c.bench_function("local_broker_request_tools_10k_tools", |b| {
        b.iter(|| local.request_tools(black_box("code_review"), &request))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

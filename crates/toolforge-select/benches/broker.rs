//! Broker selection over 10,000 tools and 50 rules (target: <= 1 ms on a 2-core machine).
//! Baseline in the same run: a plain clone of the 10,000 tools (the floor any selection pays).

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use toolforge_select::Tool;
use toolforge_select::broker::{self, Action, Match, Rule, Rules};

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
    c.bench_function("baseline_clone_10k_tools", |b| {
        b.iter(|| black_box(tools.clone()))
    });
    c.bench_function("select_10k_tools_50_rules", |b| {
        b.iter(|| broker::select(black_box(&tools), &rules, "code_review", u32::MAX))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

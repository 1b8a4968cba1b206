//! One policy decision (a `call` of a tool with arguments, against a policy set of a few
//! permits and forbids). Target: under 10 µs per decision.

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolforge_policy::{Action, Annotations, Policies, Request, Target, ToolRef};

const POLICY: &str = r#"
@id("everyone-lists") permit(principal, action in [Action::"list", Action::"search"], resource);
@id("read-only") permit(principal, action == Action::"call", resource is Tool) when { resource.annotations.readOnly };
@id("ops") permit(principal, action == Action::"call", resource) when { principal in [User::"alice", User::"ops-bot"] };
@id("no-destructive") forbid(principal, action == Action::"call", resource is Tool) when { resource.annotations.destructive && !(resource.tags.contains("safe")) };
@id("no-etc") forbid(principal, action == Action::"call", resource) when { context.arguments has path && context.arguments.path like "/etc/*" };
"#;

fn bench(c: &mut Criterion) {
    let policies = Policies::parse(POLICY).unwrap();
    let tags = vec!["files".to_owned(), "read-only".to_owned()];
    let arguments = json!({"path": "/home/alice/notes.md", "limit": 100});
    let annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    c.bench_function("decide call with arguments", |b| {
        b.iter(|| {
            policies.decide(&Request {
                principal: "bob",
                action: Action::Call,
                target: Target::Tool(ToolRef {
                    server: "filesystem",
                    name: "read_text_file",
                    tags: &tags,
                    annotations,
                }),
                arguments: Some(&arguments),
            })
        });
    });
    c.bench_function("decide list", |b| {
        b.iter(|| {
            policies.decide(&Request {
                principal: "bob",
                action: Action::List,
                target: Target::Tool(ToolRef {
                    server: "filesystem",
                    name: "read_text_file",
                    tags: &tags,
                    annotations,
                }),
                arguments: None,
            })
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

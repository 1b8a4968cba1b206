//! The secrets guard on what a proxied call carries: a short argument, a 10 KB tool result
//! without secrets (the common case: every string is read before it reaches the client), and
//! the same result with two secrets in it (found and redacted); and the poisoning scan of
//! the reference catalog's 64 tool definitions (every string of each, as a listing admits
//! them).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolforge_guard::{redact_value, scan_text, scan_tool};

/// About 10 KB of what tools return: prose, paths, identifiers, hashes, numbers.
fn result_text() -> String {
    let line = "commit 3f786850e387550fdab836ed7e6dc881de23001b touched \
                /srv/app/src/handlers/user_profile.rs (+42 -7): the profile page now \
                shows the account's created_at date and the last 5 logins, 2026-11-28.\n";
    line.repeat(10_240 / line.len() + 1)
}

fn bench(c: &mut Criterion) {
    c.bench_function("scan a short argument", |b| {
        b.iter(|| scan_text(black_box("hello, world")));
    });
    let clean = result_text();
    c.bench_function("scan a 10 KB result without secrets", |b| {
        b.iter(|| scan_text(black_box(&clean)));
    });
    let leaky = format!(
        "{clean}deploy with AKIAIOSFODNN7EXAMPLE and token ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
    );
    let result: Value = json!({"content": [{"type": "text", "text": leaky}]});
    c.bench_function("redact a 10 KB result with two secrets", |b| {
        b.iter(|| redact_value(&mut black_box(result.clone())));
    });
    let catalog: Value =
        serde_json::from_str(include_str!("../../../evals/catalogs/reference.json")).unwrap();
    let tools: Vec<&Value> = catalog["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["tools"].as_array().into_iter().flatten())
        .collect();
    let others = ["send_message", "list_chats", "read_file"];
    c.bench_function(
        "scan the 64 reference tool definitions for poisoning",
        |b| {
            b.iter(|| {
                for tool in &tools {
                    black_box(scan_tool(black_box(tool), &others));
                }
            });
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! One selector decision with cached embeddings and validators (target: <= 20 µs).
//!
//! A three-member overlap group; the worst ordinary path, where explicit-mention abstains, both
//! schemas accept the arguments (argument-type narrows to two), the session has no call in the
//! group, and cosine similarity over 384-dimension vectors decides. Baseline in the same run:
//! cloning the group's three tool ids, the floor any decision that names its candidates pays.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolforge_select::ToolId;
use toolforge_select::selector::{Candidate, Context, select};

fn vector(seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    let v: Vec<f32> = (0..384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 1000) as f32 / 1000.0 - 0.5
        })
        .collect();
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.into_iter().map(|a| a / norm).collect()
}

fn bench(c: &mut Criterion) {
    let path =
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let strict = json!({"type": "object", "properties": {"owner": {"type": "string"}}, "required": ["owner"]});
    let validators = [
        jsonschema::validator_for(&path).expect("schema"),
        jsonschema::validator_for(&path).expect("schema"),
        jsonschema::validator_for(&strict).expect("schema"),
    ];
    let ids = [
        ToolId::new("filesystem", "read_file"),
        ToolId::new("docs", "read_file"),
        ToolId::new("github", "read_file"),
    ];
    let embeddings = [vector(1), vector(2), vector(3)];
    let mut prompt = embeddings[1].clone();
    for (p, e) in prompt.iter_mut().zip(&embeddings[0]) {
        *p = 0.8 * *p + 0.2 * e;
    }
    let aliases = [vec!["fs".to_owned()], vec![], vec!["gh".to_owned()]];
    let candidates: Vec<Candidate<'_>> = (0..3)
        .map(|i| Candidate {
            id: ids[i].clone(),
            aliases: &aliases[i],
            validator: Some(&validators[i]),
            embedding: Some(&embeddings[i]),
        })
        .collect();
    let arguments = json!({"path": "notes/todo.md"});
    let session = [
        ToolId::new("memory", "search_nodes"),
        ToolId::new("git", "git_log"),
    ];
    let ctx = Context {
        prompt: "open the todo list in my notes and tell me what is left",
        arguments: &arguments,
        session: &session,
        group: &ids,
        prompt_embedding: Some(&prompt),
    };
    let decided = select(&ctx, &candidates).expect("a decision");
    assert_eq!(
        decided.rule, "cosine-similarity",
        "the bench measures the path it claims"
    );

    c.bench_function("baseline_clone_group_ids", |b| {
        b.iter(|| black_box(ids.clone()))
    });
    c.bench_function("selector_decision_cached_embeddings", |b| {
        b.iter(|| select(black_box(&ctx), black_box(&candidates)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Ranking one query over 10,000 tools (target: <= 2 ms on a 2-core machine).
//!
//! Measured: BM25 top-10 (`Bm25Index::search`), and the hybrid step (`fuse` + `ranking`) given
//! BM25 scores and the query's cosine similarities (384-dimension dot products over 10,000
//! precomputed tool vectors, as the broker holds them). Baseline in the same run: a plain
//! lower-cased substring scan of every description for the query's words, the floor any
//! keyword search pays.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use toolforge_select::rank::{self, Bm25Index, Document};

const WORDS: &[&str] = &[
    "read",
    "write",
    "file",
    "directory",
    "search",
    "query",
    "database",
    "table",
    "row",
    "email",
    "send",
    "message",
    "calendar",
    "event",
    "weather",
    "forecast",
    "city",
    "price",
    "stock",
    "crypto",
    "issue",
    "pull",
    "request",
    "branch",
    "commit",
    "image",
    "resize",
    "convert",
    "translate",
    "text",
    "summary",
    "page",
    "browser",
    "click",
    "screenshot",
    "map",
    "route",
    "flight",
    "hotel",
    "book",
    "music",
    "play",
    "video",
    "transcript",
    "note",
    "task",
    "list",
    "create",
    "delete",
    "update",
    "fetch",
    "url",
    "http",
    "json",
    "schema",
    "user",
    "account",
];

/// A deterministic pseudo-random word stream (LCG), so every run indexes the same catalog.
struct Words(u64);

impl Words {
    fn next(&mut self) -> &'static str {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        WORDS[(self.0 >> 33) as usize % WORDS.len()]
    }
}

fn docs() -> Vec<Document> {
    let mut w = Words(7);
    (0..10_000)
        .map(|i| Document {
            name: format!("{}_{}_{i}", w.next(), w.next()),
            description: (0..14).map(|_| w.next()).collect::<Vec<_>>().join(" "),
            tags: vec![w.next().to_owned()],
            params: vec![w.next().to_owned(), format!("{}Id", w.next())],
            server_description: String::new(),
        })
        .collect()
}

fn vectors(n: usize, dims: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            (0..dims)
                .map(|_| {
                    s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                })
                .collect()
        })
        .collect()
}

const QUERY: &str = "send an email about the calendar event to the user";

fn bench(c: &mut Criterion) {
    let docs = docs();
    let index = Bm25Index::new(&docs);
    let lower: Vec<String> = docs.iter().map(|d| d.description.to_lowercase()).collect();
    let tool_vecs = vectors(docs.len(), 384, 11);
    let query_vec = vectors(1, 384, 13).remove(0);
    let mut g = c.benchmark_group("rank_10k_tools");
    g.bench_function("baseline_substring_scan", |b| {
        let words: Vec<String> = QUERY.split(' ').map(str::to_owned).collect();
        b.iter(|| {
            let hits = lower
                .iter()
                .filter(|d| words.iter().any(|w| d.contains(w.as_str())))
                .count();
            black_box(hits)
        });
    });
    g.bench_function("bm25_top10", |b| {
        b.iter(|| black_box(index.search(black_box(QUERY), 10)));
    });
    g.bench_function("hybrid_top10", |b| {
        b.iter(|| {
            let lexical = index.scores(black_box(QUERY));
            let dense = rank::dense_scores(&query_vec, &tool_vecs);
            let scores = rank::fuse(&lexical, &dense);
            black_box(rank::top_k(&scores, 10))
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! `toolforge eval retrieval`: ranks every tool of a tool set for each labelled query, writes
//! `{"id", "ranked": [...]}` lines and prints recall@1, recall@5, nDCG@10 and MRR as defined by
//! `evals/retrieval/README.md` (a query needs every gold group; any member satisfies a group).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Deserialize;
use toolforge_llm::embed::{HashingEmbedder, cosine};
use toolforge_select::rank::{Bm25Index, Document};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Ranker {
    /// BM25 over name, description and parameter names.
    Bm25,
    /// Cosine similarity of hashing embeddings.
    Hashing,
    /// Min-max normalised BM25 fused 50/50 with hashing-embedding similarity.
    Hybrid,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tools, one JSON object a line: {"server","name","description","input_schema"}.
    #[arg(long)]
    pub tools: PathBuf,
    /// Queries, one JSON object a line: {"id","query","gold","gold_groups"}.
    #[arg(long)]
    pub queries: PathBuf,
    /// Where to write the rankings (JSON lines).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value_t = Ranker::Bm25)]
    pub ranker: Ranker,
}

#[derive(Debug, Deserialize)]
struct ToolLine {
    server: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    input_schema: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct QueryLine {
    id: serde_json::Value,
    query: String,
    #[serde(default)]
    gold: Vec<String>,
    #[serde(default)]
    gold_groups: Vec<Vec<String>>,
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &PathBuf) -> anyhow::Result<Vec<T>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: bad JSON line", path.display(), i + 1))
        })
        .collect()
}

fn minmax(v: &[f32]) -> Vec<f32> {
    let lo = v.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![0.0; v.len()];
    }
    v.iter().map(|x| (x - lo) / (hi - lo)).collect()
}

/// Per-query metrics: (recall@1, recall@5, nDCG@10, MRR).
fn metrics(ranked: &[String], groups: &[Vec<String>]) -> (f64, f64, f64, f64) {
    if groups.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let group_rank = |g: &Vec<String>| ranked.iter().position(|r| g.contains(r));
    let ranks: Vec<Option<usize>> = groups.iter().map(group_rank).collect();
    let n = groups.len() as f64;
    let recall = |k: usize| {
        ranks
            .iter()
            .filter(|r| matches!(r, Some(p) if *p < k))
            .count() as f64
            / n
    };
    let dcg: f64 = ranks
        .iter()
        .flatten()
        .filter(|p| **p < 10)
        .map(|p| 1.0 / ((*p as f64) + 2.0).log2())
        .sum();
    let ideal: f64 = (0..groups.len().min(10))
        .map(|i| 1.0 / ((i as f64) + 2.0).log2())
        .sum();
    let mrr = ranks
        .iter()
        .flatten()
        .min()
        .map_or(0.0, |p| 1.0 / (*p as f64 + 1.0));
    (recall(1), recall(5), dcg / ideal, mrr)
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let tools: Vec<ToolLine> = read_jsonl(&args.tools)?;
    let queries: Vec<QueryLine> = read_jsonl(&args.queries)?;
    anyhow::ensure!(!tools.is_empty(), "{} has no tools", args.tools.display());
    let ids: Vec<String> = tools
        .iter()
        .map(|t| format!("{}/{}", t.server, t.name))
        .collect();
    let docs: Vec<Document> = tools
        .iter()
        .map(|t| Document {
            name: t.name.clone(),
            description: t.description.clone(),
            tags: Vec::new(),
            params: t
                .input_schema
                .get("properties")
                .and_then(|p| p.as_object())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        })
        .collect();
    let bm25 = Bm25Index::new(&docs);
    let hasher = HashingEmbedder::default();
    let tool_vecs: Vec<Vec<f32>> = docs
        .iter()
        .map(|d| hasher.embed_one(&format!("{} {}", d.name, d.description)))
        .collect();

    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&args.out)
            .with_context(|| format!("creating {}", args.out.display()))?,
    );
    let mut sums = (0.0, 0.0, 0.0, 0.0);
    for q in &queries {
        let dense = || {
            let qv = hasher.embed_one(&q.query);
            tool_vecs
                .iter()
                .map(|v| cosine(&qv, v))
                .collect::<Vec<f32>>()
        };
        let scores: Vec<f32> = match args.ranker {
            Ranker::Bm25 => bm25.scores(&q.query),
            Ranker::Hashing => dense(),
            Ranker::Hybrid => {
                let b = minmax(&bm25.scores(&q.query));
                let d = minmax(&dense());
                b.iter().zip(&d).map(|(x, y)| 0.5 * x + 0.5 * y).collect()
            }
        };
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let ranked: Vec<String> = order.iter().take(50).map(|&i| ids[i].clone()).collect();
        let groups = if q.gold_groups.is_empty() {
            q.gold.iter().map(|g| vec![g.clone()]).collect()
        } else {
            q.gold_groups.clone()
        };
        let m = metrics(&ranked, &groups);
        sums = (sums.0 + m.0, sums.1 + m.1, sums.2 + m.2, sums.3 + m.3);
        serde_json::to_writer(&mut out, &serde_json::json!({"id": q.id, "ranked": ranked}))?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    let n = queries.len().max(1) as f64;
    println!(
        "queries={} recall@1={:.3} recall@5={:.3} ndcg@10={:.3} mrr={:.3}",
        queries.len(),
        sums.0 / n,
        sums.1 / n,
        sums.2 / n,
        sums.3 / n
    );
    Ok(ExitCode::SUCCESS)
}

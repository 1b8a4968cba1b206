//! `toolforge eval retrieval`: ranks every tool of a tool set for each labelled query, writes
//! `{"id", "ranked": [...]}` lines and prints recall@1, recall@5, nDCG@10 and MRR as defined by
//! `evals/retrieval/README.md` (a query needs every gold group; any member satisfies a group).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use serde::Deserialize;
use toolforge_llm::embed::{Embedder, cosine};
use toolforge_select::rank::{self, Bm25Index, Document};

use crate::config::Config;
use crate::embedder::{self, Backend};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Ranker {
    /// BM25 over name, description and parameter names.
    Bm25,
    /// Cosine similarity of hashing embeddings only.
    Hashing,
    /// Cosine similarity of the local model's embeddings only (EMBED_MODEL_DIR).
    Local,
    /// What toolforge ranks with: BM25 fused with the EMBEDDER_BACKEND embedder (BM25 alone
    /// when none is configured).
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
    /// Rankers to measure (comma-separated). With several, each writes `OUT` with `-RANKER`
    /// added to the file stem (out.jsonl -> out-bm25.jsonl), and embeddings are shared.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "hybrid")]
    pub ranker: Vec<Ranker>,
}

impl Ranker {
    fn name(self) -> &'static str {
        match self {
            Self::Bm25 => "bm25",
            Self::Hashing => "hashing",
            Self::Local => "local",
            Self::Hybrid => "hybrid",
        }
    }
}

/// One embedder's vectors: (tools, queries, servers), in file order.
type Vectors = (Vec<Vec<f32>>, Vec<Vec<f32>>, Vec<Vec<f32>>);

/// `out` for one ranker, or `out` with `-RANKER` added to its stem when several run.
fn out_path(out: &Path, ranker: Ranker, several: bool) -> PathBuf {
    if !several {
        return out.to_path_buf();
    }
    let stem = out
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match out.extension() {
        Some(ext) => format!("{stem}-{}.{}", ranker.name(), ext.to_string_lossy()),
        None => format!("{stem}-{}", ranker.name()),
    };
    out.with_file_name(name)
}

#[derive(Debug, Deserialize)]
struct ToolLine {
    server: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    input_schema: serde_json::Value,
    /// What the tool's server is for (LiveMCPBench has it; indexed with the tool).
    #[serde(default)]
    server_description: Option<String>,
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

pub async fn run(args: Args, config: &Config) -> anyhow::Result<ExitCode> {
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
            server_description: t.server_description.clone().unwrap_or_default(),
        })
        .collect();
    let bm25 = Bm25Index::new(&docs);
    // The servers, indexed beside their tools (name and description), in first-seen order.
    let mut server_docs: Vec<Document> = Vec::new();
    let mut server_of: Vec<usize> = Vec::with_capacity(tools.len());
    for t in &tools {
        let k = match server_docs.iter().position(|d| d.name == t.server) {
            Some(k) => k,
            None => {
                server_docs.push(Document {
                    name: t.server.clone(),
                    description: t.server_description.clone().unwrap_or_default(),
                    ..Document::default()
                });
                server_docs.len() - 1
            }
        };
        server_of.push(k);
    }
    let server_bm25 = Bm25Index::new(&server_docs);
    let mut rankers = args.ranker.clone();
    rankers.dedup();
    anyhow::ensure!(!rankers.is_empty(), "--ranker names no ranker");
    let several = rankers.len() > 1;
    let hybrid_backend = config.embedder.backend_or_none();

    // Each embedder needed embeds the tools, then all queries, once (it batches internally).
    let mut vectors: HashMap<Backend, Vectors> = HashMap::new();
    for &r in &rankers {
        let backend = match r {
            Ranker::Bm25 => continue,
            Ranker::Hashing => Backend::Hashing,
            Ranker::Local => Backend::Local,
            Ranker::Hybrid => hybrid_backend,
        };
        if vectors.contains_key(&backend) {
            continue;
        }
        let Some(e): Option<Arc<dyn Embedder>> = embedder::build(backend, &config.embedder)? else {
            continue;
        };
        let texts: Vec<String> = docs.iter().map(rank::embedding_text).collect();
        let tool_vecs = e.embed(&texts).await.context("embedding the tools")?;
        let mut texts: Vec<String> = queries.iter().map(|q| q.query.clone()).collect();
        for q in &queries {
            texts.extend(rank::query_parts(&q.query).into_iter().map(str::to_owned));
        }
        let query_vecs = e.embed(&texts).await.context("embedding the queries")?;
        let texts: Vec<String> = server_docs.iter().map(rank::embedding_text).collect();
        let server_vecs = e.embed(&texts).await.context("embedding the servers")?;
        vectors.insert(backend, (tool_vecs, query_vecs, server_vecs));
    }
    // Each query's vectors as `rank::hybrid_scores` takes them: the whole query, then its parts.
    let mut part_index: HashMap<&str, usize> = HashMap::new();
    let mut next = queries.len();
    for q in &queries {
        for p in rank::query_parts(&q.query) {
            part_index.entry(p).or_insert(next);
            next += 1;
        }
    }
    let query_vectors = |qs: &[Vec<f32>], qi: usize| -> Vec<Vec<f32>> {
        std::iter::once(qs[qi].clone())
            .chain(
                rank::query_parts(&queries[qi].query)
                    .into_iter()
                    .map(|p| qs[part_index[p]].clone()),
            )
            .collect()
    };

    for &r in &rankers {
        let backend = match r {
            Ranker::Bm25 => Backend::None,
            Ranker::Hashing => Backend::Hashing,
            Ranker::Local => Backend::Local,
            Ranker::Hybrid => hybrid_backend,
        };
        let path = out_path(&args.out, r, several);
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        let mut sums = (0.0, 0.0, 0.0, 0.0);
        for (qi, q) in queries.iter().enumerate() {
            let mut servers = rank::Servers {
                index: &server_bm25,
                of_doc: &server_of,
                vectors: None,
            };
            let scores: Vec<f32> = match (r, vectors.get(&backend)) {
                (Ranker::Hybrid, Some((tools, qs, server_vecs))) => {
                    let qv = query_vectors(qs, qi);
                    servers.vectors = Some(server_vecs);
                    rank::hybrid_scores(&bm25, &q.query, Some((tools, &qv)), Some(&servers))
                }
                (Ranker::Hybrid, None) => {
                    rank::hybrid_scores(&bm25, &q.query, None, Some(&servers))
                }
                (Ranker::Bm25, _) | (_, None) => bm25.scores(&q.query),
                (_, Some((tools, qs, _))) => tools.iter().map(|v| cosine(&qs[qi], v)).collect(),
            };
            let ranked: Vec<String> = rank::ranking(&scores)
                .into_iter()
                .take(50)
                .map(|i| ids[i].clone())
                .collect();
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
        let label = match (r, backend) {
            (Ranker::Hybrid, Backend::None) => {
                "hybrid(bm25 only: EMBEDDER_BACKEND unset)".to_owned()
            }
            (Ranker::Hybrid, b) => format!("hybrid(bm25+{})", format!("{b:?}").to_lowercase()),
            _ => r.name().to_owned(),
        };
        println!(
            "ranker={label} queries={} recall@1={:.3} recall@5={:.3} ndcg@10={:.3} mrr={:.3}",
            queries.len(),
            sums.0 / n,
            sums.1 / n,
            sums.2 / n,
            sums.3 / n
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn metrics_follow_the_data_readme() {
        let ranked = v(&["a", "b", "c", "d", "e", "f"]);
        // (gold groups, recall@1, recall@5, nDCG@10, MRR)
        type Case = (Vec<Vec<String>>, f64, f64, f64, f64);
        let cases: &[Case] = &[
            (vec![v(&["a"])], 1.0, 1.0, 1.0, 1.0),
            (vec![v(&["c"])], 0.0, 1.0, 0.5, 1.0 / 3.0),
            // any member satisfies a group
            (vec![v(&["x", "b"])], 0.0, 1.0, 1.0 / 3f64.log2(), 0.5),
            // every group is needed; one found at rank 6 counts for nDCG, not recall@5
            (
                vec![v(&["a"]), v(&["f"])],
                0.5,
                0.5,
                (1.0 + 1.0 / 7f64.log2()) / (1.0 + 1.0 / 3f64.log2()),
                1.0,
            ),
            (vec![v(&["zz"])], 0.0, 0.0, 0.0, 0.0),
        ];
        for (groups, r1, r5, ndcg, mrr) in cases {
            let (a, b, c, d) = metrics(&ranked, groups);
            for (got, want, what) in [
                (a, r1, "r@1"),
                (b, r5, "r@5"),
                (c, ndcg, "ndcg"),
                (d, mrr, "mrr"),
            ] {
                assert!(
                    (got - want).abs() < 1e-9,
                    "{groups:?} {what}: {got} != {want}"
                );
            }
        }
    }

    #[test]
    fn several_rankers_get_their_own_out_files() {
        let out = Path::new("runs/out.jsonl");
        assert_eq!(out_path(out, Ranker::Bm25, false), out);
        assert_eq!(
            out_path(out, Ranker::Bm25, true),
            Path::new("runs/out-bm25.jsonl")
        );
        assert_eq!(
            out_path(Path::new("o"), Ranker::Local, true),
            Path::new("o-local")
        );
    }
}

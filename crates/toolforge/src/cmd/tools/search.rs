//! `toolforge tools search`: ranks a catalog snapshot's tools for a query with BM25 over name,
//! description, tags and parameter names, fused with embedding similarity when
//! `EMBEDDER_BACKEND` names an embedder (`local`: all-MiniLM-L6-v2 in-process). Searching the
//! live pool (`--config`) comes later.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use toolforge_llm::embed::cosine;
use toolforge_select::Catalog;
use toolforge_select::rank::{self, Bm25Index, Document};

use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What the tool should do, in plain words.
    pub query: String,
    /// A catalog snapshot (JSON, as written by `toolforge tools snapshot`).
    #[arg(long)]
    pub catalog: PathBuf,
    /// How many tools to show.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, config: &Config) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.catalog)
        .with_context(|| format!("reading catalog snapshot {}", args.catalog.display()))?;
    let catalog = Catalog::from_snapshot_json(&text)
        .with_context(|| format!("parsing catalog snapshot {}", args.catalog.display()))?;
    let tools: Vec<_> = catalog.tools().collect();
    let index = Bm25Index::from_tools(&tools);
    let hits: Vec<(usize, f32)> = match crate::embedder::from_settings(&config.embedder)? {
        None => index.search(&args.query, args.limit),
        Some(embedder) => {
            let mut texts: Vec<String> = tools
                .iter()
                .map(|t| rank::embedding_text(&Document::from_tool(t)))
                .collect();
            let parts = rank::query_parts(&args.query);
            texts.push(args.query.clone());
            texts.extend(parts.iter().map(|p| (*p).to_owned()));
            let mut vecs = embedder
                .embed(&texts)
                .await
                .context("embedding tools and query")?;
            anyhow::ensure!(
                vecs.len() == texts.len(),
                "embedder returned too few vectors"
            );
            let query_vecs = vecs.split_off(tools.len());
            let fused = |text: &str, qv: &[f32]| {
                let dense: Vec<f32> = vecs.iter().map(|v| cosine(qv, v)).collect();
                rank::fuse(&index.scores(text), &dense)
            };
            let whole = fused(&args.query, &query_vecs[0]);
            let part_scores: Vec<Vec<f32>> = parts
                .iter()
                .zip(&query_vecs[1..])
                .map(|(p, qv)| fused(p, qv))
                .collect();
            let scores = rank::combine_parts(&whole, &part_scores);
            rank::top_k(&scores, args.limit)
                .into_iter()
                .map(|i| (i, scores[i]))
                .collect()
        }
    };
    if args.json {
        let rows: Vec<_> = hits
            .iter()
            .map(|&(i, score)| {
                serde_json::json!({
                    "tool": format!("{}/{}", tools[i].server, tools[i].name),
                    "score": score,
                    "description": tools[i].description,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if hits.is_empty() {
        println!("no tool matches {:?}", args.query);
    } else {
        for &(i, score) in &hits {
            let first_line = tools[i].description.lines().next().unwrap_or("");
            println!(
                "{score:7.3}  {}/{}  {first_line}",
                tools[i].server, tools[i].name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `toolforge tools search`: ranks a catalog snapshot's tools for a query with BM25 over name,
//! description, tags and parameter names. Searching the live pool (`--config`) comes later.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use toolforge_select::Catalog;
use toolforge_select::rank::Bm25Index;

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

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.catalog)
        .with_context(|| format!("reading catalog snapshot {}", args.catalog.display()))?;
    let catalog = Catalog::from_snapshot_json(&text)
        .with_context(|| format!("parsing catalog snapshot {}", args.catalog.display()))?;
    let tools: Vec<_> = catalog.tools().collect();
    let index = Bm25Index::from_tools(&tools);
    let hits = index.search(&args.query, args.limit);
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

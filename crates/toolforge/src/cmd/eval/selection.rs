//! `toolforge eval selection`: grades the five-rule selector against labelled cases
//! (DESIGN §8). Exits 1 below `--min-accuracy`, 2 on bad input.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use toolforge_select::Catalog;
use toolforge_select::grade::{grade, parse_cases};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Catalog snapshot (`toolforge tools snapshot` writes one).
    #[arg(long, value_name = "FILE")]
    pub catalog: PathBuf,
    /// Selection cases, JSON Lines.
    #[arg(long, value_name = "FILE")]
    pub cases: PathBuf,
    /// Fail (exit 1) when accuracy is below this, in [0, 1].
    #[arg(long, value_name = "X")]
    pub min_accuracy: Option<f64>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(x) = args.min_accuracy
        && !(0.0..=1.0).contains(&x)
    {
        anyhow::bail!("--min-accuracy must be between 0 and 1, got {x}");
    }
    let text = std::fs::read_to_string(&args.catalog)
        .with_context(|| format!("cannot read {}", args.catalog.display()))?;
    let catalog = Catalog::from_snapshot_json(&text)
        .with_context(|| format!("invalid catalog snapshot {}", args.catalog.display()))?;
    let text = std::fs::read_to_string(&args.cases)
        .with_context(|| format!("cannot read {}", args.cases.display()))?;
    let cases = parse_cases(&text, &catalog)
        .with_context(|| format!("invalid cases file {}", args.cases.display()))?;
    // The deterministic hashing embedder: grading must not depend on a model download.
    let embedder = toolforge_llm::embed::HashingEmbedder::default();
    let report = grade(&catalog, &cases, &|t| embedder.embed_one(t));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for c in report.cases.iter().filter(|c| !c.pass) {
            println!(
                "FAIL {}: expected {}/{} by {} (alternatives {:?}), got {}/{} by {} (alternatives {:?})",
                c.id,
                c.expected.server,
                c.expected.tool,
                c.expected.selection_rule,
                c.expected.alternatives,
                c.got.server,
                c.got.tool,
                c.got.selection_rule,
                c.got.alternatives
            );
        }
        println!("{:<20} {:>6} {:>6}", "rule", "passed", "total");
        for (rule, t) in &report.by_rule {
            println!("{rule:<20} {:>6} {:>6}", t.passed, t.total);
        }
        println!(
            "accuracy {:.3} ({} of {} cases)",
            report.accuracy, report.passed, report.total
        );
    }
    match args.min_accuracy {
        Some(min) if report.accuracy < min => {
            eprintln!(
                "accuracy {:.3} is below --min-accuracy {min}",
                report.accuracy
            );
            Ok(ExitCode::from(1))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

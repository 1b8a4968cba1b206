//! `toolforge select`: one routing decision ([`Selection::route`]), explained. Handy to see why a
//! call would go to a server before wiring anything.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use toolforge_select::broker::Rules;
use toolforge_select::{Call, Catalog, Limits, Selection, ToolId};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Catalog snapshot (`toolforge tools snapshot` writes one).
    #[arg(long, value_name = "FILE")]
    pub catalog: PathBuf,
    /// The tool the model called, as `server/tool`.
    #[arg(long, value_name = "SERVER/TOOL")]
    pub tool_call: String,
    /// The call's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// Earlier executed calls of the session, oldest first: `server/tool,server/tool`.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub session: Vec<String>,
    /// Print the decision as JSON.
    #[arg(long)]
    pub json: bool,
    /// The user's request.
    pub prompt: String,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.catalog)
        .with_context(|| format!("cannot read {}", args.catalog.display()))?;
    let catalog = Catalog::from_snapshot_json(&text)
        .with_context(|| format!("invalid catalog snapshot {}", args.catalog.display()))?;
    let called = ToolId::parse(&args.tool_call)
        .with_context(|| format!("--tool-call must be server/tool, got {}", args.tool_call))?;
    let arguments: Value = serde_json::from_str(&args.args).context("--args is not JSON")?;
    anyhow::ensure!(arguments.is_object(), "--args must be a JSON object");
    let session = args
        .session
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            ToolId::parse(s.trim())
                .with_context(|| format!("--session entries must be server/tool, got {s}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let selection = Selection::new(catalog, Rules::default(), Limits::default());
    // The deterministic hashing embedder, as grading uses: the same call decides the same way
    // here and in `toolforge eval selection`.
    let embedder = toolforge_llm::embed::HashingEmbedder::default();
    let selection = selection.with_route_embedder(&|t| embedder.embed_one(t));
    let prompt_vector = embedder.embed_one(&args.prompt);
    let call = Call {
        candidates: &[],
        prompt: &args.prompt,
        arguments: &arguments,
        session: &session,
        prompt_vector: Some(&prompt_vector),
    };
    let decision = selection
        .route_tool(&called, &call)
        .with_context(|| format!("{called} is not in the catalog"))?;
    if args.json {
        let out = json!({
            "server": decision.chosen.server,
            "tool": decision.chosen.name,
            "selection_rule": decision.rule,
            "alternatives": decision.alternatives,
            "candidates": decision.candidates.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "trace": decision.trace,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} by {} (alternatives: {})",
            decision.chosen,
            decision.rule,
            if decision.alternatives.is_empty() {
                "none".to_owned()
            } else {
                decision.alternatives.join(", ")
            }
        );
        for t in &decision.trace {
            let evidence = if t.evidence.is_empty() {
                String::new()
            } else {
                format!(": {}", t.evidence)
            };
            println!("  {:<18} {}{evidence}", t.rule, t.outcome);
        }
    }
    Ok(ExitCode::SUCCESS)
}

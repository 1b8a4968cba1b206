//! `toolforge broker select`: seed 004's broker on a catalog, from the command line; and where
//! every command finds its rule file (`--rules FILE`, else `"toolforge": {"broker": {"rules":
//! "FILE"}}` of the servers configuration, relative to that file).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use toolforge_select::Catalog;
use toolforge_select::broker::{Broker, LocalBroker, Rules, intent};

use crate::config::Config;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Select the tools a rule file gives an intent (or a message's detected intent).
    Select(SelectArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["intent", "message"])))]
pub struct SelectArgs {
    /// Rule file, YAML or JSON (go-toolbroker's format loads unchanged).
    #[arg(long, value_name = "FILE")]
    pub rules: PathBuf,
    /// The intent the rules apply to (a name such as `read`, or `*`).
    #[arg(long, value_name = "NAME")]
    pub intent: Option<String>,
    /// A request in plain words: its intent is detected by keyword (`*` when none is found).
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Servers configuration for the live pool (default: $MCP_SERVERS_CONFIG, else
    /// ./mcp.servers.json).
    #[arg(long, value_name = "FILE", conflicts_with = "catalog")]
    pub config: Option<PathBuf>,
    /// A catalog snapshot (as `toolforge tools snapshot` writes) instead of the live pool.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Keep the selection within this many estimated tokens.
    #[arg(long, value_name = "TOKENS")]
    pub budget: Option<u32>,
    /// Print one JSON object: {intent, count, total, rationale, tools, override_block}.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: Command, config: &Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Select(args) => select(args, config).await,
    }
}

/// Reads and validates a rule file (format by extension).
pub fn load_rules(path: &Path) -> anyhow::Result<Rules> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the rule file {}", path.display()))?;
    Rules::from_path_text(&path.to_string_lossy(), &text)
        .with_context(|| format!("invalid rule file {}", path.display()))
}

/// The rules a command runs with: `flag`, else the configuration's
/// `"toolforge": {"broker": {"rules": "FILE"}}` (relative to `config_path`), else none (every
/// tool is kept).
pub fn rules_for(
    flag: Option<&Path>,
    settings: &serde_json::Map<String, Value>,
    config_path: &Path,
) -> anyhow::Result<Rules> {
    if let Some(path) = flag {
        return load_rules(path);
    }
    let Some(broker) = settings.get("broker") else {
        return Ok(Rules::default());
    };
    let file = broker
        .get("rules")
        .and_then(Value::as_str)
        .with_context(|| {
            format!(
                "{}: \"toolforge\".\"broker\" must be {{\"rules\": \"FILE\"}}",
                config_path.display()
            )
        })?;
    let base = config_path.parent().unwrap_or_else(|| Path::new(""));
    load_rules(&base.join(file))
}

async fn select(args: SelectArgs, config: &Config) -> anyhow::Result<ExitCode> {
    let rules = load_rules(&args.rules)?;
    let catalog = match &args.catalog {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Catalog::from_snapshot_json(&text)
                .with_context(|| format!("invalid catalog snapshot {}", path.display()))?
        }
        None => {
            let pool = crate::pool::start(config, args.config.clone()).await?;
            let catalog = pool.catalog();
            pool.shutdown().await;
            catalog
        }
    };
    let intent = match (&args.intent, &args.message) {
        (Some(i), _) => i.trim().to_owned(),
        (None, Some(m)) => intent::detect(m)
            .first()
            .map_or("*", |(name, _)| *name)
            .to_owned(),
        (None, None) => anyhow::bail!("give --intent NAME or --message TEXT"),
    };
    let broker = LocalBroker::new(rules);
    broker.register(catalog.tools().cloned());
    let result = Broker::select(&broker, &intent, args.budget.unwrap_or(u32::MAX));
    if args.json {
        let tools: Vec<Value> = result
            .tools
            .iter()
            .map(|t| {
                json!({
                    "server": t.tool.server,
                    "name": t.tool.name,
                    "description": t.tool.description,
                    "summarized": t.summarized,
                })
            })
            .collect();
        let out = json!({
            "intent": intent,
            "count": result.count,
            "total": result.total,
            "rationale": result.rationale,
            "tools": tools,
            "override_block": result.override_block,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "intent {intent:?}: {} of {} tools",
            result.count, result.total
        );
        for line in &result.rationale {
            println!("  {line}");
        }
        for t in &result.tools {
            let mark = if t.summarized { " (summarized)" } else { "" };
            println!("{}/{}{mark}", t.tool.server, t.tool.name);
        }
        if !result.override_block.is_empty() {
            println!("\n{}", result.override_block);
        }
    }
    Ok(ExitCode::SUCCESS)
}

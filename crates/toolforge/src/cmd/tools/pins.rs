//! `toolforge tools diff [server/tool]` and `toolforge tools approve server/tool FINGERPRINT`:
//! the tools in quarantine (a changed or renamed definition, or poisoning markers), what
//! changed field by field with the fingerprint of the pending definition, and accepting that
//! definition (it becomes the pin). The approval names the fingerprint reviewed, so a server
//! that changes the definition after the review gets nothing approved. Pins live in the SQLite
//! catalog cache (`CATALOG_CACHE_PATH`); a running gateway picks an approval up within seconds.

use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::Value;
use toolforge_mcp::{Approval, PinStore};

use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Only this tool (`server/tool`) or server (`server`).
    #[arg(value_name = "SERVER[/TOOL]")]
    pub target: Option<String>,
    /// Print the changes as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The quarantined tool to accept, as `server/tool`.
    #[arg(value_name = "SERVER/TOOL")]
    pub target: String,
    /// The fingerprint of the definition reviewed, as `toolforge tools diff` prints it (64 hex
    /// digits): only that definition is approved.
    #[arg(value_name = "FINGERPRINT")]
    pub fingerprint: String,
}

/// Whether `text` is a fingerprint as `tools diff` prints it: 64 hex digits.
fn is_fingerprint(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

async fn store(config: &Config) -> anyhow::Result<PinStore> {
    let cache = crate::stores::catalog_cache(config).await?;
    cache.and_then(|c| c.pin_store()).context(
        "tool pins are kept in the SQLite catalog cache, and it is not in use: unset \
         CATALOG_CACHE_BACKEND or set it to sqlite (CATALOG_CACHE_PATH names the file)",
    )
}

fn split(target: &str) -> (&str, Option<&str>) {
    match target.split_once('/') {
        Some((server, tool)) => (server, Some(tool)),
        None => (target, None),
    }
}

fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "(absent)".to_owned(), Value::to_string)
}

pub async fn diff(args: DiffArgs, config: &Config) -> anyhow::Result<ExitCode> {
    let store = store(config).await?;
    let (server, tool) = args.target.as_deref().map_or((None, None), |t| {
        let (s, t) = split(t);
        (Some(s), t)
    });
    let report = store.quarantine_report(server, tool)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    if report.is_empty() {
        println!("No tool is quarantined.");
        return Ok(ExitCode::SUCCESS);
    }
    for r in &report {
        println!(
            "{}/{}: quarantined: {}",
            r["server"].as_str().unwrap_or_default(),
            r["tool"].as_str().unwrap_or_default(),
            r["reason"].as_str().unwrap_or("changed")
        );
        if r["first_seen"] == true {
            println!("  (never approved: every field is new)");
        }
        let fingerprint = r["fingerprint"].as_str().unwrap_or_default();
        println!("  fingerprint {fingerprint}");
        for c in r["changes"].as_array().into_iter().flatten() {
            println!("  {}", c["field"].as_str().unwrap_or_default());
            println!("    - {}", shown(c.get("before").filter(|v| !v.is_null())));
            println!("    + {}", shown(c.get("after").filter(|v| !v.is_null())));
        }
        println!(
            "  accept with: toolforge tools approve {}/{} {fingerprint}",
            r["server"].as_str().unwrap_or_default(),
            r["tool"].as_str().unwrap_or_default()
        );
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn approve(args: ApproveArgs, config: &Config) -> anyhow::Result<ExitCode> {
    let (server, Some(tool)) = split(&args.target) else {
        anyhow::bail!(
            "name the tool as server/tool (e.g. github/create_issue), not \"{}\"",
            args.target
        );
    };
    if !is_fingerprint(&args.fingerprint) {
        anyhow::bail!(
            "\"{}\" is not a fingerprint: name the 64 hex digits `toolforge tools diff {server}/{tool}` \
             prints for the definition you reviewed",
            args.fingerprint
        );
    }
    let store = store(config).await?;
    match store.approve_by_name(server, tool, &args.fingerprint)? {
        Approval::Approved => {
            println!(
                "Approved {server}/{tool} (fingerprint {}): that definition is now pinned. A \
                 running gateway offers it again within seconds.",
                args.fingerprint.to_ascii_lowercase()
            );
            Ok(ExitCode::SUCCESS)
        }
        Approval::Differs { pending } => {
            eprintln!(
                "{server}/{tool} was not approved: the definition pending now (fingerprint \
                 {pending}) is not the one reviewed ({}); the server changed it since. Review it \
                 again with `toolforge tools diff {server}/{tool}`.",
                args.fingerprint
            );
            Ok(ExitCode::FAILURE)
        }
        Approval::NothingPending => {
            eprintln!(
                "{server}/{tool} is not quarantined (nothing to approve); `toolforge tools diff` \
                 lists the tools that are."
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

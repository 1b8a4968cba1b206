//! `toolforge trace verify`: checks the trace file's hash chain. Exit 0 when it holds, 1 with
//! the first bad line named when a record was changed, removed or reordered.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use toolforge_agent::trace_verify::{self, VerifyError};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Verify the hash chain of a trace file (every record's prev_hash).
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Trace file to check (JSON Lines). Default: $TRACE_SINK, else logs/traces.jsonl.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The head hash printed by an earlier verify (or kept elsewhere): also checks that the
    /// chain still ends there, which catches an edited last record and a cut tail.
    #[arg(long, value_name = "HASH")]
    pub head: Option<String>,
    /// The operator's chain key (the file the gateway read as TRACE_CHAIN_KEY_FILE; default:
    /// $TRACE_CHAIN_KEY_FILE, else $TRACE_CHAIN_KEY). With it, records after the first keyed
    /// one must link under the key, which catches a rewrite that re-chained the rest.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
}

pub async fn run(command: Command, config: &crate::config::Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Verify(args) => verify(args, config).await,
    }
}

async fn verify(args: VerifyArgs, config: &crate::config::Config) -> anyhow::Result<ExitCode> {
    let path = args.trace.unwrap_or_else(|| config.trace.file_to_read());
    let shown = path.display().to_string();
    let head = args.head;
    let key = crate::agent::chain_key(&config.trace, args.key_file.as_deref())?;
    let outcome = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path)
            .with_context(|| format!("cannot open the trace file {}", path.display()))?;
        Ok::<_, anyhow::Error>(trace_verify::verify(
            std::io::BufReader::new(file),
            head.as_deref(),
            key.as_ref(),
        ))
    })
    .await
    .context("the trace reader stopped")??;
    match outcome {
        Ok(v) => {
            let legacy = if v.unchained > 0 {
                format!(
                    " ({} leading records predate the chain and are not covered)",
                    v.unchained
                )
            } else {
                String::new()
            };
            println!(
                "{shown}: chain intact, {} records{legacy}\nhead {}",
                v.records, v.head
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ VerifyError::Read(_)) => Err(anyhow::anyhow!("{shown}: {e}")),
        Err(e) => {
            eprintln!("{shown}: chain broken: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

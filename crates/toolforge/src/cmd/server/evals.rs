//! `toolforge server evals`.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`toolforge server evals` is not available in this build yet")
}

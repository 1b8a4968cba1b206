//! `toolforge cost-report`.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`toolforge cost-report` is not available in this build yet")
}

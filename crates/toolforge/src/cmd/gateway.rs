//! `toolforge gateway`.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`toolforge gateway` is not available in this build yet")
}

//! `toolforge server toolkit`.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`toolforge server toolkit` is not available in this build yet")
}

//! `toolforge server conformance`.

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`toolforge server conformance` is not available in this build yet")
}

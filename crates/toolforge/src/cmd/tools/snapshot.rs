//! `toolforge tools snapshot`.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolforge tools snapshot` is not available in this build yet")
}

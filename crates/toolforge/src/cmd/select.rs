//! `toolforge select`.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolforge select` is not available in this build yet")
}

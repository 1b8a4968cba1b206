//! `toolforge tools overlaps`.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolforge tools overlaps` is not available in this build yet")
}

//! `toolforge eval <selection|retrieval>`.

pub mod retrieval;
pub mod selection;

use std::process::ExitCode;

use crate::config::Config;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Grade the selector against labelled cases; exits non-zero below --min-accuracy.
    Selection(selection::Args),
    /// Rank tools for labelled queries; prints recall@1, recall@5, nDCG@10 and MRR.
    Retrieval(retrieval::Args),
}

pub async fn run(command: Command, config: &Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Selection(args) => selection::run(args).await,
        Command::Retrieval(args) => retrieval::run(args, config).await,
    }
}

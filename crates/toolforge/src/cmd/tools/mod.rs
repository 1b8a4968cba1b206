//! `toolforge tools <list|search|snapshot|overlaps|diff|approve>`.

pub mod list;
pub mod overlaps;
pub mod pins;
pub mod search;
pub mod snapshot;

use std::process::ExitCode;

use crate::config::Config;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the merged catalog of the configured servers.
    List(list::Args),
    /// Rank the catalog's tools against a query.
    Search(search::Args),
    /// Write a catalog snapshot file from the live pool.
    Snapshot(snapshot::Args),
    /// Show overlap groups, and suggest new ones from description similarity.
    Overlaps(overlaps::Args),
    /// Show the tools in quarantine and what changed in each, field by field.
    Diff(pins::DiffArgs),
    /// Accept the quarantined definition reviewed (named by its fingerprint): it becomes the pin.
    Approve(pins::ApproveArgs),
}

pub async fn run(command: Command, config: &Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::List(args) => list::run(args, config).await,
        Command::Search(args) => search::run(args, config).await,
        Command::Snapshot(args) => snapshot::run(args, config).await,
        Command::Overlaps(args) => overlaps::run(args, config).await,
        Command::Diff(args) => pins::diff(args, config).await,
        Command::Approve(args) => pins::approve(args, config).await,
    }
}

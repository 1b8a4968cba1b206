//! `toolforge server toolkit`: the built-in toolkit MCP server (read-only SQL, sandboxed Python).

use std::path::PathBuf;

use anyhow::Context as _;
use toolforge_gateway::{BuiltinHttpOptions, Filtered, serve_handler_http, serve_handler_stdio};
use toolforge_toolkit::{sandbox, seed, server, sql::SqlLimits};

use super::transport::Serve;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub transport: super::transport::TransportArgs,
    /// Address to bind over HTTP.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// SQLite database to serve read-only (default: `$XDG_DATA_HOME/toolforge/toolkit/sample.db`,
    /// created with the sample data when missing).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Serve the regular files directly in this directory as resources (default: the bundled
    /// files).
    #[arg(long)]
    pub resources: Option<PathBuf>,
    /// Create the sample database at `--db` (or the default path) and exit.
    #[arg(long)]
    pub seed: bool,
    #[command(flatten)]
    pub visibility: crate::cmd::visibility::VisibilityArgs,
}

/// The `Host` a server bound to `host` accepts besides loopback (none for loopback or the
/// unspecified address, which is reached by the names of the machine's interfaces).
pub(super) fn bind_host(host: std::net::IpAddr) -> Vec<String> {
    if host.is_loopback() || host.is_unspecified() {
        Vec::new()
    } else {
        vec![host.to_string()]
    }
}

pub async fn run(args: Args, process: &crate::config::Config) -> anyhow::Result<()> {
    let serve = args.transport.serve()?;
    let visibility = std::sync::Arc::new(args.visibility.config(process)?);
    let explicit = args.db.is_some();
    let db_path = args
        .db
        .unwrap_or_else(|| process.toolkit.default_db.clone());
    if args.seed {
        if let Some(dir) = db_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        seed::create(&db_path).with_context(|| {
            format!(
                "seeding {} (it must not exist yet; the sample data is never written over a file)",
                db_path.display()
            )
        })?;
        eprintln!("created the sample database at {}", db_path.display());
        return Ok(());
    }
    if !db_path.exists() {
        if explicit {
            anyhow::bail!(
                "database {} does not exist; create the sample with `toolforge server toolkit --seed --db {}`",
                db_path.display(),
                db_path.display()
            );
        }
        if let Some(dir) = db_path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        seed::ensure(&db_path)
            .with_context(|| format!("creating the sample database at {}", db_path.display()))?;
        tracing::info!(path = %db_path.display(), "created the sample database");
    }
    let config = server::ToolkitConfig {
        db_path,
        sql_limits: SqlLimits::default(),
        sandbox: sandbox::SandboxConfig::new(sandbox::resolve_python("python3")),
        rest_base_url: process.toolkit.rest_base_url.clone(),
        rest_timeout: std::time::Duration::from_secs(5),
        resources_dir: args.resources,
    };
    let handler = Filtered::new(server::Toolkit::new(config), "toolkit", visibility);
    match serve {
        Serve::Stdio => serve_handler_stdio(handler).await?,
        Serve::Http { port, named } => {
            let listener = tokio::net::TcpListener::bind((args.host, port))
                .await
                .with_context(|| format!("binding {}:{port}", args.host))?;
            eprintln!(
                "{}",
                super::transport::listening_line("toolkit", listener.local_addr()?, named)
            );
            let opts = BuiltinHttpOptions {
                extra_hosts: bind_host(args.host),
                ..BuiltinHttpOptions::default()
            };
            let cancel = opts.cancel.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                cancel.cancel();
            });
            serve_handler_http(handler, listener, opts).await?;
        }
    }
    Ok(())
}

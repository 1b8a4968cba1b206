//! `toolforge auth`: upstream OAuth grants kept for the pool, one per (server, principal).
//!
//! - `login SERVER`: the authorization-code flow for one local user, with a loopback redirect
//!   (`http://127.0.0.1:PORT/callback`, RFC 8252): prints the URL to open, waits for the
//!   redirect, keeps the grant (as `--principal`, default `anonymous`).
//! - `revoke SERVER`: forgets a principal's grant (`--all`: every principal's for that server).
//! - `list [SERVER]`: which principals have a grant, and for which servers (never a token).
//!
//! The grants live where the gateway reads them: Redis with `REDIS_URL`, else the catalog
//! cache's SQLite file, sealed with `TOOLFORGE_TOKEN_KEY` (or `_FILE`), which is required here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolforge_mcp::auth::{FlowRequest, TokenStore, UpstreamAuth};

use crate::config::Config;

/// Longest `login` waits for the browser's redirect.
const LOGIN_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Authorize an "oauth" server for one principal in the browser (loopback redirect).
    Login(LoginArgs),
    /// Forget a principal's grant for a server.
    Revoke(RevokeArgs),
    /// List the (server, principal) pairs that have a grant.
    List(ListArgs),
}

#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The server's name in the configuration.
    pub server: String,
    /// Keep the grant for this principal (default: anonymous, the principal without identity).
    #[arg(long, value_name = "NAME", default_value = "anonymous")]
    pub principal: String,
    /// Servers configuration (default: $MCP_SERVERS_CONFIG, else ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct RevokeArgs {
    pub server: String,
    #[arg(
        long,
        value_name = "NAME",
        default_value = "anonymous",
        conflicts_with = "all"
    )]
    pub principal: String,
    /// Every principal's grant for the server.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    pub server: Option<String>,
}

async fn store(config: &Config) -> anyhow::Result<Arc<TokenStore>> {
    anyhow::ensure!(
        crate::stores::token_key(config)?.is_some(),
        "set TOOLFORGE_TOKEN_KEY (or TOOLFORGE_TOKEN_KEY_FILE): the gateway's grants are sealed \
         with it, and without it they live in one process's memory only"
    );
    let cache = crate::stores::catalog_cache(config).await?;
    crate::stores::token_store(config, cache.as_deref())
        .await?
        .context("no token store")
}

pub async fn run(command: Command, config: &Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Login(args) => login(args, config).await,
        Command::Revoke(args) => {
            let store = store(config).await?;
            let principals = if args.all {
                store
                    .list(Some(&args.server))
                    .await?
                    .into_iter()
                    .map(|(_, p)| p)
                    .collect()
            } else {
                vec![args.principal]
            };
            let mut removed = 0;
            for principal in &principals {
                if store.remove(&args.server, principal).await? {
                    removed += 1;
                    eprintln!("revoked {principal}'s grant for {}", args.server);
                }
            }
            if removed == 0 {
                eprintln!("no grant to revoke for {}", args.server);
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List(args) => {
            let store = store(config).await?;
            for (server, principal) in store.list(args.server.as_deref()).await? {
                println!("{server}\t{principal}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn login(args: LoginArgs, config: &Config) -> anyhow::Result<ExitCode> {
    let pool = crate::pool::load_config(config, args.config)?;
    let server = pool
        .servers
        .iter()
        .find(|s| s.name == args.server)
        .with_context(|| format!("no server named {:?} in the configuration", args.server))?;
    let (Some(UpstreamAuth::OAuth(settings)), toolforge_mcp::Transport::Http { url, .. }) =
        (&server.auth, &server.transport)
    else {
        anyhow::bail!(
            "server {:?} does not have \"auth\": {{\"type\": \"oauth\"}}",
            args.server
        );
    };
    let store = store(config).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("cannot listen on loopback for the redirect")?;
    let redirect_uri = format!(
        "http://127.0.0.1:{}/callback",
        listener.local_addr()?.port()
    );
    let request = FlowRequest {
        resource: url,
        challenge: None,
        scopes: settings.scopes.clone(),
        redirect_uri: &redirect_uri,
    };
    let pending = toolforge_mcp::auth::flow::begin(request, &settings.identity)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    eprintln!(
        "Open this URL to authorize toolforge for {} (as {}):\n\n  {}\n",
        args.server,
        args.principal,
        pending.url()
    );
    let target = tokio::time::timeout(LOGIN_WAIT, redirect(&listener))
        .await
        .context("no redirect within 5 minutes")??;
    let authorized = pending
        .finish_with_redirect(&format!("http://127.0.0.1{target}"))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let grant = authorized
        .grant()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    store.save(&args.server, &args.principal, &grant).await?;
    eprintln!(
        "authorized: {}'s grant for {} is kept ({} store)",
        args.principal,
        args.server,
        store.backend()
    );
    Ok(ExitCode::SUCCESS)
}

/// Waits for the browser's `GET /callback?...` and answers it; returns the request target.
async fn redirect(listener: &tokio::net::TcpListener) -> anyhow::Result<String> {
    loop {
        let (mut stream, _) = listener.accept().await?;
        let mut buf = vec![0u8; 16 * 1024];
        let mut read = 0;
        while read < buf.len() {
            let n = stream.read(&mut buf[read..]).await?;
            if n == 0 {
                break;
            }
            read += n;
            if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..read]).into_owned();
        let target = head
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .filter(|t| t.starts_with("/callback"))
            .map(str::to_owned);
        let (status, body) = match &target {
            Some(t) => ("200 OK", callback_page(t)),
            None => ("404 Not Found", "not found".to_owned()),
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        if let Some(target) = target {
            return Ok(target);
        }
    }
}

/// What the browser shows on the redirect: the code is exchanged only after this answer, so it
/// promises nothing, and a refusal (`error=`) is said as one.
fn callback_page(target: &str) -> String {
    let refusal = target
        .split_once('?')
        .map_or("", |(_, query)| query)
        .split('&')
        .find_map(|pair| pair.strip_prefix("error="));
    match refusal {
        Some(error) => {
            // Only the RFC 6749 error code's own characters are echoed back.
            let error: String = error
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(64)
                .collect();
            format!("toolforge: not authorized (the authorization server answered {error}). See the terminal.")
        }
        None => "toolforge: authorization received; the terminal says when the grant is kept. You can close this window.".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::callback_page;

    #[test]
    fn the_callback_page_says_a_refusal_as_one() {
        let refused = callback_page("/callback?error=access_denied&state=x<script>");
        assert!(refused.contains("not authorized"), "{refused}");
        assert!(refused.contains("access_denied"), "{refused}");
        let hostile = callback_page("/callback?error=<script>alert(1)</script>");
        assert!(!hostile.contains('<'), "{hostile}");
        let received = callback_page("/callback?code=abc&state=x");
        assert!(received.contains("authorization received"), "{received}");
    }
}

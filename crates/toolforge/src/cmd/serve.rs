//! `toolforge serve`: the HTTP API and the gateway's MCP endpoint.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

/// How tool names are exposed.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum NamespaceArg {
    /// Own names when unique, overlap groups under the group name.
    Auto,
    /// Every tool as `server__tool`.
    Always,
}

impl From<NamespaceArg> for toolforge_select::Namespace {
    fn from(n: NamespaceArg) -> Self {
        match n {
            NamespaceArg::Auto => Self::Auto,
            NamespaceArg::Always => Self::Always,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Servers configuration (default: $MCP_SERVERS_CONFIG, else ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to bind (0 picks a free one, printed at start-up).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Stateless Streamable HTTP, for several replicas behind a load balancer.
    #[arg(long)]
    pub stateless: bool,
    /// How tool names are exposed.
    #[arg(long, value_enum, default_value = "auto")]
    pub namespace: NamespaceArg,
    /// Largest request body, in bytes, on every route (413 past it).
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Connections served at once (more wait until one closes).
    #[arg(long, default_value_t = toolforge_gateway::ConnectionLimits::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds a connection has to send a request's complete headers (after it opens, or
    /// after its previous response); it is closed then.
    #[arg(long, value_name = "SECONDS", default_value_t = toolforge_gateway::ConnectionLimits::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout: u64,
    /// Seconds a connection may stay open with no new request (a response in progress finishes
    /// first).
    #[arg(long, value_name = "SECONDS", default_value_t = toolforge_gateway::ConnectionLimits::DEFAULT_IDLE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// `/mcp` sessions open at once (an `initialize` past it gets 503).
    #[arg(long, default_value_t = toolforge_gateway::SessionLimits::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Seconds an `/mcp` session lives with no request; it ends then and its memory is freed.
    #[arg(long, value_name = "SECONDS", default_value_t = toolforge_gateway::SessionLimits::DEFAULT_IDLE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub session_idle_timeout: u64,
    /// The gateway's base URL as its clients reach it (e.g. https://gw.example.com behind a
    /// proxy): the OAuth resource (with /mcp), its metadata and the consent links derive from
    /// it, and its host is accepted. Default: the bind address.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Extra Host names to accept (besides loopback), e.g. a public name behind a proxy.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Seconds a replica told to stop (SIGTERM, Ctrl-C) waits for requests in flight; it
    /// answers /health with 503 and, after --drain-grace, accepts no new connections
    /// meanwhile. A second signal stops at once.
    #[arg(long, value_name = "SECONDS", default_value_t = toolforge_gateway::http::DEFAULT_DRAIN_TIMEOUT.as_secs())]
    pub drain_timeout: u64,
    /// Seconds a draining replica still accepts connections, answering /health with 503, so
    /// that the load balancer's health checks take it out before it refuses anyone (within
    /// --drain-timeout).
    #[arg(long, value_name = "SECONDS", default_value_t = toolforge_gateway::http::DEFAULT_DRAIN_GRACE.as_secs())]
    pub drain_grace: u64,
    /// A principal that may approve quarantined tools from the console at /ui (repeatable;
    /// `anonymous` when no identity is configured). Without it the console is read-only.
    #[arg(long = "console-admin", value_name = "PRINCIPAL")]
    pub console_admins: Vec<String>,
    /// With identity on, a principal besides the console admins that may read /metrics
    /// (repeatable; a Prometheus scraper's key). Others get 403: its labels name servers and
    /// tools.
    #[arg(long = "metrics-reader", value_name = "PRINCIPAL")]
    pub metrics_readers: Vec<String>,
    /// Broker rule file (YAML or JSON; default: the configuration's
    /// "toolforge": {"broker": {"rules": FILE}}).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    #[command(flatten)]
    pub visibility: super::visibility::VisibilityArgs,
    #[command(flatten)]
    pub tool_mode: super::visibility::ToolModeArgs,
    #[command(flatten)]
    pub governance: super::governance::GovernanceArgs,
    #[command(flatten)]
    pub identity: super::governance::IdentityArgs,
}

pub async fn run(args: Args, process: &crate::config::Config) -> anyhow::Result<()> {
    let mut visibility = args.visibility.config(process)?;
    // Checked before anything starts; built with OAuth once the address is known.
    args.identity.build(args.host)?;
    let config_path = process.servers_config_path(args.config.clone());
    let config = crate::pool::load_config(process, args.config)?;
    let settings = config.settings.clone();
    let rules = super::broker::rules_for(args.rules.as_deref(), &settings, &config_path)?;
    let governance = args
        .governance
        .build(process, &settings, &config_path)
        .await?;
    visibility.governance = governance.clone();
    let listener = tokio::net::TcpListener::bind((args.host, args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.host, args.port))?;
    let addr = listener.local_addr()?;
    let base = match &args.public_url {
        Some(url) => {
            let parsed = reqwest::Url::parse(url)
                .with_context(|| format!("--public-url {url} is not a URL"))?;
            anyhow::ensure!(
                matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some(),
                "--public-url {url} must be an http(s) URL"
            );
            url.trim_end_matches('/').to_owned()
        }
        None => format!("http://{addr}"),
    };
    let cancel = CancellationToken::new();
    let oauth = match args.identity.oauth(&settings, &format!("{base}/mcp"))? {
        Some(resource) => {
            let http = toolforge_gateway::oauth::http_client().map_err(anyhow::Error::msg)?;
            let resource = Arc::new(
                toolforge_gateway::oauth::OAuthResource::new(resource, http)
                    .map_err(anyhow::Error::msg)?,
            );
            resource
                .start(Duration::from_secs(10), cancel.clone())
                .await;
            eprintln!(
                "toolforge: OAuth resource {} (metadata at {})",
                resource.settings.resource,
                resource.metadata_url()
            );
            Some(resource)
        }
        None => None,
    };
    let identity = args.identity.build_with(args.host, oauth)?;
    let pool = crate::pool::launch(process, config).await?;
    let shared = toolforge_gateway::Shared::with_options(
        pool.clone(),
        args.namespace.into(),
        visibility,
        args.tool_mode.mode(),
    );
    crate::stores::apply_state_key(process, &shared).await?;
    shared.set_memory_release(crate::allocator::release_free_memory);
    shared.set_rules(rules.clone());
    let built = crate::agent::build(
        process,
        pool.clone(),
        &settings,
        args.namespace.into(),
        rules,
    )
    .await;
    let agent = match built {
        Ok(agent) => Arc::new(agent.with_governance(governance)),
        Err(e) => {
            pool.shutdown().await;
            return Err(e);
        }
    };
    // Gateway calls are traced through the agent's writer: one file, one hash chain.
    shared.set_trail(agent.traces().clone());
    if pool.credentials().is_some() {
        shared.set_consent(Arc::new(toolforge_gateway::consent::Consent::new(
            &base,
            pool.clone(),
            identity.clone(),
        )));
    }
    let drain = Arc::new(toolforge_gateway::Drain::new());
    let mut extra_hosts = args.allow_hosts;
    if let Some(host) = args
        .public_url
        .as_deref()
        .and_then(|u| reqwest::Url::parse(u).ok())
        .and_then(|u| u.host_str().map(str::to_owned))
    {
        extra_hosts.push(host);
    }
    if !args.host.is_loopback() && !args.host.is_unspecified() {
        extra_hosts.push(args.host.to_string());
    }
    let opts = toolforge_gateway::HttpOptions {
        extra_hosts,
        stateless: args.stateless,
        max_body_bytes: args.max_body_bytes,
        connections: toolforge_gateway::ConnectionLimits {
            max_connections: args.max_connections.max(1),
            header_read_timeout: Duration::from_secs(args.header_read_timeout),
            idle_timeout: Duration::from_secs(args.idle_timeout),
        },
        sessions: toolforge_gateway::SessionLimits {
            max_sessions: args.max_sessions.max(1),
            idle_timeout: Duration::from_secs(args.session_idle_timeout),
        },
        cancel: cancel.clone(),
        agent: Some(agent.clone()),
        identity,
        spend: agent.traces().path().map(|path| {
            let path = path.to_owned();
            toolforge_gateway::SpendReport(Arc::new(move || {
                super::cost_report::json_report(&path).map_err(|e| format!("{e:#}"))
            }))
        }),
        metrics: Arc::new(toolforge_gateway::Metrics::new()),
        drain: drain.clone(),
        drain_timeout: Duration::from_secs(args.drain_timeout),
        drain_grace: Duration::from_secs(args.drain_grace),
        console_admins: args.console_admins.clone(),
        metrics_readers: args.metrics_readers.clone(),
    };
    eprintln!(
        "toolforge: serving http://{addr} (POST /chat, /chat/stream, /agent/run; /mcp; GET /tools, /health, /metrics, /openapi.json; the console at /ui)"
    );
    let signal = cancel.clone();
    let draining = drain.clone();
    tokio::spawn(async move {
        crate::runtime::shutdown_signal().await;
        eprintln!("toolforge: draining (a second signal stops at once)");
        draining.begin();
        crate::runtime::shutdown_signal().await;
        signal.cancel();
    });
    let served = toolforge_gateway::serve(listener, shared, opts).await;
    agent.traces().flush().await;
    crate::agent::shutdown_metrics(&agent).await;
    pool.shutdown().await;
    served.context("HTTP server failed")
}

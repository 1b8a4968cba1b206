//! `toolforge client`: a plain MCP client on rmcp. Connects to one Streamable HTTP server,
//! lists its tools, and calls one (`--tool`, `--args`), printing JSON.
//!
//! It speaks both protocol eras: it probes `server/discover` (2026-07-28: per-request `_meta`,
//! the `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers, multi round-trip requests whose
//! `requestState` it echoes unchanged) and falls back to `initialize` (2025-11-25) for servers
//! that do not know it, including those that answer the probe with an unrelated result.
//!
//! It is also the client the official conformance suite tests (`conformance client --command
//! "toolforge client"`): the suite appends the mock server's URL and sets
//! `MCP_CONFORMANCE_SCENARIO` (and, for some scenarios, `MCP_CONFORMANCE_CONTEXT`); `plan`
//! decides the calls from those. What the client answers to the server's own requests is in
//! `handler`.
//!
//! A server that answers `401` with an OAuth challenge is authorized on the spot, with no user:
//! the pool's OAuth client (`toolforge_mcp::auth`) discovers the authorization server,
//! registers (pre-registered `--client-id`/`--client-secret`, or the suite's in
//! `MCP_CONFORMANCE_CONTEXT`; a Client ID Metadata Document URL; else dynamic registration),
//! follows the authorization redirect itself, and steps up on `insufficient_scope`.

mod handler;
mod plan;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rmcp::ClientServiceExt as _;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use toolforge_mcp::auth::{Bearer, ClientIdentity, Credentials, Headless};

use crate::config::Config;

/// The Client ID Metadata Document URL the conformance suite's authorization servers expect
/// (`auth/basic-cimd`); used in conformance mode when `--client-metadata-url` is not given.
const CONFORMANCE_CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool to call (default: none, or the conformance scenario's calls).
    #[arg(long)]
    pub tool: Option<String>,
    /// The tool's arguments, a JSON object (default: built from the tool's input schema).
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Seconds to wait for the server and for each call.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// An OAuth client id registered with the server's authorization server (default: a
    /// Client ID Metadata Document where supported, else dynamic registration).
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// The secret of `--client-id`, for a confidential client (or `TOOLFORGE_CLIENT_SECRET`).
    #[arg(
        long,
        value_name = "SECRET",
        env = "TOOLFORGE_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub client_secret: Option<String>,
    /// The HTTPS URL of this client's Client ID Metadata Document, its client id where the
    /// authorization server supports them.
    #[arg(long, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// The server's Streamable HTTP endpoint, used exactly as given.
    pub url: String,
}

/// Runs `fut` within `limit`, naming `what` if it does not finish.
async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: no answer within {} s", limit.as_secs()))
}

/// Connects with `server/discover` first, else `initialize`. A server that answers the probe
/// with a result that is not a discovery result (some legacy servers answer `{}` to any method
/// they do not know) gets one `initialize` on a fresh connection.
async fn connect(
    url: &str,
    timeout: Duration,
    credentials: &Credentials,
) -> anyhow::Result<RunningService<RoleClient, handler::Answers>> {
    let auto = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let first_transport = transport(url, credentials);
    let first = within(
        timeout,
        "connecting",
        handler::Answers.serve_with_lifecycle(first_transport, auto),
    )
    .await?;
    let connected = match first {
        Err(ClientInitializeError::ExpectedInitResult(Some(_))) => {
            tracing::debug!(
                "server/discover answered with a non-discovery result; using initialize"
            );
            let again = transport(url, credentials);
            within(
                timeout,
                "connecting",
                handler::Answers.serve_with_lifecycle(again, ClientLifecycleMode::Initialize),
            )
            .await?
        }
        other => other,
    };
    connected.with_context(|| format!("could not connect to {url}"))
}

/// The transport to `url`, sending the tokens of `credentials`.
fn transport(
    url: &str,
    credentials: &Credentials,
) -> StreamableHttpClientTransport<Bearer<reqwest::Client>> {
    StreamableHttpClientTransport::with_client(
        Bearer::new(reqwest::Client::default(), credentials.clone()),
        StreamableHttpClientTransportConfig::with_uri(url),
    )
}

/// Who this client is to an authorization server: the flags, else the credentials a
/// conformance scenario hands over (`client_id`, `client_secret`).
fn identity(args: &Args, context: Option<&Value>, conformance: bool) -> ClientIdentity {
    let from_context = |key: &str| {
        context
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let client_id = args.client_id.clone().or_else(|| from_context("client_id"));
    let client_secret = if args.client_id.is_some() {
        args.client_secret.clone()
    } else {
        from_context("client_secret").or_else(|| args.client_secret.clone())
    };
    ClientIdentity {
        client_secret: client_secret.filter(|_| client_id.is_some()),
        client_id,
        client_metadata_url: args
            .client_metadata_url
            .clone()
            .or_else(|| conformance.then(|| CONFORMANCE_CLIENT_METADATA_URL.to_owned())),
        client_name: "toolforge client".to_owned(),
    }
}

pub async fn run(args: Args, config: &Config) -> anyhow::Result<ExitCode> {
    let scenario = config.conformance.scenario.clone();
    let context = config.conformance.context.clone();
    let explicit_args = match &args.args {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Some(map),
            _ => anyhow::bail!("--args must be a JSON object"),
        },
        None => None,
    };
    let url = args.url.as_str();
    anyhow::ensure!(
        url.starts_with("http://") || url.starts_with("https://"),
        "invalid server URL {url} (expected http:// or https://)"
    );
    let timeout = Duration::from_secs(args.timeout.max(1));
    let credentials: Credentials = std::sync::Arc::new(Headless::new(
        url,
        identity(&args, context.as_ref(), scenario.is_some()),
    ));

    let client = connect(url, timeout, &credentials).await?;

    let listed = within(timeout, "tools/list", client.list_all_tools()).await?;
    let tools = match listed {
        Ok(tools) => tools,
        Err(e) => {
            let _ = client.cancel().await;
            anyhow::bail!("tools/list at {url} failed: {e}");
        }
    };
    let request = plan::Request {
        tool: args.tool.as_deref(),
        args: explicit_args,
        scenario: scenario.as_deref(),
        context,
    };
    let planned = match plan::calls(request, &tools) {
        Ok(planned) => planned,
        Err(message) => {
            let _ = client.cancel().await;
            anyhow::bail!(message);
        }
    };

    let mut calls = Vec::new();
    let mut failed = false;
    for call in planned {
        let params = CallToolRequestParams::new(call.tool.clone()).with_arguments(call.arguments);
        let outcome = within(
            timeout,
            &format!("tools/call {}", call.tool),
            client.call_tool(params),
        )
        .await
        .and_then(|r| r.map_err(anyhow::Error::from));
        match outcome {
            Ok(result) => calls.push(json!({"tool": call.tool, "result": result})),
            Err(error) => {
                failed = true;
                calls.push(json!({"tool": call.tool, "error": error.to_string()}));
            }
        }
    }
    let _ = client.cancel().await;
    let names: Vec<Value> = tools.iter().map(|t| json!(t.name)).collect();
    let out = Value::Object(Map::from_iter([
        ("tools".to_owned(), Value::Array(names)),
        ("calls".to_owned(), Value::Array(calls)),
    ]));
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

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
use serde_json::{Map, Value, json};

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
) -> anyhow::Result<RunningService<RoleClient, handler::Answers>> {
    let auto = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let transport = StreamableHttpClientTransport::from_uri(url);
    let first = within(
        timeout,
        "connecting",
        handler::Answers.serve_with_lifecycle(transport, auto),
    )
    .await?;
    let connected = match first {
        Err(ClientInitializeError::ExpectedInitResult(Some(_))) => {
            tracing::debug!(
                "server/discover answered with a non-discovery result; using initialize"
            );
            let transport = StreamableHttpClientTransport::from_uri(url);
            within(
                timeout,
                "connecting",
                handler::Answers.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
            )
            .await?
        }
        other => other,
    };
    connected.with_context(|| format!("could not connect to {url}"))
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scenario = crate::config::env("MCP_CONFORMANCE_SCENARIO");
    let context = match crate::config::env("MCP_CONFORMANCE_CONTEXT") {
        Some(text) => Some(
            serde_json::from_str::<Value>(&text)
                .context("MCP_CONFORMANCE_CONTEXT is not valid JSON")?,
        ),
        None => None,
    };
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

    let client = connect(url, timeout).await?;

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

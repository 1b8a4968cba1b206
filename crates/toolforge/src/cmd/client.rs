//! `toolforge client`: a plain MCP client on the pool's own client code. Connects to one
//! Streamable HTTP server, lists its tools, and calls one (`--tool`, `--args`), printing JSON.
//!
//! It is also the client the official conformance suite tests (`conformance client --command
//! "toolforge client"`): the suite appends the mock server's URL and sets
//! `MCP_CONFORMANCE_SCENARIO`; then, unless `--tool` is given, every listed tool is called with
//! arguments built from its input schema (declared defaults, else a placeholder of the right
//! type). Elicitation requests are accepted with the defaults their schema declares, which is
//! what a non-interactive client can honestly answer.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Map, Value, json};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool to call (default: none, or every tool in conformance-scenario mode).
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

/// Arguments from a JSON Schema: each property's `default`, else a placeholder of its type.
fn args_from_schema(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (name, prop) in props {
            let value = prop.get("default").cloned().unwrap_or_else(|| {
                match prop.get("type").and_then(Value::as_str) {
                    Some("integer" | "number") => json!(1),
                    Some("boolean") => json!(true),
                    Some("array") => json!([]),
                    Some("object") => json!({}),
                    _ => prop
                        .get("enum")
                        .and_then(|e| e.get(0))
                        .cloned()
                        .unwrap_or_else(|| json!("test")),
                }
            });
            out.insert(name.clone(), value);
        }
    }
    out
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scenario = crate::config::env("MCP_CONFORMANCE_SCENARIO");
    let timeout = Duration::from_secs(args.timeout.max(1));
    let text = json!({"mcpServers": {"target": {
        "url": args.url, "timeout": timeout.as_secs(), "startTimeout": timeout.as_secs()
    }}})
    .to_string();
    let config = toolforge_mcp::config::parse(&text, &|_| None)
        .with_context(|| format!("invalid server URL {}", args.url))?;
    let options = toolforge_mcp::PoolOptions {
        elicitation_fallback: toolforge_mcp::ElicitationFallback::AcceptDefaults,
        ..Default::default()
    };
    let pool = toolforge_mcp::Pool::start(config, options).await;
    let health = pool.health().remove(0);
    if health.state != toolforge_mcp::ServerState::Ready {
        pool.shutdown().await;
        anyhow::bail!(
            "could not connect to {}: {}",
            args.url,
            health.last_error.unwrap_or_else(|| "not ready".into())
        );
    }
    let catalog = pool.catalog();
    let tools: Vec<_> = catalog.tools().cloned().collect();
    let chosen: Vec<_> = match (&args.tool, &scenario) {
        (Some(name), _) => {
            let tool = tools
                .iter()
                .find(|t| &t.name == name)
                .with_context(|| format!("the server lists no tool named {name}"))?;
            vec![tool.clone()]
        }
        (None, Some(_)) => tools.clone(),
        (None, None) => Vec::new(),
    };
    let mut calls = Vec::new();
    let mut failed = false;
    for tool in chosen {
        let arguments = match &args.args {
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                _ => anyhow::bail!("--args must be a JSON object"),
            },
            None => args_from_schema(&tool.input_schema),
        };
        let params =
            rmcp::model::CallToolRequestParams::new(tool.name.clone()).with_arguments(arguments);
        match pool
            .call_tool("target", params, toolforge_mcp::CallContext::default())
            .await
        {
            Ok(outcome) => calls.push(json!({"tool": tool.name, "result": outcome.result})),
            Err(failure) => {
                failed = true;
                calls.push(json!({"tool": tool.name, "error": failure.error.to_string()}));
            }
        }
    }
    pool.shutdown().await;
    let out = json!({
        "tools": tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        "calls": calls,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_from_a_schema() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "name": {"type": "string", "default": "John"},
            "flag": {"type": "boolean"}, "mode": {"enum": ["x", "y"]}, "s": {"type": "string"}
        }});
        let got = Value::Object(args_from_schema(&schema));
        assert_eq!(
            got,
            json!({"a": 1, "name": "John", "flag": true, "mode": "x", "s": "test"})
        );
        assert!(args_from_schema(&json!({"type": "object"})).is_empty());
    }
}

//! What the agent runs tools on: the MCP pool, or anything else that lists a catalog and calls
//! tools (tests use fakes that fail when called, to prove dry-run never executes).

use futures::future::BoxFuture;
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolforge_mcp::pool::{CallContext, Pool, ServerState};
use toolforge_select::Catalog;

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text content blocks, joined.
    pub text: String,
    /// `structuredContent`, when the tool gave one.
    pub structured: Option<Value>,
    /// The tool reported an error (`isError: true`).
    pub is_error: bool,
    pub attempts: u32,
    pub retry_reason: Option<String>,
}

/// A call that did not reach a tool answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    pub error: String,
    pub attempts: u32,
    pub retry_reason: Option<String>,
}

/// How long a run waits for servers still making their first start attempt.
pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Lists tools and runs them.
pub trait ToolBackend: Send + Sync {
    /// The merged catalog (for the pool: the last lists fetched, also for servers now down).
    fn catalog(&self) -> Catalog;
    /// Servers that cannot take calls right now.
    fn unavailable(&self) -> Vec<String>;
    /// Returns once no server is still making its first start attempt (bounded): a run that
    /// starts right after the servers were launched sees their tools.
    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// Calls `server`'s `tool`.
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>>;
    /// Calls `server`'s `tool` for `on_behalf` (a server with per-principal `"auth"` is
    /// reached with that principal's own token); backends without identities ignore it.
    fn call_for<'a>(
        &'a self,
        on_behalf: toolforge_mcp::OnBehalf,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        let _ = on_behalf;
        self.call(server, tool, arguments, cancel)
    }
}

impl ToolBackend for Pool {
    fn catalog(&self) -> Catalog {
        Pool::catalog(self)
    }

    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(Pool::settled(self, START_WAIT))
    }

    fn unavailable(&self) -> Vec<String> {
        self.health()
            .into_iter()
            .filter(|h| !matches!(h.state, ServerState::Ready | ServerState::Disabled))
            .map(|h| h.name)
            .collect()
    }

    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        let anonymous = toolforge_mcp::OnBehalf {
            principal: toolforge_policy::Principal::anonymous().to_string(),
            token: None,
        };
        self.call_for(anonymous, server, tool, arguments, cancel)
    }

    fn call_for<'a>(
        &'a self,
        on_behalf: toolforge_mcp::OnBehalf,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
            let ctx = CallContext {
                cancel,
                on_behalf: Some(on_behalf),
                ..CallContext::default()
            };
            match self.call_tool(server, params, ctx).await {
                Ok(outcome) => {
                    let text = outcome
                        .result
                        .content
                        .iter()
                        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                        .collect::<Vec<_>>()
                        .join("\n");
                    Ok(ToolOutput {
                        text,
                        structured: outcome.result.structured_content.clone(),
                        is_error: outcome.result.is_error == Some(true),
                        attempts: outcome.attempts,
                        retry_reason: outcome.retry_reason,
                    })
                }
                Err(f) => Err(ToolFailure {
                    error: f.error.to_string(),
                    attempts: f.attempts,
                    retry_reason: f.retry_reason,
                }),
            }
        })
    }
}

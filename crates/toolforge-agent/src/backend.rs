//! What the agent runs tools on: the MCP pool, or anything else that lists a catalog and calls
//! tools (tests use fakes that fail when called, to prove dry-run never executes). A call the
//! server runs as a task (Tasks extension) is followed to its end: its result is the call's.

use futures::future::BoxFuture;
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolforge_mcp::pool::{CallContext, CallError, CallFailure, Pool, ServerState};
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

/// The longest a run waits for a tool call the server runs as a task (Tasks extension); less
/// when the server keeps the task for less (its `ttlMs`).
pub const MAX_TASK_WAIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// How long the agent follows `created` before it cancels it.
fn task_wait(created: &rmcp::model::CreateTaskResult) -> std::time::Duration {
    created
        .task
        .ttl_ms
        .map_or(MAX_TASK_WAIT, std::time::Duration::from_millis)
        .min(MAX_TASK_WAIT)
}

/// A tool result as the agent reads it: its text blocks joined.
fn output(
    result: &rmcp::model::CallToolResult,
    attempts: u32,
    retry_reason: Option<String>,
) -> ToolOutput {
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    ToolOutput {
        text,
        structured: result.structured_content.clone(),
        is_error: result.is_error == Some(true),
        attempts,
        retry_reason,
    }
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
                cancel: cancel.clone(),
                on_behalf: Some(on_behalf),
                follows_tasks: true,
                ..CallContext::default()
            };
            match self.call_tool(server, params, ctx).await {
                Ok(outcome) => Ok(output(
                    &outcome.result,
                    outcome.attempts,
                    outcome.retry_reason,
                )),
                // The server runs the call as a task: its result is the call's, once it ends.
                Err(CallFailure {
                    error: CallError::TaskCreated { result, .. },
                    attempts,
                    retry_reason,
                    ..
                }) => {
                    let within = task_wait(&result);
                    match self
                        .follow_task(server, &result, cancel.as_ref(), within)
                        .await
                    {
                        Ok(done) => Ok(output(&done, attempts, retry_reason)),
                        Err(e) => Err(ToolFailure {
                            error: e.to_string(),
                            attempts,
                            retry_reason,
                        }),
                    }
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

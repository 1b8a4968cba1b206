//! The MCP face of the toolkit: the rmcp tool router (the binary serves it, over stdio or
//! Streamable HTTP, through the gateway's visibility layer).
//!
//! Tool failures are in-band (`isError: true` with a clear message), never JSON-RPC errors,
//! so a model sees what went wrong and can correct itself.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{ErrorData as McpError, ServerHandler, tool, tool_handler, tool_router};
use serde::Deserialize;

use crate::budget::Budget;
use crate::resources::Resources;
use crate::rest;
use crate::sandbox::{self, SandboxConfig};
use crate::sql::{self, SqlLimits};

/// Typed configuration handed in by the binary.
#[derive(Debug, Clone)]
pub struct ToolkitConfig {
    /// The SQLite database served by `sql_query` (opened read-only).
    pub db_path: PathBuf,
    /// Limits of every query.
    pub sql_limits: SqlLimits,
    /// The `run_python` sandbox.
    pub sandbox: SandboxConfig,
    /// Base URL of the exchange-rate API (`MOCK_REST_BASE_URL`).
    pub rest_base_url: String,
    /// Per-request timeout of `rest_exchange_rate`.
    pub rest_timeout: std::time::Duration,
    /// Directory of resource files (`None`: the bundled files).
    pub resources_dir: Option<PathBuf>,
}

/// Arguments naming a resource.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct OpenArgs {
    /// A name from list_resources.
    pub name: String,
}

/// Arguments naming a handle.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct HandleArgs {
    /// A handle_id from open_resource.
    pub handle_id: String,
}

/// Arguments of list_resources (none).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// Open handles at most.
pub const MAX_HANDLES: usize = 64;

/// Arguments of `rest_exchange_rate`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RestArgs {
    /// Three-letter currency code to convert from, e.g. USD.
    pub base: String,
    /// Three-letter currency code to convert to, e.g. EUR.
    pub target: String,
    /// Optional amount of `base` to convert.
    #[serde(default)]
    pub amount: Option<f64>,
}

/// Arguments of `run_python`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunPythonArgs {
    /// Python 3 source. Imports limited to math, statistics, json, itertools, collections,
    /// datetime, re, random, textwrap; no open/exec/eval/getattr/dunder access. Print results.
    pub code: String,
    /// Wall-clock limit in seconds, 1..=10 (default 5).
    #[serde(default)]
    pub timeout_seconds: Option<i64>,
}

/// Arguments of `sql_query`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SqlQueryArgs {
    /// Exactly one read-only SELECT statement (tables: customers, products, orders).
    pub sql: String,
    /// Rows per page; clamped server-side to [1, 25] (default 10).
    #[serde(default)]
    pub page_size: Option<i64>,
    /// Rows to skip (default 0).
    #[serde(default)]
    pub offset: Option<i64>,
}

/// The toolkit MCP server: one per session ([`Toolkit::for_session`]), sharing the
/// configuration and the `run_python` budget, each with its own resource handles.
#[derive(Clone)]
pub struct Toolkit {
    config: Arc<ToolkitConfig>,
    http: reqwest::Client,
    resources: Arc<Resources>,
    python: Budget,
}

fn tool_error(msg: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg.into())])
}

fn structured(value: serde_json::Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    r.structured_content = Some(value);
    r
}

#[tool_router]
impl Toolkit {
    /// A server over `config`.
    #[must_use]
    pub fn new(config: ToolkitConfig) -> Self {
        let resources = Arc::new(Resources::new(config.resources_dir.clone(), MAX_HANDLES));
        let python = Budget::new(config.sandbox.budget);
        Self {
            config: Arc::new(config),
            http: reqwest::Client::new(),
            resources,
            python,
        }
    }

    /// The server for a new session: the same configuration and `run_python` budget, no
    /// resource handles open (they go with the session when it ends).
    #[must_use]
    pub fn for_session(&self) -> Self {
        Self {
            config: self.config.clone(),
            http: self.http.clone(),
            resources: Arc::new(self.resources.fresh()),
            python: self.python.clone(),
        }
    }

    #[tool(
        description = "Run exactly one read-only SELECT over the sample database (tables customers, products, orders). page_size is clamped to [1, 25]; every answer reports effective_page_size, total_rows_matched, has_more and next_offset.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn sql_query(
        &self,
        Parameters(args): Parameters<SqlQueryArgs>,
    ) -> Result<CallToolResult, McpError> {
        let cfg = Arc::clone(&self.config);
        let res = tokio::task::spawn_blocking(move || {
            sql::query(
                &cfg.db_path,
                &args.sql,
                args.page_size,
                args.offset,
                &cfg.sql_limits,
            )
        })
        .await;
        Ok(match res {
            Ok(Ok(page)) => match serde_json::to_value(&page) {
                Ok(v) => structured(v),
                Err(e) => tool_error(format!("could not encode the result: {e}")),
            },
            Ok(Err(e)) => tool_error(e.to_string()),
            Err(e) => tool_error(format!("the query task failed: {e}")),
        })
    }

    #[tool(
        description = "Fetch the exchange rate from one currency to another (three-letter codes like USD, EUR) from the exchange-rate REST API; optionally convert an amount.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn rest_exchange_rate(
        &self,
        Parameters(args): Parameters<RestArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(
            match rest::fetch_rate(
                &self.http,
                &self.config.rest_base_url,
                &args.base,
                &args.target,
                args.amount,
                self.config.rest_timeout,
            )
            .await
            {
                Ok(rate) => match serde_json::to_value(&rate) {
                    Ok(v) => structured(v),
                    Err(e) => tool_error(format!("could not encode the result: {e}")),
                },
                Err(e) => tool_error(e.to_string()),
            },
        )
    }

    #[tool(
        description = "Run a Python 3 snippet in an isolated sandbox (allowlisted imports only: math, statistics, json, itertools, collections, datetime, re, random, textwrap; no file, network or process access). Returns stdout, stderr, exit_code, timed_out. timeout_seconds 1..10, default 5.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_python(
        &self,
        Parameters(args): Parameters<RunPythonArgs>,
    ) -> Result<CallToolResult, McpError> {
        let _reserved = match self.python.reserve(self.config.sandbox.max_memory_bytes) {
            Ok(r) => r,
            Err(busy) => return Ok(tool_error(busy.to_string())),
        };
        Ok(
            match sandbox::run(&self.config.sandbox, &args.code, args.timeout_seconds).await {
                Ok(run) => {
                    let ok = run.ok;
                    match serde_json::to_value(&run) {
                        Ok(v) => {
                            let mut r = structured(v);
                            if !ok {
                                r.is_error = Some(true);
                            }
                            r
                        }
                        Err(e) => tool_error(format!("could not encode the result: {e}")),
                    }
                }
                Err(e) => tool_error(e.to_string()),
            },
        )
    }

    #[tool(
        description = "List the file resources that can be opened (name, uri, size_bytes, mime_type), and the handles this session has open.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_resources(
        &self,
        Parameters(_args): Parameters<NoArgs>,
    ) -> Result<CallToolResult, McpError> {
        let open: Vec<serde_json::Value> = self
            .resources
            .open_handles()
            .into_iter()
            .map(|(handle_id, name)| serde_json::json!({ "handle_id": handle_id, "name": name }))
            .collect();
        Ok(to_result(self.resources.list().map(
            |r| serde_json::json!({ "resources": r, "open_handles": open }),
        )))
    }

    #[tool(
        description = "Open a resource by name; returns a handle_id to read through and release when done.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn open_resource(
        &self,
        Parameters(args): Parameters<OpenArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(to_result(self.resources.open(&args.name).map(
            |h| serde_json::json!({ "handle_id": h, "name": args.name }),
        )))
    }

    #[tool(
        description = "Read the whole content of a resource through an open handle_id (any number of times until released).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_resource(
        &self,
        Parameters(args): Parameters<HandleArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(to_result(self.resources.read(&args.handle_id).map(
            |(name, content)| {
                serde_json::json!({ "handle_id": args.handle_id, "name": name, "content": content })
            },
        )))
    }

    #[tool(
        description = "Release an open handle_id; reads through it fail afterwards.",
        annotations(
            read_only_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn release_resource(
        &self,
        Parameters(args): Parameters<HandleArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(to_result(self.resources.release(&args.handle_id).map(
            |name| serde_json::json!({ "handle_id": args.handle_id, "name": name, "released": true }),
        )))
    }
}

fn to_result<E: std::fmt::Display>(r: Result<serde_json::Value, E>) -> CallToolResult {
    match r {
        Ok(v) => structured(v),
        Err(e) => tool_error(e.to_string()),
    }
}

#[tool_handler(
    name = "mcp-agent-toolkit",
    version = "0.1.0",
    instructions = "Read-only SQL over a sample shop database (customers, products, orders)."
)]
impl ServerHandler for Toolkit {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            "mcp-agent-toolkit",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Read-only SQL over a sample shop database, exchange rates, sandboxed Python and file resources."
                .to_string(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let list = self
            .resources
            .list()
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(rmcp::model::ListResourcesResult::with_all_items(
            list.into_iter()
                .map(|r| rmcp::model::Resource::new(r.uri, r.name).with_mime_type(r.mime_type))
                .collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(
            vec![rmcp::model::ResourceTemplate::new(
                format!("{}{{filename}}", crate::resources::URI_PREFIX),
                "toolkit-file",
            )],
        ))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let name = request
            .uri
            .strip_prefix(crate::resources::URI_PREFIX)
            .ok_or_else(|| {
                McpError::resource_not_found(format!("unknown resource {}", request.uri), None)
            })?;
        let text = self
            .resources
            .content(name)
            .map_err(|e| McpError::resource_not_found(e.to_string(), None))?;
        Ok(rmcp::model::ReadResourceResponse::Complete(
            rmcp::model::ReadResourceResult::new(vec![rmcp::model::ResourceContents::text(
                text,
                request.uri.clone(),
            )]),
        ))
    }
    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, McpError> {
        // The router sorts by name; the seed fixes this order (S2-94).
        let mut tools = Self::tool_router().list_all();
        tools.sort_by_key(|t| {
            TOOL_ORDER
                .iter()
                .position(|n| *n == t.name.as_ref())
                .unwrap_or(usize::MAX)
        });
        let supports_cache_hints = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        Ok(rmcp::model::ListToolsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            tools,
            meta: None,
            next_cursor: None,
            ttl_ms: supports_cache_hints.then_some(0),
            cache_scope: supports_cache_hints.then_some(rmcp::model::CacheScope::Public),
        })
    }
}

/// Tool order of the seed (S2-94); tools not built yet are simply absent.
pub const TOOL_ORDER: &[&str] = &[
    "sql_query",
    "rest_exchange_rate",
    "run_python",
    "list_resources",
    "open_resource",
    "read_resource",
    "release_resource",
];

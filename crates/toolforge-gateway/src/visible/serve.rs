//! Serving a built-in server ([`Filtered`]): over stdin/stdout, or over HTTP as `serve` serves
//! the gateway: Streamable HTTP at `/mcp`, the legacy HTTP+SSE transport at `GET /sse` and
//! `POST /messages` ([`crate::legacy_sse`]), and `GET /tools`, the tools a request may see
//! (seed 001: its query and `x-mcp-*` headers narrow the operator's visibility), as rows of
//! `GET /tools` of `serve`. `Host` and `Origin` are checked on every route (rmcp checks them on
//! `/mcp`, [`crate::http`]'s guard on the others).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::OneshotTransport;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_select::Tool;

use super::filtered::Filtered;
use crate::http::{QUERY_MATCHED_HEADER, ToolRow};
use crate::legacy_sse::LegacySseOptions;

/// Pages of `tools/list` `GET /tools` follows at most.
const MAX_PAGES: usize = 100;

/// How a built-in server is served over HTTP.
#[derive(Debug, Clone, Default)]
pub struct BuiltinHttpOptions {
    /// `Host` values to accept besides loopback (the bind address when it is not loopback).
    pub extra_hosts: Vec<String>,
    /// Ends every session (the server stops).
    pub cancel: CancellationToken,
}

/// Serves `handler` over stdin/stdout until the client disconnects.
///
/// # Errors
/// The transport fails during initialization.
pub async fn serve_handler_stdio<H: ServerHandler>(handler: H) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = handler
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("stdio: {e}"))?;
    let _ = running.waiting().await;
    Ok(())
}

/// `/sse`, `/messages` and `GET /tools` of `handler` (each legacy session a clone of it, which
/// is a new session), guarded against foreign `Host` and `Origin` values. Merged beside a
/// `/mcp` of the same handler.
pub fn builtin_routes<H: ServerHandler + Clone>(
    handler: Filtered<H>,
    opts: &BuiltinHttpOptions,
) -> axum::Router {
    let legacy = {
        let handler = handler.clone();
        crate::legacy_sse::routes(
            move || handler.clone(),
            LegacySseOptions {
                cancel: opts.cancel.clone(),
                ..LegacySseOptions::default()
            },
        )
    };
    axum::Router::new()
        .route("/tools", axum::routing::get(tools_route::<H>))
        .with_state(Arc::new(handler))
        .merge(legacy)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(opts.extra_hosts.clone()),
            guard,
        ))
}

/// Refuses a request from a page of another site (DNS rebinding, a foreign `Origin`).
async fn guard(State(extra_hosts): State<Arc<Vec<String>>>, req: Request, next: Next) -> Response {
    match crate::http::foreign_request(req.method(), req.headers(), &extra_hosts) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    }
}

/// `GET /tools`: the tools this request may see, each as a row of `serve`'s `GET /tools`.
async fn tools_route<H: ServerHandler + Clone>(
    State(handler): State<Arc<Filtered<H>>>,
    req: Request,
) -> Response {
    let (parts, _) = req.into_parts();
    let mut rows = Vec::new();
    let mut matched = None;
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = match list_page(&handler, &parts, cursor.take()).await {
            Ok(page) => page,
            Err(message) => {
                return crate::error::ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    message,
                )
                .into_response();
            }
        };
        for definition in page["tools"].as_array().into_iter().flatten() {
            let Value::Object(definition) = definition.clone() else {
                continue;
            };
            let Ok(tool) = Tool::from_mcp(handler.server(), definition, &[]) else {
                continue;
            };
            rows.push(ToolRow {
                server: tool.server.clone(),
                name: tool.name.clone(),
                exposed_name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.to_value(),
                tags: tool.tags.clone(),
            });
        }
        if page["_meta"][crate::mcp::QUERY_MATCHED_META_KEY] == Value::Bool(false) {
            matched = Some(false);
        }
        match page["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    let rows = axum::Json(rows);
    match matched {
        Some(matched) => ([(QUERY_MATCHED_HEADER, matched.to_string())], rows).into_response(),
        None => rows.into_response(),
    }
}

/// One `tools/list` of a fresh session of `handler`, as if it came in the HTTP request
/// `parts` (its query and headers decide what it may see).
async fn list_page<H: ServerHandler + Clone>(
    handler: &Filtered<H>,
    parts: &http::request::Parts,
    cursor: Option<String>,
) -> Result<Value, String> {
    let params = match cursor {
        Some(cursor) => json!({"cursor": cursor}),
        None => json!({}),
    };
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params});
    let mut message: ClientJsonRpcMessage =
        serde_json::from_value(message).map_err(|e| format!("tools/list: {e}"))?;
    if let ClientJsonRpcMessage::Request(request) = &mut message {
        request.request.extensions_mut().insert(parts.clone());
    }
    let (transport, mut answers) = OneshotTransport::<RoleServer>::new(message);
    let running = rmcp::service::serve_directly(handler.clone(), transport, None);
    let answer = answers.recv().await;
    drop(running);
    match answer {
        Some(ServerJsonRpcMessage::Response(response)) => {
            serde_json::to_value(&response.result).map_err(|e| format!("tools/list: {e}"))
        }
        Some(ServerJsonRpcMessage::Error(error)) => {
            Err(format!("tools/list failed: {}", error.error.message))
        }
        _ => Err("tools/list gave no answer".to_owned()),
    }
}

/// Serves `handler` over HTTP on `listener` until `opts.cancel` fires: `/mcp` (one clone of the
/// handler per session), and [`builtin_routes`].
///
/// # Errors
/// The listener fails.
pub async fn serve_handler_http<H: ServerHandler + Clone>(
    handler: Filtered<H>,
    listener: tokio::net::TcpListener,
    opts: BuiltinHttpOptions,
) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let mcp = {
        let handler = handler.clone();
        let hosts = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(str::to_owned)
            .chain(opts.extra_hosts.iter().cloned());
        StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_allowed_hosts(hosts)
                .with_cancellation_token(opts.cancel.child_token()),
        )
    };
    let router = axum::Router::new()
        .nest_service("/mcp", mcp)
        .merge(builtin_routes(handler, &opts));
    serve_router(router, listener, opts.cancel.clone()).await
}

/// Serves `router` (a built-in server's routes, from [`builtin_routes`] and its `/mcp`) on
/// `listener` until `cancel` fires, each connection with `TCP_NODELAY` and its peer's address
/// (legacy sessions belong to their client's address).
///
/// # Errors
/// The listener fails.
pub async fn serve_router(
    router: axum::Router,
    listener: tokio::net::TcpListener,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(
        // Replies go out in small writes (headers, then SSE events): without TCP_NODELAY the
        // kernel holds each later write ~40 ms for the client's delayed ACK.
        axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move { cancel.cancelled().await })
    .await
}

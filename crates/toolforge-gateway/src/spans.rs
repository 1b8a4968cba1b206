//! The gateway's trace spans: `request` (each HTTP request, continuing the client's W3C
//! `traceparent` header), `tools/call` (an MCP call, continuing the client's
//! `_meta.traceparent` when it sent one); its `selection` span (where a call goes, and why) is
//! the agent's (`toolforge_agent::spans::route`), so both name a decision alike.
//!
//! They are `tracing` spans under [`SPAN_TARGET`], exported only when the binary installs an
//! exporter; otherwise they are disabled and the middleware passes the request straight on.
//! Attributes are bounded: names, routes, rules and outcomes, never arguments or free text.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use toolforge_mcp::trace_context::{self, SPAN_TARGET};
use tracing::Span;
use tracing::field::Empty;

/// The `request` span, in the request's extensions: rmcp runs MCP handlers in a task of their
/// own, which finds its parent here (through the request head rmcp hands over).
#[derive(Clone)]
pub(crate) struct RequestSpan(pub Span);

/// Longest tool name recorded (a name a client made up may be anything).
const MAX_NAME: usize = 128;

/// `router` with [`request_span`] around every route when the spans are exported (the
/// subscriber is installed before the router is built); as it is otherwise, since a middleware
/// costs allocations on every request even when it only passes the request on.
pub(crate) fn traced(router: axum::Router) -> axum::Router {
    if tracing::span_enabled!(target: SPAN_TARGET, tracing::Level::INFO) {
        router.layer(axum::middleware::from_fn(request_span))
    } else {
        router
    }
}

/// Wraps every HTTP request in a `request` span (kept open until the response body ends).
async fn request_span(mut req: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "request",
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = req.method().as_str(),
        http.route = route_label(&req),
        http.response.status_code = Empty,
    );
    if span.is_disabled() {
        return next.run(req).await;
    }
    let headers = req.headers();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(parent) = header("traceparent") {
        trace_context::continue_from(&span, parent, header("tracestate"));
    }
    req.extensions_mut().insert(RequestSpan(span.clone()));
    let response = tracing::Instrument::instrument(next.run(req), span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    // A streamed answer (SSE) is part of the request: the span ends with the body.
    use futures::StreamExt as _;
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _open = &span;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// The span of an MCP request `method` (`tools/call`) for the tool `tool` (as the client named
/// it): a child of the client's `_meta.traceparent` when it sent one, else of the HTTP
/// request's span, else of the current span (stdio).
pub(crate) fn mcp_span(ctx: &RequestContext<RoleServer>, tool: &str) -> Span {
    let request = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<RequestSpan>());
    let tool = bounded(tool);
    let span = match request {
        Some(RequestSpan(parent)) => tracing::info_span!(
            target: SPAN_TARGET,
            parent: parent,
            "tools/call",
            otel.kind = "server",
            mcp.method.name = "tools/call",
            mcp.tool.name = tool,
        ),
        None => tracing::info_span!(
            target: SPAN_TARGET,
            "tools/call",
            otel.kind = "server",
            mcp.method.name = "tools/call",
            mcp.tool.name = tool,
        ),
    };
    if let Some(parent) = ctx.meta.get_traceparent() {
        trace_context::continue_from(&span, parent, ctx.meta.get_tracestate());
    }
    span
}

fn bounded(name: &str) -> &str {
    match name.char_indices().nth(MAX_NAME) {
        Some((end, _)) => &name[..end],
        None => name,
    }
}

/// The route label of a request: the router's pattern, `/mcp` for everything under it.
pub(crate) fn route_label(req: &Request) -> String {
    match req.extensions().get::<axum::extract::MatchedPath>() {
        Some(p) if p.as_str().starts_with("/mcp") => "/mcp".to_owned(),
        Some(p) => p.as_str().to_owned(),
        None => "unmatched".to_owned(),
    }
}

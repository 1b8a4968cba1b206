//! The HTTP face: `/mcp` (Streamable HTTP, rmcp's service), `GET /sse` and `POST /messages` (the
//! legacy HTTP+SSE transport, [`crate::legacy_sse`]), `GET /tools`, `GET /health` (and the
//! load balancer's open probes [`PROBE_PATHS`]), the agent's routes ([`crate::chat`]), the web
//! console at `/ui` ([`crate::console`]), and JSON errors for everything else.
//!
//! DNS-rebinding protection: rmcp checks `Host` (and, enforced here, `Origin`) on `/mcp`; the
//! same allow-list guards the other routes in a middleware, so a page on a foreign origin can
//! read nothing. Bodies are bounded on every route (`max_body_bytes`, 4 MiB by default): a
//! larger `Content-Length` is refused with 413 before the body is read, and a chunked body
//! that runs past the limit gets 413 too. `/mcp` has its own guard ([`crate::mcp_guard`]:
//! JSON-RPC error codes, the session cap, request ids in flight); the listener bounds
//! connections ([`crate::listener`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolforge_mcp::{ServerHealth, ServerState};

use crate::drain::Drain;
use crate::error::ApiError;
use crate::mcp::{Gateway, Shared};
use crate::mcp_guard::McpGuard;
use crate::mcp_sessions::CappedSessions;
use crate::metrics::Metrics;
use crate::visible::RequestChannels;

/// HTTP options.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Extra `Host` values to accept besides loopback (the bind address when not loopback).
    pub extra_hosts: Vec<String>,
    /// Stateless Streamable HTTP (no sessions: for replicas behind a load balancer; the
    /// server-to-client requests of a call cannot be relayed then).
    pub stateless: bool,
    /// Largest request body accepted, on every route.
    pub max_body_bytes: usize,
    /// Connections at once, and how long a connection may take to send headers or sit idle.
    pub connections: crate::listener::ConnectionLimits,
    /// `/mcp` sessions at once, and how long an idle one lives.
    pub sessions: crate::mcp_sessions::SessionLimits,
    /// Ends open sessions on shutdown.
    pub cancel: CancellationToken,
    /// The agent behind `POST /chat`, `/chat/stream` and `/agent/run` (absent: those routes
    /// answer 404 and only the gateway is served).
    pub agent: Option<Arc<toolforge_agent::Agent>>,
    /// Who may call (API keys, JWTs): every route but `/openapi.json` then needs a bearer
    /// token (401 without a valid one). `None`: every request is `anonymous`.
    pub identity: Option<Arc<crate::identity::Identity>>,
    /// The daily spend the console's "Spend and cache" page shows (absent: it says so).
    pub spend: Option<crate::console::SpendReport>,
    /// Principals that may approve quarantined tools from the console (none by default); with
    /// identity on, the operators: the only principals the console shows every tool, the bill,
    /// the quarantine and every principal's trace, and who may read `/metrics`.
    pub console_admins: Vec<String>,
    /// With identity on, principals besides the console admins that may read `/metrics` (a
    /// Prometheus scraper's key): its labels name servers and tools.
    pub metrics_readers: Vec<String>,
    /// The counters `GET /metrics` shows.
    pub metrics: Arc<Metrics>,
    /// Begun (on SIGTERM, by the binary): stop accepting, `/health` 503, finish what is in
    /// flight, return.
    pub drain: Arc<Drain>,
    /// Longest wait for requests in flight once draining has begun.
    pub drain_timeout: Duration,
    /// How long a draining replica still accepts connections (answering `/health` with 503),
    /// so that its load balancer's health checks see it leave before it refuses anyone.
    pub drain_grace: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            extra_hosts: Vec::new(),
            stateless: false,
            max_body_bytes: 4 * 1024 * 1024,
            connections: crate::listener::ConnectionLimits::default(),
            sessions: crate::mcp_sessions::SessionLimits::default(),
            cancel: CancellationToken::new(),
            agent: None,
            identity: None,
            spend: None,
            console_admins: Vec::new(),
            metrics_readers: Vec::new(),
            metrics: Arc::new(Metrics::new()),
            drain: Arc::new(Drain::new()),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            drain_grace: Duration::ZERO,
        }
    }
}

/// How long a draining replica waits for requests in flight by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `toolforge serve` keeps accepting once draining has begun, by default: HAProxy's
/// checks of `deploy/haproxy.cfg` take a replica out within about a second.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(3);

/// How long connections get to close once the drain deadline has passed (or on a hard stop).
const CLOSE_GRACE: Duration = Duration::from_secs(2);

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// One row of `GET /tools`.
#[derive(Debug, Serialize)]
pub struct ToolRow {
    pub server: String,
    pub name: String,
    pub exposed_name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub tags: Vec<String>,
}

/// The merged catalog as `GET /tools` lists it: every tool of every server, with the name the
/// gateway exposes it under, in presentation order.
#[must_use]
pub fn tool_rows(shared: &Shared) -> Vec<ToolRow> {
    tool_rows_for(shared, &RequestChannels::default())
}

/// [`tool_rows`] as one request may see them (the operator's visibility narrowed by the
/// request's query and `x-mcp-*` headers).
#[must_use]
pub fn tool_rows_for(shared: &Shared, request: &RequestChannels) -> Vec<ToolRow> {
    tool_rows_in(shared, &shared.scope(request))
}

/// [`tool_rows`] as `scope` sees them.
fn tool_rows_in(shared: &Shared, scope: &crate::visible::Scope) -> Vec<ToolRow> {
    let presentation = shared.presentation();
    let mut rows = Vec::new();
    for exposed in presentation.tools() {
        for member in &exposed.members {
            if let Some(tool) = scope.get(member) {
                rows.push(ToolRow {
                    server: tool.server.clone(),
                    name: tool.name.clone(),
                    exposed_name: exposed.name.clone(),
                    description: tool.description.clone(),
                    input_schema: tool.input_schema.to_value(),
                    tags: tool.tags.clone(),
                });
            }
        }
    }
    rows
}

/// `GET /health` body.
#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    /// The replica is draining (SIGTERM): it answers 503 so the load balancer moves away.
    pub draining: bool,
    pub servers: Vec<ServerHealth>,
    pub cache: serde_json::Value,
    /// Tools held back until approved (`toolforge tools approve`): `[{"server", "tool",
    /// "reason"}]`.
    pub quarantined: Vec<serde_json::Value>,
    /// The agent's trace writer (`lost_records`, `failing`), when the agent is served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<serde_json::Value>,
}

/// Health of the pool: `ok` when every enabled server is ready, else `degraded`.
#[must_use]
pub fn health(shared: &Shared) -> Health {
    let servers = shared.pool.health();
    let ok = servers
        .iter()
        .all(|s| matches!(s.state, ServerState::Ready | ServerState::Disabled));
    Health {
        status: if ok { "ok" } else { "degraded" },
        draining: false,
        servers,
        cache: shared.pool.cache_status(),
        quarantined: shared.pool.quarantined(),
        trace: None,
    }
}

/// Response header of `GET /tools` set to `false` when the request's search query matched
/// nothing, so the full visible set was listed instead (seed 001's fallback).
pub const QUERY_MATCHED_HEADER: &str = "x-toolforge-query-matched";

async fn tools_route(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
) -> Response {
    // As `tools/list`: servers still starting get a moment before the answer.
    shared.pool.settled(crate::mcp::START_GRACE).await;
    let scope = shared.scope(&RequestChannels {
        principal: crate::identity::principal_of(&extensions),
        ..RequestChannels::from_http(&uri, &headers)
    });
    let rows = Json(tool_rows_in(&shared, &scope));
    match scope.query_matched() {
        Some(matched) => ([(QUERY_MATCHED_HEADER, matched.to_string())], rows).into_response(),
        None => rows.into_response(),
    }
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no route for {} {}; see GET /openapi.json (POST /mcp, /chat, /chat/stream, /agent/run; GET /sse, /tools, /health, /ui)",
            req.method(),
            req.uri().path()
        ),
    )
}

/// The host of a `Host` header value (`host[:port]`, `[v6][:port]`), or `None` when it is not
/// one: anything after a bracketed address but a port, a port that is not digits, characters
/// no host name has (`@`, `/`, spaces). A lenient split let `[::1].evil.example` pass as `::1`
/// and `localhost:1@evil.example` as `localhost`.
fn authority_host(authority: &str) -> Option<&str> {
    let port_ok = |port: &str| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = authority.strip_prefix('[') {
        let (addr, after) = rest.split_once(']')?;
        let valid = !addr.is_empty()
            && addr
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        let port_fine = after.is_empty() || after.strip_prefix(':').is_some_and(port_ok);
        return (valid && port_fine).then_some(addr);
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port_ok(port) => host,
        Some(_) => return None,
        None => authority,
    };
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    valid.then_some(host)
}

fn authority_allowed(authority: &str, extra: &[String]) -> bool {
    let Some(bare) = authority_host(authority) else {
        return false;
    };
    let bare_lower = bare.to_ascii_lowercase();
    LOOPBACK_HOSTS.contains(&bare_lower.as_str())
        || extra
            .iter()
            .any(|e| e.eq_ignore_ascii_case(authority) || e.eq_ignore_ascii_case(bare))
}

fn host_allowed(headers: &HeaderMap, extra: &[String]) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true; // HTTP/1.0 or HTTP/2 without :authority mapping: nothing to rebind
    };
    host.to_str().is_ok_and(|h| authority_allowed(h, extra))
}

fn origin_allowed(headers: &HeaderMap, extra: &[String]) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    // An origin is `scheme://host[:port]` and nothing else (no user, path, query).
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|authority| authority_allowed(authority, extra))
}

/// A browser's request from another site that carries no `Origin`, other than the user
/// opening a page: refused. Browsers leave `Origin` off some requests but always send
/// `Sec-Fetch-Site`; without this, such a request from a foreign page passed the Origin check,
/// which only sees the header when it is there. (With an `Origin`, the Origin check decides: a
/// browser client on another loopback port is cross-site and allowed.)
fn cross_site(method: &axum::http::Method, headers: &HeaderMap) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !site.eq_ignore_ascii_case("cross-site") || headers.contains_key(header::ORIGIN) {
        return false;
    }
    let navigation = headers
        .get("sec-fetch-mode")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|m| m.eq_ignore_ascii_case("navigate"));
    let reading = method == axum::http::Method::GET || method == axum::http::Method::HEAD;
    !(reading && navigation)
}

pub use crate::identity::PROBE_PATHS;

/// Why a request from a page of another site is refused (DNS rebinding, a foreign `Origin`, a
/// cross-site request without one); `None` lets it through. Also the built-in servers' guard
/// (`crate::visible::serve`).
pub(crate) fn foreign_request(
    method: &axum::http::Method,
    headers: &HeaderMap,
    extra_hosts: &[String],
) -> Option<ApiError> {
    if cross_site(method, headers) {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "a request from another site is refused (Sec-Fetch-Site); open the page itself",
        ));
    }
    if !host_allowed(headers, extra_hosts) {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "Host header is not allowed (DNS-rebinding protection)",
        ));
    }
    if !origin_allowed(headers, extra_hosts) {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "Origin is not allowed (DNS-rebinding protection)",
        ));
    }
    None
}

/// Why a request is refused before any route sees it: a Host or Origin that is not ours
/// (DNS rebinding), or a declared body over the bound. `None` lets it through.
fn refusal(
    method: &axum::http::Method,
    path: &str,
    headers: &HeaderMap,
    opts: &HttpOptions,
) -> Option<ApiError> {
    if PROBE_PATHS.contains(&path) {
        return None;
    }
    if let Some(foreign) = foreign_request(method, headers, &opts.extra_hosts) {
        return Some(foreign);
    }
    let too_big = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > opts.max_body_bytes);
    too_big.then(|| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {} bytes", opts.max_body_bytes),
        )
    })
}

/// The gateway's MCP service, over `sessions`.
#[must_use]
pub fn mcp_service(
    shared: Arc<Shared>,
    opts: &HttpOptions,
    sessions: Arc<CappedSessions>,
) -> StreamableHttpService<Gateway, CappedSessions> {
    let hosts = LOOPBACK_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .chain(opts.extra_hosts.iter().cloned());
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")])
        .collect();
    for h in &opts.extra_hosts {
        origins.push(format!("http://{h}:*"));
        origins.push(format!("https://{h}:*"));
    }
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(opts.max_body_bytes)
        .with_cancellation_token(opts.cancel.child_token())
        // A request answered by its final response alone gets it as `application/json`: one
        // write instead of an SSE stream's three (headers and priming event, the event, the
        // end), in every mode. One whose handler sends anything first (progress, a request of
        // the client), or that takes longer than the keep-alive interval, gets the SSE stream.
        // Sessions do this through the vendored rmcp's patch 0002 (`vendor/README.md`).
        .with_json_response(true);
    if opts.stateless {
        config = config.with_legacy_session_mode(false);
    }
    StreamableHttpService::new(move || Ok(Gateway::new(shared.clone())), sessions, config)
}

/// rmcp's MCP service behind one `Arc`. axum clones a route's service for every request, and
/// rmcp's service clones its whole config (the allowed hosts and origins, a dozen strings) on
/// every clone and again in every `call`; this clones a pointer instead. Its answers are
/// adjusted for clients here ([`session_closed`], [`session_gone`]), not by middleware, which
/// would cost allocations on every request.
#[derive(Clone)]
struct SharedMcpService(Arc<StreamableHttpService<Gateway, CappedSessions>>);

impl<B> tower::Service<http::Request<B>> for SharedMcpService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send + 'static,
    B::Error: std::fmt::Display,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let service = self.0.clone();
        let delete = req.method() == axum::http::Method::DELETE;
        let had_session = req.headers().contains_key("mcp-session-id");
        Box::pin(async move {
            let response = service.handle(req).await.map(axum::body::Body::new);
            Ok(session_closed(delete, session_gone(had_session, response)))
        })
    }
}

/// Closing a session (`DELETE /mcp`) answers 200: rmcp answers 202, which the Python SDK
/// reports to its user as a failed termination.
fn session_closed(delete: bool, mut response: Response) -> Response {
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// Answers an unknown or expired `Mcp-Session-Id` (its replica restarted, or it idled out)
/// with a message that says what to do, instead of rmcp's bare "Session not found".
fn session_gone(had_session: bool, response: Response) -> Response {
    if !had_session || response.status() != StatusCode::NOT_FOUND {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return response; // a JSON-RPC answer of rmcp's own, already explicit
    }
    (
        StatusCode::NOT_FOUND,
        Json(json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": -32001,
                "message": SESSION_GONE_MESSAGE,
            }
        })),
    )
        .into_response()
}

pub use crate::mcp_sessions::SESSION_GONE_MESSAGE;

/// Counts every request (route, status, latency) and holds it in flight for the drain until
/// its response body has been sent; listening streams (`GET /mcp`, `GET /sse`) are not held
/// (a legacy session's requests hold it until their answers are sent). Requests
/// carry the metrics in their extensions, for the tool-call counters further in. A request
/// with a [`refusal`] is answered here (and counted) without reaching its route. One
/// middleware for both: each `from_fn` layer costs allocations on every request.
async fn observe(State(opts): State<Arc<HttpOptions>>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = crate::spans::route_label(&req);
    let method = req.method().clone();
    let listening = method == axum::http::Method::GET && (route == "/mcp" || route == "/sse");
    let in_flight = (!listening).then(|| opts.drain.enter());
    req.extensions_mut().insert(opts.metrics.clone());
    let response = match refusal(req.method(), req.uri().path(), req.headers(), &opts) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    };
    opts.metrics.http_request(
        &route,
        method.as_str(),
        response.status().as_u16(),
        started.elapsed(),
    );
    match in_flight {
        None => response,
        Some(in_flight) => response.map(|body| in_flight.hold(body)),
    }
}

async fn health_route(State((shared, opts)): State<(Arc<Shared>, Arc<HttpOptions>)>) -> Response {
    let mut body = health(&shared);
    body.trace = opts.agent.as_ref().map(|a| a.traces().status());
    if opts.drain.is_draining() {
        body.status = "draining";
        body.draining = true;
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    Json(body).into_response()
}

/// `GET /livez`: the process serves HTTP. 200 while draining too, so that a replica finishing
/// its calls is not restarted.
async fn liveness_route() -> Response {
    Json(json!({"status": "alive"})).into_response()
}

/// `GET /readyz`: whether the replica takes new traffic: 200, or 503 once it drains.
async fn readiness_route(State(opts): State<Arc<HttpOptions>>) -> Response {
    if opts.drain.is_draining() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "draining"})),
        )
            .into_response();
    }
    Json(json!({"status": "ready"})).into_response()
}

async fn metrics_route(
    State((shared, opts)): State<(Arc<Shared>, Arc<HttpOptions>)>,
    sessions: axum::Extension<Arc<CappedSessions>>,
    legacy: axum::Extension<crate::legacy_sse::LegacySessions>,
    extensions: axum::http::Extensions,
) -> Response {
    if opts.identity.is_some() {
        let principal = crate::identity::principal_of(&extensions);
        let reader = |p: &String| p == principal.as_str();
        if !opts.console_admins.iter().any(reader) && !opts.metrics_readers.iter().any(reader) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "\"{principal}\" may not read /metrics (its labels name servers and tools): \
                     the operator names readers with `serve --metrics-reader PRINCIPAL`"
                ),
            )
            .into_response();
        }
    }
    let live = crate::metrics::Live {
        sessions: sessions.open().await as u64,
        legacy_sessions: legacy.open() as u64,
        in_flight: opts.drain.in_flight(),
        draining: opts.drain.is_draining(),
        cache: shared.pool.cache_status(),
    };
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        opts.metrics.render(&live),
    )
        .into_response()
}

/// The whole HTTP router.
pub fn router(shared: Arc<Shared>, opts: HttpOptions) -> axum::Router {
    let opts = Arc::new(opts);
    let sessions = Arc::new(CappedSessions::new(opts.sessions));
    let legacy_sessions = crate::legacy_sse::LegacySessions::default();
    let mut router = axum::Router::new()
        .route("/tools", get(tools_route))
        .with_state(shared.clone())
        .merge(
            axum::Router::new()
                .route("/health", get(health_route))
                .route("/metrics", get(metrics_route))
                .layer(axum::Extension(sessions.clone()))
                .layer(axum::Extension(legacy_sessions.clone()))
                .with_state((shared.clone(), opts.clone())),
        )
        .merge(
            axum::Router::new()
                .route("/livez", get(liveness_route))
                .route("/readyz", get(readiness_route))
                .with_state(opts.clone()),
        )
        .merge(crate::openapi::routes());
    if let Some(agent) = &opts.agent {
        router = router.merge(crate::chat::routes(
            agent.clone(),
            shared.visibility.clone(),
            opts.metrics.clone(),
        ));
    }
    if let Some(oauth) = opts.identity.as_ref().and_then(|i| i.oauth()).cloned() {
        router = router.merge(crate::oauth::metadata::routes(oauth));
    }
    if let Some(consent) = shared.consent_routes() {
        router = router.merge(consent);
    }
    router = router.merge(crate::console::router::routes(
        shared.clone(),
        opts.agent.clone(),
        opts.spend.clone(),
        opts.cancel.clone(),
        &opts.console_admins,
        opts.identity.is_some(),
    ));
    // The legacy HTTP+SSE transport: each session a gateway session, as on `/mcp`.
    router = router.merge({
        let shared = shared.clone();
        crate::legacy_sse::routes_counted(
            move || Gateway::new(shared.clone()),
            crate::legacy_sse::LegacySseOptions {
                sessions: opts.sessions,
                identity_on: opts.identity.is_some(),
                max_body_bytes: opts.max_body_bytes,
                cancel: opts.cancel.clone(),
                drain: Some(opts.drain.clone()),
            },
            &legacy_sessions,
        )
    });
    let lists = Arc::downgrade(&shared);
    let lists: crate::list_splice::Resolve =
        Arc::new(move |marker| lists.upgrade()?.list_splice(marker));
    let mcp_guard = Arc::new(McpGuard::new(
        opts.max_body_bytes,
        (!opts.stateless).then(|| sessions.clone()),
        Some(lists),
        opts.identity.is_some(),
    ));
    let mcp = axum::Router::new().nest_service(
        "/mcp",
        tower::ServiceBuilder::new()
            .layer(axum::middleware::from_fn_with_state(
                mcp_guard,
                crate::mcp_guard::guard,
            ))
            .service(SharedMcpService(Arc::new(mcp_service(
                shared, &opts, sessions,
            )))),
    );
    // Every route's middleware, outermost first, as one layer: axum boxes a route once per
    // `Router::layer`, and each box costs allocations and a clone of what is inside it on every
    // request (`benchmarks/proxy/README.md`, 2026-11-28).
    let every_route = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(opts.clone(), observe))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            opts.max_body_bytes,
        ))
        // The limited body, as the body type the middleware inside take.
        .map_request(|req: Request<_>| req.map(axum::body::Body::new))
        // One bound for every route: axum's own (2 MiB for JSON) gives way to it.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .option_layer(opts.identity.clone().map(|identity| {
            axum::middleware::from_fn_with_state(identity, crate::identity::authenticate)
        }));
    let router = router.merge(mcp).fallback(not_found).layer(every_route);
    crate::spans::traced(router)
}

/// Serves [`router`] on `listener` until `opts.cancel` is cancelled (a hard stop: connections
/// close at once, in-flight responses get [`CLOSE_GRACE`]) or `opts.drain` begins: then
/// `/health` answers 503, new connections are still accepted for `opts.drain_grace` (the load
/// balancer's checks see the replica leave), the listener closes, requests in flight get what
/// is left of `opts.drain_timeout` to finish, and sessions and connections end after that.
///
/// # Errors
/// The listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    opts: HttpOptions,
) -> std::io::Result<()> {
    let cancel = opts.cancel.clone();
    let drain = opts.drain.clone();
    let (drain_timeout, drain_grace) = (opts.drain_timeout, opts.drain_grace);
    let limits = opts.connections;
    let stop = crate::listener::Stop::default();
    let closed = stop.close.clone();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            tokio::select! {
                () = drain.begun() => {
                    let deadline = tokio::time::Instant::now() + drain_timeout;
                    tracing::info!(in_flight = drain.in_flight(), "draining: /health answers 503");
                    tokio::select! {
                        () = tokio::time::sleep(drain_grace.min(drain_timeout)) => {}
                        () = cancel.cancelled() => {}
                    }
                    stop.accept.cancel();
                    tracing::info!(in_flight = drain.in_flight(), "draining: no new connections");
                    tokio::select! {
                        () = drain.idle() => {}
                        () = tokio::time::sleep_until(deadline) => {
                            tracing::warn!(in_flight = drain.in_flight(), "drain deadline passed; ending what is left");
                        }
                        () = cancel.cancelled() => {}
                    }
                }
                () = cancel.cancelled() => {}
            }
            cancel.cancel();
            stop.accept.cancel();
            stop.close.cancel();
        }
    });
    let served = crate::listener::serve_connections(listener, router(shared, opts), limits, stop);
    tokio::select! {
        r = served => r,
        () = async {
            closed.cancelled().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        } => Ok(()),
    }
}

#[cfg(test)]
mod origin_tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    /// The regression: `[::1].evil…` passed as `::1` and `localhost:1@evil…` as `localhost`.
    #[test]
    fn hosts_and_origins_are_parsed_strictly() {
        let extra = vec!["gw.example".to_owned()];
        for (origin, allowed) in [
            ("http://localhost", true),
            ("http://localhost:8000", true),
            ("https://127.0.0.1:1", true),
            ("http://[::1]:8000", true),
            ("http://LOCALHOST:8000", true),
            ("https://gw.example", true),
            ("http://[::1].evil.example", false),
            ("http://[::1]x:80", false),
            ("http://localhost:1@evil.example", false),
            ("http://localhost@evil.example", false),
            ("http://localhost:8000/path", false),
            ("http://localhost:80a", false),
            ("http://evil.example", false),
            ("ftp://localhost", false),
            ("null", false),
            ("http://", false),
        ] {
            assert_eq!(
                origin_allowed(&headers(&[("origin", origin)]), &extra),
                allowed,
                "{origin}"
            );
        }
        for (host, allowed) in [
            ("localhost:8000", true),
            ("[::1]:8000", true),
            ("gw.example", true),
            ("[::1].evil.example", false),
            ("localhost:1@evil.example", false),
        ] {
            assert_eq!(
                host_allowed(&headers(&[("host", host)]), &extra),
                allowed,
                "{host}"
            );
        }
    }

    /// The regression: a cross-site request with no `Origin` was accepted.
    #[test]
    fn cross_site_requests_are_refused_but_navigations() {
        use axum::http::Method;
        let site = |s: &'static str, mode: &'static str| {
            headers(&[("sec-fetch-site", s), ("sec-fetch-mode", mode)])
        };
        assert!(cross_site(&Method::POST, &site("cross-site", "cors")));
        assert!(cross_site(&Method::POST, &site("cross-site", "no-cors")));
        assert!(cross_site(&Method::GET, &site("cross-site", "cors")));
        // With an Origin, the Origin check decides.
        let mut with_origin = site("cross-site", "cors");
        with_origin.insert("origin", "http://localhost:6274".parse().unwrap());
        assert!(!cross_site(&Method::POST, &with_origin));
        assert!(!cross_site(&Method::POST, &site("same-site", "cors")));
        assert!(!cross_site(&Method::GET, &site("cross-site", "navigate")));
        assert!(!cross_site(&Method::POST, &site("same-origin", "cors")));
        assert!(!cross_site(&Method::POST, &site("none", "navigate")));
        assert!(!cross_site(&Method::POST, &HeaderMap::new()));
    }
}

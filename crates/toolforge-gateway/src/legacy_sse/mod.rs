//! The legacy HTTP+SSE transport of MCP 2024-11-05, server side: `GET /sse` opens a session
//! (an event stream whose first event, `endpoint`, names `/messages?sessionId=…`), and each
//! `POST /messages?sessionId=…` carries one message of that session, answered `202 Accepted`;
//! what the server sends (answers, notifications, its own requests) goes on the stream as
//! `message` events. rmcp has no such transport, so each session is an rmcp [`Transport`]
//! (`transport.rs`) feeding the same handler as `/mcp` (the gateway's, or a built-in server's).
//!
//! A message reaches the handler as if it came over `/mcp`: its HTTP request is the POST (its
//! principal, its `x-mcp-*` headers, its trace context) under the `GET /sse` URL, whose query
//! scopes the session's visibility as the connection URL does for `/mcp`; `x-mcp-*` headers
//! of the GET count for a POST that sends none of its own. Sessions have owners and a cap
//! with the same fair share as `/mcp` (`crate::mcp_sessions`): another owner that learned a
//! session's id is told it does not exist.
//!
//! Bounds: at most `max_sessions` sessions, each ending after `idle_timeout` without a POST
//! and with nothing in flight, when its stream closes, or when the gateway stops; a POST body
//! of at most `max_body_bytes`; [`QUEUED_MESSAGES`] messages queued to the handler and
//! [`QUEUED_EVENTS`] to the stream (a client that does not read its stream for
//! [`transport::STALLED_STREAM`] loses its session); [`session::MAX_PENDING_PER_SESSION`]
//! requests in flight per session, each holding the drain until its answer is sent.
//!
//! [`Transport`]: rmcp::transport::Transport

pub(crate) mod session;
mod transport;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::{
    ClientJsonRpcMessage, ErrorData, GetExtensions, RequestId, ServerJsonRpcMessage,
};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::drain::Drain;
use crate::mcp_guard::code;
use crate::mcp_sessions::{SessionLimits, SessionOwner};
use session::{Connection, Refused, Session, Sessions};
use transport::SessionTransport;

/// Messages of one session queued to its handler (a POST past them gets 503).
pub const QUEUED_MESSAGES: usize = 64;
/// Messages of one session queued to its stream.
pub const QUEUED_EVENTS: usize = 256;
/// How often an idle stream gets a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Where the `endpoint` event tells clients to POST.
pub const MESSAGES_PATH: &str = "/messages";

/// How the legacy surface runs.
#[derive(Debug, Clone)]
pub struct LegacySseOptions {
    /// Sessions at once, and how long one lives without a POST.
    pub sessions: SessionLimits,
    /// Requests are authenticated: a session belongs to its principal (else to its peer's
    /// address).
    pub identity_on: bool,
    /// The largest POST body.
    pub max_body_bytes: usize,
    /// Ends every session (the server stops).
    pub cancel: CancellationToken,
    /// Requests in flight hold it (their answers go out after their POST was answered).
    pub drain: Option<Arc<Drain>>,
}

impl Default for LegacySseOptions {
    fn default() -> Self {
        Self {
            sessions: SessionLimits::default(),
            identity_on: false,
            max_body_bytes: 4 * 1024 * 1024,
            cancel: CancellationToken::new(),
            drain: None,
        }
    }
}

/// The legacy surface of one server: a new handler per session from `factory`.
struct Surface<F> {
    factory: F,
    sessions: Arc<Sessions>,
    opts: LegacySseOptions,
}

/// Open legacy sessions (for `/metrics`).
#[derive(Debug, Clone, Default)]
pub struct LegacySessions(Arc<Sessions>);

impl LegacySessions {
    /// Sessions open now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.0.len()
    }
}

/// `GET /sse` and `POST /messages` (also `/messages/`, which the Python SDK's servers use),
/// each session served by a handler from `factory`.
pub fn routes<F, H>(factory: F, opts: LegacySseOptions) -> axum::Router
where
    F: Fn() -> H + Send + Sync + 'static,
    H: ServerHandler,
{
    routes_counted(factory, opts, &LegacySessions::default())
}

/// [`routes`], counting its sessions in `sessions`.
pub fn routes_counted<F, H>(
    factory: F,
    opts: LegacySseOptions,
    sessions: &LegacySessions,
) -> axum::Router
where
    F: Fn() -> H + Send + Sync + 'static,
    H: ServerHandler,
{
    let surface = Arc::new(Surface {
        factory,
        sessions: sessions.0.clone(),
        opts,
    });
    axum::Router::new()
        .route("/sse", axum::routing::get(open::<F, H>))
        .route(MESSAGES_PATH, axum::routing::post(post::<F>))
        .route("/messages/", axum::routing::post(post::<F>))
        .with_state(surface)
}

/// A plain-text answer (legacy clients read the status; the text is for people).
fn plain(status: StatusCode, text: impl Into<String>) -> Response {
    (status, text.into()).into_response()
}

/// A JSON-RPC error as the answer of a POST.
fn rpc_error(status: StatusCode, id: &Value, code: i64, text: impl Into<String>) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text.into()}});
    (status, axum::Json(body)).into_response()
}

/// The `x-mcp-*` headers of a request.
fn visibility_headers(headers: &http::HeaderMap) -> Vec<(http::HeaderName, http::HeaderValue)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-mcp-"))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

async fn open<F, H>(State(surface): State<Arc<Surface<F>>>, req: Request) -> Response
where
    F: Fn() -> H + Send + Sync + 'static,
    H: ServerHandler,
{
    let (parts, _) = req.into_parts();
    let owner = SessionOwner::of(&parts.extensions, surface.opts.identity_on);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (inbox, inbox_rx) = mpsc::channel(QUEUED_MESSAGES);
    let (outbox, outbox_rx) = mpsc::channel(QUEUED_EVENTS);
    let end = surface.opts.cancel.child_token();
    let session = Arc::new(Session {
        owner,
        connection: Connection {
            uri: parts.uri.clone(),
            headers: visibility_headers(&parts.headers),
        },
        inbox,
        outbox: outbox.clone(),
        in_flight: Arc::default(),
        last_post: parking_lot::Mutex::new(tokio::time::Instant::now()),
        end: end.clone(),
    });
    let max = surface.opts.sessions.max_sessions;
    if !surface.sessions.open(id.clone(), session.clone(), max) {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server already has its maximum of {max} SSE sessions open; try again later"
            ),
        );
    }
    let transport = SessionTransport {
        inbox: inbox_rx,
        outbox,
        in_flight: session.in_flight.clone(),
        end: end.clone(),
    };
    tokio::spawn(run(
        (surface.factory)(),
        transport,
        session,
        id.clone(),
        surface.sessions.clone(),
        surface.opts.sessions.idle_timeout,
    ));
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("{MESSAGES_PATH}?sessionId={id}"));
    // The client hung up: its session ends with the stream.
    let hung_up = end.clone().drop_guard();
    let messages = tokio_stream::wrappers::ReceiverStream::new(outbox_rx).filter_map(|message| {
        let event = serde_json::to_string(&message)
            .map(|json| Event::default().event("message").data(json));
        async move { event.ok() }
    });
    let stream = futures::stream::once(async { endpoint })
        .chain(messages)
        .take_until(end.cancelled_owned())
        .map(move |event| {
            let _held = &hung_up;
            Ok::<_, std::convert::Infallible>(event)
        });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    // Proxies that buffer responses would hold the events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    response
}

/// Serves one session until it ends (its stream closed, it idled out, the server stops).
async fn run<H: ServerHandler>(
    handler: H,
    transport: SessionTransport,
    session: Arc<Session>,
    id: String,
    sessions: Arc<Sessions>,
    idle: Duration,
) {
    let end = session.end.clone();
    let served = async move {
        match handler.serve(transport).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!("a legacy SSE session ended before it initialized: {e}"),
        }
    };
    tokio::select! {
        () = served => {}
        () = end.cancelled() => {}
        () = session.idled_out(idle) => {
            tracing::debug!("a legacy SSE session idled out");
        }
    }
    end.cancel();
    sessions.remove(&id);
}

async fn post<F>(State(surface): State<Arc<Surface<F>>>, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    let query = crate::visible::query_pairs(&parts.uri);
    let Some(id) = query
        .iter()
        .find(|(k, _)| k == "sessionId" || k == "session_id")
        .map(|(_, v)| v.clone())
    else {
        return plain(
            StatusCode::BAD_REQUEST,
            "sessionId is required: POST to the URL the stream's endpoint event names",
        );
    };
    let owner = SessionOwner::of(&parts.extensions, surface.opts.identity_on);
    let Some(session) = surface.sessions.get(&id, &owner) else {
        return plain(
            StatusCode::NOT_FOUND,
            "Could not find session (it ended, or the server restarted): open a new one with GET /sse",
        );
    };
    let bytes = match axum::body::to_bytes(body, surface.opts.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the message is larger than {} bytes, or could not be read",
                    surface.opts.max_body_bytes
                ),
            );
        }
    };
    *session.last_post.lock() = tokio::time::Instant::now();
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            code::PARSE_ERROR,
            "parse error: the body is not valid JSON",
        );
    };
    if let Err((code, text)) = crate::mcp_guard::check_message(&value, false) {
        return refused_message(&session, &value, code, text);
    }
    let mut message = match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(message) => message,
        Err(e) => {
            let text = format!("the message is not one this server takes: {e}");
            return refused_message(&session, &value, code::INVALID_PARAMS, text);
        }
    };
    // The handler sees this POST under the session's URL, whose query scopes what it shows.
    parts.uri = session.connection.uri.clone();
    for (name, value) in &session.connection.headers {
        if !parts.headers.contains_key(name) {
            parts.headers.insert(name.clone(), value.clone());
        }
    }
    let mut claimed = None;
    match &mut message {
        ClientJsonRpcMessage::Request(request) => {
            match session
                .in_flight
                .claim(&request.id, surface.opts.drain.as_ref())
            {
                Ok(()) => claimed = Some(request.id.clone()),
                Err(Refused::Duplicate) => {
                    return rpc_error(
                        StatusCode::BAD_REQUEST,
                        &value["id"],
                        code::INVALID_REQUEST,
                        "this request id is already used by a request still in flight on this \
                         session; use a new id",
                    );
                }
                Err(Refused::TooMany) => {
                    return rpc_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &value["id"],
                        code::SERVER_BUSY,
                        "too many requests in flight on this session; try again later",
                    );
                }
            }
            request.request.extensions_mut().insert(parts);
        }
        ClientJsonRpcMessage::Notification(notification) => {
            // A cancelled request gets no answer: its id is free again.
            if let rmcp::model::ClientNotification::CancelledNotification(cancelled) =
                &notification.notification
                && let Some(id) = &cancelled.params.request_id
            {
                session.in_flight.answered(id);
            }
            notification.notification.extensions_mut().insert(parts);
        }
        _ => {}
    }
    match session.inbox.try_send(message) {
        Ok(()) => plain(StatusCode::ACCEPTED, "Accepted"),
        Err(e) => {
            if let Some(id) = &claimed {
                session.in_flight.answered(id);
            }
            match e {
                mpsc::error::TrySendError::Full(_) => plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "{QUEUED_MESSAGES} messages of this session are waiting already; try again later"
                    ),
                ),
                mpsc::error::TrySendError::Closed(_) => plain(
                    StatusCode::NOT_FOUND,
                    "Could not find session (it ended): open a new one with GET /sse",
                ),
            }
        }
    }
}

/// A message the gateway refuses: a request with a usable id gets its error as its answer, on
/// the stream where the client waits for it (the POST is accepted); anything else is refused
/// with the error as the POST's answer.
fn refused_message(session: &Session, value: &Value, code: i64, text: String) -> Response {
    let id = value
        .get("method")
        .and(value.get("id"))
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    if let Some(id) = id {
        let error = ServerJsonRpcMessage::error(
            ErrorData::new(
                rmcp::model::ErrorCode(i32::try_from(code).unwrap_or(-32603)),
                text.clone(),
                None,
            ),
            Some(id),
        );
        if session.outbox.try_send(error).is_ok() {
            return plain(StatusCode::ACCEPTED, "Accepted (answered with an error)");
        }
    }
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    rpc_error(StatusCode::BAD_REQUEST, &id, code, text)
}

#[cfg(test)]
mod tests;

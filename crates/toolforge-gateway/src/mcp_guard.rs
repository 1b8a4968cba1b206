//! What the gateway decides on `POST /mcp` before rmcp sees a message:
//!
//! - the body bound: a body over `max_body_bytes` gets 413, whether it declared its length or
//!   came chunked;
//! - JSON-RPC errors with the spec's codes: -32700 for a body that is not JSON, -32600 for one
//!   that is not a JSON-RPC 2.0 message, -32602 for the parameters of the methods the gateway
//!   routes (`tools/call` without a `name`, say);
//! - the session cap: a new session past `max_sessions` gets 503 with a JSON-RPC error, unless
//!   an owner holding more than its share gives up its oldest (`crate::mcp_sessions`);
//! - session owners: a session is used (and closed) only by whoever opened it; anyone else
//!   gets "session not found";
//! - request ids in flight: a request reusing the id of one still unanswered on the same session
//!   is answered with an error at once (rmcp would route both answers to one of them and leave
//!   the other waiting forever);
//! - `tools/list`: the request gets a [`ListSlot`] and its answer the cached tool array the
//!   handler left there; a stream resumed with `Last-Event-ID` gets its replayed answer's
//!   (`crate::list_splice`).

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::list_splice::{ListSlot, Resolve};
use crate::mcp_sessions::{CappedSessions, SessionOwner};

mod peek;
#[cfg(test)]
mod peek_tests;

/// JSON-RPC error codes the gateway answers with.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const INVALID_PARAMS: i64 = -32602;
    /// Implementation-defined server error: no room for another session or request.
    pub const SERVER_BUSY: i64 = -32000;
}

/// Requests in flight across all sessions at most (each holds one entry while unanswered).
pub const MAX_IN_FLIGHT: usize = 65_536;

const SESSION_HEADER: &str = "mcp-session-id";

/// The state of the `/mcp` guard.
pub(crate) struct McpGuard {
    pub(crate) max_body_bytes: usize,
    pub(crate) sessions: Option<Arc<CappedSessions>>,
    /// The cached `tools/list` answers, by marker, for streams resumed with `Last-Event-ID`.
    pub(crate) lists: Option<Resolve>,
    /// (session id, request id as JSON) of every request not yet answered.
    in_flight: Arc<Mutex<HashSet<(String, String)>>>,
    /// Requests are authenticated: a session's owner is its principal (else its peer address).
    identity_on: bool,
}

impl McpGuard {
    pub(crate) fn new(
        max_body_bytes: usize,
        sessions: Option<Arc<CappedSessions>>,
        lists: Option<Resolve>,
        identity_on: bool,
    ) -> Self {
        Self {
            max_body_bytes,
            sessions,
            lists,
            in_flight: Arc::default(),
            identity_on,
        }
    }

    /// Whether the request may use the session it names (always, when it names none).
    fn may_use_session(
        &self,
        headers: &axum::http::HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> bool {
        let (Some(sessions), Some(id)) = (
            &self.sessions,
            headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()),
        ) else {
            return true;
        };
        sessions.may_use(id, &SessionOwner::of(extensions, self.identity_on))
    }
}

/// The answer to a request on a session it does not own: the one an unknown session gets, so
/// that it learns nothing about the session.
fn not_its_session() -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        &Value::Null,
        -32001,
        crate::mcp_sessions::SESSION_GONE_MESSAGE,
    )
}

/// A JSON-RPC error response.
fn rpc_error(status: StatusCode, id: &Value, code: i64, message: impl Into<String>) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message.into()},
    });
    (status, axum::Json(body)).into_response()
}

/// Whether `e` (a body read error) is the body running past its limit.
fn is_too_large(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// Checks the shape of one JSON-RPC message; the error is (code, message).
pub(crate) fn check_message(v: &Value, modern: bool) -> Result<(), (i64, String)> {
    let invalid = |m: &str| Err((code::INVALID_REQUEST, m.to_owned()));
    let obj = match v {
        Value::Object(o) => o,
        Value::Array(_) => {
            return invalid("JSON-RPC batches are not supported; send one message per request");
        }
        _ => return invalid("the body must be a JSON-RPC 2.0 message (a JSON object)"),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("`jsonrpc` must be \"2.0\"");
    }
    if let Some(id) = obj.get("id")
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return invalid("`id` must be a string or an integer");
    }
    match obj.get("method") {
        Some(Value::String(method)) => {
            let params = obj.get("params");
            if params.is_some_and(|p| !p.is_object()) {
                return Err((
                    code::INVALID_PARAMS,
                    "`params` must be an object".to_owned(),
                ));
            }
            if obj.contains_key("id") {
                check_params(method, params, modern)
            } else {
                Ok(())
            }
        }
        Some(_) => invalid("`method` must be a string"),
        None if obj.contains_key("id")
            && (obj.contains_key("result") != obj.contains_key("error")) =>
        {
            Ok(())
        }
        None => invalid(
            "a message needs a `method` (request or notification) or, with an `id`, a `result` or an `error` (response)",
        ),
    }
}

/// The parameters of the methods the gateway routes, checked against their MCP shapes. On
/// 2026-07-28 (`modern`) `resources/subscribe` and `unsubscribe` no longer exist: rmcp answers
/// them "method not found" (HTTP 404), whatever their parameters.
fn check_params(method: &str, params: Option<&Value>, modern: bool) -> Result<(), (i64, String)> {
    fn parse<T: serde::de::DeserializeOwned>(
        method: &str,
        params: Option<&Value>,
        what: &str,
    ) -> Result<(), (i64, String)> {
        let params = params.cloned().unwrap_or_else(|| json!({}));
        serde_json::from_value::<T>(params)
            .map(|_| ())
            .map_err(|e| {
                (
                    code::INVALID_PARAMS,
                    format!("invalid params for {method} ({what}): {e}"),
                )
            })
    }
    use rmcp::model::{
        CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
        SubscribeRequestParams, UnsubscribeRequestParams,
    };
    match method {
        "tools/call" => parse::<CallToolRequestParams>(
            method,
            params,
            "needs `name`, the tool's name, and optional `arguments`, an object",
        ),
        "resources/read" => {
            parse::<ReadResourceRequestParams>(method, params, "needs `uri`, a string")
        }
        "resources/subscribe" | "resources/unsubscribe" if modern => Ok(()),
        "resources/subscribe" => {
            parse::<SubscribeRequestParams>(method, params, "needs `uri`, a string")
        }
        "resources/unsubscribe" => {
            parse::<UnsubscribeRequestParams>(method, params, "needs `uri`, a string")
        }
        "prompts/get" => parse::<GetPromptRequestParams>(
            method,
            params,
            "needs `name`, the prompt's name, and optional `arguments`",
        ),
        _ => Ok(()),
    }
}

/// The `/mcp` guard (an axum middleware).
pub(crate) async fn guard(State(g): State<Arc<McpGuard>>, req: Request, next: Next) -> Response {
    if !g.may_use_session(req.headers(), req.extensions()) {
        return not_its_session();
    }
    if req.method() != Method::POST {
        let resumed = req.method() == Method::GET && req.headers().contains_key("last-event-id");
        let response = next.run(req).await;
        return match (&g.lists, resumed) {
            (Some(lists), true) => crate::list_splice::replayed(response, lists.clone()),
            _ => response,
        };
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, g.max_body_bytes).await {
        Ok(b) => b,
        Err(e) if is_too_large(&e) => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &Value::Null,
                code::INVALID_REQUEST,
                format!("the request body is larger than {} bytes", g.max_body_bytes),
            );
        }
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                code::INVALID_REQUEST,
                format!("the request body could not be read: {e}"),
            );
        }
    };
    // The common case, a valid message, is checked from a shallow borrowed parse; anything
    // else (an error to report, or a spelling the shallow parse does not vouch for) takes the
    // full parse below, which words the error.
    let modern = modern_header(&parts.headers);
    let peeked = match peek::peek(&bytes, modern) {
        Some(p) => p,
        None => match checked(&bytes, modern) {
            Ok(p) => p,
            Err(response) => return response,
        },
    };
    let session = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut opens = None;
    if session.is_none()
        && peeked.method.as_deref() == Some("initialize")
        && let Some(sessions) = &g.sessions
    {
        let owner = SessionOwner::of(&parts.extensions, g.identity_on);
        if !sessions.admit(&owner).await {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &peeked.id_value(),
                code::SERVER_BUSY,
                format!(
                    "the gateway already has its maximum of {} sessions open; try again later",
                    sessions.max_sessions()
                ),
            );
        }
        opens = Some((sessions.clone(), owner));
    }
    let mut claim = None;
    if let (Some(session), true) = (session, peeked.is_request) {
        let key = (session, peeked.id_key);
        let mut in_flight = g.in_flight.lock();
        if in_flight.contains(&key) {
            let id = &key.1;
            return rpc_error(
                StatusCode::OK,
                &serde_json::from_str(id).unwrap_or(Value::Null),
                code::INVALID_REQUEST,
                format!(
                    "request id {id} is already used by a request still in flight on this session; use a new id"
                ),
            );
        }
        if in_flight.len() >= MAX_IN_FLIGHT {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &serde_json::from_str(&key.1).unwrap_or(Value::Null),
                code::SERVER_BUSY,
                "too many requests in flight; try again later",
            );
        }
        in_flight.insert(key.clone());
        claim = Some(Claim {
            set: g.in_flight.clone(),
            key,
        });
    }
    let length = HeaderValue::from(bytes.len());
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.headers_mut().remove(header::TRANSFER_ENCODING);
    req.headers_mut().insert(header::CONTENT_LENGTH, length);
    // A `tools/list` may be answered from cached bytes (`crate::list_splice`).
    let slot = (peeked.is_request && peeked.method.as_deref() == Some("tools/list"))
        .then(ListSlot::default);
    if let Some(slot) = &slot {
        req.extensions_mut().insert(slot.clone());
    }
    let mut response = next.run(req).await;
    if let Some((sessions, owner)) = opens
        && let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        sessions.bind(id, owner);
    }
    if let Some(slot) = slot {
        response = crate::list_splice::splice(response, slot).await;
    }
    match claim {
        // The id stays taken until the answer has gone out (or the client left).
        Some(claim) => response.map(|body| {
            Body::new(Claimed {
                body,
                _claim: claim,
            })
        }),
        None => response,
    }
}

/// Whether the request names the 2026-07-28 revision (or later) in its header (rmcp checks it
/// against the body).
fn modern_header(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= "2026-07-28")
}

/// The full check: the body parsed into a `Value`, every error worded. What the guard goes on
/// with, or the error response.
fn checked(bytes: &[u8], modern: bool) -> Result<peek::Peeked, Response> {
    let message: Value = serde_json::from_slice(bytes).map_err(|e| {
        rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            code::PARSE_ERROR,
            format!("parse error: the body is not valid JSON ({e})"),
        )
    })?;
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if let Err((code, text)) = check_message(&message, modern) {
        let (id, status) = if code == code::INVALID_PARAMS {
            (id, StatusCode::OK)
        } else {
            (Value::Null, StatusCode::BAD_REQUEST)
        };
        return Err(rpc_error(status, &id, code, text));
    }
    let method = message.get("method").and_then(Value::as_str);
    Ok(peek::Peeked {
        is_request: method.is_some() && message.get("id").is_some(),
        method: method.map(str::to_owned),
        id_key: id.to_string(),
    })
}

/// An id taken by a request in flight; given back when dropped.
struct Claim {
    set: Arc<Mutex<HashSet<(String, String)>>>,
    key: (String, String),
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.set.lock().remove(&self.key);
    }
}

/// A response body that holds a [`Claim`] until it is done.
struct Claimed {
    body: Body,
    _claim: Claim,
}

impl http_body::Body for Claimed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

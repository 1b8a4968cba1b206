//! The legacy HTTP+SSE transport of MCP 2024-11-05, client side, as an rmcp [`Transport`]: rmcp
//! has none, so the pool would otherwise not reach a server that speaks only this transport.
//!
//! The client opens `GET url` (an event stream) and the server's first event, `endpoint`, says
//! where to POST messages (a URL of the same origin, usually `/messages?sessionId=…`). Every
//! message to the server is one POST there (answered 202 Accepted, or any 2xx); every message
//! from the server (answers, notifications, its own requests) is a `message` event on the
//! stream. The connection is the stream: when it ends, the transport ends, and the pool's
//! supervision reconnects as for any backend.
//!
//! Bounds: one event (one message) of at most [`MAX_EVENT_BYTES`]; at most
//! [`QUEUED_MESSAGES`] messages read ahead of the connection (the stream is then not read,
//! so TCP pushes back on the server); at most [`POSTS_IN_FLIGHT`] POSTs at once, each given
//! [`POST_TIMEOUT`]; the answer to a POST is read to [`POST_ANSWER_BYTES`] at most.

mod events;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The largest message the server may send (as rmcp's Streamable HTTP client allows).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// Messages read from the stream and not yet taken by the connection.
pub const QUEUED_MESSAGES: usize = 64;
/// POSTs one connection has in flight at once (as many calls as a Streamable HTTP backend
/// takes on one path).
pub const POSTS_IN_FLIGHT: usize = 32;
/// How long one POST may take, its answer's head included (the answer to the message itself
/// comes on the stream, so a POST is short).
pub const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// What is read of a POST's answer: its status is what counts.
const POST_ANSWER_BYTES: usize = 64 * 1024;

/// Why the legacy transport failed.
#[derive(Debug, thiserror::Error)]
pub enum LegacySseError {
    /// The request could not be made (or the connection failed during it).
    #[error("{}", causes(.0))]
    Request(#[source] reqwest::Error),
    /// The server answered with a status other than success.
    #[error("HTTP {status}{}", with_colon(.body))]
    Status {
        status: u16,
        /// `Retry-After`, as the server sent it.
        retry_after: Option<String>,
        /// The start of the answer's body, for people.
        body: String,
    },
    /// The stream is not an event stream.
    #[error("the server answered the SSE GET with content type {0:?}, not text/event-stream")]
    NotAnEventStream(String),
    /// The stream ended, or its first event was not `endpoint`.
    #[error("{0}")]
    Endpoint(String),
    /// The server no longer knows the session (404 to a POST): the message did not reach it.
    #[error("the server no longer knows this session (HTTP 404); reconnecting")]
    SessionGone,
    /// The connection ended before the message could be posted.
    #[error("the SSE connection is closed")]
    Closed,
    /// A POST did not finish in time.
    #[error("posting the message took longer than {0:?}")]
    TimedOut(Duration),
    #[error("the message could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

/// An error and its causes, each once (reqwest's own text leaves out why the request failed).
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// `": text"`, or nothing for no text.
fn with_colon(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

impl LegacySseError {
    /// Whether the message provably never reached the server: the connection was refused or
    /// already closed, or the server said it has no such session.
    #[must_use]
    pub fn never_sent(&self) -> bool {
        match self {
            Self::Request(e) => e.is_connect(),
            Self::SessionGone | Self::Closed => true,
            _ => false,
        }
    }
}

/// One legacy HTTP+SSE connection.
pub struct LegacySseTransport {
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    poster: Arc<Poster>,
    /// Ends the stream's reader (when the transport closes or is dropped).
    _stop: tokio_util::sync::DropGuard,
    stopped: CancellationToken,
}

/// What every POST needs.
struct Poster {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: http::HeaderMap,
    permits: Semaphore,
    stopped: CancellationToken,
}

impl LegacySseTransport {
    /// Opens the stream at `url` (with `headers` on every request) and waits for its `endpoint`
    /// event.
    ///
    /// # Errors
    /// The GET fails or is not answered with an event stream, the stream ends before its
    /// `endpoint` event, or that event names another origin.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: http::HeaderMap,
    ) -> Result<Self, LegacySseError> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| LegacySseError::Endpoint(format!("{url:?} is not a URL: {e}")))?;
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(http::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(LegacySseError::Request)?;
        if !response.status().is_success() {
            return Err(status_error(response).await);
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !content_type
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
        {
            return Err(LegacySseError::NotAnEventStream(content_type));
        }
        let stopped = CancellationToken::new();
        let stop = stopped.clone().drop_guard();
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let (messages_tx, messages) = mpsc::channel(QUEUED_MESSAGES);
        tokio::spawn(read_stream(
            response,
            endpoint_tx,
            messages_tx,
            stopped.clone(),
        ));
        let data = endpoint_rx.await.map_err(|_| {
            LegacySseError::Endpoint("the SSE stream ended before its endpoint event".into())
        })??;
        let endpoint = url.join(data.trim()).map_err(|e| {
            LegacySseError::Endpoint(format!("the endpoint event {data:?} is not a URL: {e}"))
        })?;
        if endpoint.origin() != url.origin() {
            return Err(LegacySseError::Endpoint(format!(
                "the endpoint event names another origin ({endpoint}); refused"
            )));
        }
        Ok(Self {
            messages,
            poster: Arc::new(Poster {
                client,
                endpoint,
                headers,
                permits: Semaphore::new(POSTS_IN_FLIGHT),
                stopped: stopped.clone(),
            }),
            _stop: stop,
            stopped,
        })
    }

    /// Where this connection posts its messages.
    #[must_use]
    pub fn endpoint(&self) -> &reqwest::Url {
        &self.poster.endpoint
    }
}

/// Reads the stream: its `endpoint` event into `endpoint`, then each `message` event into
/// `messages`, until the stream ends, breaks the bound or is stopped.
async fn read_stream(
    response: reqwest::Response,
    endpoint: oneshot::Sender<Result<String, LegacySseError>>,
    messages: mpsc::Sender<ServerJsonRpcMessage>,
    stopped: CancellationToken,
) {
    let mut endpoint = Some(endpoint);
    let mut parser = events::Parser::new(MAX_EVENT_BYTES);
    let mut body = response.bytes_stream();
    let why = loop {
        let chunk = tokio::select! {
            () = stopped.cancelled() => break "closed".to_owned(),
            () = messages.closed() => break "closed".to_owned(),
            chunk = body.next() => chunk,
        };
        let chunk = match chunk {
            None => break "the server ended the SSE stream".to_owned(),
            Some(Err(e)) => break format!("the SSE stream failed: {e}"),
            Some(Ok(chunk)) => chunk,
        };
        let events = match parser.feed(&chunk) {
            Ok(events) => events,
            Err(e) => break e.to_string(),
        };
        for event in events {
            match (event.kind.as_str(), endpoint.take()) {
                ("endpoint", Some(tx)) => {
                    let _ = tx.send(Ok(event.data));
                }
                (_, Some(tx)) => {
                    let _ = tx.send(Err(LegacySseError::Endpoint(format!(
                        "the SSE stream's first event is {:?}, not endpoint",
                        event.kind
                    ))));
                    return;
                }
                ("message", None) => match serde_json::from_str(&event.data) {
                    Ok(message) => {
                        let sent = tokio::select! {
                            () = stopped.cancelled() => false,
                            sent = messages.send(message) => sent.is_ok(),
                        };
                        if !sent {
                            return;
                        }
                    }
                    Err(e) => tracing::warn!("skipped an SSE message that is not JSON-RPC: {e}"),
                },
                (other, None) => tracing::debug!("skipped an SSE event of type {other:?}"),
            }
        }
    };
    match endpoint {
        Some(tx) => {
            let _ = tx.send(Err(LegacySseError::Endpoint(format!(
                "{why} before its endpoint event"
            ))));
        }
        None => tracing::debug!("legacy SSE connection ends: {why}"),
    }
}

/// A failed answer as an error, with the start of its body.
async fn status_error(response: reqwest::Response) -> LegacySseError {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = read_some(response, 512).await;
    LegacySseError::Status {
        status,
        retry_after,
        body: String::from_utf8_lossy(&body).trim().to_owned(),
    }
}

/// At most `max` bytes of `response`'s body (the rest is not read).
async fn read_some(response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = response.bytes_stream();
    while out.len() < max
        && let Some(Ok(chunk)) = body.next().await
    {
        out.extend_from_slice(&chunk[..chunk.len().min(max - out.len())]);
    }
    out
}

impl Poster {
    async fn post(&self, message: ClientJsonRpcMessage) -> Result<(), LegacySseError> {
        if self.stopped.is_cancelled() {
            return Err(LegacySseError::Closed);
        }
        let body = serde_json::to_vec(&message)?;
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| LegacySseError::Closed)?;
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        let response = match tokio::time::timeout(POST_TIMEOUT, request).await {
            Err(_) => return Err(LegacySseError::TimedOut(POST_TIMEOUT)),
            Ok(Err(e)) => return Err(LegacySseError::Request(e)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            // Read to its end (it is short), so the connection can be used again.
            let _ =
                tokio::time::timeout(POST_TIMEOUT, read_some(response, POST_ANSWER_BYTES)).await;
            return Ok(());
        }
        if status == reqwest::StatusCode::NOT_FOUND {
            // The server restarted or dropped the session: this connection is over.
            self.stopped.cancel();
            return Err(LegacySseError::SessionGone);
        }
        Err(status_error(response).await)
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = LegacySseError;

    fn name() -> Cow<'static, str> {
        "legacy HTTP+SSE".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let poster = self.poster.clone();
        async move { poster.post(item).await }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        tokio::select! {
            message = self.messages.recv() => message,
            () = self.stopped.cancelled() => None,
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stopped.cancel();
        Ok(())
    }
}

impl std::fmt::Debug for LegacySseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySseTransport")
            .field("endpoint", &self.poster.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;

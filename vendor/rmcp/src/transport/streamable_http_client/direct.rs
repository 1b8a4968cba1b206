//! A client's requests posted from the caller's own task.
//!
//! Through the worker, a request and its answer each cross two tasks: the caller hands the
//! request to the service loop, the loop to the worker, the worker posts it; the answer goes
//! from the worker to the loop and from the loop to the caller. [`DirectRequests`] lets the
//! caller post a request on the worker's session itself and read the answer from the response
//! it gets back, when that answer is the first thing the server sends.
//!
//! The worker publishes its session here once the `initialize` handshake is done (protocol
//! versions before the standard headers: their requests carry only the session's headers) and
//! withdraws it while it recovers an expired session and when it ends. Whatever this path cannot
//! take stays the worker's: without a published session, with as many direct requests in flight
//! as [`StreamableHttpClientTransportConfig::max_concurrent_requests`], and when the server says
//! the session expired (the server did not take the request), the caller is told
//! [`DirectOutcome::NotSent`] and sends it the usual way. When the server sends anything before
//! the answer (a log message, a progress notification, a request of its own), the caller
//! registers the request with its peer and hands the stream over ([`HandOver`]): from then on the
//! stream is read like the worker's own, every message reaching the service loop in order.

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt as _, StreamExt as _, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use super::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpClientWorker,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use crate::{
    model::{
        ClientJsonRpcMessage, ErrorData, GetExtensions as _, ProtocolVersion, RequestId,
        ServerJsonRpcMessage,
    },
    service::InboundStreamOrigin,
    transport::common::client_side_sse::SseRetryPolicy,
};

/// How long the rest of an answered stream may take to end before it is drained elsewhere.
const DRAIN_AFTER_ANSWER: Duration = Duration::from_millis(50);

/// Posts a client's requests on a worker's session from the caller's task. Cloned handles share
/// one slot; give one to [`StreamableHttpClientTransport::with_direct_requests`]
/// (`super::StreamableHttpClientTransport`) and keep a clone to call [`DirectRequests::send`].
pub struct DirectRequests<C: StreamableHttpClient> {
    shared: Arc<Shared<C>>,
}

struct Shared<C: StreamableHttpClient> {
    session: Mutex<Option<Published<C>>>,
    generation: AtomicU64,
    in_flight: AtomicUsize,
}

struct Published<C: StreamableHttpClient> {
    generation: u64,
    session: Session<C>,
}

/// What a worker publishes: everything a POST on its session needs.
#[derive(Clone)]
pub(super) struct Session<C: StreamableHttpClient> {
    pub(super) client: C,
    pub(super) uri: Arc<str>,
    pub(super) id: Option<Arc<str>>,
    pub(super) auth_header: Option<String>,
    pub(super) headers: Arc<HashMap<HeaderName, HeaderValue>>,
    pub(super) limits: StreamableHttpResponseLimits,
    pub(super) retry: Arc<dyn SseRetryPolicy>,
    pub(super) max_in_flight: usize,
    /// Where the worker takes in the messages of the streams it reads.
    pub(super) to_worker: tokio::sync::mpsc::Sender<ServerJsonRpcMessage>,
    /// Cancelled when the worker ends.
    pub(super) transport: CancellationToken,
}

impl<C: StreamableHttpClient> Session<C> {
    pub(super) fn new(
        client: C,
        config: &StreamableHttpClientTransportConfig,
        id: Option<Arc<str>>,
        headers: &HashMap<HeaderName, HeaderValue>,
        to_worker: tokio::sync::mpsc::Sender<ServerJsonRpcMessage>,
        transport: CancellationToken,
    ) -> Self {
        Self {
            client,
            uri: config.uri.clone(),
            id,
            auth_header: config.auth_header.clone(),
            headers: Arc::new(headers.clone()),
            limits: config.response_limits(),
            retry: config.retry_config.clone(),
            max_in_flight: config.max_concurrent_requests.max(1),
            to_worker,
            transport,
        }
    }
}

/// What became of a request given to [`DirectRequests::send`].
pub enum DirectOutcome<E: std::error::Error + Send + Sync + 'static> {
    /// The server's answer to the request (a response or an error).
    Answered(ServerJsonRpcMessage),
    /// The request was not sent, or the server did not take it (its session had expired):
    /// send it through the peer.
    NotSent,
    /// The server sent other messages before its answer: register the request with the peer
    /// (`Peer::expect_response`), then [`HandOver::start`].
    Streaming(HandOver<E>),
    /// The POST or its response failed after the request was sent: the server may have
    /// received it.
    Failed(StreamableHttpError<E>),
}

/// A response stream whose messages go to the worker once started: the message read first,
/// then the rest, resumed after a drop as the worker resumes its own. Bounded as the worker's
/// streams are: by the server's end of it, the worker's end, and the caller's interest.
pub struct HandOver<E: std::error::Error + Send + Sync + 'static> {
    request: RequestId,
    first: ServerJsonRpcMessage,
    rest: BoxStream<'static, Result<ServerJsonRpcMessage, StreamableHttpError<E>>>,
    to_worker: tokio::sync::mpsc::Sender<ServerJsonRpcMessage>,
    transport: CancellationToken,
}

impl<C: StreamableHttpClient> DirectRequests<C> {
    #[must_use]
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                session: Mutex::new(None),
                generation: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
            }),
        }
    }

    /// Whether a worker has a session published here now.
    #[must_use]
    pub fn is_published(&self) -> bool {
        self.lock().is_some()
    }

    /// Posts `message` (a request) on the published session and reads the server's answer, on
    /// the caller's task.
    pub async fn send(&self, message: ClientJsonRpcMessage) -> DirectOutcome<C::Error> {
        let ClientJsonRpcMessage::Request(request) = &message else {
            return DirectOutcome::NotSent;
        };
        let id = request.id.clone();
        let Some((session, _slot)) = self.take_slot() else {
            return DirectOutcome::NotSent;
        };
        // Boxed: the POST's future is most of this one's, and inline it would be copied with
        // every move of the futures that await this one (each a few kilobytes more).
        let posted = Box::pin(session.client.post_message_with_response_limits(
            session.uri.clone(),
            message,
            session.id.clone(),
            session.auth_header.clone(),
            (*session.headers).clone(),
            session.limits,
        ))
        .await;
        match posted {
            Ok(StreamableHttpPostResponse::Json(answer, _)) if answers(&answer, &id) => {
                DirectOutcome::Answered(answer)
            }
            Ok(StreamableHttpPostResponse::Json(..)) => {
                DirectOutcome::Failed(StreamableHttpError::UnexpectedServerResponse(
                    "the server answered a request with a message that is not its answer".into(),
                ))
            }
            Ok(StreamableHttpPostResponse::Accepted) => {
                DirectOutcome::Failed(StreamableHttpError::UnexpectedServerResponse(
                    "the server accepted a request without answering it".into(),
                ))
            }
            Ok(StreamableHttpPostResponse::Sse(stream, _)) => {
                let mut messages = StreamableHttpClientWorker::<C>::response_sse_to_jsonrpc(
                    stream,
                    session.id.clone(),
                    session.client.clone(),
                    session.uri.clone(),
                    session.auth_header.clone(),
                    (*session.headers).clone(),
                    session.limits.max_sse_event_size,
                    session.retry.clone(),
                );
                match messages.next().await {
                    Some(Ok(answer)) if answers(&answer, &id) => {
                        finish(messages);
                        DirectOutcome::Answered(answer)
                    }
                    Some(Ok(first)) => DirectOutcome::Streaming(HandOver {
                        request: id,
                        first,
                        rest: messages,
                        to_worker: session.to_worker.clone(),
                        transport: session.transport.clone(),
                    }),
                    Some(Err(e)) => DirectOutcome::Failed(e),
                    None => DirectOutcome::Failed(StreamableHttpError::UnexpectedEndOfStream),
                }
            }
            Err(StreamableHttpError::SessionExpired) => {
                // The server did not take it; the worker recovers the session when the peer
                // sends the request, and publishes the new one.
                self.withdraw_session(session.id.as_deref());
                DirectOutcome::NotSent
            }
            Err(e) => DirectOutcome::Failed(e),
        }
    }

    /// The published session and a place among the requests in flight, if there is both.
    fn take_slot(&self) -> Option<(Session<C>, InFlight<'_>)> {
        let session = self.lock().as_ref()?.session.clone();
        let before = self.shared.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = InFlight(&self.shared.in_flight);
        (before < session.max_in_flight).then_some((session, slot))
    }

    /// Publishes a worker's session; returns the generation to withdraw it with.
    pub(super) fn publish(&self, session: Session<C>) -> u64 {
        let generation = self.shared.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self.lock() = Some(Published {
            generation,
            session,
        });
        generation
    }

    /// Withdraws the session of `generation`, unless another was published since.
    pub(super) fn withdraw(&self, generation: u64) {
        let mut slot = self.lock();
        if slot.as_ref().is_some_and(|p| p.generation == generation) {
            *slot = None;
        }
    }

    /// Withdraws the published session if it is still the one with `id`.
    fn withdraw_session(&self, id: Option<&str>) {
        let mut slot = self.lock();
        if slot.as_ref().is_some_and(|p| p.session.id.as_deref() == id) {
            *slot = None;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Published<C>>> {
        // The slot is replaced whole; a panic elsewhere cannot leave it half written.
        self.shared
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<C: StreamableHttpClient> Default for DirectRequests<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: StreamableHttpClient> Clone for DirectRequests<C> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<C: StreamableHttpClient> fmt::Debug for DirectRequests<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectRequests")
            .field("published", &self.is_published())
            .field("in_flight", &self.shared.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

/// A worker's session as published on its [`DirectRequests`] (if it was given one), withdrawn
/// when the worker withdraws it or ends.
pub(super) struct Publication<C: StreamableHttpClient> {
    direct: Option<DirectRequests<C>>,
    generation: Option<u64>,
}

impl<C: StreamableHttpClient> Publication<C> {
    pub(super) fn new(direct: Option<DirectRequests<C>>) -> Self {
        Self {
            direct,
            generation: None,
        }
    }

    /// Publishes the session `session` makes, in place of the one published before, when its
    /// protocol version is one whose requests carry only the session's headers (later versions
    /// name each request's method and parameters in headers the worker derives).
    pub(super) fn publish(
        &mut self,
        version: &ProtocolVersion,
        session: impl FnOnce() -> Session<C>,
    ) {
        self.withdraw();
        if let Some(direct) = &self.direct
            && *version < ProtocolVersion::STANDARD_HEADERS
        {
            self.generation = Some(direct.publish(session()));
        }
    }

    pub(super) fn withdraw(&mut self) {
        if let (Some(direct), Some(generation)) = (&self.direct, self.generation.take()) {
            direct.withdraw(generation);
        }
    }
}

impl<C: StreamableHttpClient> Drop for Publication<C> {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// One direct request in flight, counted until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<E: std::error::Error + Send + Sync + 'static> HandOver<E> {
    /// Sends the stream's messages to the worker, in order, on a task of their own, until the
    /// answer, the worker's end, or the caller dropping what this returns (it gave up on the
    /// request). A stream that ends without the answer ends the request with an error.
    #[must_use = "dropping the guard stops reading the stream"]
    pub fn start(self) -> tokio_util::sync::DropGuard {
        let Self {
            request,
            first,
            mut rest,
            to_worker,
            transport,
        } = self;
        let reading = transport.child_token();
        let guard = reading.clone().drop_guard();
        tokio::spawn(async move {
            let origin = InboundStreamOrigin::OutboundRequest(request.clone());
            let mut next = Some(Ok(first));
            loop {
                let message = match next.take() {
                    Some(message) => message,
                    None => {
                        tokio::select! {
                            message = rest.next() => match message {
                                Some(message) => message,
                                None => break,
                            },
                            () = reading.cancelled() => return,
                        }
                    }
                };
                let mut message = match message {
                    Ok(message) => message,
                    Err(e) => {
                        tracing::debug!(%request, "response stream failed: {e}");
                        break;
                    }
                };
                if let ServerJsonRpcMessage::Request(r) = &mut message {
                    r.request.extensions_mut().insert(origin.clone());
                }
                let answered = answers(&message, &request);
                if to_worker.send(message).await.is_err() {
                    return;
                }
                if answered {
                    finish(rest);
                    return;
                }
            }
            let error = ErrorData::internal_error(
                "the server's response stream ended before it answered",
                None,
            );
            let _ = to_worker
                .send(ServerJsonRpcMessage::error(error, Some(request)))
                .await;
        });
        guard
    }
}

/// Whether `message` is the answer (a response or an error) to the request `id`; a server that
/// echoes a numeric id as text answers it too.
fn answers(message: &ServerJsonRpcMessage, id: &RequestId) -> bool {
    let answered = match message {
        ServerJsonRpcMessage::Response(response) => &response.id,
        ServerJsonRpcMessage::Error(error) => match &error.id {
            Some(answered) => answered,
            None => return false,
        },
        _ => return false,
    };
    answered == id
        || matches!(
            (answered.numeric_string_value(), id),
            (Some(n), RequestId::Number(m)) if n == *m
        )
}

/// Reads what is left of an answered stream so its connection goes back to the pool: at once
/// when it has already ended, otherwise on a task of its own, for at most
/// [`DRAIN_AFTER_ANSWER`], as the worker drains its streams.
fn finish<T: Send + 'static>(mut rest: BoxStream<'static, T>) {
    loop {
        match rest.next().now_or_never() {
            Some(Some(_)) => {}
            Some(None) => return,
            None => break,
        }
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DRAIN_AFTER_ANSWER, async {
            while rest.next().await.is_some() {}
        })
        .await;
    });
}

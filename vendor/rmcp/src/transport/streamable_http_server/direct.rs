//! Session requests answered without the session's worker and service loop (toolforge patch).
//!
//! In a handshake-era session a request normally crosses four tasks before its handler runs and
//! four on the way back: the HTTP task hands it to the session's worker, the worker to the
//! service loop, the loop spawns the handler; the response goes from the handler to the loop,
//! to the worker (which acknowledges it), to the HTTP task. For a request whose handler cannot
//! send anything on the request's own stream, the only thing those hops do is carry the request
//! and its response, so the HTTP task spawns the handler itself and awaits it.
//!
//! What can reach a request's stream besides its response: progress notifications for the
//! request's progress token, and requests the server sends to the client on the request's
//! behalf (sampling, elicitation, roots). A request is served here only when it has no progress
//! token and the client declared none of those capabilities, when it is a `tools/call`, and
//! when the session manager allows it ([`SessionManager::direct_touch_interval`]: replies are
//! not stored for resumption) and replies are JSON. Everything else takes the worker as before.
//!
//! What the worker and the loop did that still has to happen:
//! - cancellation: the handler gets a child of the session's cancellation token (so it ends
//!   with the session), registered under its request id until it answers, and the client's
//!   `notifications/cancelled` for that id cancels it ([`DirectSession::cancel`]);
//! - the idle limit: the request touches the session ([`SessionManager::touch_session`]) at
//!   most once per the manager's interval, as a request through the worker would have;
//! - the handler runs to its end on a task of its own even if the client goes away, as the
//!   loop's spawned handler did: a call that reached a backend finishes and is accounted for;
//! - the reply is the worker path's: JSON when the answer comes within the keep-alive
//!   interval, else an SSE stream with keep-alive pings until it does (`session_reply`); a
//!   request its client cancelled gets no answer (an SSE stream that ends without one), as the
//!   service loop drops the answer of a cancelled request.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{Arc, PoisonError},
    task::{Context, Poll, ready},
    time::Duration,
};

use tokio_util::sync::CancellationToken;

use crate::{
    Peer, RoleServer,
    model::{
        ClientRequest, ErrorData, GetExtensions, GetMeta, JsonRpcRequest, RequestId,
        ServerJsonRpcMessage, ServerResult,
    },
    service::{ORIGINATING_PROTOCOL_VERSION, ORIGINATING_REQUEST, RequestContext, Service},
    transport::streamable_http_server::SessionId,
};

/// What a session whose handshake is done lends its requests to be served on the HTTP task.
pub(crate) struct DirectSession<S> {
    service: Arc<S>,
    peer: Peer<RoleServer>,
    /// The session's cancellation token: cancelled when the session ends.
    session_ct: CancellationToken,
    /// Requests being served here, by id: their handlers' cancellation tokens.
    in_flight: std::sync::Mutex<HashMap<RequestId, CancellationToken>>,
    /// When a request last touched the session.
    last_touch: std::sync::Mutex<tokio::time::Instant>,
}

/// Sessions whose requests may be served directly, by id.
pub(crate) type DirectSessions<S> =
    Arc<std::sync::Mutex<HashMap<SessionId, Arc<DirectSession<S>>>>>;

impl<S> DirectSession<S>
where
    S: Service<RoleServer> + Send + Sync + 'static,
{
    pub(crate) fn new(
        service: Arc<S>,
        peer: Peer<RoleServer>,
        session_ct: CancellationToken,
    ) -> Self {
        Self {
            service,
            peer,
            session_ct,
            in_flight: std::sync::Mutex::default(),
            last_touch: std::sync::Mutex::new(tokio::time::Instant::now()),
        }
    }

    /// Whether `request` can be served here (see the module's documentation).
    pub(crate) fn takes(&self, request: &JsonRpcRequest<ClientRequest>) -> bool {
        if !matches!(request.request, ClientRequest::CallToolRequest(_))
            || request.request.get_meta().get_progress_token().is_some()
        {
            return false;
        }
        self.peer.peer_info().is_some_and(|info| {
            let capabilities = &info.capabilities;
            capabilities.sampling.is_none()
                && capabilities.elicitation.is_none()
                && capabilities.roots.is_none()
        })
    }

    /// True when this request should touch the session: the last touch is at least `interval`
    /// (the manager's) ago. Claims the touch, so concurrent requests make one between them.
    pub(crate) fn claim_touch(&self, interval: Duration) -> bool {
        let now = tokio::time::Instant::now();
        let mut last = self
            .last_touch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if now.saturating_duration_since(*last) < interval {
            return false;
        }
        *last = now;
        true
    }

    /// Cancels the request `id` if it is being served here.
    pub(crate) fn cancel(&self, id: &RequestId) {
        let token = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some(token) = token {
            token.cancel();
        }
    }

    /// Starts the request's handler on a task of its own; the returned call resolves to its
    /// answer.
    pub(crate) fn start(self: Arc<Self>, request: JsonRpcRequest<ClientRequest>) -> DirectCall<S> {
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        let ct = self.session_ct.child_token();
        let registered = InFlight::register(self.clone(), id.clone(), ct.clone());
        let context = RequestContext {
            ct,
            id: id.clone(),
            peer: self.peer.clone(),
            meta: std::mem::take(request.get_meta_mut()),
            extensions: std::mem::take(request.extensions_mut()),
        };
        let version = context.meta.protocol_version();
        let service = self.service.clone();
        let handler = ORIGINATING_REQUEST.scope(
            id,
            ORIGINATING_PROTOCOL_VERSION.scope(version, async move {
                // Boxed, as the service loop boxes it: a handler's future can be large.
                Box::pin(service.handle_request(request, context)).await
            }),
        );
        let task = tokio::spawn(tracing::Instrument::instrument(
            handler,
            tracing::Span::current(),
        ));
        DirectCall { task, registered }
    }
}

/// A session's entry in [`DirectSessions`] for as long as this lives (its service task holds it
/// until the service ends, and drops it on the way out, a panic included).
pub(crate) struct Registration<S> {
    sessions: DirectSessions<S>,
    id: SessionId,
}

impl<S> Registration<S> {
    pub(crate) fn new(
        sessions: DirectSessions<S>,
        id: SessionId,
        session: DirectSession<S>,
    ) -> Self {
        sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), Arc::new(session));
        Self { sessions, id }
    }
}

impl<S> Drop for Registration<S> {
    fn drop(&mut self) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// A request being served on a task of its own: resolves to its answer.
pub(crate) struct DirectCall<S> {
    task: tokio::task::JoinHandle<Result<ServerResult, ErrorData>>,
    registered: InFlight<S>,
}

impl<S> Future for DirectCall<S> {
    /// The answer, or `None` when the client cancelled the request: as the service loop does,
    /// no answer is sent for a request its client cancelled.
    type Output = Option<ServerJsonRpcMessage>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let joined = ready!(Pin::new(&mut self.task).poll(cx));
        if !self.registered.finish() {
            return Poll::Ready(None);
        }
        let id = self.registered.id.clone();
        Poll::Ready(Some(match joined {
            Ok(Ok(result)) => ServerJsonRpcMessage::response(result, id),
            Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
            Err(error) => {
                tracing::error!(%id, %error, "request handler failed");
                ServerJsonRpcMessage::error(
                    ErrorData::internal_error("the request's handler failed", None),
                    Some(id),
                )
            }
        }))
    }
}

/// A request's cancellation token in [`DirectSession::in_flight`] while it is served.
struct InFlight<S> {
    session: Arc<DirectSession<S>>,
    id: RequestId,
}

impl<S> InFlight<S> {
    fn register(session: Arc<DirectSession<S>>, id: RequestId, ct: CancellationToken) -> Self {
        session
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), ct);
        Self { session, id }
    }

    /// Takes the request out of the in-flight map; false when [`DirectSession::cancel`] took
    /// it first (the client cancelled it).
    fn finish(&mut self) -> bool {
        self.session
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id)
            .is_some()
    }
}

impl<S> Drop for InFlight<S> {
    fn drop(&mut self) {
        self.finish();
    }
}

//! A session's plain `tools/call` answered without the session's worker.
//!
//! Through rmcp's local session manager a request in a session crosses four tasks before its
//! handler runs and four on the way back: the HTTP task hands it to the session's worker, the
//! worker to the service loop, the loop spawns the handler; the answer goes from the handler to
//! the loop, to the worker, to the HTTP task. For a call whose handler cannot send anything on
//! the call's own stream those hops only carry the call and its answer, so the session manager
//! (`crate::mcp_sessions::CappedSessions::create_stream`) hands such a call to
//! [`DirectSessions::serve`]: it spawns the handler itself and gives rmcp a stream of the one
//! answer, which rmcp frames as any other (JSON when it comes within the keep-alive interval,
//! else an SSE stream with keep-alive pings).
//!
//! What can reach a call's stream besides its answer: progress notifications for its progress
//! token, and requests the server sends the client on the call's behalf (sampling, elicitation,
//! roots). A request is served here only when it is a `tools/call` without a progress token,
//! from a client that declared none of those capabilities, in a session whose handler has
//! registered itself ([`DirectSlot::register`], with the [`DirectSlot`] the session manager puts
//! in the extensions of the session's `notifications/initialized`). Everything else takes the
//! worker.
//!
//! What the worker and the loop did that still happens here:
//! - cancellation: the handler's token is a child of the session's (cancelled when the session
//!   closes, [`DirectSessions::close`]), registered under its request id until it answers, and
//!   the client's `notifications/cancelled` for that id cancels it ([`DirectSessions::cancel`]);
//!   the answer of a call so cancelled is not sent (its stream ends without one), as the
//!   service loop drops the answer of a cancelled request;
//! - the handler runs to its end on a task of its own even if the client goes away: a call
//!   that reached a backend finishes and is accounted for;
//! - a handler that fails (panics) is answered with an internal error, as the loop's join
//!   would have been reported.
//!
//! The session's idle clock is the session manager's (`crate::session_idle`), which sees these
//! calls as it sees every other request.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use futures::{Stream, StreamExt as _};
use parking_lot::Mutex;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, GetExtensions as _, GetMeta as _,
    JsonRpcRequest, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RequestContext, Service};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// The sessions whose calls may be served without their worker, by id.
pub(crate) struct DirectSessions<S> {
    sessions: Mutex<HashMap<SessionId, Arc<DirectSession<S>>>>,
    /// Calls served here so far.
    served: AtomicU64,
}

/// What a session's handler lends its calls: itself and its peer.
struct DirectSession<S> {
    service: S,
    peer: Peer<RoleServer>,
    /// Cancelled when the session closes.
    ct: CancellationToken,
    /// Calls being served, by request id: their handlers' cancellation tokens.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
}

/// Where a session's handler registers itself for calls served without the worker: the
/// session manager puts one in the extensions of the session's `notifications/initialized`,
/// and the handler (`ServerHandler::on_initialized`) calls [`DirectSlot::register`].
pub struct DirectSlot<S> {
    sessions: Arc<DirectSessions<S>>,
    id: SessionId,
}

impl<S> Clone for DirectSlot<S> {
    fn clone(&self) -> Self {
        Self {
            sessions: self.sessions.clone(),
            id: self.id.clone(),
        }
    }
}

impl<S> std::fmt::Debug for DirectSlot<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSlot").field("id", &self.id).finish()
    }
}

impl<S> DirectSlot<S> {
    /// Lends the session's handler and peer to the calls served without the worker, from now
    /// until the session closes.
    pub fn register(&self, service: S, peer: Peer<RoleServer>) {
        let session = Arc::new(DirectSession {
            service,
            peer,
            ct: CancellationToken::new(),
            in_flight: Mutex::default(),
        });
        if let Some(old) = self
            .sessions
            .sessions
            .lock()
            .insert(self.id.clone(), session)
        {
            // A second `notifications/initialized`: the first registration's calls end with
            // the session as before.
            old.ct.cancel();
        }
    }
}

impl<S> std::fmt::Debug for DirectSessions<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSessions")
            .field("sessions", &self.sessions.lock().len())
            .field("served", &self.served.load(Ordering::Relaxed))
            .finish()
    }
}

impl<S> Default for DirectSessions<S> {
    fn default() -> Self {
        Self {
            sessions: Mutex::default(),
            served: AtomicU64::new(0),
        }
    }
}

impl<S> DirectSessions<S>
where
    S: Service<RoleServer> + Clone + Send + Sync + 'static,
{
    /// The slot the session `id`'s handler registers itself with.
    pub(crate) fn slot(self: &Arc<Self>, id: &SessionId) -> DirectSlot<S> {
        DirectSlot {
            sessions: self.clone(),
            id: id.clone(),
        }
    }

    /// Calls served without the worker so far.
    pub(crate) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// The stream of `message`'s answer when it is a call this session may serve here (see
    /// the module's documentation); else the message back, for the worker.
    pub(crate) fn serve(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, ClientJsonRpcMessage>
    {
        let ClientJsonRpcMessage::Request(request) = message else {
            return Err(message);
        };
        let session = self.sessions.lock().get(id).cloned();
        let Some(session) = session.filter(|session| session.takes(&request)) else {
            return Err(ClientJsonRpcMessage::Request(request));
        };
        self.served.fetch_add(1, Ordering::Relaxed);
        let call = session.start(request);
        // No answer when the client cancelled the call: the stream then ends empty.
        Ok(futures::stream::once(call)
            .filter_map(|answer| std::future::ready(answer.map(ServerSseMessage::from_message))))
    }

    /// Cancels the call `request` of the session `id` if it is being served here.
    pub(crate) fn cancel(&self, id: &SessionId, request: &RequestId) {
        let session = self.sessions.lock().get(id).cloned();
        if let Some(token) = session.and_then(|session| session.in_flight.lock().remove(request)) {
            token.cancel();
        }
    }

    /// Forgets the session `id` and cancels its calls in flight: it has closed.
    pub(crate) fn close(&self, id: &SessionId) {
        if let Some(session) = self.sessions.lock().remove(id) {
            session.ct.cancel();
        }
    }
}

impl<S> DirectSession<S>
where
    S: Service<RoleServer> + Clone + Send + Sync + 'static,
{
    /// Whether `request` can be served here: a `tools/call` without a progress token, from a
    /// client the server cannot ask anything.
    fn takes(&self, request: &JsonRpcRequest<ClientRequest>) -> bool {
        if !matches!(request.request, ClientRequest::CallToolRequest(_))
            || request.request.get_meta().get_progress_token().is_some()
            || self.peer.is_transport_closed()
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

    /// Starts the request's handler on a task of its own; the returned call resolves to its
    /// answer.
    fn start(self: Arc<Self>, request: JsonRpcRequest<ClientRequest>) -> DirectCall<S> {
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        let ct = self.ct.child_token();
        let registered = InFlight::register(self.clone(), id.clone(), ct.clone());
        let mut context = RequestContext::new(id, self.peer.clone());
        context.ct = ct;
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let service = self.service.clone();
        // Boxed, as rmcp's service loop boxes a handler: its future can be large.
        let handler = async move { Box::pin(service.handle_request(request, context)).await };
        let task = tokio::spawn(handler.instrument(tracing::Span::current()));
        DirectCall { task, registered }
    }
}

/// A call being served on a task of its own: resolves to its answer, or to `None` when the
/// client cancelled it.
struct DirectCall<S> {
    task: tokio::task::JoinHandle<Result<ServerResult, ErrorData>>,
    registered: InFlight<S>,
}

impl<S> Future for DirectCall<S> {
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
                tracing::error!(%id, %error, "a tools/call handler failed");
                ServerJsonRpcMessage::error(
                    ErrorData::internal_error("the request's handler failed", None),
                    Some(id),
                )
            }
        }))
    }
}

/// A call's cancellation token in its session's `in_flight` while it is served.
struct InFlight<S> {
    session: Arc<DirectSession<S>>,
    id: RequestId,
    /// Taken out already (a later call may reuse the id).
    done: bool,
}

impl<S> InFlight<S> {
    fn register(session: Arc<DirectSession<S>>, id: RequestId, ct: CancellationToken) -> Self {
        session.in_flight.lock().insert(id.clone(), ct);
        Self {
            session,
            id,
            done: false,
        }
    }

    /// Takes the call out of `in_flight`; false when `cancel` took it first.
    fn finish(&mut self) -> bool {
        if std::mem::replace(&mut self.done, true) {
            return false;
        }
        self.session.in_flight.lock().remove(&self.id).is_some()
    }
}

impl<S> Drop for InFlight<S> {
    fn drop(&mut self) {
        self.finish();
    }
}

//! The pool's side of each backend connection: an rmcp `ClientHandler` that relays what a
//! backend sends on its own initiative to the gateway call it concerns.
//!
//! A backend connection is shared by every gateway session, so each request a backend makes
//! (sampling, elicitation, roots) must be matched to the one call that caused it, and answered
//! by that call's client only, on that call's own response stream:
//! - over Streamable HTTP the request arrives on the response stream of our outbound call, and
//!   rmcp says which ([`InboundStreamOrigin`]): the match is exact;
//! - over stdio nothing links a request to a call: when every call in flight on that backend
//!   comes from one client session, it goes to that session's latest call; when calls from
//!   several sessions are in flight, the request is **refused** with a clear error to the
//!   backend. It never guesses, so one user's client never answers another user's request.
//!
//! The relayed request carries the caller's own request id as its origin, so rmcp's session
//! layer puts it on the stream of the call that is waiting for it (not the optional GET stream).
//! Progress goes by token (each call gets a fresh token, mapped back to the caller's own); log
//! messages go to the session(s) with a call in flight on that backend (or are logged here when
//! there is none); list changes and resource updates become [`PoolEvent`]s.

// Sampling, roots and logging are deprecated by rmcp for protocol 2026-07-28 (SEP-2577); the
// fleet of real servers speaks 2025-11-25 and earlier, where they are required.
#![allow(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, GetExtensions, Implementation, InputRequest, ListRootsRequest,
    ListRootsResult, LoggingMessageNotificationParam, NumberOrString, ProgressNotificationParam,
    ProgressToken, RequestId, ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, OriginatingRequestId, RequestContext, ServiceError,
};
use rmcp::{ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::asks::{self, Asks};

/// What a backend announced, for the pool and the gateway.
#[derive(Debug, Clone)]
pub enum PoolEvent {
    ToolsChanged {
        server: String,
    },
    ResourcesChanged {
        server: String,
    },
    PromptsChanged {
        server: String,
    },
    ResourceUpdated {
        server: String,
        uri: String,
    },
    /// A server's state changed (ready, restarting, failed).
    StateChanged {
        server: String,
    },
}

/// What to do when a backend asks for elicitation and no gateway session can answer (the CLI).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ElicitationFallback {
    /// Answer `decline`.
    #[default]
    Decline,
    /// Accept with the defaults the requested schema declares.
    AcceptDefaults,
}

/// The client call a backend call is made for: who to relay the backend's requests to.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The client's connection (its session, or its one request in the stateless era).
    pub peer: Peer<RoleServer>,
    /// The client's request this call serves: relayed requests ride its response stream.
    pub request: RequestId,
    /// Which client session: calls of one session may share a backend request's answer.
    pub session: u64,
    /// What the client declared it can do (per request on 2026-07-28): a backend on 2026-07-28
    /// is told these, not the pool's own, so it asks only for what this client can give.
    pub capabilities: Option<ClientCapabilities>,
    /// Where a handshake-era backend's requests go when this caller speaks 2026-07-28 (it
    /// cannot be asked mid-call; the gateway turns them into `input_required`, see
    /// [`crate::asks`]). Without it they are refused with a clear error.
    pub asks: Option<Asks>,
    /// Whom the client's request is for (reads and prompts of a server with per-principal
    /// `"auth"` go over that principal's connection).
    pub on_behalf: Option<crate::on_behalf::OnBehalf>,
}

impl Caller {
    /// A caller for `peer`'s request `request` in session `session`.
    #[must_use]
    pub fn new(peer: Peer<RoleServer>, request: RequestId, session: u64) -> Self {
        Self {
            peer,
            request,
            session,
            capabilities: None,
            asks: None,
            on_behalf: None,
        }
    }

    /// The same caller, for `on_behalf`.
    #[must_use]
    pub fn with_on_behalf(mut self, on_behalf: Option<crate::on_behalf::OnBehalf>) -> Self {
        self.on_behalf = on_behalf;
        self
    }

    /// The same caller, with an inbox for its backend's mid-call requests.
    #[must_use]
    pub fn with_asks(mut self, asks: Asks) -> Self {
        self.asks = Some(asks);
        self
    }

    /// Whether this caller can still be reached: its connection is open, or (a 2026-07-28
    /// client between the rounds of a call, whose request has been answered) its call's inbox
    /// is still read.
    fn reachable(&self) -> bool {
        self.asks.as_ref().is_some_and(|a| !a.is_closed()) || !self.peer.is_transport_closed()
    }

    /// The same caller, with the capabilities its request declared.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: Option<ClientCapabilities>) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Whether the caller speaks 2026-07-28 or later, where a server cannot ask a client
    /// mid-call (it answers `input_required` instead).
    fn is_modern(&self) -> bool {
        self.peer
            .peer_info()
            .is_none_or(|i| !i.protocol_version.has_initialize())
    }

    fn declared(&self) -> ClientCapabilities {
        self.capabilities
            .clone()
            .unwrap_or_else(|| capabilities(&self.peer))
    }
}

struct InFlight {
    id: u64,
    caller: Caller,
    /// Our request to the backend, once sent (Streamable HTTP backends say which request's
    /// stream a server request arrived on).
    outbound: Option<RequestId>,
}

/// Which call a backend's request belongs to.
#[derive(Debug)]
enum Owner {
    Call(Caller),
    /// No call is in flight on this backend.
    Nobody,
    /// Calls from several sessions are in flight and nothing says which one asked.
    Ambiguous(usize),
}

pub(crate) struct RelayState {
    server: String,
    /// The calls in flight, oldest first: ids are handed out in order and entries appended, so
    /// the list stays sorted by id. A deque, because calls mostly end oldest first and its
    /// `remove` moves the shorter side.
    in_flight: Mutex<VecDeque<InFlight>>,
    progress: Mutex<HashMap<String, (Peer<RoleServer>, ProgressToken)>>,
    /// Progress that arrived before its call was registered (the request is sent before its
    /// token is known to us), relayed on registration ahead of any later one
    /// (`RelayState::relay_progress`). Bounded.
    orphans: Mutex<Vec<ProgressNotificationParam>>,
    next: AtomicU64,
    events: mpsc::UnboundedSender<PoolEvent>,
    fallback: ElicitationFallback,
    /// The last progress value relayed per token: progress must increase (the spec's MUST),
    /// so a backend's stale or repeated value is dropped. rmcp hands a connection's
    /// notifications to this handler one at a time in arrival order, and the answer of a call
    /// after them, so every one a backend sent before its answer is relayed before it.
    progress_sent: tokio::sync::Mutex<HashMap<String, f64>>,
}

impl RelayState {
    /// Relays the progress of the call registered under `key`: first what arrived before the
    /// call was registered (orphans, oldest first), then `next`. One at a time under the
    /// `progress_sent` lock, so neither a replay nor a later notification overtakes the other,
    /// and a value that does not increase is dropped.
    async fn relay_progress(&self, key: &str, next: Option<ProgressNotificationParam>) {
        let mut sent = self.progress_sent.lock().await;
        let Some((peer, original)) = self.progress.lock().get(key).cloned() else {
            return;
        };
        let early: Vec<ProgressNotificationParam> = {
            let mut orphans = self.orphans.lock();
            let (mine, rest): (Vec<_>, Vec<_>) = orphans
                .drain(..)
                .partition(|p| token_key(&p.progress_token) == key);
            *orphans = rest;
            mine
        };
        for mut params in early.into_iter().chain(next) {
            if sent.get(key).is_some_and(|last| params.progress <= *last) {
                tracing::debug!(server = %self.server, "stale progress dropped (not increasing)");
                continue;
            }
            if sent.len() >= 4096 {
                sent.clear();
            }
            sent.insert(key.to_owned(), params.progress);
            params.progress_token = original.clone();
            if let Err(e) = peer.notify_progress(params).await {
                tracing::debug!(server = %self.server, "progress not relayed: {e}");
            }
        }
    }
}

/// The `ClientHandler` of one backend connection.
#[derive(Clone)]
pub struct Relay(pub(crate) Arc<RelayState>);

/// Registration of one call in flight; unregisters on drop (also when the call is cancelled).
pub(crate) struct CallGuard {
    state: Arc<RelayState>,
    id: u64,
    token: Option<String>,
}

impl CallGuard {
    /// Records the id of the request sent to the backend for this call.
    pub(crate) fn sent(&self, outbound: RequestId) {
        let mut in_flight = self.state.in_flight.lock();
        if let Ok(at) = in_flight.binary_search_by_key(&self.id, |f| f.id) {
            in_flight[at].outbound = Some(outbound);
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut in_flight = self.state.in_flight.lock();
        if let Ok(at) = in_flight.binary_search_by_key(&self.id, |f| f.id) {
            in_flight.remove(at);
        }
        drop(in_flight);
        if let Some(t) = &self.token {
            self.state.progress.lock().remove(t);
            if let Ok(mut sent) = self.state.progress_sent.try_lock() {
                sent.remove(t);
            }
        }
    }
}

fn token_key(t: &ProgressToken) -> String {
    match &t.0 {
        NumberOrString::Number(n) => format!("n:{n}"),
        NumberOrString::String(s) => format!("s:{s}"),
    }
}

impl Relay {
    pub(crate) fn new(
        server: &str,
        events: mpsc::UnboundedSender<PoolEvent>,
        fallback: ElicitationFallback,
    ) -> Self {
        Self(Arc::new(RelayState {
            server: server.to_owned(),
            in_flight: Mutex::new(VecDeque::new()),
            progress: Mutex::new(HashMap::new()),
            orphans: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            events,
            fallback,
            progress_sent: tokio::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// Registers a call by `caller` (before the request is sent).
    pub(crate) fn register(&self, caller: Option<&Caller>) -> CallGuard {
        let id = match caller {
            Some(caller) => {
                let caller = caller.clone();
                let mut in_flight = self.0.in_flight.lock();
                // Taken under the lock, so that entries are appended in the order of their ids.
                let id = self.0.next.fetch_add(1, Ordering::Relaxed);
                in_flight.push_back(InFlight {
                    id,
                    caller,
                    outbound: None,
                });
                id
            }
            None => self.0.next.fetch_add(1, Ordering::Relaxed),
        };
        CallGuard {
            state: self.0.clone(),
            id,
            token: None,
        }
    }

    /// Maps the token rmcp put on the sent request (`sent`) to the caller's own token, and
    /// replays progress that raced ahead of this registration.
    pub(crate) fn map_progress(
        &self,
        guard: &mut CallGuard,
        caller: &Caller,
        sent: &ProgressToken,
        original: ProgressToken,
    ) {
        let key = token_key(sent);
        self.0
            .progress
            .lock()
            .insert(key.clone(), (caller.peer.clone(), original));
        guard.token = Some(key.clone());
        let early = self
            .0
            .orphans
            .lock()
            .iter()
            .any(|p| token_key(&p.progress_token) == key);
        if early {
            // Relayed in order with the later ones: `relay_progress` sends orphans first.
            let state = self.0.clone();
            tokio::spawn(async move { state.relay_progress(&key, None).await });
        }
    }

    /// The call a backend request belongs to: the call whose outbound request's stream it
    /// arrived on, else the latest call when all calls in flight share one session.
    fn owner(&self, origin: Option<&InboundStreamOrigin>) -> Owner {
        let in_flight = self.0.in_flight.lock();
        let live: Vec<&InFlight> = in_flight.iter().filter(|f| f.caller.reachable()).collect();
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin
            && let Some(f) = live.iter().find(|f| f.outbound.as_ref() == Some(id))
        {
            return Owner::Call(f.caller.clone());
        }
        let Some(last) = live.last() else {
            return Owner::Nobody;
        };
        let sessions: std::collections::HashSet<u64> =
            live.iter().map(|f| f.caller.session).collect();
        if sessions.len() == 1 {
            Owner::Call(last.caller.clone())
        } else {
            Owner::Ambiguous(sessions.len())
        }
    }

    /// The sessions with a call in flight on this backend (one peer each).
    /// Where a backend's log message goes: to the call whose request's stream it arrived on,
    /// else to the latest call of each client session with calls in flight; each with the
    /// client's request, so that the message rides that request's own stream.
    fn log_targets(
        &self,
        origin: Option<&InboundStreamOrigin>,
    ) -> Vec<(Peer<RoleServer>, RequestId)> {
        let in_flight = self.0.in_flight.lock();
        let live = || {
            in_flight
                .iter()
                .filter(|f| !f.caller.peer.is_transport_closed())
        };
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin
            && let Some(f) = live().find(|f| f.outbound.as_ref() == Some(id))
        {
            return vec![(f.caller.peer.clone(), f.caller.request.clone())];
        }
        let mut latest: Vec<&InFlight> = Vec::new();
        for f in live() {
            match latest
                .iter_mut()
                .find(|l| l.caller.session == f.caller.session)
            {
                Some(l) => *l = f,
                None => latest.push(f),
            }
        }
        latest
            .into_iter()
            .map(|f| (f.caller.peer.clone(), f.caller.request.clone()))
            .collect()
    }

    fn ambiguous(&self, what: &str, sessions: usize) -> McpError {
        McpError::invalid_request(
            format!(
                "server \"{}\" asked for {what} while calls from {sessions} different clients \
                 were in flight on it, and its transport does not say which call asked; \
                 toolforge refuses rather than ask the wrong client (give the server \
                 \"isolation\": \"session\", or reach it over Streamable HTTP)",
                self.0.server
            ),
            None,
        )
    }

    fn no_caller(&self, what: &str) -> McpError {
        McpError::invalid_request(
            format!(
                "server \"{}\" asked for {what}, but no client connected through toolforge is \
                 in a call with it that could answer",
                self.0.server
            ),
            None,
        )
    }

    fn modern_caller(&self, what: &str) -> McpError {
        McpError::invalid_request(
            format!(
                "server \"{}\" asked for {what} mid-call, but the calling client speaks MCP \
                 2026-07-28, where a server cannot ask a client mid-call; if the server speaks \
                 2026-07-28 too, give it \"protocol\": \"auto\" so that it asks with \
                 input_required, which toolforge relays",
                self.0.server
            ),
            None,
        )
    }

    /// The backend asked for what the calling client did not declare: -32021
    /// (MissingRequiredClientCapability), naming the capability, as a 2026-07-28 server would
    /// refuse such a request itself.
    fn not_declared(&self, capability: &str) -> McpError {
        let required: ClientCapabilities =
            serde_json::from_value(serde_json::json!({ capability: {} })).unwrap_or_default();
        let mut error = McpError::missing_required_client_capability(required);
        error.message = format!(
            "server \"{}\" asked for {capability}, but the calling client did not declare the \
             {capability} capability",
            self.0.server
        )
        .into();
        error
    }

    pub(crate) fn send(&self, event: PoolEvent) {
        let _ = self.0.events.send(event);
    }
}

fn capabilities(peer: &Peer<RoleServer>) -> ClientCapabilities {
    peer.peer_info()
        .map(|i| i.capabilities.clone())
        .unwrap_or_default()
}

/// The defaults a form elicitation schema declares, as the content of an `accept`.
fn schema_defaults(params: &ElicitRequestParams) -> serde_json::Map<String, Value> {
    let v = serde_json::to_value(params).unwrap_or(Value::Null);
    let mut out = serde_json::Map::new();
    if let Some(Value::Object(props)) = v.pointer("/requestedSchema/properties") {
        for (k, p) in props {
            if let Some(d) = p.get("default") {
                out.insert(k.clone(), d.clone());
            }
        }
    }
    out
}

/// What the pool's connections offer. Everything: whether a request can really be answered is
/// decided per call, by the capabilities of the gateway session that made the call. MCP Apps
/// too: servers that check register their app tools, and the gateway passes them through (a
/// host that does not render apps ignores their metadata). Not the Tasks extension: a call
/// declares it only for a caller that follows tasks (`crate::call`).
pub(crate) fn offered_capabilities() -> ClientCapabilities {
    let mut caps = serde_json::json!({
        "sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true},
        "extensions": {}
    });
    caps["extensions"][toolforge_select::apps::UI_EXTENSION_ID] =
        serde_json::json!({"mimeTypes": [toolforge_select::apps::UI_MIME_TYPE]});
    serde_json::from_value(caps).unwrap_or_default()
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        let caps = offered_capabilities();
        // The newest revision that keeps the `initialize` handshake: what real servers speak.
        let mut config = ClientConfig::new(
            caps,
            Implementation::new("toolforge", env!("CARGO_PKG_VERSION")),
        );
        config.protocol_version = rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let what = "sampling (sampling/createMessage)";
        let caller = match self.owner(ctx.extensions.get()) {
            Owner::Call(caller) => caller,
            Owner::Nobody => return Err(self.no_caller(what)),
            Owner::Ambiguous(n) => return Err(self.ambiguous(what, n)),
        };
        if caller.declared().sampling.is_none() {
            return Err(self.not_declared("sampling"));
        }
        if caller.is_modern() {
            let Some(asks) = &caller.asks else {
                return Err(self.modern_caller("sampling"));
            };
            let request = InputRequest::CreateMessage(CreateMessageRequest::new(params));
            return asks::ask(&self.0.server, asks, request, what).await;
        }
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match ask(&caller, request).await {
            Ok(ClientResult::CreateMessageResult(r)) => Ok(*r),
            Ok(_) => Err(unexpected("sampling/createMessage")),
            Err(e) => Err(relay_error("sampling/createMessage", e)),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let caller = match self.owner(ctx.extensions.get()) {
            Owner::Call(caller) => caller,
            Owner::Nobody => {
                return match self.0.fallback {
                    ElicitationFallback::Decline => {
                        Ok(ElicitResult::new(ElicitationAction::Decline))
                    }
                    ElicitationFallback::AcceptDefaults => {
                        Ok(ElicitResult::new(ElicitationAction::Accept)
                            .with_content(Value::Object(schema_defaults(&params))))
                    }
                };
            }
            Owner::Ambiguous(n) => {
                return Err(self.ambiguous("elicitation (elicitation/create)", n));
            }
        };
        if caller.declared().elicitation.is_none() {
            return Err(self.not_declared("elicitation"));
        }
        if caller.is_modern() {
            let Some(asks) = &caller.asks else {
                return Err(self.modern_caller("elicitation"));
            };
            let request = InputRequest::Elicitation(rmcp::model::ElicitRequest::new(params));
            let what = "elicitation (elicitation/create)";
            return asks::ask(&self.0.server, asks, request, what).await;
        }
        let request = ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(params));
        match ask(&caller, request).await {
            Ok(ClientResult::ElicitResult(r)) => Ok(r),
            Ok(_) => Err(unexpected("elicitation/create")),
            Err(e) => Err(relay_error("elicitation/create", e)),
        }
    }

    async fn list_roots(
        &self,
        ctx: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self.owner(ctx.extensions.get()) {
            Owner::Call(caller) if caller.declared().roots.is_some() => {
                if caller.is_modern() {
                    let Some(asks) = &caller.asks else {
                        return Err(self.modern_caller("roots"));
                    };
                    let request = InputRequest::ListRoots(ListRootsRequest::default());
                    return asks::ask(&self.0.server, asks, request, "roots (roots/list)").await;
                }
                let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
                match ask(&caller, request).await {
                    Ok(ClientResult::ListRootsResult(r)) => Ok(r),
                    Ok(_) => Err(unexpected("roots/list")),
                    Err(e) => Err(relay_error("roots/list", e)),
                }
            }
            Owner::Ambiguous(n) => Err(self.ambiguous("roots (roots/list)", n)),
            _ => Ok(ListRootsResult::default()),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let key = token_key(&params.progress_token);
        let registered = self.0.progress.lock().contains_key(&key);
        if registered {
            self.0.relay_progress(&key, Some(params)).await;
            return;
        }
        {
            let mut orphans = self.0.orphans.lock();
            if orphans.len() >= 64 {
                orphans.remove(0);
            }
            orphans.push(params);
        }
        // Registered meanwhile (after the check above, before the push): nothing else would
        // relay this one.
        if self.0.progress.lock().contains_key(&key) {
            self.0.relay_progress(&key, None).await;
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        ctx: NotificationContext<RoleClient>,
    ) {
        let targets = self.log_targets(ctx.extensions.get::<InboundStreamOrigin>());
        if targets.is_empty() {
            tracing::info!(server = %self.0.server, level = ?params.level, data = %params.data, "backend log");
        }
        for (peer, request) in targets {
            let mut message = ServerNotification::LoggingMessageNotification(
                rmcp::model::Notification::new(params.clone()),
            );
            message
                .extensions_mut()
                .insert(OriginatingRequestId(request));
            if let Err(e) = peer.send_notification(message).await {
                tracing::debug!(server = %self.0.server, "log message not relayed: {e}");
            }
        }
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.send(PoolEvent::ResourceUpdated {
            server: self.0.server.clone(),
            uri: params.uri,
        });
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.send(PoolEvent::ToolsChanged {
            server: self.0.server.clone(),
        });
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.send(PoolEvent::ResourcesChanged {
            server: self.0.server.clone(),
        });
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.send(PoolEvent::PromptsChanged {
            server: self.0.server.clone(),
        });
    }
}

/// Sends `request` to `caller` as part of its call, so that it rides that call's response
/// stream. rmcp tags a request sent from inside a handler with that handler's request (here
/// the backend's, unknown to the client's session); a task of its own carries only the origin
/// set here.
async fn ask(caller: &Caller, mut request: ServerRequest) -> Result<ClientResult, ServiceError> {
    request
        .extensions_mut()
        .insert(OriginatingRequestId(caller.request.clone()));
    let peer = caller.peer.clone();
    tokio::spawn(async move { peer.send_request(request).await })
        .await
        .unwrap_or(Err(ServiceError::TransportClosed))
}

fn unexpected(what: &str) -> McpError {
    McpError::internal_error(
        format!("the client answered {what} with another kind of result"),
        None,
    )
}

fn relay_error(what: &str, e: rmcp::service::ServiceError) -> McpError {
    match e {
        rmcp::service::ServiceError::McpError(err) => err,
        other => {
            McpError::internal_error(format!("{what} relay to the client failed: {other}"), None)
        }
    }
}

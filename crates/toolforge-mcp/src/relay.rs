//! The pool's side of each backend connection: an rmcp `ClientHandler` that relays what a
//! backend sends on its own initiative to the gateway session it concerns.
//!
//! A backend connection is shared by every gateway session, and stdio carries no link between
//! a server-to-client request and the tool call that caused it. The rule: requests a backend
//! makes (sampling, elicitation, roots) go to the session of the **most recent in-flight call**
//! on that backend; progress goes by token (each call gets a fresh token, mapped back to the
//! caller's own); log messages go to every session with a call in flight on that backend (or
//! are logged here when there is none); list changes and resource updates become [`PoolEvent`]s
//! for the pool and gateway to act on. With one call at a time per backend (the common case)
//! this is exact; with concurrent calls from several sessions, sampling/elicitation may reach
//! the session whose call started last: documented in docs/gateway.md.

// Sampling, roots and logging are deprecated by rmcp for protocol 2026-07-28 (SEP-2577); the
// fleet of real servers speaks 2025-11-25 and earlier, where they are required.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, NumberOrString, ProgressNotificationParam, ProgressToken,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;

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

struct InFlight {
    id: u64,
    caller: Peer<RoleServer>,
}

pub(crate) struct RelayState {
    server: String,
    in_flight: Mutex<Vec<InFlight>>,
    progress: Mutex<HashMap<String, (Peer<RoleServer>, ProgressToken)>>,
    /// Progress that arrived before its call was registered (the request is sent before its
    /// token is known to us), replayed on registration. Bounded.
    orphans: Mutex<Vec<ProgressNotificationParam>>,
    next: AtomicU64,
    events: mpsc::UnboundedSender<PoolEvent>,
    fallback: ElicitationFallback,
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

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.state.in_flight.lock().retain(|f| f.id != self.id);
        if let Some(t) = &self.token {
            self.state.progress.lock().remove(t);
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
            in_flight: Mutex::new(Vec::new()),
            progress: Mutex::new(HashMap::new()),
            orphans: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            events,
            fallback,
        }))
    }

    /// Registers a call by `caller` (before the request is sent).
    pub(crate) fn register(&self, caller: Option<&Peer<RoleServer>>) -> CallGuard {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        if let Some(peer) = caller {
            self.0.in_flight.lock().push(InFlight {
                id,
                caller: peer.clone(),
            });
        }
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
        caller: &Peer<RoleServer>,
        sent: &ProgressToken,
        original: ProgressToken,
    ) {
        let key = token_key(sent);
        self.0
            .progress
            .lock()
            .insert(key.clone(), (caller.clone(), original.clone()));
        guard.token = Some(key.clone());
        let early: Vec<ProgressNotificationParam> = {
            let mut orphans = self.0.orphans.lock();
            let (mine, rest): (Vec<_>, Vec<_>) = orphans
                .drain(..)
                .partition(|p| token_key(&p.progress_token) == key);
            *orphans = rest;
            mine
        };
        if !early.is_empty() {
            let peer = caller.clone();
            tokio::spawn(async move {
                for mut p in early {
                    p.progress_token = original.clone();
                    let _ = peer.notify_progress(p).await;
                }
            });
        }
    }

    fn latest_caller(&self) -> Option<Peer<RoleServer>> {
        let in_flight = self.0.in_flight.lock();
        in_flight
            .iter()
            .rev()
            .find(|f| !f.caller.is_transport_closed())
            .map(|f| f.caller.clone())
    }

    fn callers(&self) -> Vec<Peer<RoleServer>> {
        let mut out: Vec<Peer<RoleServer>> = Vec::new();
        for f in self.0.in_flight.lock().iter() {
            if !f.caller.is_transport_closed() {
                out.push(f.caller.clone());
            }
        }
        out
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

    fn send(&self, event: PoolEvent) {
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

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        // Offer everything: whether a request can really be answered is decided per call, by
        // the capabilities of the gateway session that made the call.
        let caps: ClientCapabilities = serde_json::from_value(serde_json::json!({
            "sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}
        }))
        .unwrap_or_default();
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
        _ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let caller = self
            .latest_caller()
            .ok_or_else(|| self.no_caller("sampling (sampling/createMessage)"))?;
        if capabilities(&caller).sampling.is_none() {
            return Err(McpError::invalid_request(
                format!(
                    "server \"{}\" asked for sampling, but the calling client did not declare \
                     the sampling capability",
                    self.0.server
                ),
                None,
            ));
        }
        caller
            .create_message(params)
            .await
            .map_err(|e| relay_error("sampling/createMessage", e))
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let Some(caller) = self.latest_caller() else {
            return match self.0.fallback {
                ElicitationFallback::Decline => Ok(ElicitResult::new(ElicitationAction::Decline)),
                ElicitationFallback::AcceptDefaults => {
                    Ok(ElicitResult::new(ElicitationAction::Accept)
                        .with_content(Value::Object(schema_defaults(&params))))
                }
            };
        };
        if capabilities(&caller).elicitation.is_none() {
            return Err(McpError::invalid_request(
                format!(
                    "server \"{}\" asked for elicitation, but the calling client did not declare \
                     the elicitation capability",
                    self.0.server
                ),
                None,
            ));
        }
        caller
            .create_elicitation(params)
            .await
            .map_err(|e| relay_error("elicitation/create", e))
    }

    async fn list_roots(
        &self,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self.latest_caller() {
            Some(caller) if capabilities(&caller).roots.is_some() => caller
                .list_roots()
                .await
                .map_err(|e| relay_error("roots/list", e)),
            _ => Ok(ListRootsResult::default()),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let target = self
            .0
            .progress
            .lock()
            .get(&token_key(&params.progress_token))
            .cloned();
        if let Some((peer, original)) = target {
            let mut params = params;
            params.progress_token = original;
            if let Err(e) = peer.notify_progress(params).await {
                tracing::debug!(server = %self.0.server, "progress not relayed: {e}");
            }
        } else {
            let mut orphans = self.0.orphans.lock();
            if orphans.len() >= 64 {
                orphans.remove(0);
            }
            orphans.push(params);
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let callers = self.callers();
        if callers.is_empty() {
            tracing::info!(server = %self.0.server, level = ?params.level, data = %params.data, "backend log");
        }
        for peer in callers {
            if let Err(e) = peer.notify_logging_message(params.clone()).await {
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

fn relay_error(what: &str, e: rmcp::service::ServiceError) -> McpError {
    match e {
        rmcp::service::ServiceError::McpError(err) => err,
        other => {
            McpError::internal_error(format!("{what} relay to the client failed: {other}"), None)
        }
    }
}

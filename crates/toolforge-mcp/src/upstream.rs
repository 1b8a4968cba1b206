//! One configured server as the pool holds it: its config, lifecycle state, connection and the
//! lists it last gave. Every other module of the pool works on an [`Upstream`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::RwLock;
use rmcp::model::{Prompt, Resource, ResourceTemplate, ServerCapabilities};
use rmcp::transport::streamable_http_client::DirectRequests;
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use tokio::sync::watch;

use crate::cache::CatalogCache;
use crate::config::{ServerConfig, Transport};
use crate::listed_tool::ListedTool;
use crate::pins::{Pinning, Quarantined};
use crate::relay::Relay;

/// A server's lifecycle state, as `/health` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Ready,
    Restarting,
    Failed,
    Disabled,
    /// Not connected: its tools come from the catalog cache (a dry run that must not contact
    /// servers).
    Cached,
}

/// One server's health.
#[derive(Debug, Clone, Serialize)]
pub struct ServerHealth {
    pub name: String,
    pub state: ServerState,
    pub tools: usize,
    pub last_error: Option<String>,
    pub restarts: u32,
    /// The protocol revision the pool speaks to it (negotiated: `"2025-11-25"` after the
    /// `initialize` handshake, `"2026-07-28"` after `server/discover`); null before the first
    /// connection.
    pub protocol: Option<String>,
}

/// The era a server answered in, remembered from its last connection so that a restart of a
/// `"protocol": "auto"` server skips the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize`.
    Handshake,
    /// `server/discover` (2026-07-28).
    Modern,
}

/// What a server offers, as last listed.
#[derive(Default)]
pub(crate) struct Lists {
    /// Shared: the catalog and the gateway's list of exposed tools hold these, not copies.
    pub tools: Vec<ListedTool>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    pub prompts: Vec<Prompt>,
    pub capabilities: Option<ServerCapabilities>,
    pub instructions: Option<String>,
    /// When `tools` were fetched (ms since the epoch), and whether from the cache.
    pub fetched_at_ms: Option<u64>,
    pub from_cache: bool,
    /// Listed tools held back until approved (not in `tools`; see `crate::pins`).
    pub quarantined: Vec<Quarantined>,
}

pub(crate) struct Status {
    pub state: ServerState,
    pub last_error: Option<String>,
    pub restarts: u32,
}

/// The servers, held weakly by background tasks so a dropped pool stops them.
pub(crate) type Servers = [Arc<Upstream>];

pub(crate) struct Upstream {
    pub cfg: ServerConfig,
    pub relay: Relay,
    pub status: RwLock<Status>,
    pub peer: RwLock<Option<Peer<RoleClient>>>,
    /// An HTTP server's session, for `tools/call`s posted from the caller's task
    /// (`crate::call`); none for a stdio server.
    pub direct: Option<DirectRequests<crate::auth::bearer::BackendHttp>>,
    /// The tokens its HTTP requests carry (`"auth"`): the lists' identity on the shared
    /// connection, one principal's on a connection of its own.
    pub credentials: Option<crate::auth::token::Credentials>,
    /// The server's challenge when the last connection attempt was refused for want of
    /// authorization (a call then fails at once with a consent request instead of waiting).
    pub refused: parking_lot::Mutex<Option<String>>,
    /// The principal this connection serves alone (a per-principal `"auth"` server's).
    pub principal: Option<String>,
    /// Cuts a restart backoff short (a grant it was waiting for was stored).
    pub wake: tokio::sync::Notify,
    pub lists: RwLock<Lists>,
    pub cache: Option<Arc<CatalogCache>>,
    /// Pins and the poisoning guard: applied to every list set (none: every tool offered).
    pub pinning: Option<Arc<Pinning>>,
    /// Bumped whenever `lists` is replaced (keys the pool's merged-catalog cache).
    pub lists_gen: AtomicU64,
    /// Bumped whenever the state changes, so waiters can wake.
    pub changed: watch::Sender<u64>,
    /// When the tool list was last re-read for a call naming a tool it lacked (one refresh at a
    /// time, rate-limited).
    pub unknown_refresh: tokio::sync::Mutex<Option<Instant>>,
    /// What a 2026-07-28 connection's `subscriptions/listen` stream asks for.
    pub listening: crate::listen::Listening,
    /// The era and revision of the last connection (see [`Era`]).
    pub negotiated: RwLock<Option<(Era, String)>>,
}

impl Upstream {
    pub fn new(cfg: ServerConfig, relay: Relay, cache: Option<Arc<CatalogCache>>) -> Self {
        let (state, last_error) = match (&cfg.disabled_reason, cfg.disabled) {
            (Some(reason), _) => (ServerState::Disabled, Some(reason.clone())),
            (None, true) => (ServerState::Disabled, None),
            (None, false) => (ServerState::Starting, None),
        };
        Self {
            relay,
            status: RwLock::new(Status {
                state,
                last_error,
                restarts: 0,
            }),
            peer: RwLock::new(None),
            direct: matches!(cfg.transport, Transport::Http { .. }).then(DirectRequests::new),
            credentials: None,
            refused: parking_lot::Mutex::new(None),
            principal: None,
            wake: tokio::sync::Notify::new(),
            lists: RwLock::new(Lists::default()),
            cache,
            pinning: None,
            lists_gen: AtomicU64::new(0),
            changed: watch::channel(0).0,
            unknown_refresh: tokio::sync::Mutex::new(None),
            listening: crate::listen::Listening::default(),
            negotiated: RwLock::new(None),
            cfg,
        }
    }

    pub fn set_state(&self, state: ServerState, error: Option<String>) {
        {
            let mut s = self.status.write();
            s.state = state;
            if error.is_some() || state == ServerState::Ready {
                s.last_error = error;
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn state(&self) -> ServerState {
        self.status.read().state
    }

    pub fn health(&self) -> ServerHealth {
        let s = self.status.read();
        ServerHealth {
            name: self.cfg.name.clone(),
            state: s.state,
            tools: self.lists.read().tools.len(),
            last_error: s.last_error.clone(),
            restarts: s.restarts,
            protocol: self.negotiated.read().as_ref().map(|(_, v)| v.clone()),
        }
    }

    /// Sending the tokens of `credentials`.
    #[must_use]
    pub fn with_credentials(
        mut self,
        credentials: Option<crate::auth::token::Credentials>,
    ) -> Self {
        self.credentials = credentials;
        self
    }

    /// With pins and the poisoning guard applied to its lists.
    #[must_use]
    pub fn with_pinning(mut self, pinning: Option<Arc<Pinning>>) -> Self {
        self.pinning = pinning;
        self
    }

    /// Replaces the lists (and bumps their generation). Tools the pins or the poisoning guard
    /// hold back go to `quarantined`, not `tools`.
    pub fn set_lists(&self, mut lists: Lists) {
        if let Some(pinning) = &self.pinning {
            let listed = std::mem::take(&mut lists.tools);
            let (offered, held) = pinning.admit(&crate::cache::key(&self.cfg), listed);
            lists.tools = offered;
            lists.quarantined = held;
        }
        self.lists_gen.fetch_add(1, Ordering::Release);
        *self.lists.write() = lists;
    }

    /// Judges the quarantined tools again (an approval may have been given since); true when
    /// some were released.
    pub fn readmit(&self) -> bool {
        let Some(pinning) = &self.pinning else {
            return false;
        };
        let mut lists = self.lists.write();
        if lists.quarantined.is_empty() {
            return false;
        }
        let mut all = lists.tools.clone();
        all.extend(
            lists
                .quarantined
                .iter()
                .map(|q| ListedTool::new(q.tool.clone())),
        );
        let (offered, held) = pinning.admit(&crate::cache::key(&self.cfg), all);
        let released = held.len() < lists.quarantined.len();
        lists.tools = offered;
        lists.quarantined = held;
        drop(lists);
        if released {
            self.lists_gen.fetch_add(1, Ordering::Release);
        }
        released
    }

    /// Why `tool` is quarantined, when it is.
    pub fn quarantine_reason(&self, tool: &str) -> Option<String> {
        self.lists
            .read()
            .quarantined
            .iter()
            .find(|q| q.tool.name == tool)
            .map(|q| q.reason.clone())
    }

    pub fn generation(&self) -> u64 {
        self.lists_gen.load(Ordering::Acquire)
    }

    /// Whether calling `tool` twice does no harm: the server marks it read-only or idempotent,
    /// or the operator marked the server or the tool `retryable` in `mcp.servers.json`.
    pub fn retryable(&self, tool: &str) -> bool {
        if self.cfg.retryable || self.cfg.retryable_tools.iter().any(|t| t == tool) {
            return true;
        }
        let lists = self.lists.read();
        lists
            .tools
            .iter()
            .find(|t| t.name() == tool)
            .and_then(ListedTool::annotations)
            .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true))
    }

    /// Whether the last list has `tool`.
    pub fn has_tool(&self, tool: &str) -> bool {
        self.lists.read().tools.iter().any(|t| t.name() == tool)
    }
}

//! The pool: one supervised connection per configured server, the merged lists, and calls with
//! the retry policy.
//!
//! Each server has a supervisor task that connects (spawning the child or opening the HTTP
//! session), lists what the server offers, then waits for the connection to end and reconnects
//! with exponential backoff (1 s doubling to 30 s). Start-up waits for every server's first
//! attempt concurrently, each bounded by its own start timeout, so one broken server never holds
//! up the others. Calls follow DESIGN §2: transient failures (transport, timeouts of a send,
//! HTTP 5xx, a server that is restarting) are retried up to 3 attempts with full-jitter backoff
//! from 500 ms doubling; JSON-RPC errors and tool `isError` results are terminal. One deadline
//! (the server's `timeout`) bounds all attempts of a call together.

#![allow(deprecated)]

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientRequest, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequiredResult, LoggingLevel,
    ProgressToken, Prompt, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceTemplate, ServerCapabilities, ServerResult, SetLevelRequestParams,
    SubscribeRequestParams, Tool as McpTool, UnsubscribeRequestParams,
};
use rmcp::service::{PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, ErrorData as McpError, Peer, RoleClient};
use serde::Serialize;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use toolforge_select::{Catalog, ServerEntry, Tool, ToolId};

use crate::cache::{self, CachedTools, CatalogCache, Lookup};
use crate::config::{PoolConfig, ServerConfig, Transport};
use crate::relay::{CallGuard, Caller, ElicitationFallback, PoolEvent, Relay};

/// Retry policy of DESIGN §2.
const MAX_ATTEMPTS: u32 = 3;
const RETRY_BASE: Duration = Duration::from_millis(500);
const RESTART_BASE: Duration = Duration::from_secs(1);
const RESTART_MAX: Duration = Duration::from_secs(30);

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
}

/// Options the binary chooses.
#[derive(Debug, Clone, Default)]
pub struct PoolOptions {
    /// A `command` equal to this name runs `self_exe` instead (the bundled config starts the
    /// built-in servers as `toolforge server ...`, which must be this very build).
    pub self_command: Option<(String, PathBuf)>,
    /// What to answer a backend's elicitation when no client can (the CLI).
    pub elicitation_fallback: ElicitationFallback,
    /// Where listed tools are kept between processes (none: only in this pool).
    pub cache: Option<Arc<CatalogCache>>,
    /// Do not start servers whose tools are in the cache (a dry run never contacts a server;
    /// servers missing from the cache are started once to fill it).
    pub cached_only: bool,
}

#[derive(Default)]
struct Lists {
    tools: Vec<McpTool>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    capabilities: Option<ServerCapabilities>,
    instructions: Option<String>,
    /// When `tools` were fetched (ms since the epoch), and whether from the cache.
    fetched_at_ms: Option<u64>,
    from_cache: bool,
}

struct Status {
    state: ServerState,
    last_error: Option<String>,
    restarts: u32,
}

struct Upstream {
    cfg: ServerConfig,
    relay: Relay,
    status: RwLock<Status>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    lists: RwLock<Lists>,
    cache: Option<Arc<CatalogCache>>,
    /// Bumped whenever `lists` is replaced (keys the pool's merged-catalog cache).
    lists_gen: std::sync::atomic::AtomicU64,
    /// Bumped whenever the state changes, so waiters can wake.
    changed: watch::Sender<u64>,
}

impl Upstream {
    fn set_state(&self, state: ServerState, error: Option<String>) {
        {
            let mut s = self.status.write();
            s.state = state;
            if error.is_some() || state == ServerState::Ready {
                s.last_error = error;
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    fn state(&self) -> ServerState {
        self.status.read().state
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown server \"{0}\"")]
    UnknownServer(String),
    #[error("server \"{server}\" is {state:?}{}", last_error.as_deref().map(|e| format!(": {e}")).unwrap_or_default())]
    Unavailable {
        server: String,
        state: ServerState,
        last_error: Option<String>,
    },
    #[error("server \"{server}\" did not answer within {after:?}")]
    Timeout { server: String, after: Duration },
    /// A JSON-RPC error from the server (terminal).
    #[error("{0}")]
    Rpc(McpError),
    #[error("server \"{server}\": {message}")]
    Transport { server: String, message: String },
    #[error("the call was cancelled")]
    Cancelled,
    /// The server (on protocol 2026-07-28) needs input from the caller's user before it can go
    /// on: a gateway relays it to its client; callers that cannot ask anyone fail with this.
    #[error(
        "server \"{server}\" needs input from the user (sampling, elicitation or roots) to go on, which this caller cannot give"
    )]
    InputRequired {
        server: String,
        result: Box<InputRequiredResult>,
    },
}

impl CallError {
    /// The error as a JSON-RPC error for a client.
    #[must_use]
    pub fn to_mcp(&self) -> McpError {
        match self {
            Self::Rpc(e) => e.clone(),
            Self::UnknownServer(_) => McpError::invalid_params(self.to_string(), None),
            _ => McpError::internal_error(self.to_string(), None),
        }
    }
}

/// A tool call's result and how it was obtained (traces record both).
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub result: CallToolResult,
    pub attempts: u32,
    pub retry_reason: Option<String>,
}

/// A failed call, with the attempts made.
#[derive(Debug)]
pub struct CallFailure {
    pub error: CallError,
    pub attempts: u32,
    pub retry_reason: Option<String>,
}

/// Who is calling, for relaying what the backend sends back during the call.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The client call this call serves (sampling, elicitation, roots and logging go there).
    pub caller: Option<Caller>,
    /// The caller's progress token.
    pub progress: Option<ProgressToken>,
    /// Cancelled when the caller goes away; the backend then gets `notifications/cancelled`.
    pub cancel: Option<CancellationToken>,
}

/// The pool of MCP servers.
pub struct Pool {
    servers: Vec<Arc<Upstream>>,
    overlaps: Vec<(String, Vec<ToolId>)>,
    events: broadcast::Sender<PoolEvent>,
    cancel: CancellationToken,
    tasks: parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The merged catalog, built once per change of any server's lists.
    merged: parking_lot::Mutex<Option<(u64, Arc<Catalog>)>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

fn jitter(max: Duration) -> Duration {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    let r = h.finish();
    let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX).max(1);
    Duration::from_millis(r % ms)
}

fn transient(e: &ServiceError) -> Option<String> {
    match e {
        ServiceError::TransportSend(err) => Some(format!("transport: {err}")),
        ServiceError::TransportClosed => Some("connection closed".into()),
        ServiceError::Timeout { .. } => Some("request timeout".into()),
        _ => None,
    }
}

/// The first start attempt of each server of a [`Pool::launch`]ed pool, to wait for when a
/// caller needs the catalog before it goes on (the CLI's one-shot commands).
#[must_use = "wait for it, or drop it to go on without waiting"]
pub struct FirstAttempts(Vec<(Arc<Upstream>, tokio::sync::oneshot::Receiver<()>)>);

impl std::fmt::Debug for FirstAttempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FirstAttempts").field(&self.0.len()).finish()
    }
}

impl FirstAttempts {
    /// Returns once each server has made its first attempt (ready, failed, or past its start
    /// timeout).
    pub async fn wait(self) {
        for (up, rx) in self.0 {
            let limit = up.cfg.start_timeout + Duration::from_secs(1);
            if tokio::time::timeout(limit, rx).await.is_err() {
                tracing::warn!(server = %up.cfg.name, "not ready after {limit:?}; still trying in the background");
            }
        }
    }
}

impl Pool {
    /// Starts every enabled server concurrently and returns once each has made its first
    /// attempt (ready, failed, or past its start timeout). Broken servers keep retrying in the
    /// background.
    pub async fn start(config: PoolConfig, options: PoolOptions) -> Arc<Self> {
        let (pool, first) = Self::launch(config, options).await;
        first.wait().await;
        pool
    }

    /// Starts every enabled server concurrently and returns at once, with what the catalog
    /// cache holds: a server's tools appear when it is ready (a `StateChanged` event, and the
    /// gateway's `list_changed`), so a slow or hung server never keeps a client waiting.
    pub async fn launch(config: PoolConfig, options: PoolOptions) -> (Arc<Self>, FirstAttempts) {
        let (relay_tx, mut relay_rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(256);
        let cancel = CancellationToken::new();
        let servers: Vec<Arc<Upstream>> = config
            .servers
            .into_iter()
            .map(|cfg| {
                let disabled = cfg.disabled;
                let relay = Relay::new(&cfg.name, relay_tx.clone(), options.elicitation_fallback);
                Arc::new(Upstream {
                    relay,
                    status: RwLock::new(Status {
                        state: if disabled {
                            ServerState::Disabled
                        } else {
                            ServerState::Starting
                        },
                        last_error: None,
                        restarts: 0,
                    }),
                    peer: RwLock::new(None),
                    lists: RwLock::new(Lists::default()),
                    cache: options.cache.clone(),
                    lists_gen: std::sync::atomic::AtomicU64::new(0),
                    changed: watch::channel(0).0,
                    cfg,
                })
            })
            .collect();
        let pool = Arc::new(Self {
            servers,
            overlaps: config.overlaps,
            events,
            cancel,
            tasks: parking_lot::Mutex::new(Vec::new()),
            merged: parking_lot::Mutex::new(None),
        });
        // Serve what the cache holds at once; live lists replace it as servers answer.
        let mut cached_servers = std::collections::HashSet::new();
        if let Some(cache) = &options.cache {
            let lookups = pool
                .servers
                .iter()
                .filter(|u| !u.cfg.disabled)
                .map(|u| async move { (u.clone(), cache.lookup(&u.cfg).await) });
            for (up, found) in futures::future::join_all(lookups).await {
                let entry = match found {
                    Lookup::Fresh(e) | Lookup::Stale(e) => e,
                    Lookup::Miss => continue,
                };
                let tools: Vec<McpTool> = entry
                    .tools
                    .into_iter()
                    .filter_map(|t| serde_json::from_value(t).ok())
                    .collect();
                up.lists_gen
                    .fetch_add(1, std::sync::atomic::Ordering::Release);
                let mut lists = up.lists.write();
                lists.tools = tools;
                lists.fetched_at_ms = Some(entry.fetched_at_ms);
                lists.from_cache = true;
                cached_servers.insert(up.cfg.name.clone());
            }
        }
        let mut first = Vec::new();
        for up in &pool.servers {
            if up.cfg.disabled {
                continue;
            }
            if options.cached_only && cached_servers.contains(&up.cfg.name) {
                up.set_state(ServerState::Cached, None);
                continue;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            first.push((up.clone(), rx));
            let task = tokio::spawn(supervise(
                up.clone(),
                options.clone(),
                pool.cancel.clone(),
                pool.events.clone(),
                tx,
            ));
            pool.tasks.lock().push(task);
        }
        // Refresh lists on list_changed, then tell the gateway.
        let weak = Arc::downgrade(&pool);
        let stop = pool.cancel.clone();
        let refresher = tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => break,
                    event = relay_rx.recv() => match event {
                        Some(event) => event,
                        None => break,
                    },
                };
                let Some(pool) = weak.upgrade() else { break };
                if let PoolEvent::ToolsChanged { server }
                | PoolEvent::ResourcesChanged { server }
                | PoolEvent::PromptsChanged { server } = &event
                    && let Some(up) = pool.upstream(server)
                {
                    let peer = up.peer.read().clone();
                    if let Some(peer) = peer
                        && let Err(e) = refresh_lists(&up, &peer).await
                    {
                        tracing::warn!(server = %server, "refreshing lists after list_changed failed: {e}");
                    }
                }
                let _ = pool.events.send(event);
            }
        });
        pool.tasks.lock().push(refresher);
        if let Some(cache) = options.cache.clone() {
            let weak = Arc::downgrade(&pool);
            let stop = pool.cancel.clone();
            let task = tokio::spawn(async move {
                // One pass at a time, one server at a time: a single refresh per stale list.
                let every =
                    (cache.ttl() / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(every) => {}
                    }
                    let Some(pool) = weak.upgrade() else { break };
                    pool.revalidate(&cache).await;
                }
            });
            pool.tasks.lock().push(task);
        }
        (pool, FirstAttempts(first))
    }

    /// Stops every server (stdio children get the spec shutdown) and waits briefly.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let tasks: Vec<_> = self.tasks.lock().drain(..).collect();
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(8), t).await;
        }
    }

    fn upstream(&self, name: &str) -> Option<Arc<Upstream>> {
        self.servers.iter().find(|u| u.cfg.name == name).cloned()
    }

    /// Server names in configuration order (disabled ones included).
    #[must_use]
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|u| u.cfg.name.clone()).collect()
    }

    /// Events (list changes, resource updates, state changes).
    #[must_use]
    pub fn subscribe_events(&self) -> broadcast::Receiver<PoolEvent> {
        self.events.subscribe()
    }

    /// Whether any enabled server is still making its first start attempt.
    #[must_use]
    pub fn starting(&self) -> bool {
        self.servers
            .iter()
            .any(|u| u.state() == ServerState::Starting)
    }

    /// Waits until no server is making its first start attempt any more, at most `max`; returns
    /// at once when none is. A client's first `tools/list` or a call of a tool not known yet
    /// waits here briefly, so "list, then call" does not depend on start-up timing.
    pub async fn settled(&self, max: Duration) {
        let wait_all = async {
            for up in &self.servers {
                let mut changed = up.changed.subscribe();
                while up.state() == ServerState::Starting {
                    if changed.changed().await.is_err() {
                        break;
                    }
                }
            }
        };
        let _ = tokio::time::timeout(max, wait_all).await;
    }

    /// Health of every configured server, in configuration order.
    #[must_use]
    pub fn health(&self) -> Vec<ServerHealth> {
        self.servers
            .iter()
            .map(|u| {
                let s = u.status.read();
                ServerHealth {
                    name: u.cfg.name.clone(),
                    state: s.state,
                    tools: u.lists.read().tools.len(),
                    last_error: s.last_error.clone(),
                    restarts: s.restarts,
                }
            })
            .collect()
    }

    /// True when every enabled server is ready.
    #[must_use]
    pub fn all_ready(&self) -> bool {
        self.servers
            .iter()
            .all(|u| matches!(u.state(), ServerState::Ready | ServerState::Disabled))
    }

    /// Re-lists the tools of every ready server whose list is older than the cache's TTL.
    async fn revalidate(&self, cache: &CatalogCache) {
        for up in &self.servers {
            let stale = {
                let lists = up.lists.read();
                lists.fetched_at_ms.is_some_and(|at| cache.is_stale(at))
            };
            if !stale || up.state() != ServerState::Ready {
                continue;
            }
            let peer = up.peer.read().clone();
            if let Some(peer) = peer {
                cache.count_refresh();
                match refresh_lists(up, &peer).await {
                    Ok(()) => {
                        let _ = self.events.send(PoolEvent::ToolsChanged {
                            server: up.cfg.name.clone(),
                        });
                    }
                    Err(e) => {
                        tracing::warn!(server = %up.cfg.name, "refreshing a stale tool list failed: {e}");
                    }
                }
            }
        }
    }

    /// The catalog cache's figures and each server's list age, for `/health`.
    #[must_use]
    pub fn cache_status(&self) -> serde_json::Value {
        let now = cache::now_ms();
        let servers: serde_json::Map<String, serde_json::Value> = self
            .servers
            .iter()
            .filter(|u| !u.cfg.disabled)
            .map(|u| {
                let lists = u.lists.read();
                let age = lists.fetched_at_ms.map(|at| now.saturating_sub(at) / 1000);
                (
                    u.cfg.name.clone(),
                    serde_json::json!({
                        "age_seconds": age,
                        "source": match (lists.fetched_at_ms, lists.from_cache) {
                            (None, _) => "none",
                            (Some(_), true) => "cache",
                            (Some(_), false) => "live",
                        },
                    }),
                )
            })
            .collect();
        let mut status = match self.servers.iter().find_map(|u| u.cache.clone()) {
            Some(cache) => cache.stats(),
            None => serde_json::json!({"backend": "none"}),
        };
        status["servers"] = serde_json::Value::Object(servers);
        status
    }

    /// The merged catalog of the enabled servers (last known tools of servers that are down).
    #[must_use]
    pub fn catalog(&self) -> Catalog {
        (*self.shared_catalog()).clone()
    }

    /// [`Pool::catalog`] without the copy: built once per change of any server's lists.
    #[must_use]
    pub fn shared_catalog(&self) -> Arc<Catalog> {
        let generation: u64 = self
            .servers
            .iter()
            .map(|u| u.lists_gen.load(std::sync::atomic::Ordering::Acquire))
            .sum();
        if let Some((g, c)) = self.merged.lock().as_ref()
            && *g == generation
        {
            return c.clone();
        }
        let built = Arc::new(self.build_catalog());
        *self.merged.lock() = Some((generation, built.clone()));
        built
    }

    fn build_catalog(&self) -> Catalog {
        let servers = self
            .servers
            .iter()
            .filter(|u| !u.cfg.disabled)
            .map(|u| ServerEntry {
                name: u.cfg.name.clone(),
                tags: u.cfg.tags.clone(),
                aliases: u.cfg.aliases.clone(),
                tools: u
                    .lists
                    .read()
                    .tools
                    .iter()
                    .filter_map(|t| {
                        let serde_json::Value::Object(def) = serde_json::to_value(t).ok()? else {
                            return None;
                        };
                        Tool::from_mcp(&u.cfg.name, def, &u.cfg.tags).ok()
                    })
                    .collect(),
            })
            .collect();
        Catalog::new(servers, self.overlaps.clone()).unwrap_or_default()
    }

    /// A server's own definition of one of its tools (for faithful re-exposure).
    #[must_use]
    pub fn tool_definition(&self, id: &ToolId) -> Option<McpTool> {
        let up = self.upstream(&id.server)?;
        let lists = up.lists.read();
        lists.tools.iter().find(|t| t.name == id.name).cloned()
    }

    /// [`Pool::tool_definition`] of many tools at once, in order: one lock and one pass per
    /// server, so listing a server's thousands of tools stays linear.
    #[must_use]
    pub fn tool_definitions(&self, ids: &[&ToolId]) -> Vec<Option<McpTool>> {
        let mut out: Vec<Option<McpTool>> = vec![None; ids.len()];
        let mut by_server: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            by_server.entry(id.server.as_str()).or_default().push(i);
        }
        for (server, wanted) in by_server {
            let Some(up) = self.upstream(server) else {
                continue;
            };
            let lists = up.lists.read();
            let find = |name: &str| lists.tools.iter().find(|t| t.name == name);
            // A few names are found by scanning; many through a map built once.
            if wanted.len() * 32 < lists.tools.len() {
                for i in wanted {
                    out[i] = find(&ids[i].name).cloned();
                }
                continue;
            }
            let index: HashMap<&str, &McpTool> = lists
                .tools
                .iter()
                .rev() // the first of duplicate names wins, as in `tool_definition`
                .map(|t| (t.name.as_ref(), t))
                .collect();
            for i in wanted {
                out[i] = index.get(ids[i].name.as_str()).map(|t| (*t).clone());
            }
        }
        out
    }

    /// Resources of every ready server, in configuration order.
    #[must_use]
    pub fn resources(&self) -> Vec<(String, Resource)> {
        self.collect(|l| l.resources.clone())
    }

    /// Resource templates of every server, in configuration order.
    #[must_use]
    pub fn resource_templates(&self) -> Vec<(String, ResourceTemplate)> {
        self.collect(|l| l.templates.clone())
    }

    /// Prompts of every server, in configuration order.
    #[must_use]
    pub fn prompts(&self) -> Vec<(String, Prompt)> {
        self.collect(|l| l.prompts.clone())
    }

    /// Each enabled server's capabilities, when known.
    #[must_use]
    pub fn capabilities(&self) -> Vec<(String, ServerCapabilities)> {
        self.servers
            .iter()
            .filter(|u| !u.cfg.disabled)
            .filter_map(|u| {
                u.lists
                    .read()
                    .capabilities
                    .clone()
                    .map(|c| (u.cfg.name.clone(), c))
            })
            .collect()
    }

    /// The `instructions` of the servers that gave some.
    #[must_use]
    pub fn instructions(&self) -> Vec<(String, String)> {
        self.servers
            .iter()
            .filter_map(|u| {
                u.lists
                    .read()
                    .instructions
                    .clone()
                    .map(|i| (u.cfg.name.clone(), i))
            })
            .collect()
    }

    fn collect<T>(&self, f: impl Fn(&Lists) -> Vec<T>) -> Vec<(String, T)> {
        self.servers
            .iter()
            .filter(|u| !u.cfg.disabled)
            .flat_map(|u| {
                f(&u.lists.read())
                    .into_iter()
                    .map(|x| (u.cfg.name.clone(), x))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Waits (until `deadline`) for `server` to be ready and returns its peer.
    async fn ready_peer(
        &self,
        up: &Upstream,
        deadline: Instant,
    ) -> Result<Peer<RoleClient>, CallError> {
        let mut rx = up.changed.subscribe();
        loop {
            if let Some(peer) = up.peer.read().clone()
                && !peer.is_transport_closed()
            {
                return Ok(peer);
            }
            let state = up.state();
            if state == ServerState::Disabled {
                return Err(self.unavailable(up));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, rx.changed()).await.is_err() {
                return Err(self.unavailable(up));
            }
        }
    }

    fn unavailable(&self, up: &Upstream) -> CallError {
        let s = up.status.read();
        CallError::Unavailable {
            server: up.cfg.name.clone(),
            state: s.state,
            last_error: s.last_error.clone(),
        }
    }

    /// Calls a tool on `server` with the retry policy and the server's timeout.
    ///
    /// # Errors
    /// The server is unknown or unavailable past the deadline, the call timed out, was
    /// cancelled, or the server answered a JSON-RPC error.
    pub async fn call_tool(
        &self,
        server: &str,
        params: CallToolRequestParams,
        ctx: CallContext,
    ) -> Result<CallOutcome, CallFailure> {
        let fail = |error, attempts, retry_reason| CallFailure {
            error,
            attempts,
            retry_reason,
        };
        let Some(up) = self.upstream(server) else {
            return Err(fail(CallError::UnknownServer(server.to_owned()), 0, None));
        };
        let timeout = up.cfg.call_timeout;
        let deadline = Instant::now() + timeout;
        let cancel = ctx.cancel.clone().unwrap_or_default();
        let mut retry_reason: Option<String> = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let peer = match self.ready_peer(&up, deadline).await {
                Ok(p) => p,
                Err(e) => return Err(fail(e, attempt, retry_reason)),
            };
            let mut guard = up.relay.register(ctx.caller.as_ref());
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let left = deadline.saturating_duration_since(Instant::now());
            let sent = tokio::time::timeout(
                left,
                peer.send_request_with_option(request, caller_options(&peer, ctx.caller.as_ref())),
            )
            .await;
            let outcome = match sent {
                Err(_) => Err(()),
                Ok(Err(e)) => Ok(Err(e)),
                Ok(Ok(handle)) => {
                    guard.sent(handle.id.clone());
                    if let (Some(caller), Some(original)) = (&ctx.caller, &ctx.progress) {
                        up.relay.map_progress(
                            &mut guard,
                            caller,
                            &handle.progress_token,
                            original.clone(),
                        );
                    }
                    let mut cancel_guard = CancelOnDrop {
                        peer: Some(peer.clone()),
                        id: handle.id.clone(),
                    };
                    let left = deadline.saturating_duration_since(Instant::now());
                    let r = tokio::select! {
                        r = tokio::time::timeout(left, handle.await_response()) => r.map_err(|_| ()),
                        () = cancel.cancelled() => {
                            drop(cancel_guard);
                            drop(guard);
                            return Err(fail(CallError::Cancelled, attempt, retry_reason));
                        }
                    };
                    if r.is_ok() {
                        cancel_guard.peer = None;
                    }
                    r.map(|r| {
                        r.and_then(|res| match res {
                            ServerResult::CallToolResult(result) => {
                                Ok(CallToolResponse::Complete(result))
                            }
                            ServerResult::InputRequiredResult(r) => {
                                Ok(CallToolResponse::InputRequired(r))
                            }
                            ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
                            _ => Err(ServiceError::UnexpectedResponse),
                        })
                    })
                }
            };
            drop(guard);
            let err = match outcome {
                Err(_) => {
                    return Err(fail(
                        CallError::Timeout {
                            server: server.to_owned(),
                            after: timeout,
                        },
                        attempt,
                        retry_reason,
                    ));
                }
                Ok(Ok(CallToolResponse::Complete(result))) => {
                    return Ok(CallOutcome {
                        result,
                        attempts: attempt,
                        retry_reason,
                    });
                }
                Ok(Ok(CallToolResponse::InputRequired(result))) => CallError::InputRequired {
                    server: server.to_owned(),
                    result: Box::new(result),
                },
                Ok(Ok(_)) => CallError::Rpc(McpError::internal_error(
                    format!(
                        "server \"{server}\" answered with a task result, which toolforge does not relay yet"
                    ),
                    None,
                )),
                Ok(Err(ServiceError::McpError(e))) => CallError::Rpc(e),
                Ok(Err(e)) => match transient(&e) {
                    Some(reason) if attempt < MAX_ATTEMPTS => {
                        tracing::info!(server, attempt, "transient failure, retrying: {reason}");
                        retry_reason = Some(reason);
                        let backoff = jitter(RETRY_BASE * 2u32.pow(attempt - 1));
                        let left = deadline.saturating_duration_since(Instant::now());
                        tokio::select! {
                            () = tokio::time::sleep(backoff.min(left)) => {}
                            () = cancel.cancelled() => return Err(fail(CallError::Cancelled, attempt, retry_reason)),
                        }
                        continue;
                    }
                    _ => CallError::Transport {
                        server: server.to_owned(),
                        message: e.to_string(),
                    },
                },
            };
            return Err(fail(err, attempt, retry_reason));
        }
    }

    async fn simple<T, F, Fut>(
        &self,
        server: &str,
        caller: Option<&Caller>,
        f: F,
    ) -> Result<T, CallError>
    where
        F: FnOnce(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let up = self
            .upstream(server)
            .ok_or_else(|| CallError::UnknownServer(server.to_owned()))?;
        let deadline = Instant::now() + up.cfg.call_timeout;
        let peer = self.ready_peer(&up, deadline).await?;
        let _guard: CallGuard = up.relay.register(caller);
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, f(peer)).await {
            Err(_) => Err(CallError::Timeout {
                server: server.to_owned(),
                after: up.cfg.call_timeout,
            }),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Rpc(e)),
            Ok(Err(e)) => Err(CallError::Transport {
                server: server.to_owned(),
                message: e.to_string(),
            }),
        }
    }

    /// `resources/read` on `server`.
    ///
    /// # Errors
    /// As [`Pool::call_tool`], without retries.
    pub async fn read_resource(
        &self,
        server: &str,
        params: ReadResourceRequestParams,
        caller: Option<&Caller>,
    ) -> Result<ReadResourceResult, CallError> {
        let r = self
            .simple(server, caller, |p| async move {
                p.read_resource_once(params).await
            })
            .await?;
        match r {
            ReadResourceResponse::Complete(r) => Ok(r),
            ReadResourceResponse::InputRequired(result) => Err(CallError::InputRequired {
                server: server.to_owned(),
                result: Box::new(result),
            }),
            _ => Err(CallError::Rpc(McpError::internal_error(
                "a resource read answered with a task result, which toolforge does not relay yet",
                None,
            ))),
        }
    }

    /// `prompts/get` on `server`.
    ///
    /// # Errors
    /// As [`Pool::read_resource`].
    pub async fn get_prompt(
        &self,
        server: &str,
        params: GetPromptRequestParams,
        caller: Option<&Caller>,
    ) -> Result<GetPromptResult, CallError> {
        let r = self
            .simple(server, caller, |p| async move {
                p.get_prompt_once(params).await
            })
            .await?;
        match r {
            GetPromptResponse::Complete(r) => Ok(r),
            GetPromptResponse::InputRequired(result) => Err(CallError::InputRequired {
                server: server.to_owned(),
                result: Box::new(result),
            }),
            _ => Err(CallError::Rpc(McpError::internal_error(
                "a prompt answered with a task result, which toolforge does not relay yet",
                None,
            ))),
        }
    }

    /// `completion/complete` on `server`.
    ///
    /// # Errors
    /// As [`Pool::read_resource`].
    pub async fn complete(
        &self,
        server: &str,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, CallError> {
        self.simple(server, None, |p| async move { p.complete(params).await })
            .await
    }

    /// `resources/subscribe` on `server`.
    ///
    /// # Errors
    /// As [`Pool::read_resource`].
    pub async fn subscribe(&self, server: &str, uri: &str) -> Result<(), CallError> {
        let params = SubscribeRequestParams::new(uri);
        self.simple(server, None, |p| async move { p.subscribe(params).await })
            .await
    }

    /// `resources/unsubscribe` on `server`.
    ///
    /// # Errors
    /// As [`Pool::read_resource`].
    pub async fn unsubscribe(&self, server: &str, uri: &str) -> Result<(), CallError> {
        let params = UnsubscribeRequestParams::new(uri);
        self.simple(server, None, |p| async move { p.unsubscribe(params).await })
            .await
    }

    /// `logging/setLevel` on every ready server that offers logging; failures are logged.
    pub async fn set_level(&self, level: LoggingLevel) {
        for (server, caps) in self.capabilities() {
            if caps.logging.is_none() {
                continue;
            }
            let params = SetLevelRequestParams::new(level);
            if let Err(e) = self
                .simple(&server, None, |p| async move { p.set_level(params).await })
                .await
            {
                tracing::debug!(server, "logging/setLevel not forwarded: {e}");
            }
        }
    }
}

/// Sends `notifications/cancelled` for a request abandoned before its answer (the caller went
/// away, or the deadline passed), unless disarmed by clearing `peer`.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let param = CancelledNotificationParam::new(
                Some(self.id.clone()),
                Some("the caller went away".into()),
            );
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = peer.notify_cancelled(param).await;
                });
            }
        }
    }
}

type Client = RunningService<RoleClient, Relay>;

async fn connect(up: &Upstream, options: &PoolOptions) -> Result<Client, String> {
    match &up.cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let program = match &options.self_command {
                Some((name, exe)) if name == command => exe.clone(),
                _ => PathBuf::from(command),
            };
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(args);
            for (k, v) in env {
                cmd.env(k, v);
            }
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not start `{}`: {e}", program.display()))?;
            if let Some(stderr) = stderr {
                let server = up.cfg.name.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(target: "toolforge::backend", server = %server, "{line}");
                    }
                });
            }
            up.relay
                .clone()
                .serve_with_lifecycle(transport, lifecycle(up.cfg.protocol))
                .await
                .map_err(|e| format!("initialize failed: {e}"))
        }
        Transport::Http { url, headers } => {
            let mut map = HashMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::try_from(k.as_str())
                    .map_err(|e| format!("header {k:?}: {e}"))?;
                let value = http::HeaderValue::try_from(v.as_str())
                    .map_err(|e| format!("header {k:?}: {e}"))?;
                map.insert(name, value);
            }
            let cfg =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
            let transport = StreamableHttpClientTransport::with_client(backend_http_client()?, cfg);
            up.relay
                .clone()
                .serve_with_lifecycle(transport, lifecycle(up.cfg.protocol))
                .await
                .map_err(|e| format!("initialize at {url} failed: {e}"))
        }
    }
}

/// A call's request options: on a 2026-07-28 connection, where every request says what its
/// client can do, the calling client's capabilities replace the pool's own (which offer
/// everything), so the server asks only for input this client can give.
fn caller_options(peer: &Peer<RoleClient>, caller: Option<&Caller>) -> PeerRequestOptions {
    let mut options = PeerRequestOptions::no_options();
    let modern = peer
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    if let (true, Some(capabilities)) = (modern, caller.and_then(|c| c.capabilities.clone())) {
        let mut meta = rmcp::model::RequestMetaObject::default();
        meta.set_client_capabilities(capabilities);
        options.meta = Some(meta);
    }
    options
}

/// How the pool opens a connection of `protocol`'s era.
fn lifecycle(protocol: crate::config::Protocol) -> ClientLifecycleMode {
    use crate::config::Protocol;
    use rmcp::model::ProtocolVersion;
    match protocol {
        Protocol::Handshake => ClientLifecycleMode::Initialize,
        Protocol::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        Protocol::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// Most redirects an HTTP backend may send one request through.
const MAX_BACKEND_REDIRECTS: usize = 10;

/// The HTTP client for one Streamable HTTP backend.
///
/// rmcp's default client turns connection pooling off, so every JSON-RPC message to a backend
/// opened (and closed) a TCP connection: a third of a proxied call's cost. rmcp's worker reads
/// each POST's event stream to its end once the response arrived, so a pooled connection comes
/// back clean; with `TCP_NODELAY` no Nagle / delayed-ACK stall waits on the next request.
/// Redirects are rmcp's rule: same-origin 307 and 308 only (they keep the method and the body,
/// and never replay the session id or custom headers to another host).
fn backend_http_client() -> Result<reqwest::Client, String> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_BACKEND_REDIRECTS {
            attempt.error(format!("more than {MAX_BACKEND_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(30))
        .redirect(redirects)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

async fn refresh_lists(up: &Upstream, peer: &Peer<RoleClient>) -> Result<(), String> {
    let caps = peer.peer_info().map(|i| i.capabilities.clone());
    let instructions = peer.peer_info().and_then(|i| i.instructions.clone());
    let has = |f: fn(&ServerCapabilities) -> bool| caps.as_ref().is_some_and(f);
    let tools = if has(|c| c.tools.is_some()) || caps.is_none() {
        peer.list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?
    } else {
        Vec::new()
    };
    let (resources, templates) = if has(|c| c.resources.is_some()) {
        (
            peer.list_all_resources().await.unwrap_or_default(),
            peer.list_all_resource_templates().await.unwrap_or_default(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let prompts = if has(|c| c.prompts.is_some()) {
        peer.list_all_prompts().await.unwrap_or_default()
    } else {
        Vec::new()
    };
    let fetched_at_ms = cache::now_ms();
    let cached = up.cache.as_ref().map(|_| CachedTools {
        tools: tools
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect(),
        fetched_at_ms,
    });
    up.lists_gen
        .fetch_add(1, std::sync::atomic::Ordering::Release);
    *up.lists.write() = Lists {
        tools,
        resources,
        templates,
        prompts,
        capabilities: caps,
        instructions,
        fetched_at_ms: Some(fetched_at_ms),
        from_cache: false,
    };
    if let (Some(cache), Some(entry)) = (&up.cache, cached) {
        cache.store(&up.cfg, &entry).await;
    }
    Ok(())
}

async fn supervise(
    up: Arc<Upstream>,
    options: PoolOptions,
    cancel: CancellationToken,
    events: broadcast::Sender<PoolEvent>,
    first: tokio::sync::oneshot::Sender<()>,
) {
    let mut first = Some(first);
    let mut backoff = RESTART_BASE;
    let name = up.cfg.name.clone();
    let announce = |events: &broadcast::Sender<PoolEvent>| {
        let _ = events.send(PoolEvent::StateChanged {
            server: name.clone(),
        });
    };
    loop {
        let attempt = async {
            let client = connect(&up, &options).await?;
            refresh_lists(&up, client.peer()).await?;
            Ok::<_, String>(client)
        };
        let result = tokio::select! {
            r = tokio::time::timeout(up.cfg.start_timeout, attempt) => r,
            () = cancel.cancelled() => return,
        };
        match result {
            Ok(Ok(client)) => {
                *up.peer.write() = Some(client.peer().clone());
                up.set_state(ServerState::Ready, None);
                announce(&events);
                tracing::info!(server = %name, tools = up.lists.read().tools.len(), "ready");
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
                let started = Instant::now();
                let ct = client.cancellation_token();
                let waiting = client.waiting();
                tokio::pin!(waiting);
                tokio::select! {
                    quit = &mut waiting => {
                        *up.peer.write() = None;
                        let why = match quit {
                            Ok(reason) => format!("connection ended ({reason:?})"),
                            Err(e) => format!("connection task failed: {e}"),
                        };
                        tracing::warn!(server = %name, "{why}; restarting");
                        up.status.write().restarts += 1;
                        up.set_state(ServerState::Restarting, Some(why));
                        announce(&events);
                        if started.elapsed() > RESTART_MAX {
                            backoff = RESTART_BASE;
                        }
                    }
                    () = cancel.cancelled() => {
                        *up.peer.write() = None;
                        ct.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(7), waiting).await;
                        return;
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %name, "start failed: {e}");
                up.set_state(ServerState::Failed, Some(e));
                announce(&events);
            }
            Err(_) => {
                let e = format!("did not start within {:?}", up.cfg.start_timeout);
                tracing::warn!(server = %name, "{e}");
                up.set_state(ServerState::Failed, Some(e));
                announce(&events);
            }
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = cancel.cancelled() => return,
        }
        backoff = (backoff * 2).min(RESTART_MAX);
        if up.state() == ServerState::Failed {
            up.status.write().restarts += 1;
        }
    }
}

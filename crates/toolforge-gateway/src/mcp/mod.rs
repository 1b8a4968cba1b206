//! The gateway as one MCP server over the pool: a hand-written `ServerHandler` (the catalog is
//! dynamic, so the tool macros do not fit).
//!
//! Naming: tools follow `toolforge_select::presentation` (own names when unique, overlap groups
//! under the group's name, `server__tool` always accepted). A tool with one member is re-exposed
//! with its server's own definition (title, annotations, outputSchema, `_meta`), renamed only
//! when the presentation renamed it. Resources are routed by URI (the server that lists it, else
//! the server whose template matches); prompts by name, and a prompt name offered by several
//! servers goes to the first in configuration order while the others stay reachable as
//! `server__prompt`. A group call goes where the selector decides (the five rules of DESIGN §2,
//! with the client's prompt from `_meta["toolforge/prompt"]` and this session's history); the
//! result's `_meta["toolforge/selection"]` says which server ran it and by which rule.

//!
//! One concern per file: `handler` is rmcp's `ServerHandler` and hands each request on;
//! `tool_list` answers `tools/list` and search mode (`list_cache` keeps its answers per catalog
//! and scope); `calls` routes and runs `tools/call` with
//! its MRTR rounds, `parking` one round of it at the pool (a call whose handshake-era backend
//! asks a 2026-07-28 client is parked, `crate::parked`); `resources` and `prompts` (with completions) do the same for theirs;
//! `events` carries pool events to sessions and listen streams; `apps` keeps each server's
//! MCP Apps resources (`ui://`) its own; `skills` passes the Skills extension (SEP-2640)
//! through; `tasks` the Tasks extension (SEP-2663), its task ids sealed (`crate::task_ids`).

#![allow(deprecated)]

mod apps;
mod calls;
mod consent;
mod events;
mod handler;
pub mod list_cache;
mod listed_tools;
mod parking;
mod prompts;
mod resources;
mod skills;
mod tasks;
mod tool_list;
mod trail;

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rmcp::model::{CallToolResult, ResultType, ServerCapabilities};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::json;
use toolforge_llm::embed::HashingEmbedder;
use toolforge_mcp::{Caller, Pool, PoolEvent};
use toolforge_select::ToolId;

use crate::cache_hints::CacheHints;
use crate::listen::Listeners;
use crate::mrtr::{self, StateSeal};
use crate::parked::ParkingLot;
use crate::subscriptions::Subscriptions;
use crate::visible::{PreparedCache, RequestChannels, Scope, VisibilityConfig};
use toolforge_select::broker::Rules;
use toolforge_select::presentation::{Namespace, Presentation};
use toolforge_select::{Limits, Selection};

/// How tools are offered to clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolMode {
    /// Every visible tool is listed.
    #[default]
    Direct,
    /// Progressive discovery: only `search_tools` and `call_tool` are listed, plus the pinned
    /// tools (exposed names), so a client with hundreds of tools starts from two.
    Search { pinned: Vec<String> },
}

/// How long a `tools/list` (or any list) waits for servers still making their first start
/// attempt before it answers with what is ready; their tools follow with `list_changed`.
pub const START_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a call of a name no ready server offers waits for servers still starting.
pub const START_WAIT_FOR_CALL: std::time::Duration = std::time::Duration::from_secs(30);

/// The search mode's meta-tools.
pub const SEARCH_TOOLS: &str = "search_tools";
pub const CALL_TOOL: &str = "call_tool";
/// Most results `search_tools` returns.
pub const MAX_SEARCH_RESULTS: usize = 50;

/// The `_meta` key of a `tools/list` whose search query matched no tool (the whole visible set
/// is listed then, as seed 001 says).
pub const QUERY_MATCHED_META_KEY: &str = "toolforge/queryMatched";

/// The request header that names the intent the broker's rules apply to on `tools/list`.
pub const INTENT_HEADER: &str = "x-mcp-intent";

/// The `_meta` key a client puts the user's prompt under, for the selector.
pub const PROMPT_META_KEY: &str = "toolforge/prompt";
/// The `_meta` key of a result that says which server ran the call and why.
pub const SELECTION_META_KEY: &str = "toolforge/selection";

/// The channels of a session's last `tools/list` (`None` until it lists).
type Listed = Arc<Mutex<Option<RequestChannels>>>;
/// A presentation, and each of its exposed tools' members as catalog positions.
type MemberPositions = (Arc<Presentation>, Arc<[Box<[usize]>]>);

/// One live session: its peer, and what it last listed tools with.
struct Session {
    peer: Peer<RoleServer>,
    listed: Listed,
}

/// State shared by every session of one gateway.
pub struct Shared {
    pub pool: Arc<Pool>,
    pub namespace: Namespace,
    /// The presentation sessions list, and the catalog it was built from.
    presentation: RwLock<(Arc<Presentation>, Arc<toolforge_select::Catalog>)>,
    /// A presentation a request built for a catalog newer than the kept one, before the event
    /// task caught up: the event task takes it instead of building a second (with 10,000 tools
    /// each one is about 20 MiB).
    built_ahead: Mutex<Option<(Arc<Presentation>, Arc<toolforge_select::Catalog>)>>,
    sessions: Mutex<Vec<Session>>,
    /// uri -> sessions (id, peer) subscribed to it.
    subscriptions: Mutex<Subscriptions<Peer<RoleServer>>>,
    next_session: std::sync::atomic::AtomicU64,
    embedder: HashingEmbedder,
    /// The operator's visibility (env and CLI); requests narrow it.
    pub visibility: Arc<VisibilityConfig>,
    /// The current catalog prepared for per-request visibility.
    prepared: PreparedCache,
    /// Each exposed tool's members as catalog positions, for one presentation: a restricted
    /// `tools/list` then checks positions instead of hashing every member's id.
    member_positions: Mutex<Option<MemberPositions>>,
    /// Every exposed tool as an MCP definition, built once per catalog: `tools/list`, a
    /// scoped list and `get_tool` read it instead of rebuilding definitions per request.
    listed_tools: Mutex<Option<Arc<listed_tools::ListedTools>>>,
    /// `tools/list` answers (serialised tool arrays) per catalog and visibility scope.
    list_cache: list_cache::ListCache,
    /// The `ui://` URIs each server's tools link (MCP Apps), for one catalog.
    app_links: Mutex<Option<(Arc<toolforge_select::Catalog>, AppLinks)>>,
    pub tool_mode: ToolMode,
    /// Seals the state of calls waiting for the client's input (2026-07-28).
    seal: RwLock<Arc<StateSeal>>,
    /// The sealed states already used for a retry: each is good for one.
    ledger: RwLock<Arc<dyn crate::state_ledger::StateLedger>>,
    /// Open `subscriptions/listen` streams (2026-07-28).
    listeners: Arc<Listeners>,
    /// Calls parked while a handshake-era backend waits for a 2026-07-28 client's input.
    parked: Arc<ParkingLot>,
    /// The selection over the current catalog (the one decision point for group calls), and
    /// the catalog it was built for.
    selection: Mutex<Option<(Arc<toolforge_select::Catalog>, Arc<Selection>)>>,
    /// The broker's rules (seed 004) that narrow `tools/list` to a request's intent.
    rules: RwLock<Rules>,
    /// Where every tool call's trace record goes (the agent's writer when both are served).
    trail: RwLock<toolforge_agent::TraceSink>,
    /// Consent links for upstream OAuth (set by the HTTP server; none over stdio).
    consent: RwLock<Option<Arc<crate::consent::Consent>>>,
    /// The principal of stdio requests (`TOOLFORGE_TOKEN` or `--principal`), and the token.
    stdio_identity: RwLock<Option<toolforge_mcp::OnBehalf>>,
    /// What hands free heap back after a large build (the binary's allocator knows how).
    memory_release: crate::free_memory::MemoryRelease,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Shared {
    /// Builds the shared state and starts relaying pool events to sessions.
    #[must_use]
    pub fn new(pool: Arc<Pool>, namespace: Namespace) -> Arc<Self> {
        Self::with_visibility(pool, namespace, VisibilityConfig::default())
    }

    /// Like [`Shared::new`], with the operator's visibility.
    #[must_use]
    pub fn with_visibility(
        pool: Arc<Pool>,
        namespace: Namespace,
        visibility: VisibilityConfig,
    ) -> Arc<Self> {
        Self::with_options(pool, namespace, visibility, ToolMode::Direct)
    }

    /// Like [`Shared::with_visibility`], with a tool mode.
    #[must_use]
    pub fn with_options(
        pool: Arc<Pool>,
        namespace: Namespace,
        visibility: VisibilityConfig,
        tool_mode: ToolMode,
    ) -> Arc<Self> {
        let catalog = pool.shared_catalog();
        let presentation = (Arc::new(Presentation::new(&catalog, namespace)), catalog);
        let shared = Arc::new(Self {
            pool,
            namespace,
            presentation: RwLock::new(presentation),
            built_ahead: Mutex::new(None),
            sessions: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(Subscriptions::default()),
            next_session: std::sync::atomic::AtomicU64::new(1),
            embedder: HashingEmbedder::default(),
            visibility: Arc::new(visibility),
            prepared: PreparedCache::default(),
            member_positions: Mutex::new(None),
            listed_tools: Mutex::new(None),
            list_cache: list_cache::ListCache::default(),
            app_links: Mutex::new(None),
            tool_mode,
            seal: RwLock::new(Arc::new(StateSeal::random())),
            ledger: RwLock::new(Arc::new(crate::state_ledger::MemoryLedger::default())),
            listeners: Arc::new(Listeners::default()),
            parked: Arc::new(ParkingLot::default()),
            selection: Mutex::new(None),
            rules: RwLock::new(Rules::default()),
            trail: RwLock::new(toolforge_agent::TraceSink::disabled()),
            consent: RwLock::new(None),
            stdio_identity: RwLock::new(None),
            memory_release: crate::free_memory::MemoryRelease::default(),
        });
        let weak = Arc::downgrade(&shared);
        let mut events = shared.pool.subscribe_events();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(e) => e,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        PoolEvent::ToolsChanged {
                            server: String::new(),
                        }
                    }
                    Err(_) => break,
                };
                let Some(shared) = weak.upgrade() else { break };
                shared.on_event(event).await;
            }
        });
        shared
    }

    /// Seals `requestState` with `key` from now on (at least 32 bytes; every replica behind one
    /// load balancer needs the same key, so that any of them can resume a call). Without it,
    /// a random key of this process.
    ///
    /// # Errors
    /// The key is too short.
    pub fn set_state_key(&self, key: &[u8]) -> Result<(), mrtr::KeyTooShort> {
        *self.seal.write() = Arc::new(StateSeal::new(key)?);
        Ok(())
    }

    /// Keeps the spent `requestState`s in `ledger` from now on (give replicas that share a
    /// state key one ledger, or a retry replayed to another replica is taken there).
    pub fn set_state_ledger(&self, ledger: Arc<dyn crate::state_ledger::StateLedger>) {
        *self.ledger.write() = ledger;
    }

    /// Spends the nonce of an opened envelope; refuses an envelope used before (or one
    /// without a nonce), before anything reaches the backend.
    pub(super) async fn spend_state(&self, nonce: Option<&str>) -> Result<(), McpError> {
        let Some(nonce) = nonce else {
            return Err(McpError::invalid_params(
                "requestState is not valid: it was changed, has expired, or was not issued by \
                 this gateway for this tool",
                None,
            ));
        };
        let ledger = self.ledger.read().clone();
        match ledger.spend(nonce, mrtr::STATE_TTL).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(McpError::invalid_params(
                "requestState was already used: each is good for one retry (the request it \
                 continues may have run already, so it is not sent again)",
                None,
            )),
            Err(why) => Err(McpError::internal_error(
                format!("requestState cannot be checked now: {why}"),
                None,
            )),
        }
    }

    /// Traces every tool call through the gateway to `sink` from now on (one record per call,
    /// in the agent's schema; pass the agent's sink when both are served, so one writer keeps
    /// the file's hash chain).
    /// Hands consent links out from `consent` from now on.
    pub fn set_consent(&self, consent: Arc<crate::consent::Consent>) {
        *self.consent.write() = Some(consent);
    }

    /// The consent pages' routes, when consent links are handed out.
    #[must_use]
    pub fn consent_routes(&self) -> Option<axum::Router> {
        self.consent().map(crate::consent::routes)
    }

    /// The consent links, when served.
    pub(super) fn consent(&self) -> Option<Arc<crate::consent::Consent>> {
        self.consent.read().clone()
    }

    /// Requests without an HTTP request behind them (stdio) run as `identity`.
    pub fn set_stdio_identity(&self, identity: toolforge_mcp::OnBehalf) {
        *self.stdio_identity.write() = Some(identity);
    }

    /// Whom a request is for: its HTTP request's principal and token, else the stdio
    /// identity, else `anonymous`.
    pub(super) fn on_behalf(&self, ctx: &RequestContext<RoleServer>) -> toolforge_mcp::OnBehalf {
        match ctx.extensions.get::<http::request::Parts>() {
            Some(parts) => toolforge_mcp::OnBehalf {
                principal: crate::identity::principal_of(&parts.extensions).to_string(),
                token: parts
                    .extensions
                    .get::<crate::identity::CallerToken>()
                    .map(|t| t.0.clone()),
            },
            None => self
                .stdio_identity
                .read()
                .clone()
                .unwrap_or(toolforge_mcp::OnBehalf {
                    principal: toolforge_policy::Principal::anonymous().to_string(),
                    token: None,
                }),
        }
    }

    pub fn set_trail(&self, sink: toolforge_agent::TraceSink) {
        *self.trail.write() = sink;
    }

    /// After each large build (a new catalog generation, a `tools/list` answer of a MiB or
    /// more), runs `release` on a blocking thread, at most once a second, to give the heap's
    /// free memory back to the operating system (the binary passes its allocator's). Without
    /// it, nothing is released. A second call keeps the first hook; returns whether this one
    /// took.
    pub fn set_memory_release(&self, release: crate::free_memory::ReleaseMemory) -> bool {
        self.memory_release.set(release)
    }

    /// The sink gateway calls are traced to.
    pub(super) fn trail(&self) -> toolforge_agent::TraceSink {
        self.trail.read().clone()
    }

    /// Drops what was built for an earlier catalog generation (each is rebuilt on its next
    /// use): a cache a workload never touches again would otherwise keep that generation's
    /// catalog, and with thousands of tools its definitions, alive.
    pub(super) fn forget_earlier_generations(&self) {
        *self.selection.lock() = None;
        *self.member_positions.lock() = None;
        *self.listed_tools.lock() = None;
        *self.app_links.lock() = None;
        self.prepared.clear();
    }

    /// The `ui://` URIs the current catalog's tools link, per server (built once per catalog).
    fn app_links(&self) -> AppLinks {
        let catalog = self.pool.shared_catalog();
        let mut slot = self.app_links.lock();
        if let Some((built_for, links)) = slot.as_ref()
            && Arc::ptr_eq(built_for, &catalog)
        {
            return links.clone();
        }
        let links: AppLinks = apps::AppUris::links_of(&catalog).into();
        *slot = Some((catalog, links.clone()));
        links
    }

    /// Where each `ui://` URI lives now and what clients see of it (`apps`), from the
    /// catalog's links and the resource lists.
    pub(super) fn app_uris(&self) -> apps::AppUris {
        let links = self.app_links();
        let listed: Vec<(String, String)> = self
            .pool
            .resources()
            .into_iter()
            .filter(|(_, r)| toolforge_select::apps::is_ui_uri(&r.uri))
            .map(|(server, r)| (server, r.uri))
            .collect();
        apps::AppUris::new(&links, &listed)
    }

    /// The tools' side of [`Shared::app_uris`] alone (what their links become).
    pub(super) fn app_links_table(&self) -> apps::AppUris {
        apps::AppUris::new(&self.app_links(), &[])
    }

    /// The broker's rules from now on: a `tools/list` then shows the tools the rules offer for
    /// the request's intent (`x-mcp-intent`, else detected from its query).
    pub fn set_rules(&self, rules: Rules) {
        *self.rules.write() = rules;
        *self.selection.lock() = None;
        self.list_cache.clear();
    }

    /// The selection over the pool's current catalog, built once per catalog generation.
    #[must_use]
    pub fn selection(&self) -> Arc<Selection> {
        let catalog = self.pool.shared_catalog();
        let mut slot = self.selection.lock();
        if let Some((built_for, selection)) = slot.as_ref()
            && Arc::ptr_eq(built_for, &catalog)
        {
            return selection.clone();
        }
        let limits = Limits {
            max_tools: usize::MAX,
            ..Limits::default()
        };
        let selection = Arc::new(
            Selection::new((*catalog).clone(), self.rules.read().clone(), limits)
                .with_route_embedder(&|t| self.embedder.embed_one(t)),
        );
        *slot = Some((catalog, selection.clone()));
        selection
    }

    /// The splice of the kept `tools/list` answer whose placeholder is named `marker` (a
    /// resumed stream replays it).
    pub(crate) fn list_splice(&self, marker: &str) -> Option<crate::list_splice::Splice> {
        self.list_cache.find(marker).map(|e| e.splice())
    }

    /// `tools/list` answers kept (entries, bytes of tool arrays).
    #[must_use]
    pub fn list_cache_usage(&self) -> (usize, usize) {
        self.list_cache.usage()
    }

    pub(super) fn parked(&self) -> &Arc<ParkingLot> {
        &self.parked
    }

    pub(super) fn seal(&self) -> Arc<StateSeal> {
        self.seal.read().clone()
    }

    /// The presentation of the pool's current catalog. Normally the one the event task keeps;
    /// when the catalog has just changed and that task has not caught up yet (a request that
    /// waited for a server to start), one built for this request, so it sees what the pool
    /// has now. The event task still replaces the kept one and sends `list_changed`.
    #[must_use]
    pub fn presentation(&self) -> Arc<Presentation> {
        self.presentation_of(&self.pool.shared_catalog())
    }

    /// The presentation of `catalog`: the kept one when it was built from it.
    fn presentation_of(&self, catalog: &Arc<toolforge_select::Catalog>) -> Arc<Presentation> {
        let guard = self.presentation.read();
        if Arc::ptr_eq(&guard.1, catalog) {
            return guard.0.clone();
        }
        drop(guard);
        let mut ahead = self.built_ahead.lock();
        if let Some((presentation, built_from)) = ahead.as_ref()
            && Arc::ptr_eq(built_from, catalog)
        {
            return presentation.clone();
        }
        let presentation = Arc::new(Presentation::new(catalog, self.namespace));
        *ahead = Some((presentation.clone(), catalog.clone()));
        presentation
    }

    /// The presentation of `catalog` for the event task: the one a request built ahead when
    /// there is one (the slot is emptied), else a new one.
    pub(super) fn take_built_ahead(
        &self,
        catalog: &Arc<toolforge_select::Catalog>,
    ) -> Arc<Presentation> {
        match self.built_ahead.lock().take() {
            Some((presentation, built_from)) if Arc::ptr_eq(&built_from, catalog) => presentation,
            _ => Arc::new(Presentation::new(catalog, self.namespace)),
        }
    }

    /// What a request with these channels may see of the pool's current catalog (prepared
    /// once per catalog generation).
    #[must_use]
    pub fn scope(&self, request: &crate::visible::RequestChannels) -> Scope {
        let prepared = self.prepared.get(self.pool.shared_catalog());
        self.visibility.scope(prepared, request)
    }

    /// Each server's configured tags (they apply to its resources and prompts too).
    pub(super) fn server_tags(&self) -> std::collections::HashMap<String, Vec<String>> {
        self.pool
            .shared_catalog()
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.tags.clone()))
            .collect()
    }

    pub(super) fn capabilities(&self) -> ServerCapabilities {
        let caps = self.pool.capabilities();
        let any = |f: fn(&ServerCapabilities) -> bool| caps.iter().any(|(_, c)| f(c));
        let mut v = json!({"tools": {"listChanged": true}});
        if any(|c| c.resources.is_some()) {
            let subscribe = any(|c| {
                c.resources
                    .as_ref()
                    .is_some_and(|r| r.subscribe == Some(true))
            });
            v["resources"] = json!({"subscribe": subscribe, "listChanged": true});
        }
        if any(|c| c.prompts.is_some()) {
            v["prompts"] = json!({"listChanged": true});
        }
        if any(|c| c.logging.is_some()) {
            v["logging"] = json!({});
        }
        if any(|c| c.completions.is_some()) {
            v["completions"] = json!({});
        }
        if let Some(settings) = self.apps_extension(&caps) {
            v["extensions"] = json!({});
            v["extensions"][toolforge_select::apps::UI_EXTENSION_ID] = settings;
        }
        if any(ServerCapabilities::supports_tasks) {
            if v.get("extensions").is_none() {
                v["extensions"] = json!({});
            }
            v["extensions"][rmcp::model::TASKS_EXTENSION_ID] = json!({});
        }
        // Skills ride on resources: declared only with the resources capability.
        if let Some(settings) = skills_extension(&caps).filter(|_| v.get("resources").is_some()) {
            if v.get("extensions").is_none() {
                v["extensions"] = json!({});
            }
            v["extensions"][rmcp::model::SKILLS_EXTENSION_ID] = settings;
        }
        serde_json::from_value(v).unwrap_or_default()
    }

    /// The MCP Apps extension's settings when a backend offers apps: it declares the extension
    /// (its settings), or its tools link `ui://` resources (servers on SDKs that drop
    /// `capabilities.extensions` on handshake-era connections cannot declare it). Cheap: rmcp
    /// asks for the server's info on every stateless request.
    fn apps_extension(&self, caps: &[(String, ServerCapabilities)]) -> Option<serde_json::Value> {
        let declared = caps.iter().find_map(|(_, c)| {
            c.extensions
                .as_ref()?
                .get(toolforge_select::apps::UI_EXTENSION_ID)
                .map(|settings| serde_json::to_value(settings).unwrap_or_else(|_| json!({})))
        });
        declared.or_else(|| (!self.app_links().is_empty()).then(|| json!({})))
    }
}

/// The Skills extension's settings (SEP-2640, `mcp/skills`) the gateway declares: present when a
/// backend declares the extension, `directoryRead` when one of them serves directory reads.
fn skills_extension(caps: &[(String, ServerCapabilities)]) -> Option<serde_json::Value> {
    let mut skills = caps.iter().filter(|(_, c)| c.supports_skills()).peekable();
    skills.peek()?;
    let directory_read = skills.any(|(_, c)| c.supports_directory_read());
    Some(if directory_read {
        json!({"directoryRead": true})
    } else {
        json!({})
    })
}

/// The `ui://` URIs a catalog's tools link, as (server, URI) pairs.
type AppLinks = Arc<[(String, String)]>;

/// One MCP session's handler (cheap to clone: the state is shared).
#[derive(Clone, Debug)]
pub struct Gateway {
    shared: Arc<Shared>,
    session: u64,
    /// This session's executed calls, oldest first (the selector's session-recency rule).
    history: Arc<Mutex<Vec<ToolId>>>,
    /// The query string of the session's first request (its visibility scope).
    session_query: crate::visible::SessionScope,
    /// The channels of this session's last `tools/list`.
    listed: Listed,
    /// Tool calls made in this session so far (the trace's `step`).
    steps: Arc<std::sync::atomic::AtomicU32>,
}

impl Gateway {
    /// A handler for one new session.
    #[must_use]
    pub fn new(shared: Arc<Shared>) -> Self {
        let session = shared
            .next_session
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            shared,
            session,
            history: Arc::new(Mutex::new(Vec::new())),
            session_query: Arc::new(Mutex::new(None)),
            listed: Arc::new(Mutex::new(None)),
            steps: Arc::default(),
        }
    }
}

impl Gateway {
    /// How a list answer for a request with `channels` may be cached: shared by every client
    /// when nothing narrowed it, else private to this client (it shows what this request may
    /// see).
    pub(super) fn cache_hints(&self, channels: &RequestChannels) -> CacheHints {
        CacheHints::narrowed(!(self.shared.visibility.is_open() && channels.is_empty()))
    }

    /// The client call `ctx` is, for relaying what a backend asks during it.
    pub(super) fn caller(&self, ctx: &RequestContext<RoleServer>) -> Caller {
        Caller::new(ctx.peer.clone(), ctx.id.clone(), self.session)
            .with_capabilities(ctx.client_capabilities())
            .with_on_behalf(Some(self.shared.on_behalf(ctx)))
    }

    /// What this request may see: the operator's channels narrowed by the session's query and
    /// this request's headers.
    pub(super) fn scope(&self, ctx: &RequestContext<RoleServer>) -> Scope {
        let mut channels = crate::visible::session_channels(&self.session_query, ctx);
        if ctx.extensions.get::<http::request::Parts>().is_none()
            && let Some(stdio) = self.shared.stdio_identity.read().as_ref()
        {
            channels.principal = toolforge_policy::Principal::new(&stdio.principal);
        }
        self.shared.scope(&channels)
    }

    /// Keeps the items (each with its server) this request may see; `names` gives the names a
    /// visibility list may use for one.
    pub(super) fn shown_components<T: serde::Serialize>(
        &self,
        ctx: &RequestContext<RoleServer>,
        items: Vec<(String, T)>,
        names: impl Fn(&T) -> Vec<String>,
    ) -> Vec<(String, T)> {
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        let config = &self.shared.visibility;
        if config.is_open() && channels.is_empty() {
            return items;
        }
        let tags = self.shared.server_tags();
        let components: Vec<_> = items
            .iter()
            .map(|(server, item)| {
                let server_tags = tags.get(server).map_or(&[][..], Vec::as_slice);
                crate::visible::component(server, names(item), item, server_tags)
            })
            .collect();
        let shown = config.components(&components, &channels);
        items
            .into_iter()
            .zip(shown)
            .filter_map(|(item, shown)| shown.then_some(item))
            .collect()
    }
}

/// A backend's tool result as this gateway answers it. Results relayed from servers on earlier
/// revisions carry no `resultType`; 2026-07-28 requires it on every result (rmcp strips it
/// again for clients on earlier revisions).
fn complete(mut result: CallToolResult) -> CallToolResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

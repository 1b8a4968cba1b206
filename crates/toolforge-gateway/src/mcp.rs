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

#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
    CompleteResult, ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation,
    InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, ReadResourceRequestParams,
    ReadResourceResponse, ResourceUpdatedNotificationParam, ResultType, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    Tool as McpTool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use toolforge_llm::embed::HashingEmbedder;
use toolforge_mcp::{CallContext, Caller, Pool, PoolEvent};
use toolforge_select::ToolId;

use crate::cache_hints::CacheHints;
use crate::group_annotations::group_annotations;
use crate::listen::{Change, Listeners};
use crate::mrtr::{self, StateSeal};
use crate::subscriptions::{MAX_SUBSCRIPTIONS_PER_SESSION, Subscriptions, TooMany};
use crate::visible::{Prepared, PreparedCache, RequestChannels, Scope, VisibilityConfig};
use toolforge_select::broker::Rules;
use toolforge_select::presentation::{Namespace, Presentation, Resolved, SEP};
use toolforge_select::{Call, Limits, Selection};

/// What follows a backend's `input_required`.
enum NextRound {
    /// Answer the client with this (2026-07-28 clients).
    Relay(InputRequiredResult),
    /// Retry the backend with the client's answers and the backend's state.
    Retry {
        responses: rmcp::model::InputResponses,
        state: Option<String>,
    },
}

/// Where a call goes, and the selector's reason.
struct Routed {
    id: ToolId,
    rule: &'static str,
    alternatives: Vec<String>,
}

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
    pub tool_mode: ToolMode,
    /// Seals the state of calls waiting for the client's input (2026-07-28).
    seal: RwLock<Arc<StateSeal>>,
    /// Open `subscriptions/listen` streams (2026-07-28).
    listeners: Arc<Listeners>,
    /// The selection over the current catalog (the one decision point for group calls), and
    /// the catalog it was built for.
    selection: Mutex<Option<(Arc<toolforge_select::Catalog>, Arc<Selection>)>>,
    /// The broker's rules (seed 004) that narrow `tools/list` to a request's intent.
    rules: RwLock<Rules>,
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
            sessions: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(Subscriptions::default()),
            next_session: std::sync::atomic::AtomicU64::new(1),
            embedder: HashingEmbedder::default(),
            visibility: Arc::new(visibility),
            prepared: PreparedCache::default(),
            member_positions: Mutex::new(None),
            tool_mode,
            seal: RwLock::new(Arc::new(StateSeal::random())),
            listeners: Arc::new(Listeners::default()),
            selection: Mutex::new(None),
            rules: RwLock::new(Rules::default()),
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

    /// `tools`, narrowed to what the broker's rules offer for the request's intent: the
    /// `x-mcp-intent` header, else the intent detected from its query (`q`, `x-mcp-query`).
    /// Without rules and without an intent header, `tools` as they are.
    fn offered(&self, tools: Vec<McpTool>, channels: &RequestChannels) -> Vec<McpTool> {
        let header = |name: &str| {
            channels
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let intent = header(INTENT_HEADER);
        if self.rules.read().rules.is_empty() && intent.is_none() {
            return tools;
        }
        let message = header("x-mcp-query")
            .or_else(|| {
                channels
                    .query
                    .iter()
                    .find(|(k, _)| k == "q")
                    .map(|(_, v)| v.as_str())
            })
            .unwrap_or_default();
        let offer = self.selection().offer(&toolforge_select::OfferRequest {
            intent,
            ..toolforge_select::OfferRequest::new(message)
        });
        let offered: HashSet<ToolId> = offer.ids().into_iter().collect();
        let presentation = self.presentation();
        let shown: HashSet<&str> = presentation
            .tools()
            .iter()
            .filter(|e| e.members.iter().any(|m| offered.contains(m)))
            .map(|e| e.name.as_str())
            .collect();
        tools
            .into_iter()
            .filter(|t| shown.contains(t.name.as_ref()))
            .collect()
    }

    /// The broker's rules from now on: a `tools/list` then shows the tools the rules offer for
    /// the request's intent (`x-mcp-intent`, else detected from its query).
    pub fn set_rules(&self, rules: Rules) {
        *self.rules.write() = rules;
        *self.selection.lock() = None;
    }

    /// The selection over the pool's current catalog, built once per catalog generation.
    fn selection(&self) -> Arc<Selection> {
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

    fn seal(&self) -> Arc<StateSeal> {
        self.seal.read().clone()
    }

    /// The presentation of the pool's current catalog. Normally the one the event task keeps;
    /// when the catalog has just changed and that task has not caught up yet (a request that
    /// waited for a server to start), one built for this request, so it sees what the pool
    /// has now. The event task still replaces the kept one and sends `list_changed`.
    #[must_use]
    pub fn presentation(&self) -> Arc<Presentation> {
        let catalog = self.pool.shared_catalog();
        let (kept, built_from) = self.presentation.read().clone();
        if Arc::ptr_eq(&built_from, &catalog) {
            kept
        } else {
            Arc::new(Presentation::new(&catalog, self.namespace))
        }
    }

    fn live_sessions(&self) -> Vec<Peer<RoleServer>> {
        let mut sessions = self.sessions.lock();
        sessions.retain(|s| !s.peer.is_transport_closed());
        sessions.iter().map(|s| s.peer.clone()).collect()
    }

    /// The exposed tools a `tools/list` with `channels` answers from `presentation` over
    /// `prepared` (the names, descriptions and schemas a client sees; search mode lists the
    /// pinned ones beside its two meta-tools).
    fn listed<'p>(
        &self,
        presentation: &'p Presentation,
        prepared: &'p Arc<Prepared>,
        channels: &RequestChannels,
    ) -> Vec<(
        &'p toolforge_select::ExposedTool,
        Vec<&'p toolforge_select::Tool>,
    )> {
        let scope = self.visibility.scope(prepared.clone(), channels);
        presentation
            .tools()
            .iter()
            .filter(|e| match &self.tool_mode {
                ToolMode::Direct => true,
                ToolMode::Search { pinned } => pinned.contains(&e.name),
            })
            .filter_map(|e| {
                // The members' own definitions too: a single-member tool is re-exposed with
                // its server's definition (title, annotations, output schema).
                let members: Vec<&toolforge_select::Tool> = e
                    .members
                    .iter()
                    .filter(|m| scope.allows(m))
                    .filter_map(|m| prepared.get(m))
                    .collect();
                (!members.is_empty()).then_some((e, members))
            })
            .collect()
    }

    /// Sends `tools/list_changed` to each session whose listed tools differ between the old
    /// presentation and the new one, judged with the channels of its last `tools/list` (a
    /// session that has not listed yet is told too).
    async fn notify_tools_changed(
        &self,
        old: (&Presentation, Arc<toolforge_select::Catalog>),
        new: (&Presentation, Arc<toolforge_select::Catalog>),
    ) {
        let sessions: Vec<(Peer<RoleServer>, Option<RequestChannels>)> = {
            let mut sessions = self.sessions.lock();
            sessions.retain(|s| !s.peer.is_transport_closed());
            sessions
                .iter()
                .map(|s| (s.peer.clone(), s.listed.lock().clone()))
                .collect()
        };
        let old_prepared = Arc::new(Prepared::new(old.1));
        let new_prepared = self.prepared.get(new.1);
        // Sessions usually share a few scopes: each is judged once.
        let mut judged: Vec<(RequestChannels, bool)> = Vec::new();
        for (peer, channels) in sessions {
            let changed = match channels {
                None => true,
                Some(channels) => {
                    if let Some((_, changed)) = judged.iter().find(|(c, _)| *c == channels) {
                        *changed
                    } else {
                        let changed = self.listed(old.0, &old_prepared, &channels)
                            != self.listed(new.0, &new_prepared, &channels);
                        judged.push((channels, changed));
                        changed
                    }
                }
            };
            if changed {
                let _ = peer.notify_tool_list_changed().await;
            }
        }
    }

    async fn on_event(&self, event: PoolEvent) {
        match event {
            PoolEvent::ToolsChanged { .. } | PoolEvent::StateChanged { .. } => {
                let catalog = self.pool.shared_catalog();
                let fresh = Arc::new(Presentation::new(&catalog, self.namespace));
                let old = {
                    let mut current = self.presentation.write();
                    std::mem::replace(&mut *current, (fresh.clone(), catalog.clone()))
                };
                if old.0.tools() != fresh.tools() || old.1.tools().ne(catalog.tools()) {
                    self.notify_tools_changed((&old.0, old.1), (&fresh, catalog))
                        .await;
                    self.listeners.notify(&Change::Tools).await;
                }
            }
            PoolEvent::ResourcesChanged { .. } => {
                for peer in self.live_sessions() {
                    let _ = peer.notify_resource_list_changed().await;
                }
                self.listeners.notify(&Change::Resources).await;
            }
            PoolEvent::PromptsChanged { .. } => {
                for peer in self.live_sessions() {
                    let _ = peer.notify_prompt_list_changed().await;
                }
                self.listeners.notify(&Change::Prompts).await;
            }
            PoolEvent::ResourceUpdated { uri, .. } => {
                self.listeners.notify(&Change::Resource(uri.clone())).await;
                let peers = self.subscriptions.lock().subscribers(&uri);
                for peer in peers {
                    let _ = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone()))
                        .await;
                }
            }
        }
    }

    /// The tools as MCP definitions, in presentation order.
    #[must_use]
    pub fn tool_list(&self) -> Vec<McpTool> {
        self.visible_tool_list(&|_| true)
    }

    /// The tools as MCP definitions, in presentation order, keeping those with a member
    /// `visible` allows.
    pub fn visible_tool_list(&self, visible: &dyn Fn(&ToolId) -> bool) -> Vec<McpTool> {
        self.tool_list_where(&self.presentation(), &|_, exposed| {
            exposed.members.iter().any(visible)
        })
    }

    /// The tools a request's scope shows, as MCP definitions in presentation order.
    pub fn scoped_tool_list(&self, scope: &Scope) -> Vec<McpTool> {
        let (presentation, catalog) = self.presentation.read().clone();
        if !Arc::ptr_eq(&catalog, &scope.prepared.catalog) {
            // The pool's catalog changed and the presentation is not rebuilt yet.
            return self.visible_tool_list(&|id| scope.allows(id));
        }
        let members = {
            let mut slot = self.member_positions.lock();
            match slot.as_ref() {
                Some((built_for, members)) if Arc::ptr_eq(built_for, &presentation) => {
                    members.clone()
                }
                _ => {
                    let members: Arc<[Box<[usize]>]> = presentation
                        .tools()
                        .iter()
                        .map(|e| {
                            e.members
                                .iter()
                                .filter_map(|m| scope.prepared.position(m))
                                .collect()
                        })
                        .collect();
                    *slot = Some((presentation.clone(), members.clone()));
                    members
                }
            }
        };
        self.tool_list_where(&presentation, &|k, _| {
            members[k].iter().any(|&i| scope.shows(i))
        })
    }

    /// The exposed tools `keep` accepts (given their index in the presentation), as MCP
    /// definitions in presentation order.
    fn tool_list_where(
        &self,
        presentation: &Presentation,
        keep: &dyn Fn(usize, &toolforge_select::ExposedTool) -> bool,
    ) -> Vec<McpTool> {
        let shown: Vec<&toolforge_select::ExposedTool> = presentation
            .tools()
            .iter()
            .enumerate()
            .filter(|(k, exposed)| keep(*k, exposed))
            .map(|(_, exposed)| exposed)
            .collect();
        // A tool with one member is re-exposed with its server's own definition.
        let singles: Vec<&ToolId> = shown
            .iter()
            .filter_map(|e| match e.members.as_slice() {
                [only] => Some(only),
                _ => None,
            })
            .collect();
        let mut definitions = self.pool.tool_definitions(&singles).into_iter();
        shown
            .into_iter()
            .filter_map(|exposed| {
                if exposed.members.len() == 1
                    && let Some(mut def) = definitions.next().flatten()
                {
                    def.name = exposed.name.clone().into();
                    return Some(def);
                }
                let mut def = json!({
                    "name": exposed.name,
                    "description": exposed.description,
                    "inputSchema": exposed.input_schema,
                });
                let members: Vec<&ToolId> = exposed.members.iter().collect();
                let annotations = group_annotations(&self.pool.tool_definitions(&members));
                if let Some(a) = annotations {
                    def["annotations"] = a;
                }
                serde_json::from_value(def).ok()
            })
            .collect()
    }

    /// Which server and tool a call reaches, and why: a group call is decided by the selector
    /// (DESIGN §2) with the prompt the client put in `_meta["toolforge/prompt"]` (rules 1 and 4
    /// abstain without one) and this session's earlier calls.
    fn route_tool(
        &self,
        scope: &Scope,
        name: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
        prompt: &str,
        history: &Mutex<Vec<ToolId>>,
    ) -> Option<Routed> {
        let presentation = self.presentation();
        match presentation.resolve(name)? {
            Resolved::Direct(id) => scope.allows(&id).then_some(Routed {
                id,
                rule: "single-candidate",
                alternatives: Vec::new(),
            }),
            Resolved::Group(group) => {
                // The members this request may see are the candidates; the selection decides.
                let candidates: Vec<ToolId> = group
                    .members
                    .iter()
                    .filter(|m| scope.allows(m))
                    .cloned()
                    .collect();
                if candidates.is_empty() {
                    return None;
                }
                let selection = self.selection();
                let session: Vec<ToolId> = history.lock().clone();
                let arguments = Value::Object(arguments.cloned().unwrap_or_default());
                let prompt_vector = (!prompt.is_empty()).then(|| self.embedder.embed_one(prompt));
                let decision = selection.route(&Call {
                    candidates: &candidates,
                    prompt,
                    arguments: &arguments,
                    session: &session,
                    prompt_vector: prompt_vector.as_deref(),
                })?;
                Some(Routed {
                    id: decision.chosen,
                    rule: decision.rule,
                    alternatives: decision.alternatives,
                })
            }
        }
    }

    fn resource_server(&self, uri: &str) -> Option<String> {
        if let Some((server, _)) = self
            .pool
            .resources()
            .into_iter()
            .find(|(_, r)| r.uri == uri)
        {
            return Some(server);
        }
        if let Some((server, _)) = self
            .pool
            .resource_templates()
            .into_iter()
            .find(|(_, t)| template_matches(&t.uri_template, uri))
        {
            return Some(server);
        }
        // One server offers resources at all: it is the only place the URI can live.
        let with_resources: Vec<String> = self
            .pool
            .capabilities()
            .into_iter()
            .filter(|(_, c)| c.resources.is_some())
            .map(|(s, _)| s)
            .collect();
        (with_resources.len() == 1).then(|| with_resources[0].clone())
    }

    /// What a request with these channels may see of the pool's current catalog (prepared
    /// once per catalog generation).
    #[must_use]
    pub fn scope(&self, request: &crate::visible::RequestChannels) -> Scope {
        let prepared = self.prepared.get(self.pool.shared_catalog());
        self.visibility.scope(prepared, request)
    }

    /// Each server's configured tags (they apply to its resources and prompts too).
    fn server_tags(&self) -> std::collections::HashMap<String, Vec<String>> {
        self.pool
            .shared_catalog()
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.tags.clone()))
            .collect()
    }

    /// Prompts as exposed: first server wins a name, the others are `server__name`.
    fn prompt_table(&self) -> Vec<(String, String, Prompt)> {
        let mut seen = HashSet::new();
        self.pool
            .prompts()
            .into_iter()
            .map(|(server, prompt)| {
                let exposed = if seen.insert(prompt.name.clone()) {
                    prompt.name.clone()
                } else {
                    format!("{server}{SEP}{}", prompt.name)
                };
                (exposed, server, prompt)
            })
            .collect()
    }

    fn capabilities(&self) -> ServerCapabilities {
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
        serde_json::from_value(v).unwrap_or_default()
    }
}

/// `{name}`-style URI template match: literal parts must match, each `{var}` takes one or more
/// characters (no `/` unless the variable is `{+var}` or `{/var}` style).
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    fn go(t: &str, u: &str) -> bool {
        match t.find('{') {
            None => t == u,
            Some(i) => {
                if !u.starts_with(&t[..i]) {
                    return false;
                }
                let Some(close) = t[i..].find('}') else {
                    return t == u;
                };
                let var = &t[i + 1..i + close];
                let rest_t = &t[i + close + 1..];
                let rest_u = &u[i..];
                let slash_ok = var.starts_with('+') || var.starts_with('/');
                for end in 1..=rest_u.len() {
                    if !rest_u.is_char_boundary(end) {
                        continue;
                    }
                    if !slash_ok && rest_u[..end].contains('/') {
                        break;
                    }
                    if go(rest_t, &rest_u[end..]) {
                        return true;
                    }
                }
                false
            }
        }
    }
    go(template, uri)
}

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
        }
    }
}

impl Gateway {
    /// How a list answer for a request with `channels` may be cached: shared by every client
    /// when nothing narrowed it, else private to this client (it shows what this request may
    /// see).
    fn cache_hints(&self, channels: &RequestChannels) -> CacheHints {
        CacheHints::narrowed(!(self.shared.visibility.is_open() && channels.is_empty()))
    }

    /// The client call `ctx` is, for relaying what a backend asks during it.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Caller {
        Caller::new(ctx.peer.clone(), ctx.id.clone(), self.session)
            .with_capabilities(ctx.client_capabilities())
    }

    /// What this request may see: the operator's channels narrowed by the session's query and
    /// this request's headers.
    fn scope(&self, ctx: &RequestContext<RoleServer>) -> Scope {
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        self.shared.scope(&channels)
    }

    /// Keeps the items (each with its server) this request may see; `names` gives the names a
    /// visibility list may use for one.
    fn shown_components<T: serde::Serialize>(
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

    /// The server holding `uri` (a resource's URI, or a template's URI template), if this
    /// request may see it: as the listed resource with that URI, else as a template it is or
    /// matches, else by the URI alone on the one server that can hold it.
    fn visible_resource_server(
        &self,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<String, McpError> {
        // A completion names a template by its URI template.
        let server = self
            .shared
            .pool
            .resource_templates()
            .into_iter()
            .find(|(_, t)| t.uri_template == uri)
            .map(|(server, _)| server)
            .or_else(|| self.shared.resource_server(uri))
            .ok_or_else(|| not_found("resource", uri))?;
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        let config = &self.shared.visibility;
        if config.is_open() && channels.is_empty() {
            return Ok(server);
        }
        let mut names = vec![uri.to_owned()];
        let mut item = Value::Null;
        if let Some((_, r)) = self
            .shared
            .pool
            .resources()
            .into_iter()
            .find(|(s, r)| *s == server && r.uri == uri)
        {
            names.push(r.name.clone());
            item = serde_json::to_value(&r).unwrap_or_default();
        } else if let Some((_, t)) =
            self.shared
                .pool
                .resource_templates()
                .into_iter()
                .find(|(s, t)| {
                    *s == server
                        && (t.uri_template == uri || template_matches(&t.uri_template, uri))
                })
        {
            names.extend([t.uri_template.clone(), t.name.clone()]);
            item = serde_json::to_value(&t).unwrap_or_default();
        }
        let tags = self.shared.server_tags();
        let server_tags = tags.get(&server).map_or(&[][..], Vec::as_slice);
        let resource = crate::visible::component(&server, names, &item, server_tags);
        if config.shows(&resource, &channels) {
            Ok(server)
        } else {
            Err(not_found("resource", uri))
        }
    }

    /// The visible prompt exposed as `name`: its server and the prompt as that server names it.
    fn visible_prompt(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
    ) -> Result<(String, Prompt), McpError> {
        let table = self
            .shared
            .prompt_table()
            .into_iter()
            .filter(|(exposed, _, _)| exposed == name)
            .map(|(exposed, server, prompt)| (server, (exposed, prompt)))
            .collect();
        self.shown_components(ctx, table, |(exposed, prompt)| {
            vec![exposed.clone(), prompt.name.clone()]
        })
        .into_iter()
        .next()
        .map(|(server, (_, prompt))| (server, prompt))
        .ok_or_else(|| not_found("prompt", name))
    }

    /// `search_tools`: BM25 over the tools this request may see (name, description, tags,
    /// parameters), best first.
    fn search_tools(
        &self,
        args: &serde_json::Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .filter(|q| !q.trim().is_empty())
            .ok_or_else(|| McpError::invalid_params("search_tools needs a `query`", None))?;
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(10, |n| usize::try_from(n).unwrap_or(MAX_SEARCH_RESULTS))
            .clamp(1, MAX_SEARCH_RESULTS);
        let scope = self.scope(ctx);
        let presentation = self.shared.presentation();
        let offered: Vec<(&toolforge_select::ExposedTool, &toolforge_select::Tool)> = presentation
            .tools()
            .iter()
            .filter_map(|e| e.members.iter().find_map(|m| Some((e, scope.get(m)?))))
            .collect();
        let tools: Vec<&toolforge_select::Tool> = offered.iter().map(|(_, t)| *t).collect();
        let index = toolforge_select::rank::Bm25Index::from_tools(&tools);
        let matches: Vec<Value> = index
            .search(query, limit)
            .into_iter()
            .map(|(i, score)| {
                let (exposed, _) = offered[i];
                json!({
                    "name": exposed.name,
                    "description": exposed.description,
                    "inputSchema": exposed.input_schema,
                    "score": (f64::from(score) * 1000.0).round() / 1000.0,
                })
            })
            .collect();
        let body = json!({"query": query, "tools": matches});
        let mut result = CallToolResult::structured(body.clone());
        result.content = vec![ContentBlock::text(body.to_string())];
        Ok(result)
    }

    /// Calls an exposed tool (by the name clients see): routed by the selector within what this
    /// request may see, executed by the pool, the decision added to the result's `_meta`.
    async fn call_exposed(
        &self,
        mut req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = req.name.to_string();
        let routed = match req.request_state.take() {
            // A retry after `input_required`: the same server and tool, from the sealed state.
            Some(sealed) => self.resumed(&ctx, &name, &sealed, &mut req)?,
            None => self.routed(&ctx, &name, &req).await?,
        };
        let id = routed.id.clone();
        req.name = id.name.clone().into();
        let call = CallContext {
            caller: Some(self.caller(&ctx)),
            progress: ctx.meta.get_progress_token(),
            cancel: Some(ctx.ct.clone()),
        };
        let selection = json!({
            "server": id.server,
            "tool": id.name,
            "selection_rule": routed.rule,
            "alternatives": routed.alternatives,
        });
        let mut rounds = 0;
        let metrics = crate::metrics::of_request(ctx.extensions.get::<http::request::Parts>());
        loop {
            let started = std::time::Instant::now();
            let called = self
                .shared
                .pool
                .call_tool(&id.server, req.clone(), call.clone())
                .await;
            if let Some(m) = &metrics {
                let ok = called
                    .as_ref()
                    .is_ok_and(|o| o.result.is_error != Some(true));
                m.tool_call(&id.server, &id.name, ok, started.elapsed());
            }
            let failure = match called {
                Ok(mut outcome) => {
                    {
                        let mut history = self.history.lock();
                        history.push(id);
                        let excess = history.len().saturating_sub(100);
                        history.drain(..excess);
                    }
                    outcome
                        .result
                        .meta
                        .get_or_insert_with(Default::default)
                        .insert(SELECTION_META_KEY.to_owned(), selection);
                    return Ok(CallToolResponse::Complete(complete(outcome.result)));
                }
                Err(failure) => failure,
            };
            match failure.error {
                toolforge_mcp::CallError::InputRequired { result, .. } => {
                    let key = format!("tools/call:{name}");
                    match self
                        .input_required(&ctx, &key, (&id.server, &id.name), *result, &mut rounds)
                        .await?
                    {
                        NextRound::Relay(r) => return Ok(CallToolResponse::InputRequired(r)),
                        NextRound::Retry { responses, state } => {
                            req.input_responses = Some(responses);
                            req.request_state = state;
                        }
                    }
                }
                toolforge_mcp::CallError::Rpc(e) => return Err(e),
                other => {
                    return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                        ContentBlock::text(format!("toolforge: {other}")),
                    ])));
                }
            }
        }
    }

    /// A backend's `input_required` for the client call `ctx` of `key` (method and exposed
    /// name): relayed sealed to a 2026-07-28 client, or asked of a handshake-era client on its
    /// own call's stream, giving the backend's retry inputs.
    async fn input_required(
        &self,
        ctx: &RequestContext<RoleServer>,
        key: &str,
        target: (&str, &str),
        result: InputRequiredResult,
        rounds: &mut usize,
    ) -> Result<NextRound, McpError> {
        let (server, name) = target;
        if mrtr::client_is_modern(ctx) {
            let envelope = mrtr::Envelope {
                server: server.to_owned(),
                tool: name.to_owned(),
                backend_state: result.request_state.clone(),
            };
            let sealed = self.shared.seal().seal(key, &envelope);
            return Ok(NextRound::Relay(mrtr::relayed(result, sealed)));
        }
        *rounds += 1;
        if *rounds > mrtr::MAX_ROUNDS {
            return Err(McpError::internal_error(
                format!(
                    "server \"{server}\" still asked for input after {} rounds",
                    mrtr::MAX_ROUNDS
                ),
                None,
            ));
        }
        let requests = result.input_requests.unwrap_or_default();
        Ok(NextRound::Retry {
            responses: mrtr::ask_client(ctx, requests).await?,
            state: result.request_state,
        })
    }

    /// Opens a retry's sealed state for `key`, checking it names `server`; the backend's state.
    fn reopened(&self, key: &str, sealed: &str, server: &str) -> Result<Option<String>, McpError> {
        let envelope = self.shared.seal().open(key, sealed)?;
        if envelope.server != server {
            return Err(McpError::invalid_params(
                "requestState belongs to another server's request",
                None,
            ));
        }
        Ok(envelope.backend_state)
    }

    /// Where a new call goes: the selector's decision within what this request may see,
    /// waiting for servers still starting when no ready one offers the name.
    async fn routed(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        req: &CallToolRequestParams,
    ) -> Result<Routed, McpError> {
        let prompt = ctx
            .meta
            .get(PROMPT_META_KEY)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let route = || {
            self.shared.route_tool(
                &self.scope(ctx),
                name,
                req.arguments.as_ref(),
                prompt,
                &self.history,
            )
        };
        let mut routed = route();
        if routed.is_none() && self.shared.pool.starting() {
            // The tool may belong to a server that is still starting.
            self.shared.pool.settled(START_WAIT_FOR_CALL).await;
            routed = route();
        }
        if routed.is_none() && self.shared.pool.refresh_for_unknown_tool(name).await {
            // A server added the tool without `list_changed`: route over its new list (the
            // presentation follows the pool's catalog at once; sessions hear list_changed).
            routed = route();
        }
        routed.ok_or_else(|| not_found("tool", name))
    }

    /// Where a retry after `input_required` goes: the server and tool sealed in its state
    /// (still visible to this request), with the backend's own state restored.
    fn resumed(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        sealed: &str,
        req: &mut CallToolRequestParams,
    ) -> Result<Routed, McpError> {
        let envelope = self
            .shared
            .seal()
            .open(&format!("tools/call:{name}"), sealed)?;
        let id = ToolId::new(&envelope.server, &envelope.tool);
        if !self.scope(ctx).allows(&id) {
            return Err(not_found("tool", name));
        }
        req.request_state = envelope.backend_state;
        Ok(Routed {
            id,
            rule: "resumed",
            alternatives: Vec::new(),
        })
    }
}

/// The search mode's two meta-tools.
fn search_meta_tools() -> Vec<McpTool> {
    let defs = [
        json!({
            "name": SEARCH_TOOLS,
            "description": "Search the available tools by what you want to do. Returns the best matches with their names, descriptions and input schemas; call one with call_tool.",
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string", "description": "What you want to do, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS, "default": 10}
            }, "required": ["query"]},
            "annotations": {"readOnlyHint": true}
        }),
        json!({
            "name": CALL_TOOL,
            "description": "Call a tool found with search_tools, by its name, with arguments that match its input schema.",
            "inputSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "The tool's name, as search_tools gave it."},
                "arguments": {"type": "object", "description": "The tool's arguments."}
            }, "required": ["name"]}
        }),
    ];
    defs.into_iter()
        .filter_map(|d| serde_json::from_value(d).ok())
        .collect()
}

/// A backend's tool result as this gateway answers it. Results relayed from servers on earlier
/// revisions carry no `resultType`; 2026-07-28 requires it on every result (rmcp strips it
/// again for clients on earlier revisions).
fn complete(mut result: CallToolResult) -> CallToolResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

pub(crate) fn not_found(what: &str, name: &str) -> McpError {
    McpError::invalid_params(format!("unknown {what}: {name}"), None)
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let instructions = self
            .shared
            .pool
            .instructions()
            .into_iter()
            .map(|(s, i)| format!("{s}: {i}"))
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut info = ServerConfig::new(self.shared.capabilities())
            .with_server_info(Implementation::new("toolforge", env!("CARGO_PKG_VERSION")));
        if !instructions.is_empty() {
            info = info.with_instructions(instructions);
        }
        info
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(crate::listen::offered(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.shared.listeners.hold(context).await;
        Ok(())
    }

    /// The definition clients see for `name` (rmcp validates a call's `Mcp-Param-*` headers
    /// against its `x-mcp-header` annotations).
    fn get_tool(&self, name: &str) -> Option<McpTool> {
        let presentation = self.shared.presentation();
        let index = presentation.tools().iter().position(|e| e.name == name)?;
        self.shared
            .tool_list_where(&presentation, &|k, _| k == index)
            .into_iter()
            .next()
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        let mut sessions = self.shared.sessions.lock();
        // Ended sessions (closed, or expired idle) give their memory back here too.
        sessions.retain(|s| !s.peer.is_transport_closed());
        sessions.push(Session {
            peer: ctx.peer,
            listed: self.listed.clone(),
        });
    }

    async fn list_tools(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let channels = crate::visible::session_channels(&self.session_query, &ctx);
        self.listed.lock().clone_from(&Some(channels.clone()));
        let mut query_matched = None;
        let tools = if self.shared.visibility.is_open() && channels.is_empty() {
            self.shared.tool_list()
        } else {
            let scope = self.shared.scope(&channels);
            query_matched = scope.query_matched();
            self.shared.scoped_tool_list(&scope)
        };
        let listed = tools.len();
        let tools = self.shared.offered(tools, &channels);
        let mut hints = self.cache_hints(&channels);
        if tools.len() != listed {
            // The broker narrowed it for this request's intent.
            hints.scope = CacheScope::Private;
        }
        let mut result = hints.apply(ListToolsResult::with_all_items(
            match &self.shared.tool_mode {
                ToolMode::Direct => tools,
                ToolMode::Search { pinned } => {
                    let mut listed = search_meta_tools();
                    listed.extend(
                        tools
                            .into_iter()
                            .filter(|t| pinned.iter().any(|p| p == t.name.as_ref())),
                    );
                    listed
                }
            },
        ));
        if query_matched == Some(false) {
            // The search matched nothing, so the whole visible set is listed: say so.
            result
                .meta
                .get_or_insert_with(Default::default)
                .insert(QUERY_MATCHED_META_KEY.to_owned(), Value::Bool(false));
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let ToolMode::Search { pinned } = &self.shared.tool_mode else {
            return self.call_exposed(req, ctx).await;
        };
        let args = req.arguments.clone().unwrap_or_default();
        match req.name.as_ref() {
            SEARCH_TOOLS => Ok(CallToolResponse::Complete(self.search_tools(&args, &ctx)?)),
            CALL_TOOL => {
                let Some(name) = args.get("name").and_then(Value::as_str) else {
                    return Err(McpError::invalid_params(
                        "call_tool needs `name` (a tool name from search_tools) and `arguments`",
                        None,
                    ));
                };
                let arguments = match args.get("arguments") {
                    None | Some(Value::Null) => serde_json::Map::new(),
                    Some(Value::Object(m)) => m.clone(),
                    Some(_) => {
                        return Err(McpError::invalid_params(
                            "call_tool: `arguments` must be an object",
                            None,
                        ));
                    }
                };
                let mut inner = req;
                inner.name = name.to_owned().into();
                inner.arguments = Some(arguments);
                self.call_exposed(inner, ctx).await
            }
            name if pinned.iter().any(|p| p == name) => self.call_exposed(req, ctx).await,
            name => Err(not_found("tool", name)),
        }
    }

    async fn list_resources(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let mut seen = HashSet::new();
        let listed = self.shared.pool.resources();
        let items = self
            .shown_components(&ctx, listed, |r| vec![r.uri.clone(), r.name.clone()])
            .into_iter()
            .filter(|(_, r)| seen.insert(r.uri.clone()))
            .map(|(_, r)| r)
            .collect();
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListResourcesResult::with_all_items(items)))
    }

    async fn list_resource_templates(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let listed = self.shared.pool.resource_templates();
        let items = self
            .shown_components(&ctx, listed, |t| {
                vec![t.uri_template.clone(), t.name.clone()]
            })
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListResourceTemplatesResult::with_all_items(items)))
    }

    async fn read_resource(
        &self,
        mut req: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let server = match self.visible_resource_server(&ctx, &req.uri) {
            Err(_) if self.shared.pool.starting() => {
                self.shared.pool.settled(START_WAIT_FOR_CALL).await;
                self.visible_resource_server(&ctx, &req.uri)?
            }
            found => found?,
        };
        let key = format!("resources/read:{}", req.uri);
        if let Some(sealed) = req.request_state.take() {
            req.request_state = self.reopened(&key, &sealed, &server)?;
        }
        let mut rounds = 0;
        loop {
            match self
                .shared
                .pool
                .read_resource(&server, req.clone(), Some(&self.caller(&ctx)))
                .await
            {
                Ok(mut r) => {
                    r.result_type.get_or_insert(ResultType::COMPLETE);
                    return Ok(ReadResourceResponse::Complete(r));
                }
                Err(toolforge_mcp::CallError::InputRequired { result, .. }) => {
                    match self
                        .input_required(&ctx, &key, (&server, &req.uri), *result, &mut rounds)
                        .await?
                    {
                        NextRound::Relay(r) => return Ok(ReadResourceResponse::InputRequired(r)),
                        NextRound::Retry { responses, state } => {
                            req.input_responses = Some(responses);
                            req.request_state = state;
                        }
                    }
                }
                Err(e) => return Err(e.to_mcp()),
            }
        }
    }

    async fn subscribe(
        &self,
        req: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let server = self.visible_resource_server(&ctx, &req.uri)?;
        // Only what the backend offers: a listed resource, or a URI one of its templates
        // matches (the server a bare URI would fall back to does not count).
        let offered = self
            .shared
            .pool
            .resources()
            .iter()
            .any(|(s, r)| *s == server && r.uri == req.uri)
            || self
                .shared
                .pool
                .resource_templates()
                .iter()
                .any(|(s, t)| *s == server && template_matches(&t.uri_template, &req.uri));
        if !offered {
            return Err(not_found("resource", &req.uri));
        }
        let added = self
            .shared
            .subscriptions
            .lock()
            .subscribe(&req.uri, self.session, ctx.peer.clone())
            .map_err(|TooMany| {
                McpError::invalid_params(
                    format!(
                        "this session already holds {MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions; unsubscribe from some first"
                    ),
                    None,
                )
            })?;
        if let Err(e) = self.shared.pool.subscribe(&server, &req.uri).await {
            if added {
                self.shared
                    .subscriptions
                    .lock()
                    .unsubscribe(&req.uri, self.session);
            }
            return Err(e.to_mcp());
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        req: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Nothing is kept for a URI this session was not subscribed to.
        let last = self
            .shared
            .subscriptions
            .lock()
            .unsubscribe(&req.uri, self.session);
        if last == Some(true)
            && let Some(server) = self.shared.resource_server(&req.uri)
        {
            self.shared
                .pool
                .unsubscribe(&server, &req.uri)
                .await
                .map_err(|e| e.to_mcp())?;
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let table = self
            .shared
            .prompt_table()
            .into_iter()
            .map(|(exposed, server, prompt)| (server, (exposed, prompt)))
            .collect();
        let items = self
            .shown_components(&ctx, table, |(exposed, prompt)| {
                vec![exposed.clone(), prompt.name.clone()]
            })
            .into_iter()
            .map(|(_, (exposed, mut p))| {
                p.name = exposed;
                p
            })
            .collect();
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListPromptsResult::with_all_items(items)))
    }

    async fn get_prompt(
        &self,
        mut req: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let exposed = req.name.clone();
        let (server, prompt) = match self.visible_prompt(&ctx, &exposed) {
            Err(_) if self.shared.pool.starting() => {
                self.shared.pool.settled(START_WAIT_FOR_CALL).await;
                self.visible_prompt(&ctx, &exposed)?
            }
            found => found?,
        };
        let key = format!("prompts/get:{exposed}");
        if let Some(sealed) = req.request_state.take() {
            req.request_state = self.reopened(&key, &sealed, &server)?;
        }
        req.name = prompt.name;
        let mut rounds = 0;
        loop {
            match self
                .shared
                .pool
                .get_prompt(&server, req.clone(), Some(&self.caller(&ctx)))
                .await
            {
                Ok(mut r) => {
                    r.result_type.get_or_insert(ResultType::COMPLETE);
                    return Ok(GetPromptResponse::Complete(r));
                }
                Err(toolforge_mcp::CallError::InputRequired { result, .. }) => {
                    match self
                        .input_required(&ctx, &key, (&server, &req.name), *result, &mut rounds)
                        .await?
                    {
                        NextRound::Relay(r) => return Ok(GetPromptResponse::InputRequired(r)),
                        NextRound::Retry { responses, state } => {
                            req.input_responses = Some(responses);
                            req.request_state = state;
                        }
                    }
                }
                Err(e) => return Err(e.to_mcp()),
            }
        }
    }

    async fn complete(
        &self,
        req: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let v = serde_json::to_value(&req).unwrap_or(Value::Null);
        let kind = v.pointer("/ref/type").and_then(Value::as_str).unwrap_or("");
        let (server, req) = match kind {
            "ref/prompt" => {
                let name = v.pointer("/ref/name").and_then(Value::as_str).unwrap_or("");
                let (server, prompt) = self.visible_prompt(&ctx, name)?;
                let mut v = v.clone();
                v["ref"]["name"] = Value::String(prompt.name);
                let req: CompleteRequestParams = serde_json::from_value(v)
                    .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
                (server, req)
            }
            "ref/resource" => {
                let uri = v.pointer("/ref/uri").and_then(Value::as_str).unwrap_or("");
                (self.visible_resource_server(&ctx, uri)?, req)
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown completion reference type: {other}"),
                    None,
                ));
            }
        };
        self.shared
            .pool
            .complete(&server, req)
            .await
            .map(|mut r| {
                r.result_type.get_or_insert(ResultType::COMPLETE);
                r
            })
            .map_err(|e| e.to_mcp())
    }

    async fn set_level(
        &self,
        req: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared.pool.set_level(req.level).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn uri_templates() {
        let cases = [
            (
                "test://template/{id}/data",
                "test://template/123/data",
                true,
            ),
            (
                "test://template/{id}/data",
                "test://template/1/2/data",
                false,
            ),
            ("test://template/{id}/data", "test://template//data", false),
            ("file:///{+path}", "file:///a/b/c.txt", true),
            ("res://{name}", "res://x.md", true),
            ("res://{name}", "other://x.md", false),
            ("plain://uri", "plain://uri", true),
        ];
        for (t, u, want) in cases {
            assert_eq!(template_matches(t, u), want, "{t} vs {u}");
        }
    }
}

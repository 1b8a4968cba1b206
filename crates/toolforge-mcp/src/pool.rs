//! The pool: one supervised connection per configured server, the merged lists, and calls with
//! the retry policy. This file is the public face; the work is done in the modules it uses:
//! `supervise` (connect, list, restart with backoff), `call` (the call path: at-most-once
//! execution with the retry policy), `events` (`list_changed` and cache revalidation),
//! `catalog` (the merged catalog) and `lists` (reading a server's lists, from the server or the
//! catalog cache); this file's children: `tasks` relays `tasks/*` to the server that runs a
//! task, `skills` the Skills extension's requests, each skill judged against its pin.
//!
//! Start-up waits for every server's first attempt concurrently, each bounded by its own start
//! timeout, so one broken server never holds up the others.

#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, LoggingLevel, Prompt, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceTemplate, ServerCapabilities,
    SetLevelRequestParams, SubscribeRequestParams, Tool as McpTool, UnsubscribeRequestParams,
};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use toolforge_retry::RetryPolicy;
use toolforge_select::{Catalog, ToolId};

use crate::auth::pool::PoolCredentials;
use crate::config::{Isolation, PoolConfig};
use crate::events;
use crate::isolation::Isolated;
use crate::listed_tool::ListedTool;
use crate::pins::Pinning;
use crate::relay::{Caller, PoolEvent, Relay};
use crate::upstream::{Lists, Servers, Upstream};
use crate::{call, catalog, guard, lists, supervise};

mod skills;
mod tasks;

pub use crate::call::{CallContext, CallError, CallFailure, CallOutcome};
pub use crate::options::PoolOptions;
pub use crate::supervise::FirstAttempts;
pub use crate::upstream::{ServerHealth, ServerState};

/// The pool of MCP servers.
pub struct Pool {
    servers: Arc<Servers>,
    overlaps: Vec<(String, Vec<ToolId>)>,
    events: broadcast::Sender<PoolEvent>,
    cancel: CancellationToken,
    tasks: parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The merged catalog, built once per change of any server's lists.
    merged: parking_lot::Mutex<Option<(u64, Arc<Catalog>)>>,
    retry: RetryPolicy,
    /// Connections of servers isolated per client session.
    isolated: Isolated,
    /// Pins, quarantine and the content guards' settings.
    pinning: Arc<Pinning>,
    /// The credentials of servers with `"auth"` (none when no server has any).
    credentials: Option<Arc<PoolCredentials>>,
}

/// How often tools in quarantine are judged again, so an approval given with
/// `toolforge tools approve` (another process) takes effect without a restart.
const READMIT_INTERVAL: Duration = Duration::from_secs(5);

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
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
        let (relay_tx, relay_rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(256);
        let pinning = Arc::new(Pinning::from_settings(
            &config.settings,
            options.cache.as_ref().and_then(|c| c.pin_store()),
        ));
        let credentials = credentials_for(&config.servers, &options);
        let servers: Arc<Servers> = config
            .servers
            .into_iter()
            .map(|cfg| {
                let relay = Relay::new(&cfg.name, relay_tx.clone(), options.elicitation_fallback);
                let shared = credentials.as_ref().and_then(|c| c.shared(&cfg));
                Arc::new(
                    Upstream::new(cfg, relay, options.cache.clone())
                        .with_pinning(Some(pinning.clone()))
                        .with_credentials(shared),
                )
            })
            .collect();
        let cancel = CancellationToken::new();
        let isolated = Isolated::new(
            relay_tx.clone(),
            options.clone(),
            events.clone(),
            cancel.clone(),
        );
        let pool = Arc::new(Self {
            servers,
            overlaps: config.overlaps,
            events,
            cancel,
            tasks: parking_lot::Mutex::new(Vec::new()),
            merged: parking_lot::Mutex::new(None),
            retry: RetryPolicy::default(),
            isolated,
            pinning,
            credentials,
        });
        {
            // Release quarantined tools once approved.
            let weak = Arc::downgrade(&pool);
            let stop = pool.cancel.clone();
            let readmitter = tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(READMIT_INTERVAL) => {}
                    }
                    let Some(pool) = weak.upgrade() else { break };
                    pool.readmit();
                }
            });
            pool.tasks.lock().push(readmitter);
        }
        if pool.servers.iter().any(|u| {
            u.cfg.isolation == Isolation::Session
                || u.cfg.auth.as_ref().is_some_and(|a| a.per_principal())
        }) {
            // Stop the isolated connections of ended or idle sessions.
            let weak = Arc::downgrade(&pool);
            let stop = pool.cancel.clone();
            let reaper = tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_secs(15)) => {}
                    }
                    let Some(pool) = weak.upgrade() else { break };
                    pool.isolated.reap();
                }
            });
            pool.tasks.lock().push(reaper);
        }
        // Serve what the cache holds at once; live lists replace it as servers answer.
        let mut cached_servers = std::collections::HashSet::new();
        if let Some(cache) = &options.cache {
            for name in lists::preload(&pool.servers, cache).await {
                cached_servers.insert(name);
            }
        }
        let mut first = Vec::new();
        for up in pool.servers.iter() {
            if up.cfg.disabled {
                continue;
            }
            if options.cached_only && cached_servers.contains(&up.cfg.name) {
                up.set_state(ServerState::Cached, None);
                continue;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            first.push((up.clone(), rx));
            let task = tokio::spawn(supervise::supervise(
                up.clone(),
                options.clone(),
                pool.cancel.clone(),
                pool.events.clone(),
                tx,
            ));
            pool.tasks.lock().push(task);
        }
        let weak = Arc::downgrade(&pool.servers);
        let refresher = events::spawn_list_refresher(
            weak.clone(),
            relay_rx,
            pool.events.clone(),
            pool.cancel.clone(),
        );
        pool.tasks.lock().push(refresher);
        if let Some(cache) = options.cache.clone() {
            let task =
                events::spawn_revalidator(weak, cache, pool.events.clone(), pool.cancel.clone());
            pool.tasks.lock().push(task);
        }
        (pool, FirstAttempts::new(first))
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

    /// The configuration of `server`.
    #[must_use]
    pub fn server_config(&self, server: &str) -> Option<crate::config::ServerConfig> {
        self.upstream(server).map(|u| u.cfg.clone())
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
            for up in self.servers.iter() {
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
        self.servers.iter().map(|u| u.health()).collect()
    }

    /// True when every enabled server is ready.
    #[must_use]
    pub fn all_ready(&self) -> bool {
        self.servers
            .iter()
            .all(|u| matches!(u.state(), ServerState::Ready | ServerState::Disabled))
    }

    /// The catalog cache's figures and each server's list age, for `/health`.
    #[must_use]
    pub fn cache_status(&self) -> serde_json::Value {
        lists::cache_status(&self.servers)
    }

    /// Where this pool keeps its tool pins (the catalog cache's SQLite file, else memory).
    #[must_use]
    pub fn pin_store(&self) -> &crate::pins::PinStore {
        self.pinning.store()
    }

    /// Tools held in quarantine, as `/health` shows them: `[{"server", "tool", "reason"}]`.
    #[must_use]
    pub fn quarantined(&self) -> Vec<serde_json::Value> {
        self.servers
            .iter()
            .flat_map(|u| {
                u.lists
                    .read()
                    .quarantined
                    .iter()
                    .map(|q| {
                        serde_json::json!({
                            "server": u.cfg.name,
                            "tool": q.tool.name,
                            "reason": q.reason,
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The quarantine error for a tool name a client used (its own name or `server__tool`),
    /// when a quarantined tool has it: what a call of an unlisted name is answered instead of
    /// "unknown tool".
    #[must_use]
    pub fn quarantine_error(&self, name: &str) -> Option<CallError> {
        let candidates: Vec<(Arc<Upstream>, &str)> = match name
            .split_once("__")
            .and_then(|(server, tool)| self.upstream(server).map(|up| (up, tool)))
        {
            Some(one) => vec![one],
            None => self.servers.iter().map(|u| (u.clone(), name)).collect(),
        };
        candidates.into_iter().find_map(|(up, tool)| {
            up.quarantine_reason(tool)
                .map(|reason| CallError::Quarantined {
                    server: up.cfg.name.clone(),
                    tool: tool.to_owned(),
                    reason,
                })
        })
    }

    /// Judges quarantined tools again (approvals given since are honoured); servers that
    /// released some announce changed tool lists.
    pub fn readmit(&self) {
        for up in self.servers.iter() {
            if up.readmit() {
                let _ = self.events.send(PoolEvent::ToolsChanged {
                    server: up.cfg.name.clone(),
                });
            }
        }
    }

    /// The merged catalog of the enabled servers (last known tools of servers that are down).
    #[must_use]
    pub fn catalog(&self) -> Catalog {
        (*self.shared_catalog()).clone()
    }

    /// [`Pool::catalog`] without the copy: built once per change of any server's lists.
    #[must_use]
    pub fn shared_catalog(&self) -> Arc<Catalog> {
        let generation: u64 = self.servers.iter().map(|u| u.generation()).sum();
        if let Some((g, c)) = self.merged.lock().as_ref()
            && *g == generation
        {
            return c.clone();
        }
        let built = Arc::new(catalog::build(&self.servers, &self.overlaps));
        *self.merged.lock() = Some((generation, built.clone()));
        built
    }

    /// A server's own definition of one of its tools (for faithful re-exposure).
    #[must_use]
    pub fn tool_definition(&self, id: &ToolId) -> Option<McpTool> {
        let up = self.upstream(&id.server)?;
        let lists = up.lists.read();
        lists
            .tools
            .iter()
            .find(|t| t.name() == id.name)
            .map(ListedTool::definition)
    }

    /// The listed tools behind many ids at once, in order (shared, not copied): one lock and
    /// one pass per server, so listing a server's thousands of tools stays linear.
    #[must_use]
    pub fn tool_definitions(&self, ids: &[&ToolId]) -> Vec<Option<ListedTool>> {
        catalog::definitions(&self.servers, ids)
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

    /// Calls a tool on `server` with the retry policy and the server's timeout. A call that may
    /// have reached the server is not sent again unless the tool is idempotent (see
    /// `crate::call`).
    ///
    /// # Errors
    /// The server is unknown or unavailable past the deadline, the call timed out, was
    /// cancelled, failed in transport (with why it was not retried), or the server answered a
    /// JSON-RPC error.
    pub async fn call_tool(
        &self,
        server: &str,
        mut params: CallToolRequestParams,
        ctx: CallContext,
    ) -> Result<CallOutcome, CallFailure> {
        let refused = |error: CallError| CallFailure {
            error,
            attempts: 0,
            retry_reason: None,
            not_retried: None,
        };
        let Some(up) = self.upstream(server) else {
            return Err(refused(CallError::UnknownServer(server.to_owned())));
        };
        if up.quarantine_reason(&params.name).is_some() && up.readmit() {
            let _ = self.events.send(PoolEvent::ToolsChanged {
                server: server.to_owned(),
            });
        }
        if let Some(reason) = up.quarantine_reason(&params.name) {
            return Err(refused(CallError::Quarantined {
                server: server.to_owned(),
                tool: params.name.to_string(),
                reason,
            }));
        }
        let guards = self.pinning.guards();
        let tool = params.name.to_string();
        let blocked = |reason: String| CallError::Blocked {
            server: server.to_owned(),
            tool: tool.clone(),
            reason,
        };
        let mut guarded = Vec::new();
        match guard::arguments(guards, &mut params.arguments) {
            Ok(note) => guarded.extend(note),
            Err(reason) => return Err(refused(blocked(reason))),
        }
        let mut outcome = match self.call_unguarded(&up, params, ctx).await {
            Ok(outcome) => outcome,
            Err(mut failure) => {
                self.guard_error(server, &mut failure.error);
                return Err(failure);
            }
        };
        match guard::result(guards, &mut outcome.result) {
            Ok(note) => guarded.extend(note),
            Err(reason) => {
                return Err(CallFailure {
                    error: blocked(reason),
                    attempts: outcome.attempts,
                    retry_reason: outcome.retry_reason,
                    not_retried: None,
                });
            }
        }
        outcome.guarded = guarded;
        Ok(outcome)
    }

    /// The call itself, on the server's shared, per-session or per-principal connection.
    async fn call_unguarded(
        &self,
        up: &Arc<Upstream>,
        params: CallToolRequestParams,
        ctx: CallContext,
    ) -> Result<CallOutcome, CallFailure> {
        let refused = |error: CallError| CallFailure {
            error,
            attempts: 0,
            retry_reason: None,
            not_retried: None,
        };
        let up = self
            .connection_for(up, ctx.on_behalf.as_ref(), ctx.caller.as_ref())
            .await
            .map_err(refused)?;
        // Boxed: the attempts' future is the bulk of this one and of `call_tool`'s, which would
        // otherwise carry it inline through every move.
        Box::pin(call::call_tool(&up, self.retry, params, ctx)).await
    }

    /// The connection a caller's requests to `up`'s server go over: its principal's own (the
    /// server has per-principal `"auth"`), its session's (the server is isolated per session),
    /// else the shared one.
    ///
    /// # Errors
    /// As [`Pool::principal_upstream`]; the server has too many sessions' connections.
    pub(crate) async fn connection_for(
        &self,
        up: &Arc<Upstream>,
        on_behalf: Option<&crate::on_behalf::OnBehalf>,
        caller: Option<&Caller>,
    ) -> Result<Arc<Upstream>, CallError> {
        match self.principal_upstream(up, on_behalf).await? {
            Some(own) => Ok(own),
            None => self
                .isolated
                .upstream_for(up, caller)
                .map_err(|message| CallError::Rpc(McpError::internal_error(message, None))),
        }
    }

    /// The connection of `on_behalf`'s principal to `up`'s server, when the server has
    /// per-principal `"auth"` (none otherwise: the call goes over the shared connection).
    ///
    /// # Errors
    /// The principal must authorize first, the caller brought no token to exchange, or the
    /// server has too many principals' connections.
    async fn principal_upstream(
        &self,
        up: &Arc<Upstream>,
        on_behalf: Option<&crate::on_behalf::OnBehalf>,
    ) -> Result<Option<Arc<Upstream>>, CallError> {
        let Some(auth) = up.cfg.auth.as_ref().filter(|a| a.per_principal()) else {
            return Ok(None);
        };
        let Some(credentials) = &self.credentials else {
            return Ok(None);
        };
        let principal = on_behalf.map_or(toolforge_anonymous(), |o| o.principal.clone());
        let token = on_behalf.and_then(|o| o.token.as_ref());
        match credentials.ready(&up.cfg, &principal, token).await {
            Ok(()) => {}
            Err(crate::auth::token::AuthFailure::AuthorizationRequired) => {
                return Err(CallError::AuthorizationRequired {
                    server: up.cfg.name.clone(),
                    principal,
                    scope: None,
                });
            }
            Err(crate::auth::token::AuthFailure::Failed(reason)) => {
                return Err(CallError::CredentialsFailed {
                    server: up.cfg.name.clone(),
                    reason,
                });
            }
        }
        let _ = auth;
        self.isolated
            .upstream_for_principal(up, &principal, || {
                credentials
                    .for_principal(&up.cfg, &principal)
                    .unwrap_or_else(|| unreachable!("per-principal auth has principal credentials"))
            })
            .map(Some)
            .map_err(|m| CallError::Rpc(McpError::internal_error(m, None)))
    }

    /// The credentials of the servers with `"auth"`, when some server has it.
    #[must_use]
    pub fn credentials(&self) -> Option<&Arc<PoolCredentials>> {
        self.credentials.as_ref()
    }

    /// A principal's grant for `server` was stored or removed: its own connection starts
    /// afresh on its next call, and a shared connection waiting for a grant tries again now.
    pub fn grant_changed(&self, server: &str, principal: &str) {
        self.isolated.forget_principal(server, principal);
        if let Some(up) = self.upstream(server) {
            up.wake.notify_one();
        }
    }

    /// The principals with a connection of their own to `server`.
    #[must_use]
    pub fn principal_connections(&self, server: &str) -> Vec<String> {
        self.isolated.principals(server)
    }

    /// How many isolated connections `server` has open (`"isolation": "session"`).
    #[must_use]
    pub fn isolated_sessions(&self, server: &str) -> usize {
        self.isolated.open(server)
    }

    /// Before a call naming a tool no server lists is answered "unknown tool": re-reads the
    /// tool lists that may have it since (servers that add tools without
    /// `notifications/tools/list_changed`). `name` is a tool's own name or `server__tool`;
    /// with a known server prefix only that server is asked, otherwise every ready one. Each
    /// server is asked at most once per 10 s, however many unknown names arrive. True when a
    /// server lists the tool afterwards (the caller then routes the call again).
    pub async fn refresh_for_unknown_tool(&self, name: &str) -> bool {
        let targeted = name
            .split_once("__")
            .and_then(|(server, tool)| self.upstream(server).map(|up| vec![(up, tool.to_owned())]));
        let targets = targeted.unwrap_or_else(|| {
            self.servers
                .iter()
                .filter(|u| u.state() == ServerState::Ready)
                .map(|u| (u.clone(), name.to_owned()))
                .collect()
        });
        let refreshes = targets
            .iter()
            .map(|(up, tool)| lists::refresh_for_unknown_tool(up, tool));
        let found = futures::future::join_all(refreshes).await;
        let found = found.into_iter().any(|f| f);
        if found {
            for (up, _) in &targets {
                let _ = self.events.send(PoolEvent::ToolsChanged {
                    server: up.cfg.name.clone(),
                });
            }
        }
        found
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
        let up = self.known(server)?;
        let uri = params.uri.clone();
        self.skill_allows(&up, &uri)?;
        let on_behalf = caller.and_then(|c| c.on_behalf.as_ref());
        let up = self.principal_upstream(&up, on_behalf).await?.unwrap_or(up);
        let r = call::once(&up, caller, |p| async move {
            p.read_resource_once(params).await
        })
        .await
        .map_err(|e| self.guarded_error(server, e))?;
        match r {
            ReadResourceResponse::Complete(mut r) => {
                let guarded = guard::resource(self.pinning.guards(), &mut r);
                self.settle_guarded(server, &uri, guarded)?;
                Ok(r)
            }
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
        let up = self.known(server)?;
        let name = params.name.clone();
        let on_behalf = caller.and_then(|c| c.on_behalf.as_ref());
        let up = self.principal_upstream(&up, on_behalf).await?.unwrap_or(up);
        let r = call::once(
            &up,
            caller,
            |p| async move { p.get_prompt_once(params).await },
        )
        .await
        .map_err(|e| self.guarded_error(server, e))?;
        match r {
            GetPromptResponse::Complete(mut r) => {
                let guarded = guard::prompt(self.pinning.guards(), &mut r);
                self.settle_guarded(server, &name, guarded)?;
                Ok(r)
            }
            GetPromptResponse::InputRequired(result) => Err(CallError::InputRequired {
                server: server.to_owned(),
                result: Box::new(result),
            }),
            _ => Err(CallError::Rpc(McpError::internal_error(
                "a prompt answered with a result toolforge does not relay yet",
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
        let up = self.known(server)?;
        let mut r = call::once(&up, None, |p| async move { p.complete(params).await })
            .await
            .map_err(|e| self.guarded_error(server, e))?;
        let guarded = guard::completion(self.pinning.guards(), &mut r);
        self.settle_guarded(server, "completion/complete", guarded)?;
        Ok(r)
    }

    /// `resources/subscribe` on `server`.
    ///
    /// # Errors
    /// As [`Pool::read_resource`].
    pub async fn subscribe(&self, server: &str, uri: &str) -> Result<(), CallError> {
        let up = self.known(server)?;
        if up
            .peer
            .read()
            .as_ref()
            .is_some_and(crate::listen::is_modern)
        {
            // 2026-07-28 has no resources/subscribe: the URI joins the listen stream's filter.
            return up
                .listening
                .subscribe(uri)
                .map_err(|e| CallError::Rpc(McpError::invalid_request(e.to_string(), None)));
        }
        let params = SubscribeRequestParams::new(uri);
        call::once(&up, None, |p| async move { p.subscribe(params).await })
            .await
            .map_err(|e| self.guarded_error(server, e))
    }

    /// `resources/unsubscribe` on `server`.
    ///
    /// # Errors
    /// As [`Pool::read_resource`].
    pub async fn unsubscribe(&self, server: &str, uri: &str) -> Result<(), CallError> {
        let up = self.known(server)?;
        if up
            .peer
            .read()
            .as_ref()
            .is_some_and(crate::listen::is_modern)
        {
            up.listening.unsubscribe(uri);
            return Ok(());
        }
        let params = UnsubscribeRequestParams::new(uri);
        call::once(&up, None, |p| async move { p.unsubscribe(params).await })
            .await
            .map_err(|e| self.guarded_error(server, e))
    }

    /// `logging/setLevel` on every ready server that offers logging; failures are logged.
    pub async fn set_level(&self, level: LoggingLevel) {
        for (server, caps) in self.capabilities() {
            if caps.logging.is_none() {
                continue;
            }
            let Some(up) = self.upstream(&server) else {
                continue;
            };
            let params = SetLevelRequestParams::new(level);
            if let Err(e) =
                call::once(&up, None, |p| async move { p.set_level(params).await }).await
            {
                tracing::debug!(server, "logging/setLevel not forwarded: {e}");
            }
        }
    }

    /// Redacts the secrets in `error`, what `server` sent back on a failed request
    /// (`crate::guard::error`), before any caller (client, model, trace) sees it.
    fn guard_error(&self, server: &str, error: &mut CallError) {
        let kinds = guard::error(self.pinning.guards(), error);
        if !kinds.is_empty() {
            tracing::info!(server, "redacted from the error: {}", kinds.join(", "));
        }
    }

    pub(crate) fn guarded_error(&self, server: &str, mut error: CallError) -> CallError {
        self.guard_error(server, &mut error);
        error
    }

    /// What a content guard decided about an answer of `server` to a request about `target`
    /// (a resource's URI, a prompt's name): logged when it redacted something, a refusal when
    /// it withheld the answer.
    pub(crate) fn settle_guarded(
        &self,
        server: &str,
        target: &str,
        guarded: Result<Option<String>, String>,
    ) -> Result<(), CallError> {
        match guarded {
            Ok(None) => Ok(()),
            Ok(Some(note)) => {
                tracing::info!(server, target, "{note}");
                Ok(())
            }
            Err(reason) => Err(CallError::Blocked {
                server: server.to_owned(),
                tool: target.to_owned(),
                reason,
            }),
        }
    }

    pub(crate) fn known(&self, server: &str) -> Result<Arc<Upstream>, CallError> {
        self.upstream(server)
            .ok_or_else(|| CallError::UnknownServer(server.to_owned()))
    }
}

/// The principal of a call made for no one in particular (identity off, the CLI).
fn toolforge_anonymous() -> String {
    "anonymous".to_owned()
}

/// The pool's credentials when some server has `"auth"`: the store the binary chose, else one
/// in memory under a key of this process.
fn credentials_for(
    servers: &[crate::config::ServerConfig],
    options: &PoolOptions,
) -> Option<Arc<PoolCredentials>> {
    if !servers.iter().any(|s| s.auth.is_some()) {
        return None;
    }
    let store = options.tokens.clone().unwrap_or_else(|| {
        Arc::new(crate::auth::store::TokenStore::memory(
            crate::auth::seal::SealKey::random(),
        ))
    });
    let http = match crate::auth::pool::http_client() {
        Ok(http) => http,
        Err(e) => {
            tracing::error!("upstream OAuth is off: {e}");
            return None;
        }
    };
    Some(Arc::new(PoolCredentials::new(store, http, servers)))
}

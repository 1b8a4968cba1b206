//! Visibility on every MCP surface: the operator's channels (env and CLI, fixed at start-up)
//! merged per request with the caller's (the query string of the connection URL and the
//! `x-mcp-*` headers of each HTTP request) by `toolforge_select::visibility::resolve`.
//!
//! [`filtered::Filtered`] wraps any rmcp server handler (the built-in toolkit, evals and stdio conformance
//! servers) so a hidden tool, resource, template or prompt is neither listed nor usable: calling,
//! reading, subscribing, getting or completing it answers "unknown ...", as for one that does not
//! exist. The gateway applies the same config in its own handler, in `GET /tools` and in the
//! agent's routes. Resources and prompts follow the tool rules by name (a prompt's name; a
//! resource's URI or name; a template's URI template or name) and tag, without the search query.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use toolforge_agent::Governance;
use toolforge_policy::{Action, Principal, Target};
use toolforge_select::visibility::{
    Channels, Component, Policy, Verdicts, VisibilityIndex, Visible, resolve, resolve_components,
    verdicts_with_index,
};
use toolforge_select::{Catalog, Tool, ToolId};

pub(crate) mod filtered;
pub(crate) mod serve;

/// The operator's side of visibility, fixed at start-up.
#[derive(Debug, Clone, Default)]
pub struct VisibilityConfig {
    /// Env and CLI channels (`Channels::operator`).
    pub operator: Channels,
    pub policy: Policy,
    /// The Cedar policy and rate limits (none by default): a tool the request's principal may
    /// not `list` is hidden like any other, and calls are admitted by [`Governance`].
    pub governance: Arc<Governance>,
}

/// The query string that fixes one session's visibility (set by its first request).
pub type SessionScope = Arc<Mutex<Option<Vec<(String, String)>>>>;

/// The caller's side of one request: query pairs of the connection URL and `x-mcp-*` headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestChannels {
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    /// Who asks (`anonymous` without identity, and over stdio).
    pub principal: Principal,
}

impl RequestChannels {
    /// From an HTTP request's URI and headers (as `anonymous`).
    #[must_use]
    pub fn from_http(uri: &http::Uri, headers: &http::HeaderMap) -> Self {
        Self {
            query: query_pairs(uri),
            headers: header_pairs(headers),
            principal: Principal::anonymous(),
        }
    }

    /// From an HTTP request's URI, headers and the principal it was authenticated as.
    #[must_use]
    pub fn from_parts(parts: &http::request::Parts) -> Self {
        Self {
            principal: crate::identity::principal_of(&parts.extensions),
            ..Self::from_http(&parts.uri, &parts.headers)
        }
    }

    /// From the HTTP request behind an MCP request (none over stdio).
    #[must_use]
    pub fn from_context(ctx: &RequestContext<RoleServer>) -> Self {
        ctx.extensions
            .get::<http::request::Parts>()
            .map(Self::from_parts)
            .unwrap_or_default()
    }
}

/// The URL-decoded query pairs of `uri`.
#[must_use]
pub fn query_pairs(uri: &http::Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| {
            form_urlencoded::parse(q.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The `x-mcp-*` headers (lower-case names); values that are not text are skipped.
#[must_use]
pub fn header_pairs(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-mcp-"))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

/// The channels of a request in a session: the session's query (fixed by its first request)
/// and this request's headers.
pub fn session_channels(
    session_query: &Mutex<Option<Vec<(String, String)>>>,
    ctx: &RequestContext<RoleServer>,
) -> RequestChannels {
    let mut request = RequestChannels::from_context(ctx);
    let mut scope = session_query.lock();
    match scope.as_ref() {
        Some(fixed) => request.query.clone_from(fixed),
        None => *scope = Some(request.query.clone()),
    }
    request
}

impl RequestChannels {
    /// No query pair and no `x-mcp-*` header.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.query.is_empty() && self.headers.is_empty()
    }
}

impl VisibilityConfig {
    /// True when the operator restricts nothing: with no request channels either, every tool
    /// is visible and resolving can be skipped.
    #[must_use]
    pub fn is_open(&self) -> bool {
        let open = |c: &Option<toolforge_select::visibility::ChannelInput>| {
            c.as_ref()
                .is_none_or(toolforge_select::visibility::ChannelInput::is_empty)
        };
        open(&self.operator.env)
            && open(&self.operator.cli)
            && self.operator.errors.is_empty()
            && !self.governance.has_policy()
    }

    /// What `request` may see of `catalog`. Warnings (a request channel that did not parse and
    /// was ignored) are logged.
    #[must_use]
    pub fn resolve(&self, catalog: &Catalog, request: &RequestChannels) -> Visible {
        let mut visible = resolve(catalog, &self.channels(request), &self.policy);
        for w in &visible.warnings {
            tracing::warn!("visibility: {w}");
        }
        if self.governance.has_policy() {
            visible.tools.retain(|id| {
                catalog.get(id).is_some_and(|tool| {
                    self.governance
                        .permits_tool(&request.principal, Action::List, tool)
                })
            });
        }
        visible
    }

    /// Whether the request's principal may do `action` on `target` (a resource it reads, a
    /// prompt it gets): always, without a policy.
    #[must_use]
    pub fn permits(&self, request: &RequestChannels, action: Action, target: Target<'_>) -> bool {
        !self.governance.has_policy()
            || self
                .governance
                .decide(&request.principal, action, target, None)
                .allowed
    }

    /// What `request` may see of a prepared catalog: every tool's verdict, through the
    /// catalog's index (no per-request indexing, no per-tool id). Warnings are logged.
    #[must_use]
    pub fn scope(&self, prepared: Arc<Prepared>, request: &RequestChannels) -> Scope {
        let denied = self.governance.has_policy().then(|| {
            let principal = &request.principal;
            Arc::new(
                prepared
                    .catalog
                    .tools()
                    .map(|tool| !self.governance.permits_tool(principal, Action::List, tool))
                    .collect::<Vec<bool>>(),
            )
        });
        if self.is_open() && request.is_empty() {
            return Scope {
                prepared,
                verdicts: None,
                denied,
                principal: request.principal.clone(),
                governance: self.governance.clone(),
            };
        }
        let verdicts = verdicts_with_index(
            &prepared.catalog,
            prepared.index(),
            &self.channels(request),
            &self.policy,
        );
        for w in &verdicts.warnings {
            tracing::warn!("visibility: {w}");
        }
        Scope {
            prepared,
            verdicts: Some(Arc::new(verdicts)),
            denied,
            principal: request.principal.clone(),
            governance: self.governance.clone(),
        }
    }

    /// Which of `components` (resources, templates, prompts) `request` may see, in order:
    /// every one when nothing restricts.
    #[must_use]
    pub fn components(&self, components: &[Component], request: &RequestChannels) -> Vec<bool> {
        if self.is_open() && request.is_empty() {
            return vec![true; components.len()];
        }
        resolve_components(components, &self.channels(request), &self.policy)
    }

    /// Whether `request` may see one component.
    #[must_use]
    pub fn shows(&self, component: &Component, request: &RequestChannels) -> bool {
        self.components(std::slice::from_ref(component), request)
            .first()
            .copied()
            .unwrap_or(false)
    }

    fn channels(&self, request: &RequestChannels) -> Channels {
        let mut channels = self.operator.clone();
        if !request.query.is_empty() {
            channels = channels.with_query_pairs(&request.query);
        }
        if !request.headers.is_empty() {
            channels = channels.with_header_pairs(&request.headers);
        }
        channels
    }
}

/// A catalog prepared for per-request visibility, built once per catalog generation: its
/// search index and each tool's position, so a request decides every tool's verdict without
/// naming any, and a lookup by id is a hash probe.
pub struct Prepared {
    pub catalog: Arc<Catalog>,
    /// Built on the first restricted request: an unrestricted gateway never pays for it.
    index: std::sync::OnceLock<VisibilityIndex>,
    /// Id -> (server index, tool index within the server, position in catalog order).
    positions: HashMap<ToolId, (usize, usize, usize)>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("tools", &self.positions.len())
            .finish_non_exhaustive()
    }
}

impl Prepared {
    #[must_use]
    pub fn new(catalog: Arc<Catalog>) -> Self {
        let mut positions = HashMap::with_capacity(catalog.len());
        let mut flat = 0;
        for (s, server) in catalog.servers.iter().enumerate() {
            for (t, tool) in server.tools.iter().enumerate() {
                positions.entry(tool.id()).or_insert((s, t, flat));
                flat += 1;
            }
        }
        Self {
            index: std::sync::OnceLock::new(),
            catalog,
            positions,
        }
    }

    fn index(&self) -> &VisibilityIndex {
        self.index
            .get_or_init(|| VisibilityIndex::new(&self.catalog))
    }

    /// The tool's position in catalog order (what [`Scope::shows`] takes).
    #[must_use]
    pub fn position(&self, id: &ToolId) -> Option<usize> {
        self.positions.get(id).map(|&(_, _, i)| i)
    }

    /// The tool with this id.
    #[must_use]
    pub fn get(&self, id: &ToolId) -> Option<&Tool> {
        let &(s, t, _) = self.positions.get(id)?;
        self.catalog.servers.get(s)?.tools.get(t)
    }
}

/// One [`Prepared`] for the pool's current catalog, rebuilt when the catalog changes (the pool
/// hands out the same `Arc` until a server's list changes). Building is single-flight.
#[derive(Debug, Default)]
pub struct PreparedCache(Mutex<Option<Arc<Prepared>>>);

impl PreparedCache {
    /// The prepared form of `catalog`, from the cache when it is the one last prepared.
    pub fn get(&self, catalog: Arc<Catalog>) -> Arc<Prepared> {
        let mut slot = self.0.lock();
        if let Some(prepared) = slot.as_ref()
            && Arc::ptr_eq(&prepared.catalog, &catalog)
        {
            return prepared.clone();
        }
        let prepared = Arc::new(Prepared::new(catalog));
        *slot = Some(prepared.clone());
        prepared
    }

    /// Forgets the prepared catalog (the next request prepares the current one).
    pub fn clear(&self) {
        *self.0.lock() = None;
    }
}

/// What one request may see of a [`Prepared`] catalog.
#[derive(Debug, Clone)]
pub struct Scope {
    pub prepared: Arc<Prepared>,
    /// `None`: nothing restricts the request, every tool is visible.
    verdicts: Option<Arc<Verdicts>>,
    /// By catalog position, tools the policy does not let the principal `list` (`None`
    /// without a policy).
    denied: Option<Arc<Vec<bool>>>,
    /// Who asks, and the policy and limits that decide for it.
    pub principal: Principal,
    pub governance: Arc<Governance>,
}

impl Scope {
    /// True when the tool exists and the request may see it.
    #[must_use]
    pub fn allows(&self, id: &ToolId) -> bool {
        self.prepared.position(id).is_some_and(|i| self.shows(i))
    }

    /// True when nothing narrows what the request may see (no filter, no query): then even a
    /// tool outside the catalog (one in quarantine) may be named to it.
    #[must_use]
    pub fn unrestricted(&self) -> bool {
        self.verdicts.is_none()
    }

    /// True when the request may see the tool at this catalog position
    /// ([`Prepared::position`]).
    #[must_use]
    pub fn shows(&self, position: usize) -> bool {
        self.verdicts.as_ref().is_none_or(|v| v.shows(position))
            && self
                .denied
                .as_ref()
                .is_none_or(|d| !d.get(position).copied().unwrap_or(true))
    }

    /// Whether the principal may do `action` (`search`) on a tool it sees.
    #[must_use]
    pub fn permits(&self, action: Action, tool: &Tool) -> bool {
        self.governance.permits_tool(&self.principal, action, tool)
    }

    /// Whether the policy lets the principal call the tool `id` with `arguments` (limits
    /// aside): a group call goes only to members it does.
    #[must_use]
    pub fn permits_call(
        &self,
        id: &ToolId,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> bool {
        if !self.governance.has_policy() {
            return true;
        }
        let Some(tool) = self.get(id) else {
            return false;
        };
        let arguments = serde_json::Value::Object(arguments.cloned().unwrap_or_default());
        self.governance
            .decide(
                &self.principal,
                Action::Call,
                Target::Tool(toolforge_agent::governance::tool_ref(tool)),
                Some(&arguments),
            )
            .allowed
    }

    /// Admits one call of the tool `id` (visible to this request) with `arguments`: the
    /// policy, then the principal's bucket. `Err` is the refusal the caller reads; the call
    /// must not reach the server then.
    pub async fn admit_call(
        &self,
        id: &ToolId,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<(), toolforge_agent::Refusal> {
        if self.governance.is_open() {
            return Ok(());
        }
        let Some(tool) = self.get(id) else {
            return Ok(());
        };
        let arguments = serde_json::Value::Object(arguments.cloned().unwrap_or_default());
        self.governance
            .admit_call(&self.principal, tool, &arguments)
            .await
            .map(|_| ())
    }

    /// `None` without a search query; `Some(false)` when the query matched nothing and every
    /// tool the other filters allow is shown (the seed's fallback, to be marked in answers).
    #[must_use]
    pub fn query_matched(&self) -> Option<bool> {
        self.verdicts.as_ref().and_then(|v| v.query_matched)
    }

    /// The visible tool with this id.
    #[must_use]
    pub fn get(&self, id: &ToolId) -> Option<&Tool> {
        if self.allows(id) {
            self.prepared.get(id)
        } else {
            None
        }
    }

    /// The catalog narrowed to the visible tools (every server stays; declared overlap groups
    /// keep only visible members).
    #[must_use]
    pub fn catalog(&self) -> Catalog {
        let base = &self.prepared.catalog;
        match (&self.verdicts, &self.denied) {
            (None, None) => (**base).clone(),
            _ => base.narrowed(|i, _| self.shows(i), |m| self.allows(m)),
        }
    }
}

/// A refused call as the caller reads it: an error result naming the deciding policy, or the
/// limit with `retryAfterMs` (also in `structuredContent`).
#[must_use]
pub fn refused_result(refusal: &toolforge_agent::Refusal) -> rmcp::model::CallToolResult {
    use rmcp::model::{CallToolResult, ContentBlock};
    let body = match refusal {
        toolforge_agent::Refusal::Denied { policy, message } => {
            serde_json::json!({"error": message, "policy": policy})
        }
        toolforge_agent::Refusal::Limited {
            retry_after_ms,
            message,
        } => serde_json::json!({"error": message, "retryAfterMs": retry_after_ms}),
    };
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "toolforge: {}",
        refusal.message()
    ))]);
    result.structured_content = Some(body);
    result
}

/// A resource, template or prompt as visibility sees it: offered by `server` (configured with
/// `server_tags`), known by `names`, with the tags of `item`'s `_meta`.
pub fn component<T: serde::Serialize>(
    server: &str,
    names: Vec<String>,
    item: &T,
    server_tags: &[String],
) -> Component {
    let value = serde_json::to_value(item).unwrap_or_default();
    Component::from_mcp(server, names, &value, server_tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolforge_select::ServerEntry;
    use toolforge_select::visibility::ChannelInput;

    fn catalog() -> Catalog {
        let tool = |server: &str, name: &str, tags: &[&str]| {
            let mut def = serde_json::Map::new();
            def.insert("name".into(), name.into());
            let mut tool = Tool::from_mcp(server, def, &[]).unwrap();
            tool.tags = tags.iter().map(|t| (*t).to_owned()).collect();
            tool
        };
        let server = |name: &str, tools| ServerEntry {
            name: name.into(),
            tags: Vec::new(),
            aliases: Vec::new(),
            tools,
        };
        Catalog::new(
            vec![
                server(
                    "git",
                    vec![
                        tool("git", "git_log", &["read-only"]),
                        tool("git", "git_push", &["write"]),
                    ],
                ),
                server(
                    "fs",
                    vec![
                        tool("fs", "read_file", &["read-only"]),
                        tool("fs", "write_file", &["write"]),
                    ],
                ),
            ],
            vec![(
                "read".into(),
                vec![
                    ToolId::new("git", "git_log"),
                    ToolId::new("fs", "read_file"),
                ],
            )],
        )
        .unwrap()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_scope_decides_as_resolve_does() {
        let config = VisibilityConfig {
            operator: Channels::operator(
                ChannelInput::default(),
                ChannelInput::from_cli(None, Some("git_push"), None, None).unwrap(),
            ),
            policy: Policy::default(),
            governance: Arc::default(),
        };
        let catalog = Arc::new(catalog());
        let prepared = Arc::new(Prepared::new(catalog.clone()));
        let requests = [
            RequestChannels::default(),
            RequestChannels {
                query: pairs(&[("tags", "read-only")]),
                headers: Vec::new(),
                principal: Principal::anonymous(),
            },
            RequestChannels {
                query: Vec::new(),
                headers: pairs(&[("x-mcp-disabled-tools", "fs/read_file")]),
                principal: Principal::anonymous(),
            },
            RequestChannels {
                query: pairs(&[("q", "write file")]),
                headers: Vec::new(),
                principal: Principal::anonymous(),
            },
        ];
        for request in &requests {
            let visible = config.resolve(&catalog, request);
            let scope = config.scope(prepared.clone(), request);
            for tool in catalog.tools() {
                assert_eq!(
                    scope.allows(&tool.id()),
                    visible.allows(&tool.id()),
                    "{request:?}"
                );
                assert_eq!(scope.get(&tool.id()).is_some(), visible.allows(&tool.id()));
            }
            assert_eq!(scope.catalog(), visible.catalog(&catalog), "{request:?}");
            assert_eq!(scope.query_matched(), visible.query_matched, "{request:?}");
        }
        let nothing = RequestChannels {
            query: pairs(&[("q", "zzqx")]),
            headers: Vec::new(),
            principal: Principal::anonymous(),
        };
        assert_eq!(
            config.scope(prepared.clone(), &nothing).query_matched(),
            Some(false),
            "a query that matches nothing falls back to the full set and says so"
        );
        let scope = config.scope(prepared, &requests[0]);
        assert!(
            !scope.allows(&ToolId::new("git", "git_push")),
            "the operator's deny"
        );
        assert!(!scope.allows(&ToolId::new("git", "no_such_tool")));
    }

    #[test]
    fn the_cache_prepares_each_catalog_once() {
        let cache = PreparedCache::default();
        let first = Arc::new(catalog());
        let a = cache.get(first.clone());
        assert!(Arc::ptr_eq(&a, &cache.get(first.clone())));
        let next = Arc::new(catalog());
        let b = cache.get(next.clone());
        assert!(!Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&b.catalog, &next));
    }
}

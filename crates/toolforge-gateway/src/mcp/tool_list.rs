//! `tools/list` and search mode: the exposed tools a request sees, as MCP definitions.

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use toolforge_mcp::ListedTool;
use toolforge_select::ToolId;

use axum::body::Bytes;

use super::list_cache::ListEntry;
use super::listed_tools::ListedTools;
use crate::group_annotations::group_annotations;
use crate::list_splice::ListSlot;
use crate::visible::{RequestChannels, Scope};
use toolforge_select::presentation::Presentation;

use super::{
    CALL_TOOL, Gateway, INTENT_HEADER, MAX_SEARCH_RESULTS, QUERY_MATCHED_META_KEY, SEARCH_TOOLS,
    START_GRACE, Shared, ToolMode,
};

impl Shared {
    /// `tools`, narrowed to what the broker's rules offer for the request's intent: the
    /// `x-mcp-intent` header, else the intent detected from its query (`q`, `x-mcp-query`).
    /// Without rules and without an intent header, `tools` as they are.
    pub(super) fn offered(
        &self,
        tools: Vec<ListedTool>,
        channels: &RequestChannels,
    ) -> Vec<ListedTool> {
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
            .filter(|t| shown.contains(t.name()))
            .collect()
    }

    /// The tools as MCP definitions, in presentation order.
    #[must_use]
    pub fn tool_list(&self) -> Vec<McpTool> {
        self.listed_tools()
            .all()
            .iter()
            .map(ListedTool::definition)
            .collect()
    }

    /// Every exposed tool of the pool's current catalog as an MCP definition: built once per
    /// catalog and shared by the requests until the catalog changes.
    pub(super) fn listed_tools(&self) -> Arc<ListedTools> {
        let catalog = self.pool.shared_catalog();
        if let Some(listed) = self.listed_tools.lock().as_ref()
            && Arc::ptr_eq(&listed.catalog, &catalog)
        {
            return listed.clone();
        }
        // Built outside the lock: two requests racing here build the same list.
        let presentation = self.presentation_of(&catalog);
        let listed = Arc::new(ListedTools::new(
            catalog,
            presentation.clone(),
            self.tool_definitions_where(&presentation, &|_, _| true),
        ));
        *self.listed_tools.lock() = Some(listed.clone());
        listed
    }

    /// The tools as MCP definitions, in presentation order, keeping those with a member
    /// `visible` allows.
    pub(super) fn visible_tool_list(&self, visible: &dyn Fn(&ToolId) -> bool) -> Vec<ListedTool> {
        self.tool_list_where(&self.presentation(), &|_, exposed| {
            exposed.members.iter().any(visible)
        })
    }

    /// The tools a request's scope shows, as MCP definitions in presentation order.
    pub(super) fn scoped_tool_list(&self, scope: &Scope) -> Vec<ListedTool> {
        let listed = self.listed_tools();
        if !Arc::ptr_eq(&listed.catalog, &scope.prepared.catalog) {
            // The pool's catalog changed between the scope and the list.
            return self.visible_tool_list(&|id| scope.allows(id));
        }
        let presentation = listed.presentation.clone();
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
        listed.filtered(|k| members[k].iter().any(|&i| scope.shows(i)))
    }

    /// The exposed tools `keep` accepts (given their index in the presentation), as MCP
    /// definitions in presentation order.
    pub(super) fn tool_list_where(
        &self,
        presentation: &Presentation,
        keep: &dyn Fn(usize, &toolforge_select::ExposedTool) -> bool,
    ) -> Vec<ListedTool> {
        self.tool_definitions_where(presentation, keep)
            .into_iter()
            .map(|(_, def)| def)
            .collect()
    }

    /// [`Shared::tool_list_where`], each definition with its index in the presentation.
    fn tool_definitions_where(
        &self,
        presentation: &Presentation,
        keep: &dyn Fn(usize, &toolforge_select::ExposedTool) -> bool,
    ) -> Vec<(usize, ListedTool)> {
        let shown: Vec<(usize, &toolforge_select::ExposedTool)> = presentation
            .tools()
            .iter()
            .enumerate()
            .filter(|(k, exposed)| keep(*k, exposed))
            .collect();
        // A tool with one member is re-exposed with its server's own definition.
        let singles: Vec<&ToolId> = shown
            .iter()
            .filter_map(|(_, e)| match e.members.as_slice() {
                [only] => Some(only),
                _ => None,
            })
            .collect();
        let mut definitions = self.pool.tool_definitions(&singles).into_iter();
        // A `ui://` link another server holds first leads to this server's copy (`apps`).
        let apps = self.app_links_table();
        shown
            .into_iter()
            .filter_map(|(k, exposed)| {
                if let [only] = exposed.members.as_slice()
                    && let Some(def) = definitions.next().flatten()
                {
                    let def = if apps.is_empty() {
                        def
                    } else {
                        linked_to_own_apps(def, &only.server, &apps)
                    };
                    if def.name() != exposed.name {
                        return Some((k, def.renamed(&exposed.name)));
                    }
                    return Some((k, def));
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
                Some((k, ListedTool::new(serde_json::from_value(def).ok()?)))
            })
            .collect()
    }
}

/// `def` of `server` with each `ui://` link that is rewritten for `server` (`apps`) replaced.
fn linked_to_own_apps(def: ListedTool, server: &str, apps: &super::apps::AppUris) -> ListedTool {
    let Some(meta) = def.meta() else {
        return def;
    };
    let mut meta = meta.clone();
    let rewrite = |uri: &str| apps.exposed(server, uri).map(str::to_owned);
    if toolforge_select::apps::rewrite_links(&mut meta, &rewrite) {
        def.with_meta(meta)
    } else {
        def
    }
}

impl Gateway {
    /// `search_tools`: `toolforge_select::search` over the tools this request may see and
    /// search (the name in words first, then BM25 over name, description, tags, parameters).
    pub(super) fn search_tools(
        &self,
        args: &serde_json::Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let toolforge_select::search::SearchArgs { query, limit } =
            toolforge_select::search::SearchArgs::parse(
                &Value::Object(args.clone()),
                10,
                MAX_SEARCH_RESULTS,
            )
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let query = query.as_str();
        let scope = self.scope(ctx);
        let presentation = self.shared.presentation();
        let offered: Vec<(&toolforge_select::ExposedTool, &toolforge_select::Tool)> = presentation
            .tools()
            .iter()
            .filter_map(|e| e.members.iter().find_map(|m| Some((e, scope.get(m)?))))
            .filter(|(_, tool)| scope.permits(toolforge_policy::Action::Search, tool))
            .collect();
        let tools: Vec<&toolforge_select::Tool> = offered.iter().map(|(_, t)| *t).collect();
        let index = toolforge_select::search::ToolSearch::new(&tools);
        let matches: Vec<Value> = index
            .search(query, limit, |_| true)
            .into_iter()
            .map(
                |toolforge_select::search::Hit {
                     index: i, score, ..
                 }| {
                    let (exposed, _) = offered[i];
                    json!({
                        "name": exposed.name,
                        "description": exposed.description,
                        "inputSchema": exposed.input_schema,
                        "score": (f64::from(score) * 1000.0).round() / 1000.0,
                    })
                },
            )
            .collect();
        let body = json!({"query": query, "tools": matches});
        let mut result = CallToolResult::structured(body.clone());
        result.content = vec![ContentBlock::text(body.to_string())];
        Ok(result)
    }

    pub(super) async fn serve_list_tools(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let channels = crate::visible::session_channels(&self.session_query, &ctx);
        self.listed.lock().clone_from(&Some(channels.clone()));
        let slot = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ListSlot>());
        let (tools, narrowed, query_matched) = match slot {
            // Over HTTP: the tool array from the cache, spliced into rmcp's answer by the guard.
            Some(slot) => {
                let legacy = !ctx.protocol_version().is_some_and(|v| {
                    v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
                });
                let entry = self.shared.cached_list(&channels, legacy);
                slot.fill(entry.splice());
                (
                    vec![crate::list_splice::placeholder(&entry.marker)],
                    entry.narrowed,
                    entry.query_matched,
                )
            }
            None => {
                let answer = self.shared.list_answer(&channels);
                let tools = answer.tools.iter().map(ListedTool::definition).collect();
                (tools, answer.narrowed, answer.query_matched)
            }
        };
        let mut hints = self.cache_hints(&channels);
        if narrowed {
            // The broker narrowed it for this request's intent.
            hints.scope = CacheScope::Private;
        }
        let mut result = hints.apply(ListToolsResult::with_all_items(tools));
        if query_matched == Some(false) {
            // The search matched nothing, so the whole visible set is listed: say so.
            result
                .meta
                .get_or_insert_with(Default::default)
                .insert(QUERY_MATCHED_META_KEY.to_owned(), Value::Bool(false));
        }
        Ok(result)
    }
}

impl ListEntry {
    /// What the guard splices into the answer rmcp frames around this entry's placeholder.
    pub(crate) fn splice(&self) -> crate::list_splice::Splice {
        crate::list_splice::Splice {
            needle: crate::list_splice::needle(&self.marker),
            tools: self.tools.clone(),
        }
    }
}

/// One `tools/list` answer before rmcp frames it.
pub(super) struct ListAnswer {
    pub(super) tools: Vec<ListedTool>,
    /// The broker narrowed the list for the request's intent.
    pub(super) narrowed: bool,
    /// Whether the request's search query matched (`None` without one).
    pub(super) query_matched: Option<bool>,
}

impl Shared {
    /// The `tools/list` answer for a request with `channels`.
    pub(super) fn list_answer(&self, channels: &RequestChannels) -> ListAnswer {
        let mut query_matched = None;
        let tools = if self.visibility.is_open() && channels.is_empty() {
            self.listed_tools().all()
        } else {
            let scope = self.scope(channels);
            query_matched = scope.query_matched();
            self.scoped_tool_list(&scope)
        };
        let listed = tools.len();
        let tools = self.offered(tools, channels);
        let narrowed = tools.len() != listed;
        let tools = match &self.tool_mode {
            ToolMode::Direct => tools,
            ToolMode::Search { pinned } => {
                let mut listed = search_meta_tools();
                listed.extend(
                    tools
                        .into_iter()
                        .filter(|t| pinned.iter().any(|p| p == t.name())),
                );
                listed
            }
        };
        ListAnswer {
            tools,
            narrowed,
            query_matched,
        }
    }

    /// The `tools/list` answer for `channels` with its tool array serialised as rmcp writes it
    /// to a peer of this era (`legacy`: before 2026-07-28), from the cache when it holds one
    /// for the pool's current catalog.
    pub(super) fn cached_list(&self, channels: &RequestChannels, legacy: bool) -> Arc<ListEntry> {
        let catalog = self.pool.shared_catalog();
        if let Some(entry) = self.list_cache.get(&catalog, legacy, channels) {
            return entry;
        }
        let epoch = self.list_cache.epoch();
        let answer = self.list_answer(channels);
        let tools = match tool_array(&answer.tools, legacy) {
            // Exactly its length: a `Vec` grown by doubling holds up to twice that, for as
            // long as the answer stays cached.
            Ok(bytes) => Bytes::from(bytes.into_boxed_slice()),
            Err(e) => {
                tracing::warn!("tools/list: a tool definition did not serialise: {e}");
                Bytes::from_static(b"[]")
            }
        };
        let entry = Arc::new(ListEntry {
            legacy,
            channels: channels.clone(),
            tools,
            marker: crate::list_splice::new_marker(),
            count: answer.tools.len(),
            narrowed: answer.narrowed,
            query_matched: answer.query_matched,
        });
        self.list_cache.insert(&catalog, epoch, entry.clone());
        if entry.tools.len() >= crate::free_memory::LARGE_BUILD_BYTES {
            // Building it took several copies of the catalog's definitions, gone now.
            self.memory_release.release_soon();
        }
        entry
    }
}

/// `tools` as the JSON array rmcp writes for them to a peer of this era (`legacy`: before
/// 2026-07-28), each schema copied from its text rather than parsed and written again.
fn tool_array(tools: &[ListedTool], legacy: bool) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(
        2 + tools
            .iter()
            .map(|t| 256 + t.schema().as_json().len())
            .sum::<usize>(),
    );
    out.push(b'[');
    for (i, tool) in tools.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if legacy && tool.without_schema().output_schema.is_some() {
            // What rmcp's handler does to a legacy peer's answer, by rmcp's own rule.
            let mut result =
                rmcp::model::ServerResult::ListToolsResult(ListToolsResult::with_all_items(vec![
                    tool.without_schema().clone(),
                ]));
            result.strip_non_object_output_for_legacy_peer();
            if let rmcp::model::ServerResult::ListToolsResult(mut stripped) = result
                && let Some(rest) = stripped.tools.pop()
            {
                ListedTool::from_parts(rest, tool.schema().clone()).write_json(&mut out)?;
                continue;
            }
        }
        tool.write_json(&mut out)?;
    }
    out.push(b']');
    Ok(out)
}

/// The search mode's two meta-tools.
fn search_meta_tools() -> Vec<ListedTool> {
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
        .filter_map(|d| serde_json::from_value(d).ok().map(ListedTool::new))
        .collect()
}

//! The console's JSON API: the catalog, a visibility preview, the routing explainer and the
//! bill. Every answer is computed by the code the rest of toolforge decides with (the pool's
//! health, `visibility::resolve`, `Selection::route` and `Selection::offer`, `cost-report`);
//! the console only shows it.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::extract::State;
use axum::http::{Extensions, HeaderMap, StatusCode, Uri};
use serde_json::{Value, json};
use toolforge_select::presentation::Resolved;
use toolforge_select::visibility::Component;
use toolforge_select::{Call, Catalog, OfferRequest, ToolId};

use super::{Console, Viewer, operators_only};
use crate::error::ApiError;
use crate::visible::{RequestChannels, component, query_pairs};

/// Longest query string an API request may carry, in bytes.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;
/// Most earlier calls a routing question may name.
pub const MAX_SESSION_CALLS: usize = 64;

/// 414 for a query string past [`MAX_QUERY_BYTES`].
fn bounded(uri: &Uri) -> Result<(), ApiError> {
    let len = uri.query().map_or(0, str::len);
    if len > MAX_QUERY_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!(
                "the query string is {len} bytes; the console accepts at most {MAX_QUERY_BYTES}"
            ),
        ));
    }
    Ok(())
}

/// The tools `viewer` may see at all (their operator visibility and the policy's `list`, no
/// query): `None` for an operator, who sees every tool.
fn seen_by(console: &Console, viewer: &Viewer, catalog: &Catalog) -> Option<HashSet<ToolId>> {
    if viewer.operator {
        return None;
    }
    let request = RequestChannels {
        principal: viewer.principal.clone(),
        ..RequestChannels::default()
    };
    Some(
        console
            .shared
            .visibility
            .resolve(catalog, &request)
            .tools
            .into_iter()
            .collect(),
    )
}

/// `GET /ui/api/catalog`: every server with its state, every tool with its schema, tags and
/// annotations, the overlap groups with their members, and the catalog cache's figures. To
/// anyone but an operator, only the tools their principal may see (and the servers and groups
/// they belong to), without the cache.
pub(super) async fn catalog(State(console): State<Console>, extensions: Extensions) -> Json<Value> {
    let viewer = console.viewer(&extensions);
    let shared = &console.shared;
    shared.pool.settled(crate::mcp::START_GRACE).await;
    let catalog = shared.pool.shared_catalog();
    let seen = seen_by(&console, &viewer, &catalog);
    let sees = |id: &ToolId| seen.as_ref().is_none_or(|s| s.contains(id));
    let seen_servers: Option<HashSet<&str>> = seen
        .as_ref()
        .map(|s| s.iter().map(|id| id.server.as_str()).collect());
    let presentation = shared.presentation();
    let mut exposed: HashMap<&ToolId, &str> = HashMap::new();
    for tool in presentation.tools() {
        for member in &tool.members {
            exposed.insert(member, tool.name.as_str());
        }
    }
    let servers: Vec<Value> = shared
        .pool
        .health()
        .into_iter()
        .filter(|health| {
            seen_servers
                .as_ref()
                .is_none_or(|s| s.contains(health.name.as_str()))
        })
        .map(|health| {
            let entry = catalog.servers.iter().find(|s| s.name == health.name);
            let mut row = serde_json::to_value(&health).unwrap_or_default();
            row["tags"] = json!(entry.map(|s| s.tags.clone()).unwrap_or_default());
            row["aliases"] = json!(entry.map(|s| s.aliases.clone()).unwrap_or_default());
            row
        })
        .collect();
    let tools: Vec<Value> = catalog
        .tools()
        .filter(|tool| sees(&tool.id()))
        .map(|tool| {
            let id = tool.id();
            json!({
                "id": id,
                "server": tool.server,
                "name": tool.name,
                "exposed_name": exposed.get(&id).copied().unwrap_or(tool.name.as_str()),
                "title": tool.definition.get("title"),
                "description": tool.description,
                "input_schema": tool.input_schema,
                "tags": tool.tags,
                "annotations": tool.annotations(),
            })
        })
        .collect();
    let declared: HashSet<&str> = catalog.overlaps.iter().map(|(k, _)| k.as_str()).collect();
    let groups: Vec<Value> = presentation
        .tools()
        .iter()
        .filter(|t| t.members.len() > 1)
        .filter_map(|t| {
            let members: Vec<&ToolId> = t.members.iter().filter(|m| sees(m)).collect();
            (!members.is_empty()).then(|| {
                json!({
                    "name": t.name,
                    "declared": declared.contains(t.name.as_str()),
                    "description": t.description,
                    "members": members,
                })
            })
        })
        .collect();
    Json(json!({
        "servers": servers,
        "tools": tools,
        "groups": groups,
        "cache": viewer.operator.then(|| shared.pool.cache_status()),
    }))
}

/// `GET /ui/api/visibility?...`: what a request of this principal with this query string and
/// these `x-mcp-*` headers would see, every tool, resource, template and prompt with why it is
/// in or out. To anyone but an operator, only what their principal may see at all.
pub(super) async fn visibility(
    State(console): State<Console>,
    uri: Uri,
    headers: HeaderMap,
    extensions: Extensions,
) -> Result<Json<Value>, ApiError> {
    bounded(&uri)?;
    let viewer = console.viewer(&extensions);
    let shared = &console.shared;
    shared.pool.settled(crate::mcp::START_GRACE).await;
    let request = RequestChannels {
        principal: viewer.principal.clone(),
        ..RequestChannels::from_http(&uri, &headers)
    };
    let catalog = shared.pool.shared_catalog();
    let seen = seen_by(&console, &viewer, &catalog);
    let visible = shared.visibility.resolve(&catalog, &request);
    let hidden: HashMap<&ToolId, String> = visible
        .hidden
        .iter()
        .map(|h| (&h.tool, h.reason.to_string()))
        .collect();
    let shown_reason = match visible.query_matched {
        Some(true) => "allowed by every channel and among the best matches of the query",
        Some(false) => "allowed by every channel (the query matched nothing, so it was dropped)",
        None => "allowed by every channel",
    };
    let tools: Vec<Value> = catalog
        .tools()
        .filter(|tool| seen.as_ref().is_none_or(|s| s.contains(&tool.id())))
        .map(|tool| {
            let id = tool.id();
            let reason = hidden.get(&id);
            json!({
                "id": id,
                "server": tool.server,
                "name": tool.name,
                "visible": reason.is_none(),
                "reason": reason.map_or(shown_reason, String::as_str),
            })
        })
        .collect();

    let server_tags: HashMap<&str, &[String]> = catalog
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.tags.as_slice()))
        .collect();
    let tags_of = |server: &str| server_tags.get(server).copied().unwrap_or_default();
    let mut rows = Vec::new();
    let mut components = Vec::new();
    // Each row, with what the policy decides it by (a URI, a template, a prompt's own name).
    let mut targets: Vec<String> = Vec::new();
    let mut add = |kind: &str, server: &str, name: &str, label: &str, c: Component| {
        rows.push(json!({"kind": kind, "server": server, "name": name, "label": label}));
        components.push(c);
    };
    for (server, r) in shared.pool.resources() {
        targets.push(r.uri.clone());
        let names = vec![r.uri.clone(), r.name.clone()];
        add(
            "resource",
            &server,
            &r.name,
            &r.uri,
            component(&server, names, &r, tags_of(&server)),
        );
    }
    for (server, t) in shared.pool.resource_templates() {
        targets.push(t.uri_template.clone());
        let names = vec![t.uri_template.clone(), t.name.clone()];
        let c = component(&server, names, &t, tags_of(&server));
        add("template", &server, &t.name, &t.uri_template, c);
    }
    // As the gateway lists prompts: the first server keeps a name, the others are
    // `server__name`.
    let mut seen = HashSet::new();
    for (server, p) in shared.pool.prompts() {
        targets.push(p.name.clone());
        let exposed = if seen.insert(p.name.clone()) {
            p.name.clone()
        } else {
            format!("{server}__{}", p.name)
        };
        let names = vec![exposed.clone(), p.name.clone()];
        add(
            "prompt",
            &server,
            &exposed,
            &exposed,
            component(&server, names, &p, tags_of(&server)),
        );
    }
    let shown = shared.visibility.components(&components, &request);
    // What the viewer may see at all: shown with no channels of their own, and permitted.
    let allowed: Vec<bool> = if viewer.operator {
        vec![true; rows.len()]
    } else {
        let base = RequestChannels {
            principal: viewer.principal.clone(),
            ..RequestChannels::default()
        };
        let shown_at_all = shared.visibility.components(&components, &base);
        rows.iter()
            .zip(shown_at_all)
            .zip(&targets)
            .map(|((row, shown), name)| {
                let server = row["server"].as_str().unwrap_or_default();
                let (action, target) = match row["kind"].as_str() {
                    Some("prompt") => (
                        toolforge_policy::Action::Prompt,
                        toolforge_policy::Target::Prompt { server, name },
                    ),
                    _ => (
                        toolforge_policy::Action::Read,
                        toolforge_policy::Target::Resource { server, uri: name },
                    ),
                };
                shown && shared.visibility.permits(&base, action, target)
            })
            .collect()
    };
    let mut resources = Vec::new();
    let mut templates = Vec::new();
    let mut prompts = Vec::new();
    for ((mut row, shown), allowed) in rows.into_iter().zip(shown).zip(allowed) {
        if !allowed {
            continue;
        }
        row["visible"] = json!(shown);
        row["reason"] = json!(if shown {
            "allowed by every channel (a search query narrows tools only)"
        } else {
            "a disabled list names it or one of its tags, or an enabled list leaves it out"
        });
        match row["kind"].as_str() {
            Some("resource") => resources.push(row),
            Some("template") => templates.push(row),
            _ => prompts.push(row),
        }
    }
    Ok(Json(json!({
        "request": {"principal": request.principal.as_str(), "query": request.query, "headers": request.headers},
        "query_matched": visible.query_matched,
        "warnings": visible.warnings,
        "visible_tools": visible.tools.len(),
        "tools": tools,
        "resources": resources,
        "templates": templates,
        "prompts": prompts,
    })))
}

/// The parameters of one routing question.
#[derive(Debug, Default, PartialEq)]
struct RouteQuestion {
    prompt: String,
    tool: Option<String>,
    arguments: Value,
    session: Vec<ToolId>,
    intent: Option<String>,
}

impl RouteQuestion {
    fn parse(pairs: &[(String, String)]) -> Result<Self, String> {
        let mut q = Self {
            arguments: json!({}),
            ..Self::default()
        };
        for (key, value) in pairs {
            let value = value.trim();
            match key.as_str() {
                "prompt" => value.clone_into(&mut q.prompt),
                "tool" if !value.is_empty() => q.tool = Some(value.to_owned()),
                "intent" if !value.is_empty() => q.intent = Some(value.to_owned()),
                "args" if !value.is_empty() => {
                    q.arguments = serde_json::from_str(value)
                        .map_err(|e| format!("args is not JSON: {e}"))?;
                    if !q.arguments.is_object() {
                        return Err("args must be a JSON object, e.g. {\"path\": \"a.txt\"}".into());
                    }
                }
                "session" => {
                    for entry in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        if q.session.len() == MAX_SESSION_CALLS {
                            return Err(format!(
                                "session names more than {MAX_SESSION_CALLS} earlier calls"
                            ));
                        }
                        let id = ToolId::parse(entry).ok_or_else(|| {
                            format!("session entries must be server/tool, got {entry:?}")
                        })?;
                        q.session.push(id);
                    }
                }
                "tool" | "intent" | "args" => {}
                other => {
                    return Err(format!(
                        "unknown parameter {other:?}; use prompt, tool, args, session or intent"
                    ));
                }
            }
        }
        Ok(q)
    }
}

/// `GET /ui/api/route?prompt=&tool=&args=&session=&intent=`: the broker's offer for the
/// prompt, and, when a tool is named (`server/tool` or a name the gateway exposes), which
/// server runs that call with every rule's evidence (what `toolforge select` prints).
pub(super) async fn route(
    State(console): State<Console>,
    uri: Uri,
    extensions: Extensions,
) -> Result<Json<Value>, ApiError> {
    bounded(&uri)?;
    let question = RouteQuestion::parse(&query_pairs(&uri))
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m))?;
    let viewer = console.viewer(&extensions);
    let shared = &console.shared;
    shared.pool.settled(crate::mcp::START_GRACE).await;
    let selection = shared.selection();
    let catalog = shared.pool.shared_catalog();
    // The offer a request of the viewer's principal with no channels of its own gets: the
    // operator's visibility and the policy, as the gateway decides for that principal.
    let visible: HashSet<ToolId> = shared
        .visibility
        .resolve(
            &catalog,
            &RequestChannels {
                principal: viewer.principal.clone(),
                ..RequestChannels::default()
            },
        )
        .tools
        .into_iter()
        .collect();
    let offer = selection.offer(&OfferRequest {
        intent: question.intent.as_deref(),
        visible: Some(&visible),
        ..OfferRequest::new(&question.prompt)
    });
    let decision = match &question.tool {
        None => Value::Null,
        Some(tool) => {
            let embedder = toolforge_llm::embed::HashingEmbedder::default();
            let prompt_vector = embedder.embed_one(&question.prompt);
            let call = Call {
                candidates: &[],
                prompt: &question.prompt,
                arguments: &question.arguments,
                session: &question.session,
                prompt_vector: Some(&prompt_vector),
            };
            let presentation = shared.presentation();
            let by_id = ToolId::parse(tool).filter(|id| selection.tool(id).is_some());
            // Only what this principal sees is routed to, as a call of theirs would be; a tool
            // they may not see is as unknown as one that does not exist.
            let decided = match (by_id, presentation.resolve(tool)) {
                (Some(id), _) | (None, Some(Resolved::Direct(id))) => {
                    if visible.contains(&id) {
                        selection.route_tool(&id, &call)
                    } else {
                        None
                    }
                }
                (None, Some(Resolved::Group(group))) => {
                    let members: Vec<ToolId> = group
                        .members
                        .iter()
                        .filter(|m| visible.contains(m))
                        .cloned()
                        .collect();
                    if members.is_empty() {
                        None
                    } else {
                        selection.route(&Call {
                            candidates: &members,
                            ..call
                        })
                    }
                }
                (None, None) => None,
            };
            let Some(d) = decided else {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no tool {tool:?} in the catalog; name it as server/tool or as the gateway exposes it"
                    ),
                ));
            };
            json!({
                "server": d.chosen.server,
                "tool": d.chosen.name,
                "selection_rule": d.rule,
                "alternatives": d.alternatives,
                "candidates": d.candidates,
                "trace": d.trace,
            })
        }
    };
    Ok(Json(json!({
        "decision": decision,
        "offer": offer,
        "offer_summary": offer.summary(),
    })))
}

/// `GET /ui/api/spend`: the daily spend (`cost-report`'s JSON) and the catalog cache's figures,
/// for operators.
pub(super) async fn spend(
    State(console): State<Console>,
    extensions: Extensions,
) -> Result<Json<Value>, ApiError> {
    operators_only(&console.viewer(&extensions), "the spend report")?;
    let cache = console.shared.pool.cache_status();
    let (report, error) = match &console.spend {
        None => (Value::Null, Some("no trace file is written".to_owned())),
        Some(read) => {
            let Ok(permit) = console.spend_readers.clone().try_acquire_owned() else {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the spend report is being read for other pages; try again in a moment",
                ));
            };
            let read = read.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                let _permit = permit;
                (read.0)()
            })
            .await;
            match outcome {
                Ok(Ok(report)) => (report, None),
                Ok(Err(message)) => (Value::Null, Some(message)),
                Err(_) => (Value::Null, Some("the spend report failed".to_owned())),
            }
        }
    };
    Ok(Json(
        json!({"report": report, "error": error, "cache": cache}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_routing_question_parses_its_parts() {
        let q = RouteQuestion::parse(&pairs(&[
            ("prompt", " read a.txt "),
            ("tool", "fs/read_file"),
            ("args", r#"{"path": "a.txt"}"#),
            ("session", "fs/list_directory, git/git_status"),
            ("intent", ""),
        ]))
        .unwrap();
        assert_eq!(q.prompt, "read a.txt");
        assert_eq!(q.tool.as_deref(), Some("fs/read_file"));
        assert_eq!(q.arguments, json!({"path": "a.txt"}));
        assert_eq!(
            q.session,
            [
                ToolId::new("fs", "list_directory"),
                ToolId::new("git", "git_status")
            ]
        );
        assert_eq!(q.intent, None);
    }

    #[test]
    fn bad_routing_questions_say_what_is_wrong() {
        let cases = [
            (("args", "[1]"), "JSON object"),
            (("args", "{"), "not JSON"),
            (("session", "nope"), "server/tool"),
            (("colour", "red"), "unknown parameter"),
        ];
        for ((k, v), expected) in cases {
            let err = RouteQuestion::parse(&pairs(&[(k, v)])).unwrap_err();
            assert!(err.contains(expected), "{k}={v}: {err}");
        }
        let long = vec!["a/b"; MAX_SESSION_CALLS + 1].join(",");
        let err = RouteQuestion::parse(&pairs(&[("session", &long)])).unwrap_err();
        assert!(err.contains("more than"), "{err}");
    }

    #[test]
    fn long_query_strings_are_refused() {
        let ok: Uri = format!("/ui/api/route?prompt={}", "a".repeat(100))
            .parse()
            .unwrap();
        assert!(bounded(&ok).is_ok());
        let long: Uri = format!("/ui/api/route?prompt={}", "a".repeat(MAX_QUERY_BYTES))
            .parse()
            .unwrap();
        assert!(bounded(&long).is_err());
    }
}

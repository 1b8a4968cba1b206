//! Reading a server's lists (tools with pagination, resources, templates, prompts) into its
//! [`Upstream`], filling them from the catalog cache at start-up, and keeping that cache in
//! step.

use std::time::{Duration, Instant};

use rmcp::model::{ServerCapabilities, Tool as McpTool};
use rmcp::{Peer, RoleClient};

use crate::cache::{self, CachedTools, CatalogCache, Lookup};
use crate::listed_tool::ListedTool;
use crate::upstream::{Lists, Servers, Upstream};

/// Least time between two refreshes of one server's tool list caused by calls naming a tool
/// it did not list (servers that add tools without `notifications/tools/list_changed`).
pub(crate) const UNKNOWN_TOOL_REFRESH_INTERVAL: Duration = Duration::from_secs(10);

pub(crate) async fn refresh_lists(up: &Upstream, peer: &Peer<RoleClient>) -> Result<(), String> {
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
    // The cache keeps the list as the server gave it (quarantined tools too). Its JSON is made
    // after `set_lists`, so it is not held while pin admission makes its own (the peak with
    // thousands of tools).
    let tools: Vec<ListedTool> = tools.into_iter().map(ListedTool::new).collect();
    let listed = up.cache.as_ref().map(|_| tools.clone());
    up.set_lists(Lists {
        tools,
        resources,
        templates,
        prompts,
        capabilities: caps,
        instructions,
        fetched_at_ms: Some(fetched_at_ms),
        from_cache: false,
        quarantined: Vec::new(),
    });
    if let (Some(cache), Some(listed)) = (&up.cache, listed) {
        let entry = CachedTools {
            tools: listed
                .iter()
                .filter_map(|t| serde_json::to_value(t.definition()).ok())
                .collect(),
            fetched_at_ms,
        };
        drop(listed);
        cache.store(&up.cfg, &entry).await;
    }
    Ok(())
}

/// Re-reads the lists of `up` because a call named `tool`, which its last list lacks: at most
/// once per [`UNKNOWN_TOOL_REFRESH_INTERVAL`], one refresh at a time (concurrent callers wait
/// for it and share its result). True when `tool` is listed afterwards.
pub(crate) async fn refresh_for_unknown_tool(up: &Upstream, tool: &str) -> bool {
    let mut last = up.unknown_refresh.lock().await;
    if up.has_tool(tool) {
        return true; // a refresh that finished while this caller waited listed it
    }
    if last.is_some_and(|at| at.elapsed() < UNKNOWN_TOOL_REFRESH_INTERVAL) {
        return false;
    }
    let peer = up.peer.read().clone();
    let Some(peer) = peer else { return false };
    *last = Some(Instant::now());
    match refresh_lists(up, &peer).await {
        Ok(()) => up.has_tool(tool),
        Err(e) => {
            tracing::warn!(server = %up.cfg.name, "re-reading the tool list for an unknown tool failed: {e}");
            false
        }
    }
}

/// Fills each enabled server's tools from the cache (fresh or stale); returns the servers
/// found there.
pub(crate) async fn preload(servers: &Servers, cache: &CatalogCache) -> Vec<String> {
    let lookups = servers
        .iter()
        .filter(|u| !u.cfg.disabled)
        .map(|u| async move { (u.clone(), cache.lookup(&u.cfg).await) });
    let mut found = Vec::new();
    for (up, hit) in futures::future::join_all(lookups).await {
        let entry = match hit {
            Lookup::Fresh(e) | Lookup::Stale(e) => e,
            Lookup::Miss => continue,
        };
        let tools: Vec<ListedTool> = entry
            .tools
            .into_iter()
            .filter_map(|t| {
                serde_json::from_value::<McpTool>(t)
                    .ok()
                    .map(ListedTool::new)
            })
            .collect();
        up.set_lists(Lists {
            tools,
            fetched_at_ms: Some(entry.fetched_at_ms),
            from_cache: true,
            ..Lists::default()
        });
        found.push(up.cfg.name.clone());
    }
    found
}

/// Each enabled server's list age and source, with the catalog cache's own figures.
pub(crate) fn cache_status(servers: &Servers) -> serde_json::Value {
    let now = cache::now_ms();
    let lists_by_server: serde_json::Map<String, serde_json::Value> = servers
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
    let mut status = match servers.iter().find_map(|u| u.cache.clone()) {
        Some(cache) => cache.stats(),
        None => serde_json::json!({"backend": "none"}),
    };
    status["servers"] = serde_json::Value::Object(lists_by_server);
    status
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    use serde_json::json;

    use super::*;
    use crate::testing::{Reply, connected};

    #[tokio::test]
    async fn an_unknown_tool_rereads_the_list_at_most_once_per_interval() {
        let listed = Arc::new(AtomicU32::new(0));
        let added = Arc::new(AtomicBool::new(false));
        let (count, grown) = (listed.clone(), added.clone());
        let up = connected(move |method, _| {
            if method != "tools/list" {
                return Reply::Result(json!({}));
            }
            count.fetch_add(1, Ordering::SeqCst);
            let mut tools = vec![json!({"name": "a", "inputSchema": {"type": "object"}})];
            if grown.load(Ordering::SeqCst) {
                tools.push(json!({"name": "b", "inputSchema": {"type": "object"}}));
            }
            Reply::Result(json!({"tools": tools}))
        })
        .await;
        let peer = up.peer.read().clone().expect("connected");
        refresh_lists(&up, &peer).await.expect("tools/list");
        assert_eq!(listed.load(Ordering::SeqCst), 1, "listed once at start");
        // A listed tool needs no refresh.
        assert!(refresh_for_unknown_tool(&up, "a").await);
        assert_eq!(listed.load(Ordering::SeqCst), 1);
        // The server added `b` silently: one refresh finds it.
        added.store(true, Ordering::SeqCst);
        assert!(refresh_for_unknown_tool(&up, "b").await);
        assert_eq!(listed.load(Ordering::SeqCst), 2);
        // Names nobody has do not make the server list again within the interval.
        for name in ["nope", "still-nope", "b2"] {
            assert!(!refresh_for_unknown_tool(&up, name).await, "{name}");
        }
        assert_eq!(listed.load(Ordering::SeqCst), 2, "rate-limited");
    }
}

//! Background work on what backends announce: `list_changed` re-reads that server's lists, and
//! with a catalog cache, lists older than its TTL are re-read. Both pass the news on as
//! [`PoolEvent`]s.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cache::CatalogCache;
use crate::lists::refresh_lists;
use crate::relay::PoolEvent;
use crate::upstream::{ServerState, Servers, Upstream};

fn find(servers: &Servers, name: &str) -> Option<Arc<Upstream>> {
    servers.iter().find(|u| u.cfg.name == name).cloned()
}

/// Re-reads a server's lists on its `list_changed`, then passes every relayed event on.
pub(crate) fn spawn_list_refresher(
    servers: Weak<Servers>,
    mut relayed: mpsc::UnboundedReceiver<PoolEvent>,
    events: broadcast::Sender<PoolEvent>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => break,
                event = relayed.recv() => match event {
                    Some(event) => event,
                    None => break,
                },
            };
            let Some(servers) = servers.upgrade() else {
                break;
            };
            if let PoolEvent::ToolsChanged { server }
            | PoolEvent::ResourcesChanged { server }
            | PoolEvent::PromptsChanged { server } = &event
                && let Some(up) = find(&servers, server)
            {
                let peer = up.peer.read().clone();
                if let Some(peer) = peer
                    && let Err(e) = refresh_lists(&up, &peer).await
                {
                    tracing::warn!(server = %server, "refreshing lists after list_changed failed: {e}");
                }
            }
            let _ = events.send(event);
        }
    })
}

/// Every so often (a quarter of the TTL, 1-60 s), re-reads the tools of each ready server
/// whose list is older than the cache's TTL: one pass at a time, one server at a time.
pub(crate) fn spawn_revalidator(
    servers: Weak<Servers>,
    cache: Arc<CatalogCache>,
    events: broadcast::Sender<PoolEvent>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let every = (cache.ttl() / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(every) => {}
            }
            let Some(servers) = servers.upgrade() else {
                break;
            };
            revalidate(&servers, &cache, &events).await;
        }
    })
}

async fn revalidate(
    servers: &Servers,
    cache: &CatalogCache,
    events: &broadcast::Sender<PoolEvent>,
) {
    for up in servers {
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
                    let _ = events.send(PoolEvent::ToolsChanged {
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

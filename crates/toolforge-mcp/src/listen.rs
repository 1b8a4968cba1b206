//! `subscriptions/listen` to 2026-07-28 backends: how their list changes and resource updates
//! reach the pool.
//!
//! On 2026-07-28 there is no session and no GET stream: a server sends
//! `notifications/{tools,prompts,resources}/list_changed` and `notifications/resources/updated`
//! only on the `subscriptions/listen` streams that asked for them (`resources/subscribe` is
//! legacy-only). So once a 2026-07-28 connection is ready, the pool keeps one listen stream open
//! on it for the three list changes and the resource URIs its clients subscribed to (a legacy
//! `resources/subscribe` through the gateway adds its URI here); a changed set of URIs reopens
//! the stream with the new filter. What arrives becomes the same [`PoolEvent`]s a handshake-era
//! backend's notifications do.

use std::collections::BTreeSet;

use parking_lot::Mutex;
use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::{Peer, RoleClient};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::relay::{PoolEvent, Relay};

/// Most resource URIs subscribed on one backend at once.
pub const MAX_SUBSCRIBED_URIS: usize = 1024;

/// The resource URIs a backend's listen stream asks for, and the signal to reopen it.
#[derive(Debug, Default)]
pub(crate) struct Listening {
    uris: Mutex<BTreeSet<String>>,
    changed: Notify,
}

/// Too many resource URIs are subscribed on one backend.
#[derive(Debug, thiserror::Error)]
#[error("{MAX_SUBSCRIBED_URIS} resources are already subscribed on this server")]
pub struct TooManySubscriptions;

impl Listening {
    /// Adds `uri` to what the stream asks for (reopened if it was not there).
    pub(crate) fn subscribe(&self, uri: &str) -> Result<(), TooManySubscriptions> {
        let mut uris = self.uris.lock();
        if uris.contains(uri) {
            return Ok(());
        }
        if uris.len() >= MAX_SUBSCRIBED_URIS {
            return Err(TooManySubscriptions);
        }
        uris.insert(uri.to_owned());
        drop(uris);
        self.changed.notify_one();
        Ok(())
    }

    /// Removes `uri` from what the stream asks for.
    pub(crate) fn unsubscribe(&self, uri: &str) {
        if self.uris.lock().remove(uri) {
            self.changed.notify_one();
        }
    }

    /// The filter of the stream: every list change, and the subscribed URIs.
    pub(crate) fn filter(&self) -> SubscriptionFilter {
        let uris: Vec<String> = self.uris.lock().iter().cloned().collect();
        let mut filter = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed();
        if !uris.is_empty() {
            filter = filter.resource_subscriptions(uris);
        }
        filter.build()
    }
}

/// Whether `peer` speaks 2026-07-28 or later (no `initialize`).
pub(crate) fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize())
}

/// What a listen-stream notification means to the pool.
pub(crate) fn event(server: &str, notification: ServerNotification) -> Option<PoolEvent> {
    let server = server.to_owned();
    match notification {
        ServerNotification::ToolListChangedNotification(_) => {
            Some(PoolEvent::ToolsChanged { server })
        }
        ServerNotification::PromptListChangedNotification(_) => {
            Some(PoolEvent::PromptsChanged { server })
        }
        ServerNotification::ResourceListChangedNotification(_) => {
            Some(PoolEvent::ResourcesChanged { server })
        }
        ServerNotification::ResourceUpdatedNotification(n) => Some(PoolEvent::ResourceUpdated {
            server,
            uri: n.params.uri,
        }),
        _ => None,
    }
}

/// Keeps a listen stream open on `peer` (a 2026-07-28 connection) until the connection ends or
/// `stop` fires, reopening it when the subscribed URIs change.
pub(crate) async fn keep(
    server: String,
    peer: Peer<RoleClient>,
    listening: &Listening,
    relay: Relay,
    stop: CancellationToken,
) {
    loop {
        let opened = tokio::select! {
            s = peer.listen(listening.filter()) => s,
            () = stop.cancelled() => return,
        };
        let mut subscription = match opened {
            Ok(s) => s,
            Err(e) => {
                // A server that does not offer it (or a closed connection): its lists are
                // still re-read on each start and when the catalog cache revalidates.
                tracing::info!(server, "subscriptions/listen not open: {e}");
                return;
            }
        };
        tracing::debug!(server, "listening for list changes");
        let reopen = loop {
            tokio::select! {
                next = subscription.next() => match next {
                    Ok(Some(n)) => {
                        if let Some(e) = event(&server, n) {
                            relay.send(e);
                        }
                    }
                    // Ended by the server or the connection; a new connection listens anew.
                    Ok(None) | Err(_) => break false,
                },
                () = listening.changed.notified() => break true,
                () = stop.cancelled() => break false,
            }
        };
        let _ = subscription.cancel().await;
        if !reopen {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_asks_for_every_list_change_and_the_subscribed_uris() {
        let listening = Listening::default();
        let filter = serde_json::to_value(listening.filter()).unwrap();
        assert_eq!(
            filter,
            serde_json::json!({"toolsListChanged": true, "promptsListChanged": true,
                "resourcesListChanged": true})
        );
        listening.subscribe("file:///a").unwrap();
        listening.subscribe("file:///a").unwrap();
        let filter = serde_json::to_value(listening.filter()).unwrap();
        assert_eq!(
            filter["resourceSubscriptions"],
            serde_json::json!(["file:///a"])
        );
        listening.unsubscribe("file:///a");
        assert!(
            serde_json::to_value(listening.filter()).unwrap()["resourceSubscriptions"].is_null()
        );
    }

    #[test]
    fn subscriptions_are_bounded() {
        let listening = Listening::default();
        for i in 0..MAX_SUBSCRIBED_URIS {
            listening.subscribe(&format!("file:///{i}")).unwrap();
        }
        assert!(listening.subscribe("file:///one-more").is_err());
    }

    #[test]
    fn listen_notifications_become_pool_events() {
        let n: ServerNotification = serde_json::from_value(serde_json::json!({
            "method": "notifications/resources/updated", "params": {"uri": "file:///a"}
        }))
        .unwrap();
        assert!(matches!(
            event("s", n),
            Some(PoolEvent::ResourceUpdated { uri, .. }) if uri == "file:///a"
        ));
        let n: ServerNotification = serde_json::from_value(
            serde_json::json!({"method": "notifications/tools/list_changed"}),
        )
        .unwrap();
        assert!(matches!(
            event("s", n),
            Some(PoolEvent::ToolsChanged { .. })
        ));
    }
}

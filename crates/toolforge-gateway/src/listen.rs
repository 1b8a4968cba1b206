//! `subscriptions/listen` (protocol 2026-07-28): the streams clients hold open for list changes
//! and resource updates, which have no session to ride. The gateway's pool events reach each
//! stream that asked for that kind of notification; rmcp sends the acknowledgment, tags each
//! notification with the subscription id and drops what a stream did not ask for.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rmcp::model::{
    PromptListChangedNotification, ResourceListChangedNotification, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification, SubscriptionFilter,
    ToolListChangedNotification,
};
use rmcp::service::{SubscriptionContext, SubscriptionSink};

/// Most streams open at once; the oldest stops getting notifications beyond it.
pub const MAX_LISTENERS: usize = 1024;

/// What changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Tools,
    Prompts,
    Resources,
    /// One resource's content (sent to streams that subscribed to its URI).
    Resource(String),
}

/// The open streams of one gateway (every replica holds its own clients' streams).
#[derive(Debug, Default)]
pub struct Listeners {
    open: Mutex<Vec<(u64, SubscriptionSink)>>,
    next: AtomicU64,
}

/// The notification kinds the gateway can deliver (rmcp narrows them to what a client asked
/// for and what the gateway's capabilities advertise).
#[must_use]
pub fn offered(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build();
    filter
        .resource_subscriptions
        .clone_from(&requested.resource_subscriptions);
    filter
}

impl Listeners {
    /// Keeps `context` registered until its client cancels the stream or goes away.
    pub async fn hold(self: &Arc<Self>, context: SubscriptionContext) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut open = self.open.lock();
            if open.len() >= MAX_LISTENERS {
                open.remove(0);
            }
            open.push((id, context.sink().clone()));
        }
        context.cancelled().await;
        self.open.lock().retain(|(other, _)| *other != id);
    }

    /// Sends `change` to every open stream that accepted it.
    pub async fn notify(&self, change: &Change) {
        let sinks: Vec<SubscriptionSink> =
            self.open.lock().iter().map(|(_, s)| s.clone()).collect();
        for sink in sinks {
            let accepted = sink.accepted();
            let notification = match change {
                Change::Tools if accepted.tools_list_changed == Some(true) => {
                    ServerNotification::ToolListChangedNotification(
                        ToolListChangedNotification::default(),
                    )
                }
                Change::Prompts if accepted.prompts_list_changed == Some(true) => {
                    ServerNotification::PromptListChangedNotification(
                        PromptListChangedNotification::default(),
                    )
                }
                Change::Resources if accepted.resources_list_changed == Some(true) => {
                    ServerNotification::ResourceListChangedNotification(
                        ResourceListChangedNotification::default(),
                    )
                }
                Change::Resource(uri)
                    if accepted
                        .resource_subscriptions
                        .as_ref()
                        .is_some_and(|uris| uris.contains(uri)) =>
                {
                    ServerNotification::ResourceUpdatedNotification(
                        ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(
                            uri.clone(),
                        )),
                    )
                }
                _ => continue,
            };
            let _ = sink.send(notification).await;
        }
    }
}

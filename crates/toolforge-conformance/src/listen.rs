//! `subscriptions/listen` streams (protocol 2026-07-28): the open ones, so that a list change
//! made by one request (`test_trigger_tool_change`, `test_trigger_prompt_change`) reaches every
//! stream that asked for that kind of notification. rmcp sends the acknowledgment, tags each
//! notification with the subscription id and drops what the stream did not ask for.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    PromptListChangedNotification, ServerNotification, SubscriptionFilter,
    ToolListChangedNotification,
};
use rmcp::service::{SubscriptionContext, SubscriptionSink};

/// At most this many streams are open at once; the oldest is dropped from fan-out beyond it.
pub(crate) const MAX_LISTENERS: usize = 64;

/// Which list changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListChange {
    Tools,
    Prompts,
}

/// The open streams, shared by every session and stateless request of one fixture.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listeners {
    open: Arc<Mutex<Vec<(u64, SubscriptionSink)>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

/// The notification kinds the fixture can deliver (the SDK narrows this further to what was
/// requested and what the capabilities advertise).
pub(crate) fn offered() -> SubscriptionFilter {
    SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .build()
}

impl Listeners {
    /// Keeps `context` registered until the client cancels the stream or disconnects.
    pub(crate) async fn hold(&self, context: SubscriptionContext) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            if open.len() >= MAX_LISTENERS {
                open.remove(0);
            }
            open.push((id, context.sink().clone()));
        }
        context.cancelled().await;
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(other, _)| *other != id);
    }

    /// Sends `change` to every open stream that accepted it; returns how many got it.
    pub(crate) async fn notify(&self, change: ListChange) -> usize {
        let sinks: Vec<SubscriptionSink> = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect();
        let mut delivered = 0;
        for sink in sinks {
            let wanted = match change {
                ListChange::Tools => sink.accepted().tools_list_changed == Some(true),
                ListChange::Prompts => sink.accepted().prompts_list_changed == Some(true),
            };
            if !wanted {
                continue;
            }
            let notification = match change {
                ListChange::Tools => ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification::default(),
                ),
                ListChange::Prompts => ServerNotification::PromptListChangedNotification(
                    PromptListChangedNotification::default(),
                ),
            };
            if sink.send(notification).await.is_ok() {
                delivered += 1;
            }
        }
        delivered
    }
}

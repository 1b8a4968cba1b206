//! How pool events reach sessions: `list_changed` to the sessions whose view changed, resource
//! updates to their subscribers, and every change to the 2026-07-28 `subscriptions/listen` streams.

use std::sync::Arc;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::{Peer, RoleServer};
use toolforge_mcp::PoolEvent;

use crate::listen::Change;
use crate::visible::{Prepared, RequestChannels};
use toolforge_select::presentation::Presentation;

use super::{Shared, ToolMode};

impl Shared {
    pub(super) fn live_sessions(&self) -> Vec<Peer<RoleServer>> {
        let mut sessions = self.sessions.lock();
        sessions.retain(|s| !s.peer.is_transport_closed());
        sessions.iter().map(|s| s.peer.clone()).collect()
    }

    /// The exposed tools a `tools/list` with `channels` answers from `presentation` over
    /// `prepared` (the names, descriptions and schemas a client sees; search mode lists the
    /// pinned ones beside its two meta-tools).
    pub(super) fn listed<'p>(
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
    pub(super) async fn notify_tools_changed(
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

    pub(super) async fn on_event(&self, event: PoolEvent) {
        match event {
            PoolEvent::ToolsChanged { .. } | PoolEvent::StateChanged { .. } => {
                let catalog = self.pool.shared_catalog();
                let fresh = self.take_built_ahead(&catalog);
                let (old_presentation, old_catalog) = {
                    let mut current = self.presentation.write();
                    std::mem::replace(&mut *current, (fresh.clone(), catalog.clone()))
                };
                let new_generation = !Arc::ptr_eq(&old_catalog, &catalog);
                if new_generation {
                    self.forget_earlier_generations();
                }
                if old_presentation.tools() != fresh.tools()
                    || old_catalog.tools().ne(catalog.tools())
                {
                    self.notify_tools_changed((&old_presentation, old_catalog), (&fresh, catalog))
                        .await;
                    self.listeners.notify(&Change::Tools).await;
                }
                drop(old_presentation);
                if new_generation {
                    // The earlier generation and the build of this one are gone.
                    self.memory_release.release_soon();
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
            PoolEvent::ResourceUpdated { server, uri } => {
                // A `ui://` copy rewritten for its server is known to clients by that name.
                let uri = self.exposed_uri(&server, &uri);
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
}

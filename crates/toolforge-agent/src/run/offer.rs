//! What a request is offered first, fixed once per request: the catalog it may see (visibility,
//! then policy), its presentation (the names the model sees for the whole run), the selection
//! of the current catalog, the broker's first offer for its message (pins included), and the
//! tools a search may still add (`offering` grows the offer as searches find them).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use toolforge_llm::embed::{Embedder, HashingEmbedder};
use toolforge_select::pins::Pin;
use toolforge_select::{
    Catalog, LeftOutReason, Limits, OfferRequest, Presentation, Selection, ToolId,
};

use super::Agent;
use super::prepared::Prepared;
use super::request::RunRequest;

impl Agent {
    /// The catalog this request may see.
    #[must_use]
    pub fn visible_catalog(&self, request: &RunRequest) -> Catalog {
        let catalog = self.backend.catalog();
        match &request.visibility {
            Some(v) => v(&catalog),
            None => catalog,
        }
    }

    /// Fixes what `request` is offered first (logged when the offer leaves tools out).
    pub(super) async fn prepare(&self, request: &RunRequest, session_id: &str) -> Prepared {
        let mut visible = self.visible_catalog(request);
        let principal = &request.principal;
        if self.governance.has_policy() {
            visible = visible.narrowed(
                |_, tool| {
                    self.governance
                        .permits_tool(principal, toolforge_policy::Action::List, tool)
                },
                |_| true,
            );
        }
        let presentation = Presentation::new(&visible, self.config.namespace);
        let available_tools: Vec<String> = presentation
            .tools()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        let exposed_of: HashMap<ToolId, usize> = presentation
            .tools()
            .iter()
            .enumerate()
            .flat_map(|(i, t)| t.members.iter().map(move |m| (m.clone(), i)))
            .collect();
        let selection = self.selection(self.backend.catalog()).await;
        let (query_vectors, prompt_vector) =
            self.request_vectors(&selection, &request.message).await;
        let visible_ids: HashSet<ToolId> = visible.tools().map(|t| t.id()).collect();
        let pins = self.pins_for(principal);
        let span = crate::spans::offer();
        let offer = span.in_scope(|| {
            selection.offer(&OfferRequest {
                message: &request.message,
                intent: None,
                visible: Some(&visible_ids),
                query_vectors: query_vectors.as_deref(),
                pins: &pins,
            })
        });
        crate::spans::record_offer(&span, offer.tools.len(), offer.left_out.len());
        drop(span);
        let rationale = offer.summary();
        if !offer.left_out.is_empty() {
            tracing::info!(
                session_id = %session_id,
                offered = offer.tools.len(),
                left_out = offer.left_out.len(),
                "{rationale}"
            );
        }
        let chosen_ids: HashSet<ToolId> = offer.ids().into_iter().collect();
        let first_offer: Vec<usize> = presentation
            .tools()
            .iter()
            .enumerate()
            .filter(|(_, t)| t.members.iter().any(|m| chosen_ids.contains(m)))
            .map(|(i, _)| i)
            .collect();
        // Deny still wins over discovery: a tool an exclude rule denies is never found.
        let excluded: HashSet<&ToolId> = offer
            .left_out
            .iter()
            .filter(|l| matches!(l.reason, LeftOutReason::ExcludedByRule { .. }))
            .map(|l| &l.tool)
            .collect();
        let mut prepared = Prepared {
            visible,
            presentation,
            exposed_of,
            selection,
            prompt_vector,
            chosen_ids,
            first_offer,
            searchable: Vec::new(),
            available_tools,
            rationale,
        };
        prepared.searchable = (0..prepared.presentation.tools().len())
            .filter(|&i| {
                let exposed = &prepared.presentation.tools()[i];
                !exposed.members.iter().any(|m| excluded.contains(m))
                    && prepared.representative(i).is_some_and(|tool| {
                        self.governance.permits_tool(
                            principal,
                            toolforge_policy::Action::Search,
                            tool,
                        )
                    })
            })
            .collect();
        prepared
    }

    /// The pins of an offer for `principal`: the operator's, then its learned ones (those
    /// the operator's do not already name).
    fn pins_for(&self, principal: &toolforge_policy::Principal) -> Vec<Pin> {
        let mut pins = self.config.pins.clone();
        for pin in self
            .learned
            .pins(principal.as_str(), self.config.learned_pins)
        {
            let toolforge_select::pins::PinPattern::Tool(id) = &pin.pattern else {
                continue;
            };
            if !pins.iter().any(|p| p.pattern.matches(id)) {
                pins.push(pin);
            }
        }
        pins
    }

    /// Why the request cannot run while servers are down, if it cannot: every server of the
    /// offered tools is down (or, with nothing offered, any server is, as the tools it needs
    /// may be theirs).
    pub(super) fn servers_down(&self, prepared: &Prepared) -> Option<String> {
        let down: HashSet<String> = self.backend.unavailable().into_iter().collect();
        let needed: HashSet<&str> = prepared
            .chosen_ids
            .iter()
            .map(|t| t.server.as_str())
            .collect();
        let blocked = if needed.is_empty() {
            !down.is_empty()
        } else {
            needed.iter().all(|s| down.contains(*s))
        };
        if !blocked {
            return None;
        }
        let needed = if needed.is_empty() {
            down.iter().map(String::as_str).collect()
        } else {
            needed
        };
        let mut names: Vec<&str> = needed.into_iter().collect();
        names.sort_unstable();
        Some(format!(
            "the MCP servers this request needs are down: {}",
            names.join(", ")
        ))
    }

    /// The embedder of `cosine-similarity`: the configured one, else the hashing embedder.
    fn route_embedder(&self) -> Arc<dyn Embedder> {
        self.embedder
            .clone()
            .unwrap_or_else(|| Arc::new(HashingEmbedder::default()))
    }

    /// The selection for `catalog`: the cached one while the catalog is unchanged, else built
    /// (and its tools embedded) once. An embedder that fails leaves ranking to BM25 and
    /// `cosine-similarity` abstaining, with a warning.
    async fn selection(&self, catalog: Catalog) -> Arc<Selection> {
        let mut cached = self.selection.lock().await;
        if let Some(s) = cached.as_ref()
            && s.catalog() == &catalog
        {
            return Arc::clone(s);
        }
        let limits = Limits {
            max_tools: self.config.max_tools,
            ..Limits::default()
        };
        let mut selection = Selection::new(catalog, self.config.rules.clone(), limits);
        if let Some(embedder) = &self.embedder {
            match embedder.embed(&selection.rank_texts()).await {
                Ok(vectors) => selection = selection.with_rank_vectors(vectors),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the tools failed: ranking with BM25 alone")
                }
            }
        }
        let (ids, texts): (Vec<ToolId>, Vec<String>) = selection.route_texts().into_iter().unzip();
        if !texts.is_empty() {
            match self.route_embedder().embed(&texts).await {
                Ok(vectors) => {
                    selection =
                        selection.with_route_vectors(ids.into_iter().zip(vectors).collect());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the overlap groups failed: cosine-similarity abstains")
                }
            }
        }
        let selection = Arc::new(selection);
        *cached = Some(Arc::clone(&selection));
        selection
    }

    /// Vectors of the request for ranking (`None` without a configured embedder) and for
    /// `cosine-similarity`.
    async fn request_vectors(
        &self,
        selection: &Selection,
        message: &str,
    ) -> (Option<Vec<Vec<f32>>>, Option<Vec<f32>>) {
        let texts = Selection::query_texts(message);
        let rank = match &self.embedder {
            Some(e) if selection.ranks_with_vectors() => match e.embed(&texts).await {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the request failed: ranking with BM25 alone");
                    None
                }
            },
            _ => None,
        };
        let route = match (&self.embedder, &rank) {
            (Some(_), Some(v)) => v.first().cloned(),
            _ => self
                .route_embedder()
                .embed(&texts[..1])
                .await
                .ok()
                .and_then(|mut v| v.pop()),
        };
        (rank, route)
    }
}

//! What a request is offered, fixed once per request: the catalog it may see (visibility, then
//! policy), the selection of the current catalog, the broker's offer for its message, and the
//! presentation of the offered subset the model sees on every turn.

use std::collections::HashSet;
use std::sync::Arc;

use toolforge_llm::ToolSpec;
use toolforge_llm::embed::{Embedder, HashingEmbedder};
use toolforge_select::{
    Catalog, Limits, OfferRequest, Presentation, Selection, ServerEntry, ToolId,
};

use super::Agent;
use super::request::RunRequest;

/// A request's offer and everything its turns route with.
pub(super) struct Prepared {
    /// The offered tools only, as catalog entries (calls are admitted against these).
    pub subset: Catalog,
    /// The offered tools as the model sees them.
    pub presentation: Presentation,
    pub specs: Vec<ToolSpec>,
    pub selection: Arc<Selection>,
    /// The message's vector for `cosine-similarity`, when an embedder gave one.
    pub prompt_vector: Option<Vec<f32>>,
    pub chosen_ids: HashSet<ToolId>,
    /// Every tool the request could see, by exposed name.
    pub available_tools: Vec<String>,
    /// Why those tools (the offer's summary).
    pub rationale: String,
}

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

    /// Fixes what `request` is offered (logged when the offer leaves tools out).
    pub(super) async fn prepare(&self, request: &RunRequest, session_id: &str) -> Prepared {
        let mut visible = self.visible_catalog(request);
        if self.governance.has_policy() {
            let principal = &request.principal;
            visible = visible.narrowed(
                |_, tool| {
                    self.governance
                        .permits_tool(principal, toolforge_policy::Action::List, tool)
                },
                |_| true,
            );
        }
        let full = Presentation::new(&visible, self.config.namespace);
        let available_tools: Vec<String> = full.tools().iter().map(|t| t.name.clone()).collect();
        let selection = self.selection(self.backend.catalog()).await;
        let (query_vectors, prompt_vector) =
            self.request_vectors(&selection, &request.message).await;
        let visible_ids: HashSet<ToolId> = visible.tools().map(|t| t.id()).collect();
        let span = crate::spans::offer();
        let offer = span.in_scope(|| {
            selection.offer(&OfferRequest {
                message: &request.message,
                intent: None,
                visible: Some(&visible_ids),
                query_vectors: query_vectors.as_deref(),
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
        let subset = Catalog {
            servers: visible
                .servers
                .iter()
                .map(|s| ServerEntry {
                    tools: s
                        .tools
                        .iter()
                        .filter(|t| chosen_ids.contains(&t.id()))
                        .cloned()
                        .collect(),
                    ..s.clone()
                })
                .collect(),
            overlaps: visible.overlaps.clone(),
        };
        let presentation = Presentation::new(&subset, self.config.namespace);
        let specs: Vec<ToolSpec> = presentation
            .tools()
            .iter()
            .map(|t| ToolSpec {
                name: presentation.model_name(t).to_owned(),
                description: t.description.clone(),
                input_schema: t.input_schema.to_value(),
            })
            .collect();
        Prepared {
            subset,
            presentation,
            specs,
            selection,
            prompt_vector,
            chosen_ids,
            available_tools,
            rationale,
        }
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

//! A request's first offer, as its turns route with it: what it may see, the names the model
//! sees, the selection, the first offer and what a search may still add (built by `offer`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use toolforge_select::{Catalog, Presentation, Selection, Tool, ToolId};

/// A request's first offer and everything its turns route with.
pub(super) struct Prepared {
    /// Every tool the request may see (visibility, then policy's `list`): calls are admitted
    /// against these, once offered.
    pub visible: Catalog,
    /// `visible` as the model sees it, for the whole run: a tool that joins the offer later has
    /// the name it would have had in the first offer, and no offered tool is renamed.
    pub presentation: Presentation,
    /// Each visible tool's exposed tool (its index in `presentation.tools()`).
    pub exposed_of: HashMap<ToolId, usize>,
    pub selection: Arc<Selection>,
    /// The message's vector for `cosine-similarity`, when an embedder gave one.
    pub prompt_vector: Option<Vec<f32>>,
    /// The first offer's tools.
    pub chosen_ids: HashSet<ToolId>,
    /// The first offer, as exposed tools in presentation order.
    pub first_offer: Vec<usize>,
    /// The exposed tools a search may find (the policy lets the principal `search` their first
    /// visible member, no exclude rule denies them), in presentation order.
    pub searchable: Vec<usize>,
    /// Every tool the request could see, by exposed name.
    pub available_tools: Vec<String>,
    /// Why those tools (the offer's summary).
    pub rationale: String,
}

impl Prepared {
    /// The tool a search ranks an exposed tool by: its first visible member.
    pub fn representative(&self, exposed: usize) -> Option<&Tool> {
        self.presentation.tools()[exposed]
            .members
            .iter()
            .find_map(|m| self.visible.get(m))
    }
}

//! The tools a run offers the model, call by call: the first offer (then the search tool, when
//! the first offer leaves tools out), then what searches find, appended in the order found. The
//! tools already offered never move or change, so every call's tool list starts with the one
//! the first call sent (and cached); at most `max_found` tools join in one run.
//!
//! With a provider that searches itself (Anthropic's tool search, opt-in), the tools the first
//! offer leaves out go as deferred definitions instead, and the agent offers no search tool:
//! what the provider's search loads becomes callable (the API expands it in the conversation,
//! so the tool list never changes at all).

use std::collections::HashMap;

use serde_json::{Value, json};
use toolforge_llm::ToolSpec;
use toolforge_select::search::{SearchArgs, SearchArgsError, ToolSearch};
use toolforge_select::{Resolved, Tool, ToolId};

use super::prepared::Prepared;
use crate::discovery::{
    Discovery, MAX_SEARCH_LIMIT, SEARCH_TOOL, SEARCH_TOOL_FALLBACK, search_tool_spec,
};

/// A run's offer as it grows.
pub(super) struct Offering {
    /// Exposed tools offered, in the order the model sees them.
    offered: Vec<usize>,
    /// By exposed tool.
    is_offered: Vec<bool>,
    specs: Vec<ToolSpec>,
    /// Specs of the first offer (the search tool included).
    stable: usize,
    search: Option<SearchTool>,
    /// The provider's search's tools (deferred definitions), as sent, and their exposed tools
    /// by model-facing name.
    deferred: Vec<ToolSpec>,
    deferred_of: HashMap<String, usize>,
}

/// The search tool of a run.
struct SearchTool {
    /// Its model-facing name.
    name: String,
    default_limit: usize,
    /// Tools searches may still add.
    room: usize,
    /// Built at the first search, over `Prepared::searchable`.
    index: Option<ToolSearch>,
}

/// What one search came to.
pub(super) struct Found {
    pub args: Result<SearchArgs, SearchArgsError>,
    /// The matches, best first, as exposed tools (none offered before the search).
    pub found: Vec<usize>,
    /// Those that joined the offer (the rest are past the run's bound).
    pub added: Vec<usize>,
}

impl Offering {
    /// The first offer of `prepared`, with the search tool when `discovery` has search on and
    /// the first offer leaves searchable tools out; or, when the model `searches_itself`, the
    /// tools left out as deferred definitions.
    pub fn new(prepared: &Prepared, discovery: &Discovery, searches_itself: bool) -> Self {
        let exposed = prepared.presentation.tools();
        let mut offering = Self {
            offered: Vec::new(),
            is_offered: vec![false; exposed.len()],
            specs: Vec::new(),
            stable: 0,
            search: None,
            deferred: Vec::new(),
            deferred_of: HashMap::new(),
        };
        for &i in &prepared.first_offer {
            offering.add(prepared, i);
        }
        let leaves_out = prepared.searchable.iter().any(|&i| !offering.is_offered[i]);
        if discovery.search && searches_itself && leaves_out {
            for &i in prepared
                .searchable
                .iter()
                .filter(|&&i| !offering.is_offered[i])
            {
                let spec = spec_of(prepared, i);
                offering.deferred_of.insert(spec.name.clone(), i);
                offering.deferred.push(spec);
            }
        } else if discovery.search && discovery.max_found > 0 && leaves_out {
            let taken = |name: &str| {
                exposed
                    .iter()
                    .any(|e| prepared.presentation.model_name(e) == name)
            };
            let name = if taken(SEARCH_TOOL) {
                SEARCH_TOOL_FALLBACK
            } else {
                SEARCH_TOOL
            };
            let default_limit = discovery.search_limit.clamp(1, MAX_SEARCH_LIMIT);
            offering.specs.push(search_tool_spec(name, default_limit));
            offering.search = Some(SearchTool {
                name: name.to_owned(),
                default_limit,
                room: discovery.max_found,
                index: None,
            });
        }
        offering.stable = offering.specs.len();
        offering
    }

    /// The tools the next model call is offered.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// How many of [`Offering::specs`] the first call sent.
    pub fn stable(&self) -> usize {
        self.stable
    }

    /// The deferred definitions the provider's own search may load (empty otherwise).
    pub fn deferred(&self) -> &[ToolSpec] {
        &self.deferred
    }

    /// The provider's search loaded `names`: those among the deferred tools become callable.
    /// Returns them as exposed tools (the found), and those not callable before (the added).
    pub fn loaded(&mut self, names: &[String]) -> (Vec<usize>, Vec<usize>) {
        let mut found = Vec::new();
        let mut added = Vec::new();
        for name in names {
            let Some(&i) = self.deferred_of.get(name) else {
                continue;
            };
            found.push(i);
            if !self.is_offered[i] {
                self.is_offered[i] = true;
                self.offered.push(i);
                added.push(i);
            }
        }
        (found, added)
    }

    /// True when `name` is this run's search tool.
    pub fn is_search(&self, name: &str) -> bool {
        self.search.as_ref().is_some_and(|s| s.name == name)
    }

    /// The offered tools' model-facing names, in order.
    pub fn names(&self) -> Vec<String> {
        self.specs.iter().map(|s| s.name.clone()).collect()
    }

    /// What a model-facing name resolves to, when it names an offered tool (`server__tool`
    /// of an offered tool's member included).
    pub fn resolve<'p>(&self, prepared: &'p Prepared, name: &str) -> Option<Resolved<'p>> {
        let resolved = prepared.presentation.resolve_model_name(name)?;
        let member: &ToolId = match &resolved {
            Resolved::Direct(id) => id,
            Resolved::Group(group) => group.members.first()?,
        };
        let &exposed = prepared.exposed_of.get(member)?;
        self.is_offered[exposed].then_some(resolved)
    }

    fn add(&mut self, prepared: &Prepared, exposed: usize) {
        if self.is_offered[exposed] {
            return;
        }
        self.is_offered[exposed] = true;
        self.offered.push(exposed);
        self.specs.push(spec_of(prepared, exposed));
    }

    /// Answers one call of the search tool with `input`: the matches among the searchable
    /// tools not offered yet join the offer (from the next model call on), while the run's
    /// bound has room.
    pub fn search(&mut self, prepared: &Prepared, input: &Value) -> Found {
        let Some(search) = self.search.as_mut() else {
            return Found {
                args: Err(SearchArgsError::NoQuery),
                found: Vec::new(),
                added: Vec::new(),
            };
        };
        let args = SearchArgs::parse(input, search.default_limit, MAX_SEARCH_LIMIT);
        let Ok(parsed) = &args else {
            return Found {
                args,
                found: Vec::new(),
                added: Vec::new(),
            };
        };
        let index = search.index.get_or_insert_with(|| {
            let tools: Vec<&Tool> = prepared
                .searchable
                .iter()
                .filter_map(|&i| prepared.representative(i))
                .collect();
            ToolSearch::new(&tools)
        });
        let is_offered = &self.is_offered;
        let found: Vec<usize> = index
            .search(&parsed.query, parsed.limit, |k| {
                !is_offered[prepared.searchable[k]]
            })
            .into_iter()
            .map(|hit| prepared.searchable[hit.index])
            .collect();
        let added: Vec<usize> = found.iter().copied().take(search.room).collect();
        search.room -= added.len();
        for &i in &added {
            self.add(prepared, i);
        }
        Found { args, found, added }
    }
}

/// An exposed tool as the model is sent it.
fn spec_of(prepared: &Prepared, exposed: usize) -> ToolSpec {
    let tool = &prepared.presentation.tools()[exposed];
    ToolSpec {
        name: prepared.presentation.model_name(tool).to_owned(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.to_value(),
    }
}

impl Found {
    /// The tool result the model reads, and whether it is an error.
    pub fn tool_result(&self, prepared: &Prepared) -> (String, bool) {
        let args = match &self.args {
            Ok(args) => args,
            Err(e) => return (format!("Error: {e}"), true),
        };
        let describe = |&i: &usize| {
            let tool = &prepared.presentation.tools()[i];
            json!({
                "name": prepared.presentation.model_name(tool),
                "description": super::result::short(&tool.description, 200),
            })
        };
        let added: Vec<Value> = self.added.iter().map(describe).collect();
        let note = if self.found.is_empty() {
            "No tool you have not been offered matches. Try other words, or go on with the tools you have."
        } else if self.added.len() < self.found.len() {
            "This run cannot add more tools: go on with the tools you have."
        } else {
            "These tools are yours from your next turn on: call them then."
        };
        let body = json!({"query": args.query, "added": added, "note": note});
        (body.to_string(), false)
    }

    /// The model-facing name of each exposed tool.
    pub fn names(prepared: &Prepared, exposed: &[usize]) -> Vec<String> {
        exposed
            .iter()
            .map(|&i| {
                let tool = &prepared.presentation.tools()[i];
                prepared.presentation.model_name(tool).to_owned()
            })
            .collect()
    }

    /// `server/tool` of each exposed tool (a group by its first member).
    pub fn ids(prepared: &Prepared, exposed: &[usize]) -> Vec<String> {
        exposed
            .iter()
            .filter_map(|&i| prepared.presentation.tools()[i].members.first())
            .map(ToString::to_string)
            .collect()
    }
}

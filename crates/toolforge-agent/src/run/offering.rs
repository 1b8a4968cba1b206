//! The tools a run offers the model, call by call: the first offer (then the search tool, when
//! the first offer leaves tools out), then what searches find, appended in the order found. The
//! tools already offered never move or change, so every call's tool list starts with the one
//! the first call sent (and cached); at most `max_found` tools join in one run.

use serde_json::{Value, json};
use toolforge_llm::ToolSpec;
use toolforge_select::search::{SearchArgs, SearchArgsError, ToolSearch};
use toolforge_select::{Resolved, Tool, ToolId};

use super::offer::Prepared;
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
    /// the first offer leaves searchable tools out.
    pub fn new(prepared: &Prepared, discovery: &Discovery) -> Self {
        let exposed = prepared.presentation.tools();
        let mut offering = Self {
            offered: Vec::new(),
            is_offered: vec![false; exposed.len()],
            specs: Vec::new(),
            stable: 0,
            search: None,
        };
        for &i in &prepared.first_offer {
            offering.add(prepared, i);
        }
        let leaves_out = prepared.searchable.iter().any(|&i| !offering.is_offered[i]);
        if discovery.search && discovery.max_found > 0 && leaves_out {
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
        let tool = &prepared.presentation.tools()[exposed];
        self.is_offered[exposed] = true;
        self.offered.push(exposed);
        self.specs.push(ToolSpec {
            name: prepared.presentation.model_name(tool).to_owned(),
            description: tool.description.clone(),
            input_schema: tool.input_schema.to_value(),
        });
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

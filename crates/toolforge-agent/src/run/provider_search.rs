//! Searches the provider ran itself (Anthropic's tool search tool over the deferred tools):
//! read from a model turn's answer, what they loaded made callable, each recorded like the
//! agent's own searches (a `tool_search` record with its share of the turn's cost, and a search
//! in the run's result).

use serde_json::Value;
use toolforge_llm::{Content, ModelResponse};

use super::calls::split_even;
use super::offering::Found;
use super::prepared::Prepared;
use super::result::SearchStep;
use super::{Agent, RunRequest, RunState};
use crate::trace::Searcher;

/// One search of the provider's, with what it loaded.
pub(super) struct ProviderSearch<'a> {
    name: &'a str,
    input: &'a Value,
    tool_names: &'a [String],
    error: Option<&'a str>,
}

/// The provider's searches in `response`, in order: each call with its result.
pub(super) fn provider_searches(response: &ModelResponse) -> Vec<ProviderSearch<'_>> {
    response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ProviderSearch { id, name, input } => Some((id, name, input)),
            _ => None,
        })
        .map(|(id, name, input)| {
            let result = response.content.iter().find_map(|c| match c {
                Content::ProviderSearchResult {
                    tool_use_id,
                    tool_names,
                    error,
                } if tool_use_id == id => Some((tool_names.as_slice(), error.as_deref())),
                _ => None,
            });
            let (tool_names, error) = result.unwrap_or((&[], Some("no result came back")));
            ProviderSearch {
                name,
                input,
                tool_names,
                error,
            }
        })
        .collect()
}

/// The query of a provider's search: its `query` (BM25) or `pattern`, else its input as JSON.
fn query_of(input: &Value) -> String {
    ["query", "pattern"]
        .iter()
        .find_map(|k| input.get(k).and_then(Value::as_str))
        .map_or_else(|| input.to_string(), str::to_owned)
}

impl Agent {
    /// Makes what `searches` loaded callable and records each: `shares` is how many records
    /// the turn's cost is split over, and `first` the share of the first search (the turn's
    /// tool calls take the ones before).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record_provider_searches(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        state: &mut RunState,
        step: u32,
        response: &ModelResponse,
        cost: f64,
        searches: &[ProviderSearch<'_>],
        (shares, first): (usize, usize),
    ) {
        for (k, search) in searches.iter().enumerate() {
            let (found, added) = state.offering.loaded(search.tool_names);
            let share = first + k;
            let step_record = SearchStep {
                step,
                by: Searcher::Provider,
                query: query_of(search.input),
                found: Found::names(prepared, &found),
                added: Found::names(prepared, &added),
                error: search.error.map(str::to_owned),
                tokens_in: split_even(response.usage.total_input(), shares, share),
                tokens_out: split_even(response.usage.output_tokens, shares, share),
                cost_usd: cost / shares.max(1) as f64,
            };
            let record = self.search_record(
                &state.session_id,
                request,
                search.name,
                search.input,
                &step_record,
                0,
                (Found::ids(prepared, &found), Found::ids(prepared, &added)),
            );
            if !self.trace(record).await {
                state.trace_failed = true;
            }
            state.result.searches.push(step_record);
        }
    }
}

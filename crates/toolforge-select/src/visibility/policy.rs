//! How the channels are merged: the operator lock and the search cut.

/// Default for [`Policy::search_limit`].
pub const DEFAULT_SEARCH_LIMIT: usize = 20;

/// How the channels are merged.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `false` (default): operator lock, request channels only narrow env and CLI.
    /// `true`: the seed's literal precedence, a request's enabled list replaces the operator's.
    pub allow_request_widening: bool,
    /// At most this many search matches are kept (at least one).
    pub search_limit: usize,
    /// A search match needs a BM25 score above this (and above 0).
    pub search_min_score: f32,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allow_request_widening: false,
            search_limit: DEFAULT_SEARCH_LIMIT,
            search_min_score: 0.0,
        }
    }
}

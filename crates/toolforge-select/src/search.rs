//! Tool search: the one matcher behind every `search_tools`, the gateway's search mode and
//! the agent's progressive discovery alike.
//!
//! The caller decides the candidates (the tools the asker may see and may search: visibility
//! and policy are the caller's, decided before a tool reaches this module, so a search can
//! never return a tool they hide); this module ranks them for a query.
//!
//! Ranking: a candidate whose name in words *is* the query ("get weather forecast" for
//! `get_weather_forecast` or `getWeatherForecast`, or with its server's name in front) comes
//! first, since that is what a model that knows what it needs asks for; then every candidate
//! sharing a term with the query, by BM25 over name, description, tags and parameter names
//! ([`crate::rank`]). Ties keep the candidates' order.

use serde_json::Value;

use crate::catalog::Tool;
use crate::rank::{Bm25Index, terms, tokenize};

/// One search hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Position of the tool in the candidates the index was built over.
    pub index: usize,
    /// Its BM25 score for the query.
    pub score: f32,
    /// The query is the tool's name in words.
    pub by_name: bool,
}

/// A search index over a fixed list of candidate tools.
#[derive(Debug, Clone)]
pub struct ToolSearch {
    index: Bm25Index,
    /// Each candidate's name as a sorted set of index terms, and the same with its server's.
    names: Vec<(Vec<String>, Vec<String>)>,
    /// Each candidate's name as a sorted set of all its words, stop words included: a name
    /// such as `Now` or `AboutMe` is nothing but stop words to the index.
    words: Vec<Vec<String>>,
}

/// The sorted, deduplicated index terms of `text`.
fn term_set(text: &str) -> Vec<String> {
    let mut set = terms(text);
    set.sort_unstable();
    set.dedup();
    set
}

/// The sorted, deduplicated words of `text`, stop words included, lower-cased.
fn word_set(text: &str) -> Vec<String> {
    let mut set = tokenize(text);
    set.sort_unstable();
    set.dedup();
    set
}

impl ToolSearch {
    /// Indexes `tools` (hits name their position in it).
    #[must_use]
    pub fn new(tools: &[&Tool]) -> Self {
        let names = tools
            .iter()
            .map(|t| {
                (
                    term_set(&t.name),
                    term_set(&format!("{} {}", t.server, t.name)),
                )
            })
            .collect();
        Self {
            index: Bm25Index::from_tools(tools),
            names,
            words: tools.iter().map(|t| word_set(&t.name)).collect(),
        }
    }

    /// Number of candidates.
    #[must_use]
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when there is no candidate.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The best `limit` candidates `keep` accepts for `query`, best first (module docs).
    #[must_use]
    pub fn search(&self, query: &str, limit: usize, keep: impl Fn(usize) -> bool) -> Vec<Hit> {
        let wanted = term_set(query);
        let said = word_set(query);
        if said.is_empty() || limit == 0 {
            return Vec::new();
        }
        let scores = self.index.scores(query);
        let mut hits: Vec<Hit> = scores
            .iter()
            .enumerate()
            .filter(|&(i, _)| keep(i))
            .filter_map(|(i, &score)| {
                let (name, qualified) = &self.names[i];
                let by_name = (!name.is_empty() && *name == wanted)
                    || (!wanted.is_empty() && *qualified == wanted)
                    || self.words[i] == said;
                (by_name || score > 0.0).then_some(Hit {
                    index: i,
                    score,
                    by_name,
                })
            })
            .collect();
        hits.sort_by(|a, b| {
            b.by_name
                .cmp(&a.by_name)
                .then(b.score.total_cmp(&a.score))
                .then(a.index.cmp(&b.index))
        });
        hits.truncate(limit);
        hits
    }
}

/// The arguments of a `search_tools` call: `{"query": string, "limit"?: integer}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchArgs {
    pub query: String,
    /// Within 1 and the surface's most.
    pub limit: usize,
}

/// Why `search_tools` arguments were refused (the caller returns it to the asker as a tool
/// error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchArgsError {
    #[error("search_tools takes an object: {{\"query\": \"what you want to do\", \"limit\": n}}")]
    NotAnObject,
    #[error("search_tools needs a `query`: what you want to do, in plain words")]
    NoQuery,
    #[error("search_tools: `limit` must be a whole number from 1 to {max}")]
    Limit { max: usize },
}

impl SearchArgs {
    /// Reads a call's arguments: a blank or missing query is refused, `limit` defaults to
    /// `default` and is held within 1..=`max`; a `limit` that is not a whole number is refused.
    ///
    /// # Errors
    /// [`SearchArgsError`] says what is wrong.
    pub fn parse(arguments: &Value, default: usize, max: usize) -> Result<Self, SearchArgsError> {
        let max = max.max(1);
        let Value::Object(args) = arguments else {
            return Err(SearchArgsError::NotAnObject);
        };
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or(SearchArgsError::NoQuery)?;
        let limit = match args.get("limit") {
            None | Some(Value::Null) => default,
            Some(v) => {
                let n = v
                    .as_u64()
                    .or_else(|| {
                        v.as_f64()
                            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                            .map(|f| f as u64)
                    })
                    .ok_or(SearchArgsError::Limit { max })?;
                usize::try_from(n).unwrap_or(max)
            }
        };
        Ok(Self {
            query: query.to_owned(),
            limit: limit.clamp(1, max),
        })
    }
}

/// `snake_case`, `kebab-case` and `camelCase` names in plain words, lower-cased:
/// `getWeatherForecast` -> "get weather forecast".
#[must_use]
pub fn name_in_words(name: &str) -> String {
    crate::rank::tokenize(name).join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(server: &str, name: &str, description: &str) -> Tool {
        let mut def = serde_json::Map::new();
        def.insert("name".into(), json!(name));
        def.insert("description".into(), json!(description));
        def.insert("inputSchema".into(), json!({"type": "object"}));
        Tool::from_mcp(server, def, &[]).expect("tool")
    }

    fn names(tools: &[Tool], hits: &[Hit]) -> Vec<String> {
        hits.iter().map(|h| tools[h.index].name.clone()).collect()
    }

    #[test]
    fn the_name_in_words_comes_first_then_bm25() {
        let tools = vec![
            tool(
                "w",
                "forecast_summary",
                "Weather forecast for a city, weather and more weather.",
            ),
            tool("w", "getWeatherForecast", "Returns data."),
            tool("w", "get_alerts", "Weather alerts."),
        ];
        let refs: Vec<&Tool> = tools.iter().collect();
        let search = ToolSearch::new(&refs);
        let hits = search.search("get weather forecast", 10, |_| true);
        assert_eq!(
            names(&tools, &hits),
            ["getWeatherForecast", "forecast_summary", "get_alerts"]
        );
        assert!(hits[0].by_name && !hits[1].by_name);
        // With the server in front, and as the literal name.
        let hits = search.search("w get weather forecast", 1, |_| true);
        assert_eq!(names(&tools, &hits), ["getWeatherForecast"]);
        let hits = search.search("getWeatherForecast", 1, |_| true);
        assert_eq!(names(&tools, &hits), ["getWeatherForecast"]);
    }

    #[test]
    fn a_name_of_stop_words_is_found_by_its_words() {
        // "now" and "about me" are stop words only: the index has no term for them.
        let tools = [
            tool("m", "Now", "Tells the current time."),
            tool("m", "AboutMe", "Builds a profile page."),
            tool("m", "clock", "Time now and later."),
        ];
        let refs: Vec<&Tool> = tools.iter().collect();
        let search = ToolSearch::new(&refs);
        assert_eq!(names(&tools, &search.search("now", 3, |_| true)), ["Now"]);
        assert_eq!(
            names(&tools, &search.search("about me", 3, |_| true)),
            ["AboutMe"]
        );
    }

    #[test]
    fn only_kept_candidates_with_a_shared_term_are_returned_up_to_the_limit() {
        let tools = [
            tool("a", "read_file", "Read a file."),
            tool("b", "read_file", "Read a file from a repository."),
            tool("a", "send_mail", "Send an email."),
        ];
        let refs: Vec<&Tool> = tools.iter().collect();
        let search = ToolSearch::new(&refs);
        let hits = search.search("read file", 10, |i| i != 0);
        assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [1]);
        assert_eq!(search.search("read file", 1, |_| true).len(), 1);
        assert!(search.search("zzz", 10, |_| true).is_empty());
        assert!(search.search("the of", 10, |_| true).is_empty());
        assert!(search.search(" ", 10, |_| true).is_empty());
        assert!(search.search("read", 0, |_| true).is_empty());
    }

    #[test]
    fn arguments_table() {
        type Want = Result<(&'static str, usize), SearchArgsError>;
        let cases: &[(Value, Want)] = &[
            (json!({"query": " read a file "}), Ok(("read a file", 5))),
            (json!({"query": "x", "limit": 3}), Ok(("x", 3))),
            (json!({"query": "x", "limit": 3.0}), Ok(("x", 3))),
            (json!({"query": "x", "limit": 0}), Ok(("x", 1))),
            (json!({"query": "x", "limit": 999}), Ok(("x", 10))),
            (json!({"query": "x", "limit": null}), Ok(("x", 5))),
            (
                json!({"query": "x", "limit": "3"}),
                Err(SearchArgsError::Limit { max: 10 }),
            ),
            (
                json!({"query": "x", "limit": -1}),
                Err(SearchArgsError::Limit { max: 10 }),
            ),
            (
                json!({"query": "x", "limit": 2.5}),
                Err(SearchArgsError::Limit { max: 10 }),
            ),
            (json!({"query": "  "}), Err(SearchArgsError::NoQuery)),
            (json!({"limit": 2}), Err(SearchArgsError::NoQuery)),
            (json!({"query": 5}), Err(SearchArgsError::NoQuery)),
            (json!("read"), Err(SearchArgsError::NotAnObject)),
        ];
        for (args, want) in cases {
            let got = SearchArgs::parse(args, 5, 10).map(|a| (a.query, a.limit));
            let want = want.clone().map(|(q, l)| (q.to_owned(), l));
            assert_eq!(got, want, "{args}");
        }
    }

    #[test]
    fn names_in_words() {
        assert_eq!(name_in_words("getWeatherForecast"), "get weather forecast");
        assert_eq!(name_in_words("get-douyin_trending"), "get douyin trending");
        assert_eq!(name_in_words("ResearchHelper"), "research helper");
    }
}

//! `GET /ui/api/trace/stream`: the agent's trace records as server-sent events. It opens with
//! the most recent records (up to `toolforge_agent::trace::RECENT_CAPACITY`, the ones the
//! trace sink keeps, oldest first; one `record` event each), then `ready`, then one `record`
//! per trace record as it is emitted (`lagged` when this stream fell behind and skipped some).
//! No record comes twice and none emitted in between is missed. Optional exact-match filters,
//! applied to both: `session`, `server`, `tool`, `rule` (the selection rule).
//!
//! Bounded: at most [`MAX_LIVE_STREAMS`] streams at once (more get 503); a stream that cannot
//! keep up skips records rather than slow the agent (the trace sink's broadcast); every stream
//! ends on shutdown.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt as _};
use serde_json::json;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use toolforge_agent::TraceRecord;

use super::Console;
use super::streams::MAX_LIVE_STREAMS;
use crate::error::ApiError;
use crate::visible::query_pairs;

/// Longest filter value, in characters.
pub const MAX_FILTER_CHARS: usize = 256;

/// Which records a stream sends: each filter given must equal the record's field.
#[derive(Debug, Default, PartialEq)]
struct Filter {
    session: Option<String>,
    server: Option<String>,
    tool: Option<String>,
    rule: Option<String>,
    /// Set for anyone but an operator: only their own principal's records.
    principal: Option<String>,
}

impl Filter {
    fn parse(pairs: &[(String, String)]) -> Result<Self, String> {
        let mut filter = Self::default();
        for (key, value) in pairs {
            let value = value.trim();
            if value.chars().count() > MAX_FILTER_CHARS {
                return Err(format!(
                    "the {key} filter is longer than {MAX_FILTER_CHARS} characters"
                ));
            }
            let slot = match key.as_str() {
                "session" => &mut filter.session,
                "server" => &mut filter.server,
                "tool" => &mut filter.tool,
                "rule" => &mut filter.rule,
                other => {
                    return Err(format!(
                        "unknown filter {other:?}; use session, server, tool or rule"
                    ));
                }
            };
            *slot = (!value.is_empty()).then(|| value.to_owned());
        }
        Ok(filter)
    }

    fn keeps(&self, r: &TraceRecord) -> bool {
        let is = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        is(&self.session, Some(&r.session_id))
            && is(&self.principal, Some(&r.principal))
            && is(&self.server, r.server.as_deref())
            && is(&self.tool, Some(&r.tool))
            && is(&self.rule, r.selection_rule.as_deref())
    }
}

/// The event one broadcast item becomes, if this stream sends it.
fn event(
    item: Result<Arc<TraceRecord>, BroadcastStreamRecvError>,
    filter: &Filter,
) -> Option<Event> {
    match item {
        Ok(record) => filter.keeps(&record).then(|| {
            Event::default()
                .event("record")
                .data(serde_json::to_string(&*record).unwrap_or_default())
        }),
        Err(BroadcastStreamRecvError::Lagged(skipped)) => Some(
            Event::default()
                .event("lagged")
                .data(json!({"skipped": skipped}).to_string()),
        ),
    }
}

pub(super) async fn stream(
    State(console): State<Console>,
    uri: Uri,
    extensions: axum::http::Extensions,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Some(agent) = &console.agent else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "there is no live trace here: the agent is not served (run toolforge serve)",
        ));
    };
    let mut filter =
        Filter::parse(&query_pairs(&uri)).map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m))?;
    let viewer = console.viewer(&extensions);
    if !viewer.operator {
        filter.principal = Some(viewer.principal.as_str().to_owned());
    }
    let Some(slot) = console.live_streams.enter() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_LIVE_STREAMS} live trace streams are open; close one and retry"),
        ));
    };
    // The kept records and the subscription in one step: each record comes once, and every
    // record emitted after the page sees `ready` is delivered.
    let (recent, records) = agent.traces().subscribe_with_recent();
    let earlier: Vec<Event> = recent
        .into_iter()
        .filter_map(|record| event(Ok(record), &filter))
        .collect();
    let records = BroadcastStream::new(records);
    let ready = futures::stream::once(async { Event::default().event("ready").data("{}") });
    let events = futures::stream::iter(earlier)
        .chain(ready)
        .chain(records.filter_map(move |item| {
            let sent = event(item, &filter);
            async move { sent }
        }))
        .take_until(console.cancel.clone().cancelled_owned())
        .map(move |e| {
            let _open = &slot;
            Ok(e)
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(session: &str, server: Option<&str>, tool: &str, rule: Option<&str>) -> TraceRecord {
        TraceRecord {
            schema_version: "1".into(),
            timestamp: "2026-05-14T09:15:04.382Z".into(),
            server: server.map(str::to_owned),
            tool: tool.into(),
            latency_ms: 1.0,
            success: true,
            executed: true,
            tokens_in: 1,
            tokens_out: 1,
            selection_rule: rule.map(str::to_owned),
            ..TraceRecord::new(toolforge_agent::RecordKind::ToolCall, session, 1)
        }
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn filters_match_exactly_and_empty_ones_match_all() {
        let r = record("s1", Some("toolkit"), "sql_query", Some("single-candidate"));
        let answer = record("s1", None, "", None);
        let all = Filter::parse(&pairs(&[("session", ""), ("tool", " ")])).unwrap();
        assert!(all.keeps(&r) && all.keeps(&answer));
        let by_session = Filter::parse(&pairs(&[("session", "s1")])).unwrap();
        assert!(by_session.keeps(&r) && by_session.keeps(&answer));
        assert!(
            !Filter::parse(&pairs(&[("session", "s")]))
                .unwrap()
                .keeps(&r)
        );
        let by_server = Filter::parse(&pairs(&[("server", "toolkit")])).unwrap();
        assert!(by_server.keeps(&r));
        assert!(!by_server.keeps(&answer), "a model call has no server");
        let by_rule = Filter::parse(&pairs(&[("rule", "priority-order")])).unwrap();
        assert!(!by_rule.keeps(&r));
        let both = Filter::parse(&pairs(&[
            ("tool", "sql_query"),
            ("rule", "single-candidate"),
        ]));
        assert!(both.unwrap().keeps(&r));
    }

    /// The regression: the stream sent every principal's calls to anyone who opened it.
    #[test]
    fn a_principal_filter_keeps_only_that_principals_records() {
        let mut mine = record("s1", Some("toolkit"), "sql_query", None);
        mine.principal = "alice".into();
        let mut theirs = mine.clone();
        theirs.principal = "bob".into();
        let filter = Filter {
            principal: Some("alice".into()),
            ..Filter::default()
        };
        assert!(filter.keeps(&mine));
        assert!(!filter.keeps(&theirs));
    }

    #[test]
    fn bad_filters_are_refused_with_a_reason() {
        let err = Filter::parse(&pairs(&[("colour", "red")])).unwrap_err();
        assert!(err.contains("session, server, tool or rule"), "{err}");
        let long = "x".repeat(MAX_FILTER_CHARS + 1);
        let err = Filter::parse(&pairs(&[("tool", &long)])).unwrap_err();
        assert!(err.contains("longer than"), "{err}");
    }

    #[test]
    fn a_lagging_stream_is_told_how_many_records_it_skipped() {
        let filter = Filter::default();
        assert!(event(Err(BroadcastStreamRecvError::Lagged(7)), &filter).is_some());
        let by_tool = Filter::parse(&pairs(&[("tool", "other")])).unwrap();
        let r = Arc::new(record("s", Some("a"), "t", None));
        assert!(event(Ok(r.clone()), &by_tool).is_none());
        assert!(event(Ok(r), &filter).is_some());
    }
}

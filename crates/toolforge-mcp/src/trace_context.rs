//! W3C Trace Context across MCP: the `backend call` span of each attempt, its `traceparent`
//! (and `tracestate`) put into the outgoing call's `_meta` (SEP-414), and an incoming
//! `traceparent` (an HTTP header, or a client's `_meta`) continued by a span.
//!
//! Spans are `tracing` spans under [`SPAN_TARGET`]; the binary turns exactly those into
//! OpenTelemetry spans when an exporter is configured, and disables them otherwise, so with no
//! exporter a span here is a disabled one (no allocation, nothing recorded) and no `_meta` is
//! written.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use rmcp::model::RequestMetaObject;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The `tracing` target of every span toolforge exports (and of no event).
pub const SPAN_TARGET: &str = "toolforge_otel";

/// Longest `tracestate` carried on (W3C allows 32 members of at most 256 bytes each).
const MAX_TRACESTATE: usize = 512;

/// The span context a W3C `traceparent` names, with `tracestate` when given and valid; `None`
/// for anything malformed (which then starts a new trace, as the W3C specification asks).
#[must_use]
pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex(version, 2) || version == "ff" || !hex(trace_id, 32) || !hex(span_id, 16) {
        return None;
    }
    // Version 00 has exactly four fields; a later version may append more.
    if !hex(flags, 2) || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()? & TraceFlags::SAMPLED.to_u8();
    let state = tracestate
        .filter(|s| s.len() <= MAX_TRACESTATE)
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        state,
    ))
}

/// The `traceparent` header value of `cx`.
#[must_use]
pub fn format(cx: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        cx.trace_id(),
        cx.span_id(),
        cx.trace_flags().to_u8()
    )
}

/// Makes `span` (not yet entered) continue the trace `traceparent` names; nothing when it is
/// malformed or the span is disabled. True when the parent was set.
pub fn continue_from(span: &Span, traceparent: &str, tracestate: Option<&str>) -> bool {
    if span.is_disabled() {
        return false;
    }
    let Some(remote) = parse(traceparent, tracestate) else {
        return false;
    };
    let parent = opentelemetry::Context::new().with_remote_span_context(remote);
    span.set_parent(parent).is_ok()
}

/// The span context `span` has in the exported trace (invalid when it is not exported).
#[must_use]
pub fn span_context(span: &Span) -> SpanContext {
    if span.is_disabled() {
        return SpanContext::empty_context();
    }
    span.context().span().span_context().clone()
}

/// Puts `span`'s `traceparent` (and `tracestate`, or removes one from elsewhere) into `meta`,
/// keeping every other key; nothing when `span` is not exported.
pub fn inject(span: &Span, meta: &mut Option<RequestMetaObject>) {
    let cx = span_context(span);
    if !cx.is_valid() {
        return;
    }
    let meta = meta.get_or_insert_with(RequestMetaObject::default);
    meta.set_traceparent(format(&cx));
    let state = cx.trace_state().header();
    if state.is_empty() {
        meta.remove("tracestate");
    } else {
        meta.set_tracestate(state);
    }
}

/// The span of one attempt of a `tools/call` to `server`'s `tool`; its outcome is recorded by
/// [`record_outcome`].
#[must_use]
pub fn backend_call_span(server: &str, tool: &str, attempt: u32) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "backend call",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = "tools/call",
        mcp.tool.name = tool,
        toolforge.server = server,
        toolforge.attempt = i64::from(attempt),
        toolforge.outcome = tracing::field::Empty,
    )
}

/// Records a backend call's outcome (`ok`, `tool_error`, or the failure's kind) on its span.
pub fn record_outcome(span: &Span, outcome: &'static str) {
    span.record("toolforge.outcome", outcome);
    if outcome != "ok" && outcome != "tool_error" {
        span.record("otel.status_code", "error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_w3c_traceparent_is_parsed_and_written_back_the_same() {
        let cx = parse(PARENT, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).expect("valid");
        assert_eq!(
            cx.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(cx.span_id().to_string(), "b7ad6b7169203331");
        assert!(cx.is_sampled() && cx.is_remote());
        assert_eq!(
            cx.trace_state().header(),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
        );
        assert_eq!(format(&cx), PARENT);
        // Unknown flags are dropped; a later version may carry more fields.
        let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03-extra";
        assert_eq!(parse(later, None).map(|c| c.trace_flags().to_u8()), Some(1));
        // A malformed tracestate is dropped, not the parent.
        assert!(
            parse(PARENT, Some("not a list")).is_some_and(|c| c.trace_state().header().is_empty())
        );
    }

    #[test]
    fn malformed_traceparents_start_a_new_trace() {
        for bad in [
            "",
            "00",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
        ] {
            assert!(parse(bad, None).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_backend_call_carries_its_own_traceparent_and_keeps_the_other_meta_keys() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let span = backend_call_span("s", "t", 1);
            assert!(continue_from(&span, PARENT, Some("vendor=v")));
            let meta: RequestMetaObject = serde_json::from_value(serde_json::json!({
                "traceparent": "00-11111111111111111111111111111111-2222222222222222-01",
                "tracestate": "stale=1",
                "progressToken": 7,
                "example/key": "kept"
            }))
            .expect("a request _meta");
            let mut meta = Some(meta);
            inject(&span, &mut meta);
            let meta = meta.expect("written");
            let ours = span_context(&span);
            assert_eq!(
                ours.trace_id().to_string(),
                "0af7651916cd43dd8448eb211c80319c"
            );
            assert_eq!(meta.get_traceparent(), Some(format(&ours).as_str()));
            assert_ne!(ours.span_id().to_string(), "b7ad6b7169203331");
            assert_eq!(meta.get_tracestate(), Some("vendor=v"));
            assert_eq!(meta["progressToken"], 7);
            assert_eq!(meta["example/key"], "kept");
        });
    }

    #[test]
    fn without_an_exporter_nothing_is_written_into_meta() {
        // No subscriber here: the span is disabled, so there is no trace to carry.
        let span = backend_call_span("s", "t", 1);
        let mut meta = None;
        inject(&span, &mut meta);
        assert!(meta.is_none());
        assert!(!continue_from(&span, PARENT, None));
    }
}

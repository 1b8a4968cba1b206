//! `OTEL_TRACES_EXPORTER=stdout` (or `console`): each finished span as one JSON object on its
//! own line, on stderr (stdout carries command results and the stdio MCP transport).

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::Value as OtelValue;
use opentelemetry::trace::{SpanId, Status};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::{Map, Value, json};

/// Writes spans as JSON lines to stderr.
#[derive(Debug, Default)]
pub struct JsonLinesSpans {
    is_shutdown: AtomicBool,
}

impl SpanExporter for JsonLinesSpans {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if self.is_shutdown.load(Ordering::SeqCst) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let mut out = Vec::new();
        for span in &batch {
            out.extend_from_slice(line(span).to_string().as_bytes());
            out.push(b'\n');
        }
        std::io::stderr()
            .lock()
            .write_all(&out)
            .map_err(|e| OTelSdkError::InternalFailure(format!("cannot write to stderr: {e}")))
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.is_shutdown.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// `name`, `trace_id`, `span_id`, `parent_span_id` (absent for a root), `kind`, `start`,
/// `duration_ms`, `status` (`unset`, `ok`, `error`) and `attributes`.
fn line(span: &SpanData) -> Value {
    let mut attributes = Map::new();
    for kv in &span.attributes {
        let value = match &kv.value {
            OtelValue::Bool(b) => json!(b),
            OtelValue::I64(i) => json!(i),
            OtelValue::F64(f) => json!(f),
            other => json!(other.as_str()),
        };
        attributes.insert(kv.key.as_str().to_owned(), value);
    }
    let since_epoch = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let duration_ms = span
        .end_time
        .duration_since(span.start_time)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let mut line = Map::new();
    line.insert("name".into(), json!(span.name));
    line.insert(
        "trace_id".into(),
        json!(span.span_context.trace_id().to_string()),
    );
    line.insert(
        "span_id".into(),
        json!(span.span_context.span_id().to_string()),
    );
    if span.parent_span_id != SpanId::INVALID {
        line.insert(
            "parent_span_id".into(),
            json!(span.parent_span_id.to_string()),
        );
    }
    line.insert(
        "kind".into(),
        json!(format!("{:?}", span.span_kind).to_ascii_lowercase()),
    );
    line.insert("start".into(), json!(since_epoch(span.start_time)));
    line.insert("duration_ms".into(), json!(duration_ms));
    let status = match span.status {
        Status::Unset => "unset",
        Status::Ok => "ok",
        Status::Error { .. } => "error",
    };
    line.insert("status".into(), json!(status));
    line.insert("attributes".into(), Value::Object(attributes));
    Value::Object(line)
}

#[cfg(test)]
mod tests {
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{SpanContext, SpanKind, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    #[test]
    fn a_span_is_one_json_object_with_its_ids_timing_and_attributes() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let span = SpanData {
            span_context: SpanContext::new(
                TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
                SpanId::from_hex("00f067aa0ba902b7").unwrap(),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: "backend call".into(),
            start_time: start,
            end_time: start + Duration::from_millis(12),
            attributes: vec![
                KeyValue::new("toolforge.server", "meta"),
                KeyValue::new("toolforge.attempt", 1_i64),
            ],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::error(""),
            instrumentation_scope: opentelemetry::InstrumentationScope::builder("t").build(),
        };
        let line = line(&span);
        assert_eq!(line["name"], "backend call");
        assert_eq!(line["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(line["span_id"], "00f067aa0ba902b7");
        assert!(line.get("parent_span_id").is_none(), "a root has none");
        assert_eq!(line["kind"], "client");
        assert_eq!(line["status"], "error");
        assert!((line["duration_ms"].as_f64().unwrap() - 12.0).abs() < 1e-6);
        assert_eq!(line["attributes"]["toolforge.server"], "meta");
        assert_eq!(line["attributes"]["toolforge.attempt"], 1);
    }
}

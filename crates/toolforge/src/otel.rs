//! OpenTelemetry traces: toolforge's own `tracing` spans (target
//! [`toolforge_mcp::trace_context::SPAN_TARGET`]: `request`, `tools/call`, `selection`,
//! `agent run`, `backend call`, `model call`) exported over OTLP/HTTP with protobuf bodies, or
//! written to stderr as JSON lines (`crate::otel_stderr`).
//!
//! [`telemetry::init_tracing`](crate::telemetry::init_tracing) reads the environment into
//! [`TraceSettings`] and, when an exporter is set, adds [`Traces::layer`] to the subscriber;
//! with none (the default) the spans stay disabled and cost nothing. The SDK's batch processor
//! queues finished spans (bounded: spans past `max_queue_size` are dropped and counted by the
//! SDK) and exports them from its own thread; `main` calls [`Traces::shutdown`] at exit, which
//! sends what is queued (a drained `serve`, a finished `chat`).

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use toolforge_mcp::trace_context::SPAN_TARGET;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;

/// The OTLP/HTTP base endpoint when none is given (the OTel default for `http/protobuf`).
const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318";

/// How long the final export at exit may take.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Where traces go (`OTEL_TRACES_EXPORTER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TracesExporter {
    /// No traces (the default): no layer is installed.
    Off,
    /// One JSON object per span and line, on stderr (`stdout` or `console`).
    Stdout,
    /// OTLP over HTTP with protobuf bodies, to this URL (the full `/v1/traces` URL).
    Otlp { url: String },
}

impl TracesExporter {
    /// From `OTEL_TRACES_EXPORTER` ("none"/"" → Off, "stdout"/"console" → Stdout, "otlp" →
    /// Otlp), with the endpoint from
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or else `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (a base URL: `/v1/traces` is appended), default `http://localhost:4318/v1/traces`.
    /// Matching ignores ASCII case and surrounding whitespace; empty values count as unset.
    pub fn parse(
        value: Option<&str>,
        traces_endpoint: Option<&str>,
        base_endpoint: Option<&str>,
    ) -> Result<Self, String> {
        let value = value.unwrap_or("").trim();
        fn given(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        match value.to_ascii_lowercase().as_str() {
            "" | "none" => Ok(Self::Off),
            "stdout" | "console" => Ok(Self::Stdout),
            "otlp" => {
                let url = match (given(traces_endpoint), given(base_endpoint)) {
                    (Some(url), _) => url.to_owned(),
                    (None, base) => format!(
                        "{}/v1/traces",
                        base.unwrap_or(DEFAULT_OTLP_ENDPOINT).trim_end_matches('/')
                    ),
                };
                Ok(Self::Otlp { url })
            }
            _ => Err(format!(
                "OTEL_TRACES_EXPORTER={value:?} is not supported; accepted values: \"none\" (or empty), \"stdout\", \"console\", \"otlp\""
            )),
        }
    }
}

/// Everything [`Traces::start`] needs, read from the environment by `config`.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    pub exporter: TracesExporter,
    /// `OTEL_SERVICE_NAME` (default `toolforge`).
    pub service_name: Option<String>,
    /// `OTEL_BSP_SCHEDULE_DELAY`: how long finished spans wait to be batched (SDK default 5 s).
    pub schedule_delay: Option<Duration>,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: finished spans held for export at most (SDK default 2048).
    pub max_queue_size: Option<usize>,
}

/// The tracer provider behind the subscriber's OpenTelemetry layer.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// None when the exporter is Off. A rustls crypto provider must already be installed (the
    /// exporter's HTTP client is built here), and no async runtime may be running on this
    /// thread (the client is reqwest's blocking one).
    pub fn start(settings: TraceSettings) -> Result<Option<Traces>, String> {
        let mut batch = BatchConfigBuilder::default();
        if let Some(delay) = settings.schedule_delay {
            batch = batch.with_scheduled_delay(delay);
        }
        if let Some(size) = settings.max_queue_size {
            batch = batch.with_max_queue_size(size.max(1));
        }
        let batch = batch.build();
        let processor = match settings.exporter {
            TracesExporter::Off => return Ok(None),
            TracesExporter::Stdout => {
                BatchSpanProcessor::builder(crate::otel_stderr::JsonLinesSpans::default())
                    .with_batch_config(batch)
                    .build()
            }
            TracesExporter::Otlp { url } => {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url.clone())
                    .build()
                    .map_err(|e| format!("cannot set up the OTLP trace exporter for {url}: {e}"))?;
                BatchSpanProcessor::builder(exporter)
                    .with_batch_config(batch)
                    .build()
            }
        };
        let service = settings
            .service_name
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "toolforge".to_owned());
        let resource = Resource::builder_empty()
            .with_service_name(service)
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .with_detector(Box::new(TelemetryResourceDetector))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        Ok(Some(Traces { provider }))
    }

    /// The subscriber layer that exports toolforge's spans, and nothing else: no events (log
    /// lines are free text), no other crate's spans.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let tracer = self.provider.tracer("toolforge");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(FilterFn::new(|meta| meta.target() == SPAN_TARGET))
    }

    /// Exports what is queued and stops (blocking, at most a few seconds). Call it outside the
    /// async runtime.
    pub fn shutdown(&self) {
        match self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            Ok(()) | Err(OTelSdkError::AlreadyShutdown) => {}
            Err(err) => eprintln!("warning: the final export of traces failed: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporter_and_its_endpoint_follow_the_otel_variables() {
        let otlp = |url: &str| TracesExporter::Otlp {
            url: url.to_owned(),
        };
        assert_eq!(
            TracesExporter::parse(None, None, None),
            Ok(TracesExporter::Off)
        );
        assert_eq!(
            TracesExporter::parse(Some("Console"), None, None),
            Ok(TracesExporter::Stdout)
        );
        assert_eq!(
            TracesExporter::parse(Some(" None "), Some("http://x"), None),
            Ok(TracesExporter::Off)
        );
        assert_eq!(
            TracesExporter::parse(Some("otlp"), None, None),
            Ok(otlp("http://localhost:4318/v1/traces"))
        );
        assert_eq!(
            TracesExporter::parse(Some("OTLP"), None, Some("http://collector:4318/")),
            Ok(otlp("http://collector:4318/v1/traces"))
        );
        // The per-signal endpoint is used as it is, and wins.
        assert_eq!(
            TracesExporter::parse(
                Some("otlp"),
                Some("http://jaeger:4318/custom"),
                Some("http://collector:4318")
            ),
            Ok(otlp("http://jaeger:4318/custom"))
        );
        assert_eq!(
            TracesExporter::parse(Some("otlp"), Some(" "), None),
            Ok(otlp("http://localhost:4318/v1/traces"))
        );
        let err = TracesExporter::parse(Some("zipkin"), None, None).expect_err("unsupported");
        assert!(
            err.contains("OTEL_TRACES_EXPORTER") && err.contains("otlp"),
            "{err}"
        );
    }
}

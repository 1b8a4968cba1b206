//! OpenTelemetry metrics for agent runs.
//!
//! The binary reads `OTEL_METRICS_EXPORTER` and `OTEL_EXPORTER_OTLP_ENDPOINT`, turns them into a
//! [`MetricsExporter`] with [`MetricsExporter::parse`], calls [`Metrics::init`] once, hands every
//! finished [`RunResult`] to [`Metrics::record_run`] and calls [`Metrics::shutdown`] before it
//! exits. This module reads no environment itself (the OTLP exporter crate still honours its own
//! `OTEL_EXPORTER_OTLP_*` variables for headers, timeout and compression).
//!
//! Instruments (attribute sets are bounded: no session ids, no arguments, no free text):
//!
//! | name | kind | unit | attributes |
//! | --- | --- | --- | --- |
//! | `toolforge.agent.runs` | counter | `{run}` | `model`, `dry_run`, `halted`, `halt_reason` (only when halted) |
//! | `toolforge.agent.tool_calls` | counter | `{call}` | `server` (absent for an unknown tool), `tool`, `selection_rule` (when set), `executed`, `success`, `dry_run` |
//! | `toolforge.agent.tool_call.duration` | histogram | `ms` | `server`, `tool` (executed calls only) |
//! | `toolforge.agent.cost` | counter | `USD` | `model` |
//! | `toolforge.agent.tokens` | counter | `{token}` | `model`, `type` = `input`, `output`, `cache_write`, `cache_read` |
//! | `toolforge.agent.run.cost` | histogram | `USD` | `model` |
//!
//! A tool name the catalog does not know (the model made it up) is recorded as `tool="_OTHER"`
//! without `server`, and a halted run without a reason as `halt_reason="_OTHER"`, so a
//! misbehaving model cannot grow the number of series.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use serde_json::{Map, Value, json};

use crate::halt::HaltReason;
use crate::run::result::RunResult;

/// How often the periodic reader exports when the caller has no preference.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The OTLP/HTTP base endpoint when none is given (the OTel default for `http/protobuf`).
pub const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318";

/// The path appended to an `OTEL_EXPORTER_OTLP_ENDPOINT`-style base endpoint.
const OTLP_METRICS_PATH: &str = "/v1/metrics";

/// The attribute value standing for "something outside the known set" (OTel convention).
const OTHER: &str = "_OTHER";

/// Values accepted by [`MetricsExporter::parse`], for messages.
const ACCEPTED: &str = "\"none\" (or empty), \"stdout\", \"console\", \"otlp\"";

/// Where metrics go (`OTEL_METRICS_EXPORTER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsExporter {
    /// No metrics: [`Metrics::init`] returns `None`.
    Off,
    /// One JSON object per data point and line, on stderr (stdout carries results and the
    /// stdio MCP transport, so it is never written to).
    Stdout,
    /// OTLP over HTTP with protobuf bodies.
    Otlp {
        /// A base URL with `OTEL_EXPORTER_OTLP_ENDPOINT` semantics: `/v1/metrics` is appended.
        /// `None` means [`DEFAULT_OTLP_ENDPOINT`].
        endpoint: Option<String>,
    },
}

impl MetricsExporter {
    /// From the value of `OTEL_METRICS_EXPORTER` ("none"/"" → Off, "stdout"/"console" → Stdout,
    /// "otlp" → Otlp); unknown → Err with a clear message listing the accepted values.
    ///
    /// Matching ignores ASCII case and surrounding whitespace. `otlp_endpoint` is the value of
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (an empty value counts as unset); it is used only for
    /// `otlp`.
    pub fn parse(value: Option<&str>, otlp_endpoint: Option<String>) -> Result<Self, String> {
        let value = value.unwrap_or("").trim();
        match value.to_ascii_lowercase().as_str() {
            "" | "none" => Ok(Self::Off),
            "stdout" | "console" => Ok(Self::Stdout),
            "otlp" => Ok(Self::Otlp {
                endpoint: otlp_endpoint
                    .map(|e| e.trim().to_owned())
                    .filter(|e| !e.is_empty()),
            }),
            _ => Err(format!(
                "OTEL_METRICS_EXPORTER={value:?} is not supported; accepted values: {ACCEPTED}"
            )),
        }
    }
}

/// The metrics of agent runs: a meter provider with a periodic reader and its instruments.
///
/// Cheap to clone (every field is a handle to shared state); clones record into the same
/// provider, and [`Metrics::shutdown`] on any clone shuts it down for all.
#[derive(Clone)]
pub struct Metrics {
    provider: SdkMeterProvider,
    runs: Counter<u64>,
    tool_calls: Counter<u64>,
    tool_call_duration: Histogram<f64>,
    cost: Counter<f64>,
    tokens: Counter<u64>,
    run_cost: Histogram<f64>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// None when Off. Installs a MeterProvider with a periodic reader (interval configurable,
    /// default 60 s; stdout exporter for Stdout; OTLP/HTTP protobuf for Otlp, endpoint default
    /// `http://localhost:4318/v1/metrics`, following `OTEL_EXPORTER_OTLP_ENDPOINT` semantics if
    /// passed).
    ///
    /// A zero `interval` means [`DEFAULT_INTERVAL`]. The provider is not installed as the
    /// global one: only these instruments feed it. For `Otlp`, a rustls crypto provider must
    /// already be installed (the binary installs ring at start-up), since the HTTP client is
    /// built here.
    pub fn init(exporter: MetricsExporter, interval: Duration) -> Result<Option<Metrics>, String> {
        let interval = if interval.is_zero() {
            DEFAULT_INTERVAL
        } else {
            interval
        };
        let builder = SdkMeterProvider::builder().with_resource(resource());
        let provider = match exporter {
            MetricsExporter::Off => return Ok(None),
            MetricsExporter::Stdout => builder
                .with_reader(
                    PeriodicReader::builder(JsonLinesExporter::default())
                        .with_interval(interval)
                        .build(),
                )
                .build(),
            MetricsExporter::Otlp { endpoint } => {
                let url = otlp_metrics_url(endpoint.as_deref());
                let exporter = opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url.clone())
                    .build()
                    .map_err(|err| {
                        format!("cannot set up the OTLP metrics exporter for {url}: {err}")
                    })?;
                builder
                    .with_reader(
                        PeriodicReader::builder(exporter)
                            .with_interval(interval)
                            .build(),
                    )
                    .build()
            }
        };
        Ok(Some(Metrics::from_provider(provider)))
    }

    /// The instruments, on a provider already set up.
    fn from_provider(provider: SdkMeterProvider) -> Metrics {
        let meter = provider.meter_with_scope(
            InstrumentationScope::builder("toolforge-agent")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        );
        Metrics {
            runs: meter
                .u64_counter("toolforge.agent.runs")
                .with_unit("{run}")
                .with_description("Finished agent runs.")
                .build(),
            tool_calls: meter
                .u64_counter("toolforge.agent.tool_calls")
                .with_unit("{call}")
                .with_description("Tool calls the model asked for, executed or not.")
                .build(),
            tool_call_duration: meter
                .f64_histogram("toolforge.agent.tool_call.duration")
                .with_unit("ms")
                .with_description("Latency of executed tool calls, retries included.")
                .with_boundaries(vec![
                    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0,
                    10_000.0, 30_000.0, 60_000.0,
                ])
                .build(),
            cost: meter
                .f64_counter("toolforge.agent.cost")
                .with_unit("USD")
                .with_description("Model cost of agent runs.")
                .build(),
            tokens: meter
                .u64_counter("toolforge.agent.tokens")
                .with_unit("{token}")
                .with_description("Model tokens of agent runs, by billing type.")
                .build(),
            run_cost: meter
                .f64_histogram("toolforge.agent.run.cost")
                .with_unit("USD")
                .with_description("Model cost of one agent run.")
                .with_boundaries(vec![
                    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0,
                ])
                .build(),
            provider,
        }
    }

    /// Records one finished run.
    pub fn record_run(&self, run: &RunResult) {
        let model = KeyValue::new("model", run.model.clone());

        let mut run_attrs = vec![
            model.clone(),
            KeyValue::new("dry_run", run.dry_run),
            KeyValue::new("halted", run.halted),
        ];
        if run.halted || run.halt_reason.is_some() {
            let reason = run.halt_reason.map_or(OTHER, HaltReason::as_str);
            run_attrs.push(KeyValue::new("halt_reason", reason));
        }
        self.runs.add(1, &run_attrs);

        for step in &run.steps {
            // An unknown tool's name is whatever the model made up: keep it out of the labels.
            let target = match &step.server {
                Some(server) => vec![
                    KeyValue::new("server", server.clone()),
                    KeyValue::new("tool", step.tool.clone()),
                ],
                None => vec![KeyValue::new("tool", OTHER)],
            };
            let mut call_attrs = target.clone();
            if let Some(rule) = &step.selection_rule {
                call_attrs.push(KeyValue::new("selection_rule", rule.clone()));
            }
            call_attrs.extend([
                KeyValue::new("executed", step.executed),
                KeyValue::new("success", step.success),
                KeyValue::new("dry_run", step.dry_run),
            ]);
            self.tool_calls.add(1, &call_attrs);
            if step.executed && step.latency_ms.is_finite() && step.latency_ms >= 0.0 {
                self.tool_call_duration.record(step.latency_ms, &target);
            }
        }

        let usage = &run.usage;
        for (kind, count) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_write", usage.cache_creation_input_tokens),
            ("cache_read", usage.cache_read_input_tokens),
        ] {
            self.tokens
                .add(count, &[model.clone(), KeyValue::new("type", kind)]);
        }

        if run.cost_usd.is_finite() && run.cost_usd >= 0.0 {
            let attrs = std::slice::from_ref(&model);
            self.cost.add(run.cost_usd, attrs);
            self.run_cost.record(run.cost_usd, attrs);
        }
    }

    /// Flushes and shuts down (call at process exit, and at the end of a one-shot CLI command).
    ///
    /// Blocks until the last export finishes (the exporter's own timeout bounds it); from async
    /// code on a current-thread runtime, call it through `spawn_blocking`. Calling it again, on
    /// this value or a clone, does nothing.
    pub fn shutdown(&self) {
        match self.provider.shutdown() {
            Ok(()) | Err(OTelSdkError::AlreadyShutdown) => {}
            Err(err) => tracing::warn!(error = %err, "metrics: the final export failed"),
        }
    }
}

/// `service.name=toolforge`, `service.version`, and the SDK's own attributes. Built without the
/// SDK's env detectors (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`): libraries read no env.
fn resource() -> Resource {
    Resource::builder_empty()
        .with_service_name("toolforge")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .with_detector(Box::new(TelemetryResourceDetector))
        .build()
}

/// The metrics URL for an `OTEL_EXPORTER_OTLP_ENDPOINT`-style base: `/v1/metrics` appended,
/// without doubling a trailing slash.
fn otlp_metrics_url(base: Option<&str>) -> String {
    let base = base.unwrap_or(DEFAULT_OTLP_ENDPOINT);
    format!("{}{OTLP_METRICS_PATH}", base.trim_end_matches('/'))
}

/// Writes every data point of an export as one JSON object on its own line, on stderr.
#[derive(Debug, Default)]
struct JsonLinesExporter {
    is_shutdown: AtomicBool,
}

impl PushMetricExporter for JsonLinesExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        if self.is_shutdown.load(Ordering::SeqCst) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let mut out = Vec::new();
        for line in json_lines(metrics) {
            out.extend_from_slice(line.to_string().as_bytes());
            out.push(b'\n');
        }
        std::io::stderr()
            .lock()
            .write_all(&out)
            .map_err(|err| OTelSdkError::InternalFailure(format!("cannot write to stderr: {err}")))
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.is_shutdown.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

/// One JSON object per data point: `time`, `metric`, `unit`, `kind`, `attributes`, then
/// `value` (sums, gauges) or `count`/`sum`/`min`/`max`/`bounds`/`bucket_counts` (histograms).
fn json_lines(metrics: &ResourceMetrics) -> Vec<Value> {
    let mut lines = Vec::new();
    for scope in metrics.scope_metrics() {
        for metric in scope.metrics() {
            let head = |kind: &str, time: SystemTime, attrs: Map<String, Value>| {
                let mut line = Map::new();
                line.insert("time".into(), json!(rfc3339(time)));
                line.insert("metric".into(), json!(metric.name()));
                line.insert("unit".into(), json!(metric.unit()));
                line.insert("kind".into(), json!(kind));
                line.insert("attributes".into(), Value::Object(attrs));
                line
            };
            match metric.data() {
                AggregatedMetrics::F64(data) => points(data, &head, &mut lines),
                AggregatedMetrics::U64(data) => points(data, &head, &mut lines),
                AggregatedMetrics::I64(data) => points(data, &head, &mut lines),
            }
        }
    }
    lines
}

fn points<T, H>(data: &MetricData<T>, head: &H, lines: &mut Vec<Value>)
where
    T: Copy + Into<Value>,
    H: Fn(&str, SystemTime, Map<String, Value>) -> Map<String, Value>,
{
    match data {
        MetricData::Sum(sum) => {
            for point in sum.data_points() {
                let mut line = head("sum", sum.time(), attributes(point.attributes()));
                line.insert("value".into(), point.value().into());
                lines.push(Value::Object(line));
            }
        }
        MetricData::Gauge(gauge) => {
            for point in gauge.data_points() {
                let mut line = head("gauge", gauge.time(), attributes(point.attributes()));
                line.insert("value".into(), point.value().into());
                lines.push(Value::Object(line));
            }
        }
        MetricData::Histogram(hist) => {
            for point in hist.data_points() {
                let mut line = head("histogram", hist.time(), attributes(point.attributes()));
                line.insert("count".into(), json!(point.count()));
                line.insert("sum".into(), point.sum().into());
                line.insert("min".into(), point.min().map_or(Value::Null, Into::into));
                line.insert("max".into(), point.max().map_or(Value::Null, Into::into));
                line.insert("bounds".into(), json!(point.bounds().collect::<Vec<_>>()));
                line.insert(
                    "bucket_counts".into(),
                    json!(point.bucket_counts().collect::<Vec<_>>()),
                );
                lines.push(Value::Object(line));
            }
        }
        MetricData::ExponentialHistogram(hist) => {
            for point in hist.data_points() {
                let mut line = head(
                    "exponential_histogram",
                    hist.time(),
                    attributes(point.attributes()),
                );
                line.insert("count".into(), json!(point.count()));
                line.insert("sum".into(), point.sum().into());
                lines.push(Value::Object(line));
            }
        }
    }
}

fn attributes<'a>(kvs: impl Iterator<Item = &'a KeyValue>) -> Map<String, Value> {
    kvs.map(|kv| {
        let value = match &kv.value {
            opentelemetry::Value::Bool(b) => json!(b),
            opentelemetry::Value::I64(i) => json!(i),
            opentelemetry::Value::F64(f) => json!(f),
            other => json!(other.to_string()),
        };
        (kv.key.to_string(), value)
    })
    .collect()
}

fn rfc3339(time: SystemTime) -> String {
    time::OffsetDateTime::from(time)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use opentelemetry_sdk::metrics::InMemoryMetricExporter;
    use serde_json::json;
    use toolforge_llm::Usage;

    use super::*;
    use crate::run::result::Step;

    fn step(tool: &str, server: Option<&str>, executed: bool, success: bool) -> Step {
        Step {
            step: 1,
            tool: tool.to_owned(),
            server: server.map(str::to_owned),
            server_tool: server.map(|_| tool.to_owned()),
            arguments: json!({"secret": "never a label"}),
            selection_rule: server.map(|_| "exact_name".to_owned()),
            alternatives: Vec::new(),
            executed,
            dry_run: false,
            success,
            error: None,
            corrective_retry: false,
            latency_ms: 120.0,
            attempts: 1,
            retry_reason: None,
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: 0.0,
            result_summary: String::new(),
            raw_result: Value::Null,
            policy: None,
        }
    }

    fn run(steps: Vec<Step>, halt_reason: Option<HaltReason>) -> RunResult {
        RunResult {
            session_id: "session-123".to_owned(),
            response: "done".to_owned(),
            key_facts: json!({}),
            steps,
            cost_usd: 0.0125,
            tokens_in: 1_500,
            tokens_out: 200,
            usage: Usage {
                input_tokens: 1_000,
                output_tokens: 200,
                cache_creation_input_tokens: 300,
                cache_read_input_tokens: 200,
            },
            model_calls: 2,
            halted: halt_reason.is_some(),
            halt_reason,
            error: None,
            dry_run: false,
            model: "claude-test".to_owned(),
            ceiling_usd: 0.5,
            available_tools: Vec::new(),
            offered_tools: Vec::new(),
            broker_rationale: String::new(),
            searches: Vec::new(),
        }
    }

    /// Metrics over the in-memory exporter (the interval is long: tests flush by hand).
    fn in_memory() -> (Metrics, InMemoryMetricExporter) {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_resource(resource())
            .with_reader(
                PeriodicReader::builder(exporter.clone())
                    .with_interval(Duration::from_secs(3600))
                    .build(),
            )
            .build();
        (Metrics::from_provider(provider), exporter)
    }

    /// A data point flattened: its attributes as strings, and its value (sums) or count
    /// (histograms), with the histogram's sum.
    #[derive(Debug, Clone, PartialEq)]
    struct Point {
        attrs: BTreeMap<String, String>,
        value: f64,
        sum: f64,
    }

    /// Every point of the last export, by metric name, with the metric's unit.
    fn collect(
        metrics: &Metrics,
        exporter: &InMemoryMetricExporter,
    ) -> BTreeMap<String, (String, Vec<Point>)> {
        metrics.provider.force_flush().unwrap();
        let exports = exporter.get_finished_metrics().unwrap();
        let last = exports.last().expect("one export");
        let mut out: BTreeMap<String, (String, Vec<Point>)> = BTreeMap::new();
        for scope in last.scope_metrics() {
            assert_eq!(scope.scope().name(), "toolforge-agent");
            for metric in scope.metrics() {
                let entry = out
                    .entry(metric.name().to_owned())
                    .or_insert_with(|| (metric.unit().to_owned(), Vec::new()));
                for line in points_of(metric) {
                    entry.1.push(line);
                }
            }
        }
        out
    }

    fn points_of(metric: &opentelemetry_sdk::metrics::data::Metric) -> Vec<Point> {
        let attrs = |kvs: &mut dyn Iterator<Item = &KeyValue>| {
            kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let mut points = Vec::new();
        match metric.data() {
            AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                for p in sum.data_points() {
                    let v = p.value() as f64;
                    points.push(Point {
                        attrs: attrs(&mut p.attributes()),
                        value: v,
                        sum: v,
                    });
                }
            }
            AggregatedMetrics::F64(MetricData::Sum(sum)) => {
                for p in sum.data_points() {
                    points.push(Point {
                        attrs: attrs(&mut p.attributes()),
                        value: p.value(),
                        sum: p.value(),
                    });
                }
            }
            AggregatedMetrics::F64(MetricData::Histogram(hist)) => {
                for p in hist.data_points() {
                    points.push(Point {
                        attrs: attrs(&mut p.attributes()),
                        value: p.count() as f64,
                        sum: p.sum(),
                    });
                }
            }
            other => panic!("unexpected aggregation for {}: {other:?}", metric.name()),
        }
        points.sort_by(|a, b| format!("{:?}", a.attrs).cmp(&format!("{:?}", b.attrs)));
        points
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn find<'a>(points: &'a [Point], pairs: &[(&str, &str)]) -> &'a Point {
        let want = labels(pairs);
        points
            .iter()
            .find(|p| p.attrs == want)
            .unwrap_or_else(|| panic!("no point with {want:?} in {points:#?}"))
    }

    #[test]
    fn parse_accepts_the_documented_values() {
        assert_eq!(MetricsExporter::parse(None, None), Ok(MetricsExporter::Off));
        assert_eq!(
            MetricsExporter::parse(Some(""), None),
            Ok(MetricsExporter::Off)
        );
        assert_eq!(
            MetricsExporter::parse(Some("none"), None),
            Ok(MetricsExporter::Off)
        );
        assert_eq!(
            MetricsExporter::parse(Some(" NONE "), None),
            Ok(MetricsExporter::Off)
        );
        assert_eq!(
            MetricsExporter::parse(Some("stdout"), None),
            Ok(MetricsExporter::Stdout)
        );
        assert_eq!(
            MetricsExporter::parse(Some("console"), None),
            Ok(MetricsExporter::Stdout)
        );
        assert_eq!(
            MetricsExporter::parse(Some("otlp"), None),
            Ok(MetricsExporter::Otlp { endpoint: None })
        );
        assert_eq!(
            MetricsExporter::parse(Some("otlp"), Some("http://collector:4318".into())),
            Ok(MetricsExporter::Otlp {
                endpoint: Some("http://collector:4318".into())
            })
        );
        assert_eq!(
            MetricsExporter::parse(Some("otlp"), Some("  ".into())),
            Ok(MetricsExporter::Otlp { endpoint: None })
        );
        // The endpoint matters only for otlp.
        assert_eq!(
            MetricsExporter::parse(Some("stdout"), Some("http://collector:4318".into())),
            Ok(MetricsExporter::Stdout)
        );
    }

    #[test]
    fn parse_rejects_unknown_values_naming_the_accepted_ones() {
        for bad in ["prometheus", "otlp,stdout", "yes", "zipkin"] {
            let err = MetricsExporter::parse(Some(bad), None).unwrap_err();
            assert!(err.contains("OTEL_METRICS_EXPORTER"), "{err}");
            assert!(err.contains(bad), "{err}");
            for accepted in ["none", "stdout", "console", "otlp"] {
                assert!(err.contains(accepted), "{err} lacks {accepted}");
            }
        }
    }

    #[test]
    fn otlp_url_follows_the_base_endpoint_semantics() {
        assert_eq!(otlp_metrics_url(None), "http://localhost:4318/v1/metrics");
        assert_eq!(
            otlp_metrics_url(Some("http://collector:4318")),
            "http://collector:4318/v1/metrics"
        );
        assert_eq!(
            otlp_metrics_url(Some("https://otel.example/prefix/")),
            "https://otel.example/prefix/v1/metrics"
        );
    }

    #[test]
    fn init_off_is_none_and_stdout_is_some() {
        assert!(
            Metrics::init(MetricsExporter::Off, DEFAULT_INTERVAL)
                .unwrap()
                .is_none()
        );
        let metrics = Metrics::init(MetricsExporter::Stdout, Duration::ZERO)
            .unwrap()
            .expect("stdout metrics");
        // (Nothing recorded: the export would print to the test's stderr.)
        metrics.shutdown();
        // Idempotent, also through a clone.
        metrics.clone().shutdown();
    }

    #[test]
    fn record_run_yields_the_expected_sums_and_attributes() {
        let (metrics, exporter) = in_memory();
        let steps = vec![
            step("search", Some("docs"), true, true),
            step("search", Some("docs"), true, false),
            step("made_up_tool", None, false, false),
        ];
        metrics.record_run(&run(steps, None));
        metrics.record_run(&run(vec![], Some(HaltReason::MaxSteps)));
        let mut halted_without_reason = run(vec![], None);
        halted_without_reason.halted = true;
        metrics.record_run(&halted_without_reason);
        let got = collect(&metrics, &exporter);

        let (unit, runs) = &got["toolforge.agent.runs"];
        assert_eq!(unit, "{run}");
        let base = [("model", "claude-test"), ("dry_run", "false")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            v
        };
        assert_eq!(find(runs, &with(&[("halted", "false")])).value, 1.0);
        assert_eq!(
            find(
                runs,
                &with(&[("halted", "true"), ("halt_reason", "max_steps")])
            )
            .value,
            1.0
        );
        assert_eq!(
            find(
                runs,
                &with(&[("halted", "true"), ("halt_reason", "_OTHER")])
            )
            .value,
            1.0
        );
        assert_eq!(runs.len(), 3);

        let (unit, calls) = &got["toolforge.agent.tool_calls"];
        assert_eq!(unit, "{call}");
        let call = |tool, server: Option<&'static str>, rule: Option<&'static str>, ok| {
            let mut v = vec![("tool", tool)];
            v.extend(server.map(|s| ("server", s)));
            v.extend(rule.map(|r| ("selection_rule", r)));
            v.extend([
                ("executed", if server.is_some() { "true" } else { "false" }),
                ("success", ok),
                ("dry_run", "false"),
            ]);
            v
        };
        assert_eq!(
            find(
                calls,
                &call("search", Some("docs"), Some("exact_name"), "true")
            )
            .value,
            1.0
        );
        assert_eq!(
            find(
                calls,
                &call("search", Some("docs"), Some("exact_name"), "false")
            )
            .value,
            1.0
        );
        assert_eq!(find(calls, &call("_OTHER", None, None, "false")).value, 1.0);
        assert_eq!(calls.len(), 3);

        // Executed calls only, by server and tool.
        let (unit, durations) = &got["toolforge.agent.tool_call.duration"];
        assert_eq!(unit, "ms");
        assert_eq!(durations.len(), 1);
        let d = find(durations, &[("server", "docs"), ("tool", "search")]);
        assert_eq!((d.value, d.sum), (2.0, 240.0));

        let (unit, tokens) = &got["toolforge.agent.tokens"];
        assert_eq!(unit, "{token}");
        for (kind, per_run) in [
            ("input", 1_000.0),
            ("output", 200.0),
            ("cache_write", 300.0),
            ("cache_read", 200.0),
        ] {
            let p = find(tokens, &[("model", "claude-test"), ("type", kind)]);
            assert_eq!(p.value, 3.0 * per_run, "{kind}");
        }

        let (unit, cost) = &got["toolforge.agent.cost"];
        assert_eq!(unit, "USD");
        let c = find(cost, &[("model", "claude-test")]).value;
        assert!((c - 3.0 * 0.0125).abs() < 1e-12, "{c}");

        let (unit, run_cost) = &got["toolforge.agent.run.cost"];
        assert_eq!(unit, "USD");
        let h = find(run_cost, &[("model", "claude-test")]);
        assert_eq!(h.value, 3.0);
        assert!((h.sum - 3.0 * 0.0125).abs() < 1e-12);

        // Nothing run-specific leaks into the labels.
        for (_, points) in got.values() {
            for p in points {
                for value in p.attrs.values() {
                    assert!(!value.contains("session-123") && !value.contains("never a label"));
                }
            }
        }
        metrics.shutdown();
    }

    #[test]
    fn bad_numbers_are_not_recorded() {
        let (metrics, exporter) = in_memory();
        let mut bad = run(vec![step("search", Some("docs"), true, true)], None);
        bad.cost_usd = f64::NAN;
        bad.steps[0].latency_ms = -1.0;
        metrics.record_run(&bad);
        let got = collect(&metrics, &exporter);
        assert!(!got.contains_key("toolforge.agent.cost"));
        assert!(!got.contains_key("toolforge.agent.run.cost"));
        assert!(!got.contains_key("toolforge.agent.tool_call.duration"));
        assert_eq!(got["toolforge.agent.runs"].1.len(), 1);
    }

    #[test]
    fn json_lines_carry_one_object_per_point() {
        let (metrics, exporter) = in_memory();
        metrics.record_run(&run(vec![step("search", Some("docs"), true, true)], None));
        metrics.provider.force_flush().unwrap();
        let exports = exporter.get_finished_metrics().unwrap();
        let lines = json_lines(exports.last().unwrap());
        let runs: Vec<&Value> = lines
            .iter()
            .filter(|l| l["metric"] == "toolforge.agent.runs")
            .collect();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["kind"], "sum");
        assert_eq!(runs[0]["unit"], "{run}");
        assert_eq!(runs[0]["value"], 1);
        assert_eq!(runs[0]["attributes"]["model"], "claude-test");
        assert_eq!(runs[0]["attributes"]["halted"], false);
        assert!(runs[0]["time"].as_str().unwrap().contains('T'));
        let hist = lines
            .iter()
            .find(|l| l["metric"] == "toolforge.agent.tool_call.duration")
            .unwrap();
        assert_eq!(hist["kind"], "histogram");
        assert_eq!(hist["count"], 1);
        assert_eq!(hist["sum"], 120.0);
        assert_eq!(
            hist["bucket_counts"].as_array().unwrap().len(),
            hist["bounds"].as_array().unwrap().len() + 1
        );
        // Every line is one JSON object on one line.
        for line in &lines {
            assert!(!line.to_string().contains('\n'));
        }
        metrics.shutdown();
    }
}

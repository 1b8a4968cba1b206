//! Logs and OpenTelemetry: `RUST_LOG`; traces per `OTEL_TRACES_EXPORTER`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME` and
//! the batch processor's `OTEL_BSP_SCHEDULE_DELAY` (milliseconds) and `OTEL_BSP_MAX_QUEUE_SIZE`;
//! metrics per `OTEL_METRICS_EXPORTER` (`stdout` or `otlp`; off by default) and
//! `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds).

use std::time::Duration;

use toolforge_agent::metrics::{self, MetricsExporter};

use super::source::Source;
use crate::otel::{TraceSettings, TracesExporter};

#[derive(Debug, Clone)]
pub struct TelemetrySettings {
    /// `RUST_LOG`'s directives, when set.
    pub log_filter: Option<String>,
    pub traces: TraceSettings,
    pub metrics_exporter: MetricsExporter,
    pub metrics_interval: Duration,
}

impl TelemetrySettings {
    pub(super) fn read(env: &Source) -> anyhow::Result<Self> {
        let traces = TraceSettings {
            exporter: TracesExporter::parse(
                env.text("OTEL_TRACES_EXPORTER").as_deref(),
                env.text("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").as_deref(),
                env.text("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
            )
            .map_err(anyhow::Error::msg)?,
            service_name: env.text("OTEL_SERVICE_NAME"),
            schedule_delay: whole_number(env, "OTEL_BSP_SCHEDULE_DELAY")?
                .map(Duration::from_millis),
            max_queue_size: whole_number(env, "OTEL_BSP_MAX_QUEUE_SIZE")?
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        };
        let metrics_exporter = MetricsExporter::parse(
            env.text("OTEL_METRICS_EXPORTER").as_deref(),
            env.text("OTEL_EXPORTER_OTLP_ENDPOINT"),
        )
        .map_err(anyhow::Error::msg)?;
        Ok(Self {
            log_filter: env.text("RUST_LOG"),
            traces,
            metrics_exporter,
            metrics_interval: env
                .number::<u64>("OTEL_METRIC_EXPORT_INTERVAL")?
                .map_or(metrics::DEFAULT_INTERVAL, Duration::from_millis),
        })
    }
}

fn whole_number(env: &Source, name: &str) -> anyhow::Result<Option<u64>> {
    env.text(name)
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| anyhow::anyhow!("{name} is \"{v}\", which is not a whole number"))
        })
        .transpose()
}

//! Logs and spans: logs go to stderr (stdout belongs to the MCP stdio protocol and to command
//! results); with an OpenTelemetry traces exporter configured, toolforge's spans are exported too
//! ([`crate::otel`]).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::TelemetrySettings;
use crate::otel::Traces;

/// Installs the log subscriber (and the span exporter, when one is set); the returned handle
/// flushes the spans at exit. Call after [`crate::runtime::init_tls`], before the async runtime.
///
/// # Errors
/// An exporter that cannot be built.
pub fn init_tracing(settings: &TelemetrySettings) -> Result<Option<Traces>, String> {
    let filter = settings
        .log_filter
        .as_deref()
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new("info,rmcp=warn"));
    // The exported spans are not log lines: the log never shows them, whatever RUST_LOG says.
    let filter = match format!("{}=off", toolforge_mcp::trace_context::SPAN_TARGET).parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let traces = Traces::start(settings.traces.clone())?;
    // Two shapes rather than an optional layer: with no exporter the spans stay disabled.
    let _ = match &traces {
        Some(t) => tracing_subscriber::registry()
            .with(logs)
            .with(t.layer())
            .try_init(),
        None => tracing_subscriber::registry().with(logs).try_init(),
    };
    Ok(traces)
}

//! Builds the agent from the process's settings and the servers configuration: the model
//! provider, the cost ceiling, the trace sink, session storage and price overrides.
//! Shared by `toolforge chat` and `toolforge serve`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use toolforge_agent::metrics::Metrics;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RedisSessions, SessionStore, ToolBackend, TraceSink,
};
use toolforge_llm::{MockModel, Model, Price, PriceTable, anthropic, openai};

use crate::config::{
    AgentSettings, ChainKeySource, Config, LlmSettings, TelemetrySettings, TraceFileSettings,
};

/// The model provider [`LlmSettings`] names.
pub fn model(settings: &LlmSettings) -> anyhow::Result<Arc<dyn Model>> {
    Ok(match settings {
        LlmSettings::Mock => Arc::new(MockModel::new()),
        LlmSettings::Anthropic(config) => Arc::new(
            anthropic::AnthropicModel::new(config.clone()).context("LLM_PROVIDER=anthropic")?,
        ),
        LlmSettings::OpenAi(config) => {
            Arc::new(openai::OpenAiModel::new(config.clone()).context("LLM_PROVIDER=openai")?)
        }
    })
}

/// Price overrides from the config's `"toolforge": {"prices": {"<model>": {input, output,
/// cache_write, cache_read}}}` (USD per million tokens).
pub fn prices(settings: &serde_json::Map<String, serde_json::Value>) -> anyhow::Result<PriceTable> {
    let Some(value) = settings.get("prices") else {
        return Ok(PriceTable::default());
    };
    let overrides: std::collections::BTreeMap<String, Price> =
        serde_json::from_value(value.clone()).context(
            "\"toolforge\".\"prices\" must map model ids to {\"input\", \"output\", \
             \"cache_write\", \"cache_read\"} in USD per million tokens",
        )?;
    for (model, p) in &overrides {
        let all = [p.input, p.output, p.cache_write, p.cache_read];
        if all.iter().any(|x| !x.is_finite() || *x < 0.0) {
            bail!("\"toolforge\".\"prices\".\"{model}\": prices must be finite and not negative");
        }
    }
    Ok(PriceTable::default().with_overrides(overrides))
}

/// The operator's pins from the config's `"toolforge": {"pins": ["server/tool", "server/*"]}`
/// (checked against the configured servers when the configuration was read).
pub fn pins(
    settings: &serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<Vec<toolforge_select::pins::Pin>> {
    let Some(value) = settings.get("pins") else {
        return Ok(Vec::new());
    };
    let named: Vec<&str> = value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .filter_map(|p| p.split_once('/').map(|(server, _)| server))
        .collect();
    toolforge_select::pins::from_config(value, &named)
        .map_err(|e| anyhow::anyhow!("\"toolforge\": {e}"))
}

/// The agent's configuration: its settings, and pins and prices from the servers
/// configuration.
pub fn agent_config(
    agent: &AgentSettings,
    settings: &serde_json::Map<String, serde_json::Value>,
    namespace: toolforge_select::Namespace,
) -> anyhow::Result<AgentConfig> {
    Ok(AgentConfig {
        ceiling_usd: agent.ceiling_usd,
        max_steps: agent.max_steps,
        max_tokens: agent.max_tokens,
        max_tools: agent.max_tools,
        discovery: agent.discovery,
        pins: pins(settings)?,
        learned_pins: agent.learned_pins,
        namespace,
        trace_verbose: agent.trace_verbose,
        trace_fail_closed: agent.trace_fail_closed,
        prices: prices(settings)?,
        ..AgentConfig::default()
    })
}

/// The trace sink `TRACE_SINK` names (disabled for `off`).
pub async fn trace_sink(trace: &TraceFileSettings) -> anyhow::Result<TraceSink> {
    let Some(path) = &trace.sink else {
        return Ok(TraceSink::disabled());
    };
    TraceSink::open_keyed(path, chain_key(trace, None)?)
        .await
        .with_context(|| format!("cannot open the trace file {} (TRACE_SINK)", path.display()))
}

/// The operator's trace chain key: the file `file` when given, else the one the settings name
/// (`TRACE_CHAIN_KEY_FILE`, else `TRACE_CHAIN_KEY`); `None` without one (the chain is plain
/// SHA-256).
pub fn chain_key(
    trace: &TraceFileSettings,
    file: Option<&Path>,
) -> anyhow::Result<Option<toolforge_agent::ChainKey>> {
    let source = match file {
        Some(file) => Some(ChainKeySource::File(file.to_path_buf())),
        None => trace.chain_key.clone(),
    };
    let bytes = match source {
        Some(ChainKeySource::File(file)) => std::fs::read(&file)
            .with_context(|| format!("cannot read the trace chain key file {}", file.display()))?
            .trim_ascii()
            .to_vec(),
        Some(ChainKeySource::Text(text)) => text.into_bytes(),
        None => return Ok(None),
    };
    toolforge_agent::ChainKey::new(&bytes)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("TRACE_CHAIN_KEY: {e}"))
}

/// Session recency: in Redis when `REDIS_URL` is set (shared by replicas), else in memory. A
/// Redis that does not answer at start-up degrades to memory with a warning, never an outage.
pub async fn sessions(redis_url: Option<&str>) -> anyhow::Result<Arc<dyn SessionStore>> {
    match redis_url {
        Some(url) => {
            let connect =
                tokio::time::timeout(Duration::from_secs(4), RedisSessions::connect(url)).await;
            match connect {
                Ok(Ok(store)) => Ok(Arc::new(store)),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "Redis at REDIS_URL is unavailable: session recency stays in this process");
                    Ok(Arc::new(MemorySessions::default()))
                }
                Err(_) => {
                    tracing::warn!(
                        "Redis at REDIS_URL did not answer within 4 s: session recency stays in this process"
                    );
                    Ok(Arc::new(MemorySessions::default()))
                }
            }
        }
        None => Ok(Arc::new(MemorySessions::default())),
    }
}

/// OpenTelemetry metrics as the telemetry settings say (off by default).
pub fn metrics(telemetry: &TelemetrySettings) -> anyhow::Result<Option<Metrics>> {
    Metrics::init(
        telemetry.metrics_exporter.clone(),
        telemetry.metrics_interval,
    )
    .map_err(anyhow::Error::msg)
}

/// Flushes and stops `metrics` (the final export blocks, so off the async threads).
pub async fn shutdown_metrics(agent: &Agent) {
    if let Some(m) = agent.metrics().cloned() {
        let _ = tokio::task::spawn_blocking(move || m.shutdown()).await;
    }
}

/// The agent over `backend`, with the broker's `rules` and `EMBEDDER_BACKEND`'s embedder.
pub async fn build(
    process: &Config,
    backend: Arc<dyn ToolBackend>,
    settings: &serde_json::Map<String, serde_json::Value>,
    namespace: toolforge_select::Namespace,
    rules: toolforge_select::broker::Rules,
) -> anyhow::Result<Agent> {
    let mut config = agent_config(&process.agent, settings, namespace)?;
    config.rules = rules;
    let embedder = crate::embedder::from_settings(&process.embedder)?;
    let model = model(&process.llm)?;
    let sessions = sessions(process.stores.redis_url.as_deref()).await?;
    let traces = trace_sink(&process.trace).await?;
    tracing::info!(
        provider = model.provider(),
        model = model.model(),
        ceiling_usd = config.ceiling_usd,
        sessions = sessions.backend(),
        "agent ready"
    );
    let metrics = metrics(&process.telemetry)?;
    let learned = learned_pins(&config, &traces).await;
    Ok(Agent::new(backend, model, sessions, traces, config)
        .with_embedder(embedder)
        .with_metrics(metrics)
        .with_learned_pins(learned))
}

/// How much of the trace file's end learned pins are seeded from.
const LEARNED_PINS_TRACE_TAIL: u64 = 8 * 1024 * 1024;

/// Learned pins, seeded from the last records of the trace file when they are on. A trace
/// that cannot be read leaves them to learn from this process's runs, with a warning.
async fn learned_pins(
    config: &AgentConfig,
    traces: &TraceSink,
) -> Arc<toolforge_agent::learned_pins::LearnedPins> {
    let learned = Arc::new(toolforge_agent::learned_pins::LearnedPins::default());
    let Some(path) = traces.path().map(std::path::Path::to_path_buf) else {
        return learned;
    };
    if config.learned_pins == 0 {
        return learned;
    }
    let seeded = learned.clone();
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<usize> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let mut file = std::fs::File::open(&path)?;
        let len = file.metadata()?.len();
        let start = len.saturating_sub(LEARNED_PINS_TRACE_TAIL);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.take(LEARNED_PINS_TRACE_TAIL).read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes);
        // From the middle of the file, the first line may be cut: skip it.
        let lines = text.lines().skip(usize::from(start > 0));
        Ok(seeded.seed(lines))
    })
    .await;
    match read {
        Ok(Ok(n)) => tracing::info!(calls = n, "learned pins seeded from the trace"),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read the trace for learned pins: they start empty")
        }
        Err(e) => tracing::warn!(error = %e, "seeding learned pins failed"),
    }
    learned
}

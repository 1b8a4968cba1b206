//! Builds the agent from the environment and the servers configuration: the model provider
//! (`LLM_PROVIDER`), the cost ceiling, the trace sink, session storage and price overrides.
//! Shared by `toolforge chat` and `toolforge serve`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use toolforge_agent::metrics::{self, Metrics, MetricsExporter};
use toolforge_agent::{
    Agent, AgentConfig, DEFAULT_CEILING_USD, MemorySessions, RedisSessions, SessionStore,
    ToolBackend, TraceSink,
};
use toolforge_llm::{MockModel, Model, Price, PriceTable, anthropic, openai};

use crate::config::env;

/// Where traces go unless `TRACE_SINK` says otherwise.
pub const DEFAULT_TRACE_SINK: &str = "logs/traces.jsonl";

/// The model provider named by `LLM_PROVIDER` (default `mock`), configured from the providers'
/// usual variables: `ANTHROPIC_API_KEY`/`ANTHROPIC_BASE_URL`, `OPENAI_API_KEY`/`OPENAI_BASE_URL`,
/// and `LLM_MODEL` for the model id. `LLM_STREAM=1` streams responses from the provider.
pub fn model_from_env() -> anyhow::Result<Arc<dyn Model>> {
    let provider = env("LLM_PROVIDER").unwrap_or_else(|| "mock".to_owned());
    let stream = flag("LLM_STREAM")?;
    let model: Arc<dyn Model> = match provider.to_ascii_lowercase().as_str() {
        "mock" => Arc::new(MockModel::new()),
        "anthropic" | "claude" => {
            let defaults = anthropic::AnthropicConfig::default();
            let config = anthropic::AnthropicConfig {
                api_key: env("ANTHROPIC_API_KEY").unwrap_or_default(),
                base_url: env("ANTHROPIC_BASE_URL").unwrap_or(defaults.base_url.clone()),
                model: env("LLM_MODEL")
                    .or_else(|| env("ANTHROPIC_MODEL"))
                    .unwrap_or(defaults.model.clone()),
                stream,
                tool_search: anthropic_tool_search()?,
                ..defaults
            };
            Arc::new(anthropic::AnthropicModel::new(config).context("LLM_PROVIDER=anthropic")?)
        }
        "openai" | "openai-compatible" => {
            let defaults = openai::OpenAiConfig::default();
            let config = openai::OpenAiConfig {
                api_key: env("OPENAI_API_KEY"),
                base_url: env("OPENAI_BASE_URL").unwrap_or(defaults.base_url.clone()),
                model: env("LLM_MODEL")
                    .or_else(|| env("OPENAI_MODEL"))
                    .unwrap_or(defaults.model.clone()),
                stream,
                // OpenAI's hosted tool search, through the Responses API.
                tool_search: flag("OPENAI_TOOL_SEARCH")?,
                ..defaults
            };
            Arc::new(openai::OpenAiModel::new(config).context("LLM_PROVIDER=openai")?)
        }
        other => bail!(
            "LLM_PROVIDER is \"{other}\"; use mock (offline, the default), anthropic or openai \
             (any OpenAI-compatible endpoint via OPENAI_BASE_URL)"
        ),
    };
    Ok(model)
}

/// `ANTHROPIC_TOOL_SEARCH`: `bm25` or `regex` turns on Anthropic's tool search tool (the tools
/// the first offer leaves out go deferred; the model searches them server-side); unset or
/// `off`, the agent's own `search_tools`.
fn anthropic_tool_search() -> anyhow::Result<Option<toolforge_llm::ProviderToolSearch>> {
    use toolforge_llm::ProviderToolSearch;
    match env("ANTHROPIC_TOOL_SEARCH").map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(None),
        Some(v) if ["", "off", "0", "false", "no"].contains(&v.as_str()) => Ok(None),
        Some(v) if v == "bm25" => Ok(Some(ProviderToolSearch::Bm25)),
        Some(v) if v == "regex" => Ok(Some(ProviderToolSearch::Regex)),
        Some(v) => bail!("ANTHROPIC_TOOL_SEARCH is \"{v}\"; use bm25, regex or off"),
    }
}

/// A boolean variable: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`; unset is false.
pub fn flag(name: &str) -> anyhow::Result<bool> {
    match env(name).map(|v| v.to_ascii_lowercase()) {
        None => Ok(false),
        Some(v) if ["1", "true", "yes", "on"].contains(&v.as_str()) => Ok(true),
        Some(v) if ["0", "false", "no", "off"].contains(&v.as_str()) => Ok(false),
        Some(v) => bail!("{name} is \"{v}\"; use 1/true/yes/on or 0/false/no/off"),
    }
}

fn number<T: std::str::FromStr>(name: &str) -> anyhow::Result<Option<T>> {
    env(name)
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|_| anyhow::anyhow!("{name} is \"{v}\", which is not a valid number"))
        })
        .transpose()
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

/// How the model reaches tools beyond the first offer: `AGENT_TOOL_SEARCH` (on unless `0`,
/// `false`, `no` or `off`), `AGENT_SEARCH_LIMIT` (results of a search that names none),
/// `AGENT_MAX_FOUND_TOOLS` (most tools searches add to one run).
fn discovery() -> anyhow::Result<toolforge_agent::discovery::Discovery> {
    use toolforge_agent::discovery::{Discovery, MAX_SEARCH_LIMIT};
    let defaults = Discovery::default();
    let search = match env("AGENT_TOOL_SEARCH") {
        None => defaults.search,
        Some(_) => flag("AGENT_TOOL_SEARCH")?,
    };
    let search_limit = number::<usize>("AGENT_SEARCH_LIMIT")?.unwrap_or(defaults.search_limit);
    if !(1..=MAX_SEARCH_LIMIT).contains(&search_limit) {
        bail!("AGENT_SEARCH_LIMIT must be from 1 to {MAX_SEARCH_LIMIT}");
    }
    let max_found = number::<usize>("AGENT_MAX_FOUND_TOOLS")?.unwrap_or(defaults.max_found);
    Ok(Discovery {
        search,
        search_limit,
        max_found,
    })
}

/// Agent settings from the environment: `COST_CEILING_USD`, `MAX_AGENT_STEPS`,
/// `AGENT_MAX_TOKENS`, `AGENT_MAX_TOOLS` (default: 8 with search, 32 without), the discovery
/// settings above, `AGENT_LEARNED_PINS`, `TRACE_VERBOSE`, `TRACE_FAIL_CLOSED`; and pins and
/// prices from the servers configuration.
pub fn agent_config(
    settings: &serde_json::Map<String, serde_json::Value>,
    namespace: toolforge_select::Namespace,
) -> anyhow::Result<AgentConfig> {
    let defaults = AgentConfig::default();
    let ceiling_usd = number::<f64>("COST_CEILING_USD")?.unwrap_or(DEFAULT_CEILING_USD);
    if !ceiling_usd.is_finite() || ceiling_usd <= 0.0 {
        bail!("COST_CEILING_USD must be a positive number of dollars, e.g. 0.10");
    }
    let max_steps = number::<u32>("MAX_AGENT_STEPS")?.unwrap_or(defaults.max_steps);
    if max_steps == 0 {
        bail!("MAX_AGENT_STEPS must be at least 1");
    }
    let max_tokens = number::<u32>("AGENT_MAX_TOKENS")?.unwrap_or(defaults.max_tokens);
    if max_tokens == 0 {
        bail!("AGENT_MAX_TOKENS must be at least 1");
    }
    let discovery = discovery()?;
    let max_tools = match number::<usize>("AGENT_MAX_TOOLS")? {
        Some(n) => n,
        None if discovery.search => toolforge_agent::discovery::DEFAULT_FIRST_OFFER,
        None => toolforge_select::selection::DEFAULT_MAX_TOOLS,
    };
    if max_tools == 0 && !discovery.search {
        bail!(
            "AGENT_MAX_TOOLS must be at least 1 when AGENT_TOOL_SEARCH is off (0 offers only pins and search)"
        );
    }
    let learned_pins = number::<usize>("AGENT_LEARNED_PINS")?.unwrap_or(defaults.learned_pins);
    Ok(AgentConfig {
        ceiling_usd,
        max_steps,
        max_tokens,
        max_tools,
        discovery,
        pins: pins(settings)?,
        learned_pins,
        namespace,
        trace_verbose: flag("TRACE_VERBOSE")?,
        trace_fail_closed: flag("TRACE_FAIL_CLOSED")?,
        prices: prices(settings)?,
        ..defaults
    })
}

/// The trace sink: `TRACE_SINK` (a file path; `off` disables tracing), default
/// [`DEFAULT_TRACE_SINK`].
pub async fn trace_sink() -> anyhow::Result<TraceSink> {
    let target = env("TRACE_SINK").unwrap_or_else(|| DEFAULT_TRACE_SINK.to_owned());
    if matches!(target.as_str(), "off" | "none") {
        return Ok(TraceSink::disabled());
    }
    let path = PathBuf::from(&target);
    TraceSink::open_keyed(&path, chain_key(None)?)
        .await
        .with_context(|| format!("cannot open the trace file {} (TRACE_SINK)", path.display()))
}

/// The operator's trace chain key: the file `file` when given, else `TRACE_CHAIN_KEY_FILE`,
/// else the text of `TRACE_CHAIN_KEY`; `None` without one (the chain is plain SHA-256).
pub fn chain_key(
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<toolforge_agent::ChainKey>> {
    let file = file
        .map(std::path::Path::to_path_buf)
        .or_else(|| env("TRACE_CHAIN_KEY_FILE").map(PathBuf::from));
    let bytes = match file {
        Some(file) => std::fs::read(&file)
            .with_context(|| format!("cannot read the trace chain key file {}", file.display()))?
            .trim_ascii()
            .to_vec(),
        None => match env("TRACE_CHAIN_KEY") {
            Some(text) => text.into_bytes(),
            None => return Ok(None),
        },
    };
    toolforge_agent::ChainKey::new(&bytes)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("TRACE_CHAIN_KEY: {e}"))
}

/// Session recency: in Redis when `REDIS_URL` is set (shared by replicas), else in memory. A
/// Redis that does not answer at start-up degrades to memory with a warning, never an outage.
pub async fn sessions() -> anyhow::Result<Arc<dyn SessionStore>> {
    match env("REDIS_URL") {
        Some(url) => {
            let connect =
                tokio::time::timeout(Duration::from_secs(4), RedisSessions::connect(&url)).await;
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

/// OpenTelemetry metrics per `OTEL_METRICS_EXPORTER` (`stdout` or `otlp`; off by default),
/// `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds).
pub fn metrics() -> anyhow::Result<Option<Metrics>> {
    let exporter = MetricsExporter::parse(
        env("OTEL_METRICS_EXPORTER").as_deref(),
        env("OTEL_EXPORTER_OTLP_ENDPOINT"),
    )
    .map_err(anyhow::Error::msg)?;
    let interval = number::<u64>("OTEL_METRIC_EXPORT_INTERVAL")?
        .map_or(metrics::DEFAULT_INTERVAL, Duration::from_millis);
    Metrics::init(exporter, interval).map_err(anyhow::Error::msg)
}

/// Flushes and stops `metrics` (the final export blocks, so off the async threads).
pub async fn shutdown_metrics(agent: &Agent) {
    if let Some(m) = agent.metrics().cloned() {
        let _ = tokio::task::spawn_blocking(move || m.shutdown()).await;
    }
}

/// The agent over `backend`, with the broker's `rules` and `EMBEDDER_BACKEND`'s embedder.
pub async fn build(
    backend: Arc<dyn ToolBackend>,
    settings: &serde_json::Map<String, serde_json::Value>,
    namespace: toolforge_select::Namespace,
    rules: toolforge_select::broker::Rules,
) -> anyhow::Result<Agent> {
    let mut config = agent_config(settings, namespace)?;
    config.rules = rules;
    let embedder = crate::embedder::from_env()?;
    let model = model_from_env()?;
    let sessions = sessions().await?;
    let traces = trace_sink().await?;
    tracing::info!(
        provider = model.provider(),
        model = model.model(),
        ceiling_usd = config.ceiling_usd,
        sessions = sessions.backend(),
        "agent ready"
    );
    let metrics = metrics()?;
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

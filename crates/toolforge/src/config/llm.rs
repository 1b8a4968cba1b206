//! The model provider: `LLM_PROVIDER` (default `mock`) and the providers' usual variables,
//! `ANTHROPIC_API_KEY`/`ANTHROPIC_BASE_URL`/`ANTHROPIC_MODEL`/`ANTHROPIC_TOOL_SEARCH`,
//! `OPENAI_API_KEY`/`OPENAI_BASE_URL`/`OPENAI_MODEL`/`OPENAI_TOOL_SEARCH`, `LLM_MODEL` (wins
//! over the provider's own model variable) and `LLM_STREAM`.

use anyhow::bail;
use toolforge_llm::{ProviderToolSearch, anthropic, openai};

use super::source::Source;

/// Which provider runs the agent's model calls, with its configuration.
#[derive(Clone)]
pub enum LlmSettings {
    /// The offline scripted model (the default).
    Mock,
    Anthropic(anthropic::AnthropicConfig),
    /// OpenAI or any OpenAI-compatible endpoint.
    OpenAi(openai::OpenAiConfig),
}

impl LlmSettings {
    pub(super) fn read(env: &Source) -> anyhow::Result<Self> {
        let provider = env
            .text("LLM_PROVIDER")
            .unwrap_or_else(|| "mock".to_owned());
        let stream = env.flag("LLM_STREAM")?.unwrap_or(false);
        Ok(match provider.trim().to_ascii_lowercase().as_str() {
            "mock" => Self::Mock,
            "anthropic" | "claude" => {
                let defaults = anthropic::AnthropicConfig::default();
                Self::Anthropic(anthropic::AnthropicConfig {
                    api_key: env.text("ANTHROPIC_API_KEY").unwrap_or_default(),
                    base_url: env
                        .text("ANTHROPIC_BASE_URL")
                        .unwrap_or(defaults.base_url.clone()),
                    model: env
                        .text("LLM_MODEL")
                        .or_else(|| env.text("ANTHROPIC_MODEL"))
                        .unwrap_or(defaults.model.clone()),
                    stream,
                    tool_search: anthropic_tool_search(env)?,
                    ..defaults
                })
            }
            "openai" | "openai-compatible" => {
                let defaults = openai::OpenAiConfig::default();
                Self::OpenAi(openai::OpenAiConfig {
                    api_key: env.text("OPENAI_API_KEY"),
                    base_url: env
                        .text("OPENAI_BASE_URL")
                        .unwrap_or(defaults.base_url.clone()),
                    model: env
                        .text("LLM_MODEL")
                        .or_else(|| env.text("OPENAI_MODEL"))
                        .unwrap_or(defaults.model.clone()),
                    stream,
                    // OpenAI's hosted tool search, through the Responses API.
                    tool_search: env.flag("OPENAI_TOOL_SEARCH")?.unwrap_or(false),
                    ..defaults
                })
            }
            other => bail!(
                "LLM_PROVIDER is \"{other}\"; use mock (offline, the default), anthropic or openai \
                 (any OpenAI-compatible endpoint via OPENAI_BASE_URL)"
            ),
        })
    }
}

/// `ANTHROPIC_TOOL_SEARCH`: `bm25` or `regex` turns on Anthropic's tool search tool (the tools
/// the first offer leaves out go deferred; the model searches them server-side); unset or
/// `off`, the agent's own `search_tools`.
fn anthropic_tool_search(env: &Source) -> anyhow::Result<Option<ProviderToolSearch>> {
    match env
        .text("ANTHROPIC_TOOL_SEARCH")
        .map(|v| v.trim().to_ascii_lowercase())
    {
        None => Ok(None),
        Some(v) if ["off", "0", "false", "no"].contains(&v.as_str()) => Ok(None),
        Some(v) if v == "bm25" => Ok(Some(ProviderToolSearch::Bm25)),
        Some(v) if v == "regex" => Ok(Some(ProviderToolSearch::Regex)),
        Some(v) => bail!("ANTHROPIC_TOOL_SEARCH is \"{v}\"; use bm25, regex or off"),
    }
}

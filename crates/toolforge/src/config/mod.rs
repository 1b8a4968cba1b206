//! The process's configuration, read once in `main` from the environment and `./.env`
//! ([`Source`]: the environment wins) into typed, checked settings that every command is
//! handed. A malformed value stops the process at start-up with the variable's name. Flags win
//! over these settings; the commands that take a flag for a setting merge the two
//! ([`Config::servers_config_path`], the visibility channels, the trace file).
//!
//! Nothing else in toolforge reads environment variables, but for the few the C library and the
//! async runtime read at start-up ([`process_env_sets`]).

mod agent;
mod builtin;
mod embedder;
mod llm;
mod source;
mod stores;
mod telemetry;
mod trace;

use std::path::PathBuf;

use anyhow::Context as _;
use toolforge_select::visibility::ChannelInput;

pub use agent::AgentSettings;
pub use builtin::{EvalsSettings, ToolkitSettings};
pub use embedder::{EmbedderBackend, EmbedderSettings};
pub use llm::LlmSettings;
pub use source::process_env_sets;
pub use stores::{CatalogBackend, KeySource, StoreSettings};
pub use telemetry::TelemetrySettings;
pub use trace::{ChainKeySource, TraceFileSettings};

use source::Source;

/// Every setting toolforge takes from its environment.
#[derive(Clone)]
pub struct Config {
    /// For `${VAR}` in the servers configuration ([`Config::expand`]).
    source: Source,
    /// `MCP_SERVERS_CONFIG`: the servers configuration when `--config` names none.
    servers_config: Option<PathBuf>,
    pub telemetry: TelemetrySettings,
    pub llm: LlmSettings,
    pub agent: AgentSettings,
    pub embedder: EmbedderSettings,
    pub trace: TraceFileSettings,
    pub stores: StoreSettings,
    /// The env channel of visibility (`MCP_ENABLED_TOOLS`, `MCP_DISABLED_TAGS`, ...).
    pub visibility: ChannelInput,
    pub toolkit: ToolkitSettings,
    pub evals: EvalsSettings,
    /// `TOOLFORGE_TOKEN`: the token the stdio gateway acts with when `--principal` is not given.
    pub token: Option<String>,
    pub conformance: ConformanceClientSettings,
}

/// What the official conformance suite hands `toolforge client`: `MCP_CONFORMANCE_SCENARIO`
/// and `MCP_CONFORMANCE_CONTEXT` (a JSON value).
#[derive(Debug, Clone, Default)]
pub struct ConformanceClientSettings {
    pub scenario: Option<String>,
    pub context: Option<serde_json::Value>,
}

impl Config {
    /// Reads the environment and `./.env`.
    ///
    /// # Errors
    /// A setting with a value it cannot take; the message names the variable.
    pub fn load() -> anyhow::Result<Self> {
        Self::from_source(Source::read())
    }

    fn from_source(source: Source) -> anyhow::Result<Self> {
        let env = &source;
        let context = env
            .text("MCP_CONFORMANCE_CONTEXT")
            .map(|text| {
                serde_json::from_str::<serde_json::Value>(&text)
                    .context("MCP_CONFORMANCE_CONTEXT is not valid JSON")
            })
            .transpose()?;
        Ok(Self {
            servers_config: env.path("MCP_SERVERS_CONFIG"),
            telemetry: TelemetrySettings::read(env)?,
            llm: LlmSettings::read(env)?,
            agent: AgentSettings::read(env)?,
            embedder: EmbedderSettings::read(env)?,
            trace: TraceFileSettings::read(env),
            stores: StoreSettings::read(env)?,
            visibility: ChannelInput::from_env(&|name| env.text(name))
                .context("invalid visibility setting in the environment")?,
            toolkit: ToolkitSettings::read(env),
            evals: EvalsSettings::read(env)?,
            token: env.text("TOOLFORGE_TOKEN"),
            conformance: ConformanceClientSettings {
                scenario: env.text("MCP_CONFORMANCE_SCENARIO"),
                context,
            },
            source,
        })
    }

    /// The servers configuration: `--config` (`flag`), else `MCP_SERVERS_CONFIG`, else
    /// `./mcp.servers.json`.
    pub fn servers_config_path(&self, flag: Option<PathBuf>) -> PathBuf {
        flag.or_else(|| self.servers_config.clone())
            .unwrap_or_else(|| PathBuf::from("mcp.servers.json"))
    }

    /// `${name}` in the servers configuration: the variable as set, empty values included.
    pub fn expand(&self, name: &str) -> Option<String> {
        self.source.raw(name)
    }

    /// A configuration of exactly these variables (tests).
    #[cfg(test)]
    pub fn of(vars: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::from_source(Source::of(vars))
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn an_empty_environment_is_a_working_configuration() {
        let config = Config::of(&[]).expect("the defaults");
        assert!(matches!(config.llm, super::LlmSettings::Mock));
        assert_eq!(config.embedder.backend, None);
        assert_eq!(
            config.servers_config_path(None),
            std::path::PathBuf::from("mcp.servers.json")
        );
        assert_eq!(
            config.trace.sink.as_deref(),
            Some("logs/traces.jsonl".as_ref())
        );
    }

    #[test]
    fn the_flag_wins_over_the_variable_and_expansion_keeps_empty_values() {
        let config = Config::of(&[("MCP_SERVERS_CONFIG", "from-env.json"), ("EMPTY", "")]).unwrap();
        assert_eq!(
            config.servers_config_path(None),
            std::path::PathBuf::from("from-env.json")
        );
        assert_eq!(
            config.servers_config_path(Some("flag.json".into())),
            std::path::PathBuf::from("flag.json")
        );
        assert_eq!(config.expand("EMPTY").as_deref(), Some(""));
        assert_eq!(config.expand("UNSET"), None);
    }

    #[test]
    fn every_section_is_checked_at_load() {
        for (name, value, says) in [
            ("LLM_PROVIDER", "gpt", "LLM_PROVIDER is \"gpt\""),
            (
                "EMBEDDER_BACKEND",
                "faiss",
                "EMBEDDER_BACKEND=\"faiss\" is not known",
            ),
            (
                "OTEL_TRACES_EXPORTER",
                "zipkin",
                "OTEL_TRACES_EXPORTER=\"zipkin\"",
            ),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "-1", "not a whole number"),
            (
                "LM_STUDIO_SERVERS",
                "localhost:1234",
                "is not an http(s) URL",
            ),
            ("MCP_CONFORMANCE_CONTEXT", "{", "not valid JSON"),
        ] {
            let err = match Config::of(&[(name, value)]) {
                Ok(_) => panic!("{name}={value} was accepted"),
                Err(e) => format!("{e:#}"),
            };
            assert!(err.contains(says), "{name}={value}: {err}");
        }
    }
}

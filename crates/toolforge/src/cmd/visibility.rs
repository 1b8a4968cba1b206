//! The operator's visibility flags, shared by every command that serves or runs tools. The
//! environment (`MCP_ENABLED_TOOLS`, `MCP_DISABLED_TOOLS`, `MCP_ENABLED_TAGS`,
//! `MCP_DISABLED_TAGS`, and the `_COMPONENTS` aliases) is the lowest channel; these flags come
//! next; a request's query string and `x-mcp-*` headers can then only narrow what they allow.

use anyhow::Context as _;
use toolforge_gateway::visible::VisibilityConfig;
use toolforge_select::visibility::{ChannelInput, Channels, DEFAULT_SEARCH_LIMIT, Policy};

#[derive(Debug, Clone, clap::Args)]
pub struct VisibilityArgs {
    /// Show only these tools, prompts and resources (comma-separated: a tool or prompt name, a
    /// resource URI or name, `server/name`, `server__name`, a server name for all it offers,
    /// or `all`).
    #[arg(long, value_name = "LIST")]
    pub tools: Option<String>,
    /// Never show these tools, prompts and resources (adds to every other channel's disabled
    /// list).
    #[arg(long, value_name = "LIST")]
    pub disabled_tools: Option<String>,
    /// Show only tools, prompts and resources with one of these tags.
    #[arg(long, value_name = "LIST")]
    pub tags: Option<String>,
    /// Never show tools, prompts and resources with these tags.
    #[arg(long, value_name = "LIST")]
    pub disabled_tags: Option<String>,
    /// Let a request's query or headers widen what env and flags allow (the seed's literal
    /// precedence); by default requests can only narrow.
    #[arg(long)]
    pub allow_request_widening: bool,
    /// Most tools a search (`?q=`, `x-mcp-query`) keeps.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SEARCH_LIMIT)]
    pub search_limit: usize,
}

impl VisibilityArgs {
    /// The operator's channels from the environment and these flags. A malformed value is an
    /// error: the command refuses to start rather than show more than intended.
    pub fn config(&self, process: &crate::config::Config) -> anyhow::Result<VisibilityConfig> {
        let env = process.visibility.clone();
        let cli = ChannelInput::from_cli(
            self.tools.as_deref(),
            self.disabled_tools.as_deref(),
            self.tags.as_deref(),
            self.disabled_tags.as_deref(),
        )
        .context("invalid visibility flag")?;
        Ok(VisibilityConfig {
            operator: Channels::operator(env, cli),
            policy: Policy {
                allow_request_widening: self.allow_request_widening,
                search_limit: self.search_limit,
                ..Policy::default()
            },
            governance: std::sync::Arc::default(),
        })
    }
}

/// How tools are offered to MCP clients.
#[derive(Debug, Clone, Copy, Default, clap::ValueEnum)]
pub enum ToolModeArg {
    /// List every visible tool.
    #[default]
    Direct,
    /// List only `search_tools` and `call_tool` (plus `--pin-tools`): progressive discovery.
    Search,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ToolModeArgs {
    /// How tools are offered to MCP clients.
    #[arg(long, value_enum, default_value = "direct")]
    pub tool_mode: ToolModeArg,
    /// In search mode, tools listed as well (exposed names, comma-separated).
    #[arg(long, value_name = "LIST")]
    pub pin_tools: Option<String>,
}

impl ToolModeArgs {
    #[must_use]
    pub fn mode(&self) -> toolforge_gateway::ToolMode {
        match self.tool_mode {
            ToolModeArg::Direct => toolforge_gateway::ToolMode::Direct,
            ToolModeArg::Search => toolforge_gateway::ToolMode::Search {
                pinned: self
                    .pin_tools
                    .as_deref()
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            },
        }
    }
}

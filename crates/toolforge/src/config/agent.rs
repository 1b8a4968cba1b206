//! The agent's own settings: `COST_CEILING_USD`, `MAX_AGENT_STEPS`, `AGENT_MAX_TOKENS`,
//! `AGENT_MAX_TOOLS` (default: 8 with search, 32 without), `AGENT_TOOL_SEARCH` (on unless `0`,
//! `false`, `no` or `off`), `AGENT_SEARCH_LIMIT` (results of a search that names none),
//! `AGENT_MAX_FOUND_TOOLS` (most tools searches add to one run), `AGENT_LEARNED_PINS`,
//! `TRACE_VERBOSE` and `TRACE_FAIL_CLOSED`. Pins and prices come from the servers
//! configuration, not from here.

use anyhow::bail;
use toolforge_agent::discovery::{DEFAULT_FIRST_OFFER, Discovery, MAX_SEARCH_LIMIT};
use toolforge_agent::{AgentConfig, DEFAULT_CEILING_USD};

use super::source::Source;

/// What the environment says of the agent, checked.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub ceiling_usd: f64,
    pub max_steps: u32,
    pub max_tokens: u32,
    pub max_tools: usize,
    pub discovery: Discovery,
    pub learned_pins: usize,
    pub trace_verbose: bool,
    pub trace_fail_closed: bool,
}

impl AgentSettings {
    pub(super) fn read(env: &Source) -> anyhow::Result<Self> {
        let defaults = AgentConfig::default();
        let ceiling_usd = env
            .number::<f64>("COST_CEILING_USD")?
            .unwrap_or(DEFAULT_CEILING_USD);
        if !ceiling_usd.is_finite() || ceiling_usd <= 0.0 {
            bail!("COST_CEILING_USD must be a positive number of dollars, e.g. 0.10");
        }
        let max_steps = env
            .number::<u32>("MAX_AGENT_STEPS")?
            .unwrap_or(defaults.max_steps);
        if max_steps == 0 {
            bail!("MAX_AGENT_STEPS must be at least 1");
        }
        let max_tokens = env
            .number::<u32>("AGENT_MAX_TOKENS")?
            .unwrap_or(defaults.max_tokens);
        if max_tokens == 0 {
            bail!("AGENT_MAX_TOKENS must be at least 1");
        }
        let discovery = discovery(env)?;
        let max_tools = match env.number::<usize>("AGENT_MAX_TOOLS")? {
            Some(n) => n,
            None if discovery.search => DEFAULT_FIRST_OFFER,
            None => toolforge_select::selection::DEFAULT_MAX_TOOLS,
        };
        if max_tools == 0 && !discovery.search {
            bail!(
                "AGENT_MAX_TOOLS must be at least 1 when AGENT_TOOL_SEARCH is off (0 offers only pins and search)"
            );
        }
        Ok(Self {
            ceiling_usd,
            max_steps,
            max_tokens,
            max_tools,
            discovery,
            learned_pins: env
                .number::<usize>("AGENT_LEARNED_PINS")?
                .unwrap_or(defaults.learned_pins),
            trace_verbose: env.flag("TRACE_VERBOSE")?.unwrap_or(false),
            trace_fail_closed: env.flag("TRACE_FAIL_CLOSED")?.unwrap_or(false),
        })
    }
}

fn discovery(env: &Source) -> anyhow::Result<Discovery> {
    let defaults = Discovery::default();
    let search = env.flag("AGENT_TOOL_SEARCH")?.unwrap_or(defaults.search);
    let search_limit = env
        .number::<usize>("AGENT_SEARCH_LIMIT")?
        .unwrap_or(defaults.search_limit);
    if !(1..=MAX_SEARCH_LIMIT).contains(&search_limit) {
        bail!("AGENT_SEARCH_LIMIT must be from 1 to {MAX_SEARCH_LIMIT}");
    }
    let max_found = env
        .number::<usize>("AGENT_MAX_FOUND_TOOLS")?
        .unwrap_or(defaults.max_found);
    Ok(Discovery {
        search,
        search_limit,
        max_found,
    })
}

#[cfg(test)]
mod tests {
    use super::AgentSettings;
    use crate::config::source::Source;

    #[test]
    fn defaults_and_the_first_offer_follow_search() {
        let on = AgentSettings::read(&Source::of(&[])).unwrap();
        assert!(on.discovery.search);
        assert_eq!(
            on.max_tools,
            toolforge_agent::discovery::DEFAULT_FIRST_OFFER
        );
        let off = AgentSettings::read(&Source::of(&[("AGENT_TOOL_SEARCH", "off")])).unwrap();
        assert!(!off.discovery.search);
        assert_eq!(
            off.max_tools,
            toolforge_select::selection::DEFAULT_MAX_TOOLS
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (name, value, says) in [
            (
                "COST_CEILING_USD",
                "-1",
                "COST_CEILING_USD must be a positive",
            ),
            ("COST_CEILING_USD", "ten", "COST_CEILING_USD is \"ten\""),
            ("MAX_AGENT_STEPS", "0", "MAX_AGENT_STEPS must be at least 1"),
            (
                "AGENT_SEARCH_LIMIT",
                "0",
                "AGENT_SEARCH_LIMIT must be from 1",
            ),
            (
                "TRACE_VERBOSE",
                "sometimes",
                "TRACE_VERBOSE is \"sometimes\"",
            ),
        ] {
            let err = AgentSettings::read(&Source::of(&[(name, value)]))
                .err()
                .unwrap_or_else(|| panic!("{name}={value} was accepted"))
                .to_string();
            assert!(err.contains(says), "{name}={value}: {err}");
        }
    }
}

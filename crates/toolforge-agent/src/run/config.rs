//! The agent's settings and the system prompt it sends.

use toolforge_llm::PriceTable;
use toolforge_select::Namespace;
use toolforge_select::broker::Rules;
use toolforge_select::pins::Pin;

use crate::cost::DEFAULT_CEILING_USD;
use crate::discovery::{DEFAULT_FIRST_OFFER, Discovery};

/// The system prompt every provider gets.
pub const SYSTEM_PROMPT: &str = "You are toolforge's agent. Do what the user asks by calling the tools offered; call several at once when they do not depend on each other. Use only the tools offered and give arguments that match their input schemas. When you are done, reply with only one JSON object and nothing else: {\"answer\": \"<the answer in plain words>\", \"key_facts\": {<the facts the answer rests on, as JSON values>}}.";

/// Agent settings (the binary fills them from env and flags).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `COST_CEILING_USD`.
    pub ceiling_usd: f64,
    /// `MAX_AGENT_STEPS`: model turns per request.
    pub max_steps: u32,
    /// `max_tokens` asked of each model call before clamping.
    pub max_tokens: u32,
    /// `AGENT_MAX_TOOLS`: tools the first offer ranks in (pins come on top); larger catalogs
    /// are ranked against the request, and the model searches for the rest.
    pub max_tools: usize,
    /// How the model reaches the tools the first offer leaves out.
    pub discovery: Discovery,
    /// The operator's pins (`"toolforge": {"pins": [...]}`): offered whatever their rank.
    pub pins: Vec<Pin>,
    /// `AGENT_LEARNED_PINS`: most tools a principal called in its recent runs that its first
    /// offer also pins (0: off).
    pub learned_pins: usize,
    /// The broker's rules (seed 004), applied with the intent of each request's message.
    pub rules: Rules,
    pub namespace: Namespace,
    /// Prompt-cache breakpoints (on by default).
    pub cache: bool,
    /// `TRACE_VERBOSE`: arguments in trace records.
    pub trace_verbose: bool,
    /// `TRACE_FAIL_CLOSED`: refuse to run (and stop a run) while the trace cannot be written.
    pub trace_fail_closed: bool,
    pub prices: PriceTable,
    pub system_prompt: String,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            ceiling_usd: DEFAULT_CEILING_USD,
            max_steps: 8,
            max_tokens: 1024,
            max_tools: DEFAULT_FIRST_OFFER,
            discovery: Discovery::default(),
            pins: Vec::new(),
            learned_pins: 0,
            rules: Rules::default(),
            namespace: Namespace::Auto,
            cache: true,
            trace_verbose: false,
            trace_fail_closed: false,
            prices: PriceTable::default(),
            system_prompt: SYSTEM_PROMPT.to_owned(),
        }
    }
}

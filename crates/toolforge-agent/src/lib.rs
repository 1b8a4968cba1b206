//! The agent's run loop: visibility, broker, presentation, model, selector, pool or dry-run,
//! trace, with a hard cost ceiling.
//!
//! The agent speaks toolforge's own types; it never touches HTTP directly, and reaches MCP
//! servers only through a [`backend::ToolBackend`] (the pool in production).

pub mod answer;
pub mod backend;
pub mod cost;
pub mod discovery;
pub mod governance;
pub mod halt;
pub mod learned_pins;
pub mod metrics;
pub mod run;
pub mod session;
pub mod spans;
pub mod trace;
mod trace_live;
pub mod trace_verify;

pub use backend::{ToolBackend, ToolFailure, ToolOutput};
pub use cost::{Allowance, CostGuard, DEFAULT_CEILING_USD};
pub use governance::{Governance, Limiter, Refusal};
pub use run::{Agent, AgentConfig, RunEvent, RunRequest, RunResult, SearchStep, Step, Visibility};
pub use session::{MemorySessions, RedisSessions, SessionStore};
pub use trace::{ChainKey, RecordKind, TraceRecord, TraceSink};

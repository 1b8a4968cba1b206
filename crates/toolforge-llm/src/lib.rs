//! Model providers behind one trait (Anthropic Messages, OpenAI-compatible chat completions and
//! the deterministic offline mock), the price table, and the embedders (hashing,
//! OpenAI-compatible, Voyage and a local BERT model run in-process).
//!
//! This crate never reads the environment or files on its own: the binary hands it typed config.

pub mod anthropic;
pub mod embed;
pub mod mock;
pub mod model;
pub mod openai;
pub mod openai_tokens;
pub mod pricing;
mod provider_http;

pub use mock::{MOCK_MODEL, MockModel};
pub use model::{
    BoundSource, Content, InputBound, Message, Model, ModelError, ModelRequest, ModelResponse,
    ProviderToolSearch, Role, StopReason, ToolSpec, Usage, counted_bound, deferred_load_bound,
    estimate_input_tokens, input_token_upper_bound,
};
pub use pricing::{Price, PriceTable};

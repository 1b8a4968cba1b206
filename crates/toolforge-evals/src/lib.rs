//! The built-in `evals` MCP server: the LLM-evaluation tools of seed 003 (list_models, complete,
//! react_step, judge, drift, variants and trajectories) plus `grade_selection`.
//!
//! The tools run against OpenAI-compatible backends (LM Studio servers, Together, the Hugging
//! Face router) composed into one router, and an embedder for the drift, variant and trajectory
//! tools. Every tool is stateless: the caller owns loops and traces.
//!
//! This crate never reads the environment: the binary builds an [`EvalsConfig`] and hands it
//! in. It never executes the tools a model calls either: `react_step` answers from mocks or
//! hands the calls back to the caller.

pub mod adapter;
pub mod analysis;
pub mod chat;
pub mod config;
pub mod embedding;
pub mod error;
pub mod grade;
pub mod judge;
pub mod pyjson;
pub mod react;
pub mod reply;
pub mod server;
pub mod tools;
pub mod variants;

pub use config::{EmbeddingConfig, EvalsConfig, RemoteBackend, ToolTimeouts};
pub use error::EvalError;
pub use server::EvalsServer;
pub use tools::Tools;

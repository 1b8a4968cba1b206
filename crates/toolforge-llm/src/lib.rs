//! Model providers behind one trait (Anthropic Messages, OpenAI-compatible chat completions and
//! the deterministic offline mock), the price table, and the embedders (hashing,
//! OpenAI-compatible, Voyage and a local BERT model run in-process).
//!
//! This crate never reads the environment or files on its own: the binary hands it typed config.

pub mod embed;

//! The MCP server fixture that the official conformance suite's server scenarios call by name
//! (`test_simple_text`, `test://static-text`, `test_prompt_with_arguments`, ...).
//!
//! It exists to prove that toolforge's MCP plumbing (and the gateway in front of it) is
//! faithful; it is not a product feature.

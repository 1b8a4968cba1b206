//! The agent's run loop: visibility, broker, presentation, model, selector, pool or dry-run,
//! trace, with a hard cost ceiling.
//!
//! The agent speaks toolforge's own types; it never touches HTTP or rmcp directly.

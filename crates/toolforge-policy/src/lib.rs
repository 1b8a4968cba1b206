//! Governance decisions, pure: who is asking ([`Principal`]), whether a Cedar policy set lets
//! them list, call, search, read or prompt something ([`Policies::decide`], with the deciding
//! policy ids), and rate limits as token buckets per (principal, tool) ([`limits`]).
//!
//! No I/O, no async, no clock: callers pass the policy text, the request and the time.

mod engine;
mod error;
pub mod limits;
mod principal;
mod request;

pub use engine::{DEFAULT_DENY, Decision, Policies};
pub use error::PolicyError;
pub use principal::{ANONYMOUS, Principal};
pub use request::{Action, Annotations, Request, Target, ToolRef};

#[cfg(test)]
mod tests;

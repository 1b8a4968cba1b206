//! Integration tests of the agent: the run loop against fake backends and scripted models, and
//! session recency in a real Redis server (installed by `scripts/setup`).

mod discovery;
mod discovery_wire;
mod redis_limits;
mod redis_sessions;
mod run_loop;

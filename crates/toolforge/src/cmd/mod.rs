//! One module per subcommand; each owns its clap arguments and its `run` function.

pub mod auth;
pub mod broker;
pub mod chat;
pub mod client;
pub mod cost_report;
pub mod eval;
pub mod gateway;
pub mod governance;
pub mod mock_rest;
pub mod select;
pub mod serve;
pub mod server;
pub mod tools;
pub mod trace;
pub mod visibility;

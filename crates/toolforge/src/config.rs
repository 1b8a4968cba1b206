//! Process-level set-up and the environment: the only module of toolforge that reads env vars.
//! Everything read here is parsed once into typed config and handed to the libraries.

use tracing_subscriber::EnvFilter;

/// Logs go to stderr: stdout belongs to the MCP stdio protocol and to command results.
pub fn init_tracing() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// reqwest is built without a bundled crypto provider (ring is much cheaper to build than
/// aws-lc); install ring once, before any HTTPS client exists.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Reads one environment variable; empty values count as unset.
#[allow(clippy::disallowed_methods)]
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

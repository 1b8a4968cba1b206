//! Integration tests of the toolkit server: the SQL engine, its hostile corpus, and the MCP
//! server over in-process, real stdio and real Streamable HTTP transports.

mod fairness;
mod mcp;
mod python_hostile;
mod resources;
mod rest;
mod sql;
mod sql_hostile;

use std::path::{Path, PathBuf};

/// A fresh seeded database in its own temp dir.
pub fn seeded_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sample.db");
    toolforge_toolkit::seed::create(&path).expect("seed");
    (dir, path)
}

/// Bytes of every file in `dir` (database plus any -wal/-shm/-journal siblings).
pub fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    out.sort();
    out
}

pub const ALICE_SQL: &str = "SELECT c.name AS customer_name, o.order_id, o.quantity, p.unit_price, (o.quantity * p.unit_price) AS line_total, o.status FROM orders o JOIN customers c ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id WHERE c.name = 'Alice Nguyen'";

/// The sandbox over the machine's `python3`.
pub fn sandbox_config() -> toolforge_toolkit::sandbox::SandboxConfig {
    let python = toolforge_toolkit::sandbox::resolve_python("python3");
    assert!(
        python.is_file(),
        "python3 not found: install CPython 3 (scripts/setup)"
    );
    toolforge_toolkit::sandbox::SandboxConfig::new(python)
}

/// A server configuration over `db`, with the exchange-rate API at `rest`.
pub fn toolkit_config(db: PathBuf, rest: &str) -> toolforge_toolkit::server::ToolkitConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    toolforge_toolkit::server::ToolkitConfig {
        db_path: db,
        sql_limits: toolforge_toolkit::sql::SqlLimits::default(),
        sandbox: sandbox_config(),
        rest_base_url: rest.to_owned(),
        rest_timeout: std::time::Duration::from_secs(2),
        resources_dir: None,
    }
}

/// Serves the toolkit over Streamable HTTP at `/mcp` on `listener` (a server per session,
/// [`toolforge_toolkit::server::Toolkit::for_session`]) until `cancel` fires.
pub async fn serve_http(
    config: toolforge_toolkit::server::ToolkitConfig,
    listener: tokio::net::TcpListener,
    cancel: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let toolkit = toolforge_toolkit::server::Toolkit::new(config);
    let service = StreamableHttpService::new(
        move || Ok(toolkit.for_session()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_cancellation_token(cancel.child_token()),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
}

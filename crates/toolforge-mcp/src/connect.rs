//! Opening one server's connection: spawning a stdio child (its stderr drained to our logs),
//! opening a Streamable HTTP session over the pool's own keep-alive HTTP client, or opening a
//! legacy HTTP+SSE stream (`crate::legacy_sse`) over the same client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientLifecycleOptions, ClientServiceExt, RoleClient};
use tokio::io::AsyncBufReadExt;

use crate::config::Transport;
use crate::legacy_sse::LegacySseTransport;
use crate::options::{BackendProxy, PoolOptions};
use crate::relay::Relay;
use crate::upstream::Upstream;

/// A running connection to one server.
pub(crate) type Client = RunningService<RoleClient, Relay>;

pub(crate) async fn connect(up: &Upstream, options: &PoolOptions) -> Result<Client, String> {
    match &up.cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let program = match &options.self_command {
                Some((name, exe)) if name == command => exe.clone(),
                _ => PathBuf::from(command),
            };
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(args);
            for (k, v) in env {
                cmd.env(k, v);
            }
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            if options.stdio_default_scheduling {
                crate::stdio_scheduling::start_under_default_policy(&mut cmd);
            }
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not start `{}`: {e}", program.display()))?;
            if let Some(stderr) = stderr {
                let server = up.cfg.name.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(target: "toolforge::backend", server = %server, "{line}");
                    }
                });
            }
            let served = serve(up, transport)
                .await
                .map_err(|e| format!("initialize failed: {}", init_error(e)));
            remember(up, served)
        }
        Transport::Http { url, headers } => {
            let map = configured_headers(headers)?;
            let cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(map)
                .max_concurrent_requests(BACKEND_CALLS_IN_FLIGHT);
            let client = match &up.credentials {
                Some(credentials) => crate::auth::bearer::Bearer::new(
                    backend_http_client(options.backend_proxy)?,
                    credentials.clone(),
                ),
                None => {
                    crate::auth::bearer::Bearer::plain(backend_http_client(options.backend_proxy)?)
                }
            };
            let transport = match &up.direct {
                Some(direct) => {
                    StreamableHttpClientTransport::with_direct_requests(client, cfg, direct.clone())
                }
                None => StreamableHttpClientTransport::with_client(client, cfg),
            };
            let served = serve(up, transport).await;
            match served {
                Ok(client) => {
                    *up.refused.lock() = None;
                    remember(up, Ok(client))
                }
                Err(e) => {
                    let refusal = crate::auth::refusal::auth_refusal_of(&e);
                    let message = format!("initialize at {url} failed: {}", init_error(e));
                    *up.refused.lock() = refusal.map(|(_, challenge)| challenge);
                    remember(up, Err(message))
                }
            }
        }
        Transport::Sse { url, headers } => {
            let map: http::HeaderMap = configured_headers(headers)?.into_iter().collect();
            let client = backend_http_client(options.backend_proxy)?;
            let transport = LegacySseTransport::connect(client, url, map)
                .await
                .map_err(|e| format!("the SSE stream at {url} failed: {e}"))?;
            let served = up
                .relay
                .clone()
                .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                .await
                .map_err(|e| format!("initialize at {url} failed: {}", init_error(e)));
            remember(up, served)
        }
    }
}

/// Starts `up`'s connection over `transport` in the era [`lifecycle`] picks.
async fn serve<T, E, A>(
    up: &Upstream,
    transport: T,
) -> Result<Client, rmcp::service::ClientInitializeError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    up.relay
        .clone()
        .serve_with_lifecycle_options(transport, lifecycle(up), lifecycle_options(up))
        .await
}

/// A failed start for people (`/health`'s `last_error`): what went wrong and its causes, without
/// rmcp's transport type names.
fn init_error(e: rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::TransportError { error, context } => {
            let mut text = error.error.to_string();
            let mut cause = error.error.source();
            while let Some(c) = cause {
                let more = c.to_string();
                if !text.contains(&more) {
                    text = format!("{text}: {more}");
                }
                cause = c.source();
            }
            format!("{text} ({context})")
        }
        other => other.to_string(),
    }
}

/// How the pool opens a connection to `up`: in the era its `protocol` names, or, for `"auto"`,
/// in the era it answered in last time (no probe), else by probing `server/discover` and falling
/// back to `initialize`.
fn lifecycle(up: &Upstream) -> ClientLifecycleMode {
    use crate::config::Protocol;
    use crate::upstream::Era;
    let era = match up.cfg.protocol {
        Protocol::Handshake => Some(Era::Handshake),
        Protocol::Modern => Some(Era::Modern),
        Protocol::Auto => up.negotiated.read().as_ref().map(|(era, _)| *era),
    };
    match era {
        Some(Era::Handshake) => ClientLifecycleMode::Initialize,
        Some(Era::Modern) => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        None => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// The probe's bound for `"auto"`: the server's `discoverTimeout`, not rmcp's 10 s, so that a
/// handshake-era server that leaves `server/discover` unanswered is reached within it.
fn lifecycle_options(up: &Upstream) -> ClientLifecycleOptions {
    ClientLifecycleOptions::default().with_auto_discover_timeout(up.cfg.discover_timeout)
}

/// Records the era a connection was opened in (for `/health` and the next restart); a failed
/// one forgets it, so that an `"auto"` server that changed is probed again.
fn remember(up: &Upstream, served: Result<Client, String>) -> Result<Client, String> {
    use crate::upstream::Era;
    let learned = served.as_ref().ok().and_then(|client| {
        let version = client.peer().peer_info()?.protocol_version.clone();
        let era = if version.has_initialize() {
            Era::Handshake
        } else {
            Era::Modern
        };
        Some((era, version.to_string()))
    });
    *up.negotiated.write() = learned;
    served
}

/// Calls one HTTP backend may have in flight on each of its two paths at once: posted straight
/// from the calling task (`DirectRequests`), and posted by the connection's task, which takes
/// the rest and the calls that need it (a progress token to map). rmcp's default is 16: at 32
/// concurrent clients half the calls then took the connection's path, through more tasks, and
/// the gateway's CPU per call at c = 32 was 0.065-0.074 ms against 0.056-0.063 with 32
/// (`benchmarks/proxy/README.md`, 2026-11-29).
const BACKEND_CALLS_IN_FLIGHT: usize = 32;

/// Most redirects an HTTP backend may send one request through.
const MAX_BACKEND_REDIRECTS: usize = 10;

/// A server's configured `headers`, each checked as an HTTP header name and value; of a name
/// given twice, the last value.
fn configured_headers(
    headers: &[(String, String)],
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name =
                http::HeaderName::try_from(k.as_str()).map_err(|e| format!("header {k:?}: {e}"))?;
            let value = http::HeaderValue::try_from(v.as_str())
                .map_err(|e| format!("header {k:?}: {e}"))?;
            Ok((name, value))
        })
        .collect()
}

/// The HTTP client for one Streamable HTTP backend.
///
/// rmcp's default client turns connection pooling off, so every JSON-RPC message to a backend
/// opened (and closed) a TCP connection: a third of a proxied call's cost. rmcp's worker reads
/// each POST's event stream to its end once the response arrived, so a pooled connection comes
/// back clean; with `TCP_NODELAY` no Nagle / delayed-ACK stall waits on the next request.
/// Redirects are rmcp's rule: same-origin 307 and 308 only (they keep the method and the body,
/// and never replay the session id or custom headers to another host).
fn backend_http_client(proxy: BackendProxy) -> Result<reqwest::Client, String> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_BACKEND_REDIRECTS {
            attempt.error(format!("more than {MAX_BACKEND_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    let builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(30))
        .redirect(redirects);
    let builder = match proxy {
        BackendProxy::Environment => builder,
        BackendProxy::None => builder.no_proxy(),
    };
    builder.build().map_err(|e| format!("HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::time::{Duration, Instant};

    use super::{remember, serve};
    use crate::relay::{ElicitationFallback, Relay};
    use crate::upstream::{Era, Upstream};

    /// A handshake-era server on the other end of `io` that leaves requests it does not know
    /// (`server/discover`) unanswered, as some servers do, and answers `initialize`. Returns
    /// when `initialize` arrived, on the test's clock.
    async fn handshake_only(io: tokio::io::DuplexStream) -> Vec<(String, Instant)> {
        let (read, mut write) = tokio::io::split(io);
        let mut lines = BufReader::new(read).lines();
        let mut seen = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            let msg: Value = serde_json::from_str(&line).unwrap_or_default();
            let method = msg["method"].as_str().unwrap_or_default().to_owned();
            seen.push((method.clone(), Instant::now()));
            if method == "initialize" {
                let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "old", "version": "0"}}});
                let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
            }
            if method == "notifications/initialized" {
                return seen;
            }
        }
        seen
    }

    /// Connects an `"auto"` server configured with `entry`'s keys to [`handshake_only`] and
    /// returns how long after the `server/discover` probe the client sent `initialize`, and the
    /// era the pool remembered.
    async fn fallback_wait(entry: Value) -> (Duration, Option<Era>) {
        let mut entry = entry;
        entry["command"] = json!("unused");
        let text = json!({"mcpServers": {"old": entry}});
        let cfg = crate::config::parse(&text.to_string(), &|_| None)
            .expect("config")
            .servers
            .remove(0);
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        let up = Arc::new(Upstream::new(
            cfg,
            Relay::new("old", events, ElicitationFallback::Decline),
            None,
        ));
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(handshake_only(theirs));
        let (read, write) = tokio::io::split(ours);
        let client = serve(&up, (read, write)).await.map_err(|e| e.to_string());
        let client = remember(&up, client).expect("the client falls back to initialize");
        let seen = server.await.expect("server");
        let methods: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            methods,
            ["server/discover", "initialize", "notifications/initialized"]
        );
        let era = up.negotiated.read().as_ref().map(|(era, _)| *era);
        let _ = client.cancel().await;
        (seen[1].1 - seen[0].1, era)
    }

    /// `waited` is `timeout`, give or take the (paused) clock's steps between the timer firing
    /// and the backend reading what it sent.
    fn assert_about(waited: Duration, timeout: Duration) {
        assert!(
            waited >= timeout && waited < timeout + Duration::from_millis(100),
            "initialize {waited:?} after the probe, not after its {timeout:?}"
        );
    }

    // The clock is paused: it jumps to the next timer whenever every task waits, so each wait
    // below is the probe's timeout exactly, however slow the machine.

    #[tokio::test(start_paused = true)]
    async fn a_handshake_only_backend_is_reached_after_the_short_default_probe() {
        let (waited, era) = fallback_wait(json!({})).await;
        assert_about(waited, crate::config::DEFAULT_DISCOVER_TIMEOUT);
        assert!(
            waited < Duration::from_secs(10),
            "rmcp's own 10 s: {waited:?}"
        );
        assert_eq!(era, Some(Era::Handshake));
    }

    #[tokio::test(start_paused = true)]
    async fn discover_timeout_sets_the_probes_bound() {
        let (waited, era) = fallback_wait(json!({"discoverTimeout": 0.5})).await;
        assert_about(waited, Duration::from_millis(500));
        assert_eq!(era, Some(Era::Handshake));
        let (waited, _) = fallback_wait(json!({"discoverTimeout": 12})).await;
        assert_about(waited, Duration::from_secs(12));
    }
}

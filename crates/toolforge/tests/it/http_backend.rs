//! A Streamable HTTP backend behind the gateway: calls reuse pooled connections instead of
//! opening a TCP connection per JSON-RPC message (a third of a proxied call's cost), and
//! redirects are followed only to the same origin.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

use crate::Served;
use crate::stateless::session_rpc;

/// A gateway serving the toolkit server, to stand as the HTTP backend of the gateway under
/// test: the process, and its address (`host:port`).
async fn toolkit_backend() -> (Served, String) {
    let backend = Served::start(&json!({"mcpServers": {
        "toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}
    }}))
    .await;
    let address = backend.base.trim_start_matches("http://").to_owned();
    (backend, address)
}

/// The gateway under test, stateless, with one Streamable HTTP backend at `url`.
async fn gateway_in_front_of(url: String) -> Served {
    Served::start_full(
        &json!({"mcpServers": {"back": {"url": url}}}),
        &[],
        &["--stateless"],
    )
    .await
}

/// A `tools/call` through `front` (JSON-RPC id `id`) gets the toolkit backend's answer.
async fn assert_backend_answers(front: &Served, id: u64) {
    let params = json!({"name": "list_resources", "arguments": {}});
    let (_, r) = session_rpc(&front.base, None, id, "tools/call", params).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("schema.sql")),
        "the backend's answer comes through: {r}"
    );
}

/// A TCP forwarder to `target` that counts the connections it accepted.
async fn counting_forwarder(target: String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn calls_to_an_http_backend_reuse_connections() {
    let (_backend, backend) = toolkit_backend().await;
    let (port, accepted) = counting_forwarder(backend).await;
    let front = gateway_in_front_of(format!("http://127.0.0.1:{port}/mcp")).await;
    front.wait_health(60, |h| h["status"] == "ok").await;
    let before = accepted.load(Ordering::SeqCst);

    const CALLS: usize = 20;
    for id in 0..CALLS {
        assert_backend_answers(&front, id as u64).await;
    }
    let opened = accepted.load(Ordering::SeqCst) - before;
    // Without pooling every message opens a connection (at least 20 here). With it, a few may
    // still open: hyper hands a connection back to its pool only after the response is read,
    // so on a loaded machine the next request can start first and open another.
    assert!(
        opened <= CALLS / 4,
        "{CALLS} calls opened {opened} new connections to the backend; pooled connections \
         should carry them"
    );
}

/// A front for the backend at `backend` (`host:port`), on a port of its own: `/mcp` relays
/// each request to the backend's `/mcp` (streaming the answer, event streams included),
/// `/moved` redirects with a 307 to `/mcp` on the same origin, and `/away` with a 307 to the
/// backend itself (another origin). Returns the front's port and how many requests `/moved`
/// got.
async fn redirecting_front(backend: String) -> (u16, Arc<AtomicUsize>) {
    use axum::body::Body;
    use axum::http::{Request, Response, header};
    use axum::response::Redirect;
    use axum::routing::any;

    let moved = Arc::new(AtomicUsize::new(0));
    let hits = moved.clone();
    let target = format!("http://{backend}/mcp");
    let relay = reqwest::Client::new();
    let app = axum::Router::new()
        .route(
            "/mcp",
            any(move |request: Request<Body>| {
                let (relay, target) = (relay.clone(), target.clone());
                async move {
                    let (parts, body) = request.into_parts();
                    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                    let mut headers = parts.headers;
                    headers.remove(header::HOST);
                    let answer = relay
                        .request(parts.method, &target)
                        .headers(headers)
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    let mut response = Response::builder().status(answer.status());
                    for (name, value) in answer.headers() {
                        response = response.header(name, value);
                    }
                    response
                        .body(Body::from_stream(answer.bytes_stream()))
                        .unwrap()
                }
            }),
        )
        .route(
            "/moved",
            any(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                async { Redirect::temporary("/mcp") }
            }),
        )
        .route(
            "/away",
            any(move || async move { Redirect::temporary(&format!("http://{backend}/mcp")) }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, moved)
}

#[tokio::test]
async fn a_backend_behind_a_same_origin_redirect_is_reached() {
    let (_backend, backend) = toolkit_backend().await;
    let (port, moved) = redirecting_front(backend).await;
    let front = gateway_in_front_of(format!("http://127.0.0.1:{port}/moved")).await;
    let health = front.wait_health(60, |h| h["status"] == "ok").await;
    assert_eq!(health["status"], "ok", "{health}");
    let before = moved.load(Ordering::SeqCst);

    assert_backend_answers(&front, 1).await;
    assert!(
        moved.load(Ordering::SeqCst) > before,
        "the call went to the configured URL and followed its redirect"
    );
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed() {
    let (_backend, backend) = toolkit_backend().await;
    let (port, _) = redirecting_front(backend).await;
    let front = gateway_in_front_of(format!("http://127.0.0.1:{port}/away")).await;
    let health = front
        .wait_health(60, |h| crate::server_state(h, "back")["state"] == "failed")
        .await;
    let back = crate::server_state(&health, "back");
    assert_eq!(back["state"], "failed", "{health}");
    let error = back["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("307"),
        "the redirect is reported, not followed: {error}"
    );
}

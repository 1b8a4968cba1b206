//! The Streamable HTTP router in-process: loopback Host/Origin get through, anything else is
//! refused with 403 before it reaches a session (DNS-rebinding protection).

use http::{Request, StatusCode};
use toolforge_conformance::{HttpOptions, router};
use tower::ServiceExt as _;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

async fn post(host: &str, origin: Option<&str>) -> StatusCode {
    let mut req = Request::post("/mcp")
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    let resp = router(HttpOptions::default())
        .oneshot(req.body(axum::body::Body::from(INIT)).unwrap())
        .await
        .unwrap();
    resp.status()
}

#[tokio::test]
async fn host_and_origin_are_checked_against_loopback() {
    let table: &[(&str, Option<&str>, bool)] = &[
        ("127.0.0.1:8080", None, true),
        ("localhost:8080", None, true),
        ("[::1]:8080", None, true),
        ("127.0.0.1:8080", Some("http://127.0.0.1:8080"), true),
        ("localhost:3000", Some("http://localhost:5173"), true),
        ("evil.example.com", None, false),
        ("evil.example.com:8080", None, false),
        ("127.0.0.1:8080", Some("http://evil.example.com"), false),
        (
            "127.0.0.1:8080",
            Some("https://evil.example.com:443"),
            false,
        ),
    ];
    for (host, origin, ok) in table {
        let status = post(host, *origin).await;
        if *ok {
            assert!(status.is_success(), "{host} {origin:?}: {status}");
        } else {
            assert_eq!(status, StatusCode::FORBIDDEN, "{host} {origin:?}");
        }
    }
}

#[tokio::test]
async fn extra_hosts_are_accepted_when_configured() {
    let opts = HttpOptions {
        extra_hosts: vec!["fixture.internal".into()],
        ..Default::default()
    };
    let req = Request::post("/mcp")
        .header("host", "fixture.internal:9000")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(axum::body::Body::from(INIT))
        .unwrap();
    let status = router(opts).oneshot(req).await.unwrap().status();
    assert!(status.is_success(), "{status}");
}

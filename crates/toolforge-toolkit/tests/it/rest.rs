//! `rest_exchange_rate` against the mock API on a free loopback port, and against broken APIs.

use std::time::Duration;

use axum::http::StatusCode;
use toolforge_toolkit::rest::{self, RestError};

/// (API base URL, from, to, expected error kind, message fragment)
type Case<'a> = (&'a str, &'a str, &'a str, fn(&RestError) -> bool, &'a str);

async fn serve(router: axum::Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    format!("http://{addr}")
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[tokio::test]
async fn mock_answers_rates_and_conversions() {
    let base = serve(rest::mock_router()).await;
    let r = rest::fetch_rate(
        &client(),
        &base,
        "usd",
        "EUR",
        Some(334.0),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    assert_eq!(
        (r.base.as_str(), r.target.as_str(), r.rate),
        ("USD", "EUR", 0.92)
    );
    assert_eq!(r.converted, Some(307.28));
    assert_eq!(r.date.as_deref(), Some(rest::MOCK_DATE));
    let r = rest::fetch_rate(
        &client(),
        &format!("{base}/"),
        "EUR",
        "USD",
        None,
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    assert!((r.rate - 1.086_957).abs() < 1e-6, "{}", r.rate);
}

#[tokio::test]
async fn failures_are_clear() {
    let mock = serve(rest::mock_router()).await;
    let garbage = serve(axum::Router::new().route(
        "/rates/{b}",
        axum::routing::get(|| async { "<html>oops</html>" }),
    ))
    .await;
    let wrong_shape = serve(axum::Router::new().route(
        "/rates/{b}",
        axum::routing::get(|| async { axum::Json(serde_json::json!({"rates": {"EUR": "high"}})) }),
    ))
    .await;
    let status = serve(axum::Router::new().route(
        "/rates/{b}",
        axum::routing::get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance") }),
    ))
    .await;
    let slow = serve(axum::Router::new().route(
        "/rates/{b}",
        // Never answers: the client's timeout is the only way out.
        axum::routing::get(|| async {
            std::future::pending::<()>().await;
            "late"
        }),
    ))
    .await;
    // Bound but not listening, and held for the whole test: connecting is refused, and no
    // other process can take the port meanwhile.
    let refusing = tokio::net::TcpSocket::new_v4().unwrap();
    refusing.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let dead = format!("http://{}", refusing.local_addr().unwrap());
    let t = Duration::from_millis(500);
    let c = client();
    let cases: Vec<Case<'_>> = vec![
        (
            &mock,
            "US",
            "EUR",
            |e| matches!(e, RestError::BadCode(_)),
            "three letters",
        ),
        (
            &mock,
            "USD",
            "E1R",
            |e| matches!(e, RestError::BadCode(_)),
            "three letters",
        ),
        (
            &mock,
            "XYZ",
            "EUR",
            |e| matches!(e, RestError::Status(404, _)),
            "HTTP 404",
        ),
        (
            &mock,
            "USD",
            "XYZ",
            |e| matches!(e, RestError::NoRate(..)),
            "no rate",
        ),
        (
            &garbage,
            "USD",
            "EUR",
            |e| matches!(e, RestError::Garbage(_)),
            "not a rates document",
        ),
        (
            &wrong_shape,
            "USD",
            "EUR",
            |e| matches!(e, RestError::Garbage(_)),
            "not a rates document",
        ),
        (
            &status,
            "USD",
            "EUR",
            |e| matches!(e, RestError::Status(503, _)),
            "down for maintenance",
        ),
        (
            &slow,
            "USD",
            "EUR",
            |e| matches!(e, RestError::Timeout(..)),
            "did not answer",
        ),
        (
            &dead,
            "USD",
            "EUR",
            |e| matches!(e, RestError::Connect(..)),
            "could not connect",
        ),
    ];
    for (url, b, tgt, is, msg) in cases {
        let e = rest::fetch_rate(&c, url, b, tgt, None, t)
            .await
            .unwrap_err();
        assert!(is(&e), "{b}->{tgt} at {url}: {e:?}");
        assert!(e.to_string().contains(msg), "{e}");
    }
}

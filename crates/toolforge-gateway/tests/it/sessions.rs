//! `/mcp` sessions: the cap, idle expiry (also for a session used only for tool calls, which
//! are answered without the session's worker: the gateway's own idle clock counts them), and
//! request ids reused while in flight.

use std::time::Duration;

use http_body_util::BodyExt as _;
use toolforge_gateway::{HttpOptions, SessionLimits};
use tower::ServiceExt as _;

use crate::{INITIALIZE, app, mcp_post, open_session, rpc, send, text};

fn limits(max_sessions: usize, idle: Duration) -> HttpOptions {
    HttpOptions {
        sessions: SessionLimits {
            max_sessions,
            idle_timeout: idle,
        },
        ..HttpOptions::default()
    }
}

#[tokio::test]
async fn no_session_opens_past_the_cap() {
    let (router, _dir) = app(limits(3, Duration::from_secs(300))).await;
    for _ in 0..3 {
        open_session(&router).await;
    }
    let (status, body) = send(&router, mcp_post(None, INITIALIZE)).await;
    assert_eq!(status, 503, "{body}");
    let reply = rpc(&body);
    assert_eq!(reply["error"]["code"], -32000, "{body}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum of 3 sessions"),
        "{body}"
    );
}

#[tokio::test]
async fn an_idle_session_ends_and_frees_its_place() {
    let (router, _dir) = app(limits(1, Duration::from_millis(200))).await;
    let first = open_session(&router).await;
    // Its place comes back once it has idled out (polled, with a deadline).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = send(&router, mcp_post(None, INITIALIZE)).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the idle session never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let (status, _) = send(&router, mcp_post(Some(&first), ping)).await;
    assert_eq!(status, 404, "the expired session is gone");
}

#[tokio::test]
async fn a_session_used_only_for_tool_calls_outlives_its_idle_limit() {
    let idle = Duration::from_millis(600);
    let (router, _dir) = app(limits(10, idle)).await;
    let session = open_session(&router).await;
    let ping = |id: u64| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
    let (status, _) = send(&router, mcp_post(Some(&session), ping(1))).await;
    assert_eq!(status, 200);
    // Nothing but calls for four idle limits (paced, not synchronised, by the sleep): each is
    // answered without the session's worker, and only the session manager's clock sees them.
    let end = tokio::time::Instant::now() + idle * 4;
    let mut id = 2;
    while tokio::time::Instant::now() < end {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"none"}}}}"#
        );
        let (status, body) = send(&router, mcp_post(Some(&session), call)).await;
        assert_eq!(status, 200, "call {id}: {body}");
        assert!(rpc(&body).get("id").is_some(), "{body}");
        id += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = send(&router, mcp_post(Some(&session), ping(id))).await;
    assert_eq!(status, 200, "the session is still open: {body}");
}

#[tokio::test]
async fn a_reused_request_id_in_flight_is_answered_with_an_error() {
    let (router, _dir) = app(HttpOptions::default()).await;
    let session = open_session(&router).await;
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    // The first ping's answer is not read yet: its id is still in flight.
    let first = router
        .clone()
        .oneshot(mcp_post(Some(&session), ping))
        .await
        .unwrap();
    let second = tokio::time::timeout(
        Duration::from_secs(10),
        send(&router, mcp_post(Some(&session), ping)),
    )
    .await
    .expect("the second request is answered");
    let reply = rpc(&second.1);
    assert_eq!(reply["error"]["code"], -32600, "{}", second.1);
    assert!(second.1.contains("already used"), "{}", second.1);
    let first = tokio::time::timeout(Duration::from_secs(10), text(first))
        .await
        .expect("the first request is answered");
    assert!(rpc(&first).get("result").is_some(), "{first}");
    // Answered: the id is free again.
    let again = router
        .clone()
        .oneshot(mcp_post(Some(&session), ping))
        .await
        .unwrap();
    let body = again.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(rpc(&body).get("result").is_some(), "{body}");
}

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789abc";

fn keyed(
    key: &str,
    mut req: axum::http::Request<axum::body::Body>,
) -> axum::http::Request<axum::body::Body> {
    req.headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    req
}

fn with_keys(max_sessions: usize) -> HttpOptions {
    let identity = toolforge_gateway::identity::Identity::default()
        .with_api_keys(&format!("{ALICE} alice\n{BOB} bob\n"))
        .unwrap();
    HttpOptions {
        identity: Some(std::sync::Arc::new(identity)),
        ..limits(max_sessions, Duration::from_secs(300))
    }
}

/// `initialize` as the holder of `key`: the status and the session id, if one opened.
async fn open_as(router: &axum::Router, key: &str) -> (u16, Option<String>) {
    let res = router
        .clone()
        .oneshot(keyed(key, mcp_post(None, INITIALIZE)))
        .await
        .unwrap();
    let status = res.status().as_u16();
    let id = res
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let _ = text(res).await;
    (status, id)
}

/// The regression: another principal could use, and close, a session whose id it learned.
#[tokio::test]
async fn a_session_answers_only_the_principal_that_opened_it() {
    let (router, _dir) = app(with_keys(10)).await;
    let (status, session) = open_as(&router, ALICE).await;
    assert_eq!(status, 200);
    let session = session.unwrap();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let (status, body) = send(&router, keyed(BOB, mcp_post(Some(&session), ping))).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("session not found"), "{body}");
    let delete = axum::http::Request::delete("/mcp")
        .header("host", "127.0.0.1")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, _) = send(&router, keyed(BOB, delete)).await;
    assert_eq!(status, 404);
    // Still alice's, and still open.
    let (status, body) = send(&router, keyed(ALICE, mcp_post(Some(&session), ping))).await;
    assert_eq!(status, 200, "{body}");
    assert!(rpc(&body).get("result").is_some(), "{body}");
}

/// The regression: one client could take every session place, and everyone else got 503
/// until its sessions idled out. Now a newcomer gets in while someone holds more than their
/// share: that holder's oldest session is closed for it.
#[tokio::test]
async fn one_principal_cannot_take_every_session_place() {
    let (router, _dir) = app(with_keys(4)).await;
    let mut alices = Vec::new();
    for _ in 0..4 {
        let (status, id) = open_as(&router, ALICE).await;
        assert_eq!(status, 200);
        alices.push(id.unwrap());
    }
    // Full: alice gets no fifth, bob still gets in (twice), alice's oldest ones make room.
    assert_eq!(open_as(&router, ALICE).await.0, 503);
    assert_eq!(open_as(&router, BOB).await.0, 200);
    assert_eq!(open_as(&router, BOB).await.0, 200);
    // Two each now: nobody holds more than the newcomer plus one.
    assert_eq!(open_as(&router, BOB).await.0, 503);
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let (status, _) = send(&router, keyed(ALICE, mcp_post(Some(&alices[0]), ping))).await;
    assert_eq!(status, 404, "alice's oldest session made room");
    let (status, _) = send(&router, keyed(ALICE, mcp_post(Some(&alices[3]), ping))).await;
    assert_eq!(status, 200, "her newest is still open");
}

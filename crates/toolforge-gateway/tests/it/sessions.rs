//! `/mcp` sessions: the cap, idle expiry (also for a session used only for tool calls, which
//! are answered without the session's worker), and request ids reused while in flight.

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
    // answered without the session's worker, so only their touches keep the session open.
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

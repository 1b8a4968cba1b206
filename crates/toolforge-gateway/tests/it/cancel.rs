//! A client that leaves `/chat/stream` cancels the run at once: the in-flight tool call is
//! cancelled and no new call starts.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

use crate::{Scripted, SlowBackend, agent};

#[tokio::test]
async fn leaving_the_stream_cancels_the_call_in_flight() {
    let backend = Arc::new(SlowBackend::default());
    // The model would ask for the tool twice.
    let model = Arc::new(Scripted::new(2));
    let (agent, dir) = agent(backend.clone(), model.clone()).await;
    let router = toolforge_gateway::chat::routes(agent.clone(), Arc::default(), Arc::default());
    let req = Request::post("/chat/stream")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"message": "take your time"}"#))
        .unwrap();
    let res = router.oneshot(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.into_body();
    // The first event arrives, and the call starts.
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("an event")
        .expect("a frame")
        .unwrap();
    assert!(
        String::from_utf8_lossy(first.data_ref().unwrap()).contains("session.start"),
        "{first:?}"
    );
    tokio::time::timeout(Duration::from_secs(10), backend.started.notified())
        .await
        .expect("the tool call starts");
    // The client leaves mid-call.
    drop(body);
    tokio::time::timeout(Duration::from_secs(10), backend.cancelled.notified())
        .await
        .expect("the call in flight is cancelled when the client leaves");
    // The run ends (its task lets go of the agent) without a second call or model turn.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(&agent) > 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*backend.calls.lock(), 1, "no new call starts");
    assert_eq!(*model.completions.lock(), 1, "no new model turn");
    drop(dir);
}

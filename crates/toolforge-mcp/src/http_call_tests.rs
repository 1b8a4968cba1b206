//! `tools/call` on a Streamable HTTP server, posted from the caller's task
//! (`rmcp`'s `DirectRequests`): answered from the POST's own response, whatever the server sends
//! first reaching the relay before the answer, an expired session recovered without running the
//! call twice, and a call the server may have run never sent again.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use tokio_util::sync::CancellationToken;
use toolforge_retry::{GiveUp, RetryPolicy};

use crate::call::{CallContext, CallFailure, CallOutcome, call_tool};
use crate::relay::PoolEvent;
use crate::testing_http::{CallReply, connected_http, http_backend};
use crate::upstream::Upstream;

fn pay() -> CallToolRequestParams {
    CallToolRequestParams::new("pay")
}

/// A `tools/call` of `pay` with the default retry policy and no caller.
async fn call(up: &Upstream) -> Result<CallOutcome, CallFailure> {
    call_tool(up, RetryPolicy::default(), pay(), CallContext::default()).await
}

fn text(outcome: &CallOutcome) -> String {
    let content = serde_json::to_value(&outcome.result.content).unwrap();
    content[0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_call_is_answered_from_its_own_post() {
    let (url, seen) = http_backend(CallReply::Json).await;
    let (up, _events) = connected_http(&url).await;
    let direct = up
        .direct
        .as_ref()
        .expect("an HTTP server has a direct path");
    assert!(
        direct.is_published(),
        "the handshake's session is published"
    );
    let outcome = call(&up).await.expect("answered");
    assert_eq!((text(&outcome), outcome.attempts), ("done".to_owned(), 1));
    // Posted by the caller: no progress token (the peer gives every request one).
    seen.get(|s| {
        assert_eq!(s.calls, 1);
        assert!(
            s.call_meta[0].get("progressToken").is_none(),
            "{:?}",
            s.call_meta
        );
    });
}

#[tokio::test]
async fn what_the_server_sends_before_its_answer_is_handled_first() {
    let (url, _seen) = http_backend(CallReply::ListChangedFirst).await;
    let (up, mut events) = connected_http(&url).await;
    let outcome = call(&up)
        .await
        .expect("answered through the handed-over stream");
    assert_eq!(text(&outcome), "done");
    // The notification came before the answer on the stream, so the relay had it before the
    // call returned.
    assert!(
        matches!(events.try_recv(), Ok(PoolEvent::ToolsChanged { server }) if server == "pay"),
        "the list change was relayed before the answer"
    );
}

#[tokio::test]
async fn a_handed_over_stream_is_closed_when_its_call_gives_up() {
    let (url, seen) = http_backend(CallReply::ListChangedThenNothing).await;
    let (up, mut events) = connected_http(&url).await;
    let cancel = CancellationToken::new();
    let ctx = CallContext {
        cancel: Some(cancel.clone()),
        ..CallContext::default()
    };
    let call = tokio::spawn({
        let up = up.clone();
        async move { call_tool(&up, RetryPolicy::default(), pay(), ctx).await }
    });
    // The notification has been handed to the peer: the stream is the worker's to read now.
    let relayed = events.recv().await;
    assert!(matches!(relayed, Some(PoolEvent::ToolsChanged { .. })));
    cancel.cancel();
    let failure = call.await.unwrap().expect_err("the caller gave up");
    assert!(
        matches!(failure.error, crate::call::CallError::Cancelled),
        "{}",
        failure.error
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.get(|s| s.streams_dropped) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream is still read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_server_request_before_the_answer_is_answered_and_the_call_completes() {
    let (url, seen) = http_backend(CallReply::ElicitFirst).await;
    let (up, _events) = connected_http(&url).await;
    let outcome = call(&up).await.expect("answered after the elicitation");
    assert_eq!(text(&outcome), "done");
    seen.get(|s| {
        assert_eq!(s.answers.len(), 1, "{:?}", s.answers);
        assert_eq!(s.answers[0]["id"], "e1");
        assert_eq!(s.answers[0]["result"]["action"], "decline");
    });
}

#[tokio::test]
async fn an_expired_session_is_recovered_and_the_call_runs_once() {
    let (url, seen) = http_backend(CallReply::ExpireFirst).await;
    let (up, _events) = connected_http(&url).await;
    let outcome = call(&up).await.expect("answered on the new session");
    assert_eq!(text(&outcome), "done");
    seen.get(|s| assert_eq!((s.initializes, s.calls), (2, 1)));
    let direct = up.direct.as_ref().unwrap();
    assert!(direct.is_published(), "the new session is published");
    call(&up)
        .await
        .expect("the next call goes on the new session");
    seen.get(|s| assert_eq!((s.initializes, s.calls), (2, 2)));
}

#[tokio::test]
async fn a_call_whose_answer_broke_off_is_not_sent_again() {
    let (url, seen) = http_backend(CallReply::Break).await;
    let (up, _events) = connected_http(&url).await;
    let failure = call(&up).await.expect_err("the answer broke off");
    assert_eq!(failure.attempts, 1);
    assert_eq!(failure.not_retried, Some(GiveUp::MayHaveExecuted));
    seen.get(|s| assert_eq!(s.calls, 1));
}

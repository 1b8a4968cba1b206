use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::transport::DynamicTransportError;

use super::*;
use crate::testing::{Reply, connected};

/// The real policy with a 1 ms base, so waits stay short.
fn fast() -> RetryPolicy {
    RetryPolicy::default().with_base(Duration::from_millis(1))
}

/// Always the cap (deterministic waits).
struct Max;
impl Jitter for Max {
    fn up_to(&mut self, bound: u64) -> u64 {
        bound
    }
}

fn broken(failure: Option<Failure>) -> AttemptError {
    (transport_error("s", "the connection broke"), failure)
}

/// Runs [`with_retries`] with `script` giving each attempt's result (by attempt number,
/// from 1); returns the outcome and the attempts made.
async fn run(
    idempotent: bool,
    script: impl Fn(u32) -> Result<&'static str, AttemptError>,
) -> (
    Result<(&'static str, u32, Option<String>), CallFailure>,
    u32,
) {
    let cancel = CancellationToken::new();
    let made = AtomicU32::new(0);
    let retrying = Retrying {
        policy: fast(),
        idempotent,
        deadline: Instant::now() + Duration::from_secs(30),
        cancel: &cancel,
    };
    let out = with_retries(retrying, &mut Max, "s", || {
        let next = script(made.fetch_add(1, Ordering::SeqCst) + 1);
        async move { next }
    })
    .await;
    (out, made.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_call_that_may_have_run_is_sent_once() {
    let (out, made) = run(false, |_| Err(broken(Some(Failure::Network)))).await;
    let failure = out.expect_err("fails");
    assert_eq!((made, failure.attempts), (1, 1));
    assert_eq!(failure.not_retried, Some(GiveUp::MayHaveExecuted));
    let text = failure.error.to_string();
    assert!(
        text.contains("not retried") && text.contains("run it twice"),
        "{text}"
    );
    let data = failure
        .error
        .to_mcp()
        .data
        .expect("the reason travels as data");
    assert!(
        data["notRetried"]
            .as_str()
            .is_some_and(|r| r.contains("may have reached"))
    );
    // A 5xx answer and a timeout reached the server too.
    for failure in [
        Failure::Status {
            status: 502,
            retry_after: None,
        },
        Failure::Timeout,
    ] {
        let (out, made) = run(false, |_| Err(broken(Some(failure)))).await;
        assert_eq!(made, 1, "{failure:?}");
        assert_eq!(
            out.expect_err("fails").not_retried,
            Some(GiveUp::MayHaveExecuted)
        );
    }
}

#[tokio::test]
async fn what_never_left_is_sent_again() {
    let (out, made) = run(false, |n| match n {
        1 => Err(broken(Some(Failure::NotSent))),
        _ => Ok("answer"),
    })
    .await;
    let (value, attempts, reason) = out.expect("the second attempt answers");
    assert_eq!((value, attempts, made), ("answer", 2, 2));
    assert!(reason.is_some_and(|r| r.contains("the connection broke")));
}

#[tokio::test]
async fn an_idempotent_call_is_retried_three_times_at_most() {
    let (out, made) = run(true, |_| Err(broken(Some(Failure::Network)))).await;
    let failure = out.expect_err("fails every time");
    assert_eq!((made, failure.attempts), (3, 3));
    assert_eq!(
        failure.not_retried,
        Some(GiveUp::AttemptsExhausted { attempts: 3 })
    );
    let (out, made) = run(true, |n| match n {
        1 => Err(broken(Some(Failure::Timeout))),
        _ => Ok("answer"),
    })
    .await;
    assert_eq!((out.expect("answers").1, made), (2, 2));
}

#[tokio::test]
async fn terminal_and_final_errors_are_returned_as_they_are() {
    let rpc = |_| {
        let error = CallError::Rpc(McpError::invalid_params("bad", None));
        Err((error, Some(Failure::Rejected)))
    };
    let (out, made) = run(true, rpc).await;
    let failure = out.expect_err("terminal");
    assert_eq!(made, 1);
    assert!(matches!(failure.error, CallError::Rpc(_)));
    assert_eq!(failure.not_retried, Some(GiveUp::Terminal));
    // Past the deadline or cancelled: final, whatever the policy would say.
    let (out, made) = run(true, |_| Err((CallError::Cancelled, None))).await;
    let failure = out.expect_err("final");
    assert_eq!((made, failure.not_retried.is_none()), (1, true));
}

#[tokio::test]
async fn cancelling_during_the_wait_stops_the_retries() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let made = AtomicU32::new(0);
    let retrying = Retrying {
        policy: RetryPolicy::default(),
        idempotent: false,
        deadline: Instant::now() + Duration::from_secs(60),
        cancel: &cancel,
    };
    let out = with_retries(retrying, &mut Max, "s", || {
        made.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(broken(Some(Failure::NotSent))) }
    })
    .await;
    let failure = out.expect_err("cancelled");
    assert!(
        matches!(failure.error, CallError::Cancelled),
        "{}",
        failure.error
    );
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

fn http_error(e: StreamableHttpError<reqwest::Error>) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "http",
        std::any::TypeId::of::<()>(),
        Box::new(e),
    ))
}

#[test]
fn failures_are_classified_by_whether_they_may_have_run() {
    use rmcp::transport::streamable_http_client::HttpStatusError;
    let status = |status, retry_after| Failure::Status {
        status,
        retry_after,
    };
    let cases = [
        (ServiceError::TransportClosed, Failure::Network),
        (
            ServiceError::Timeout {
                timeout: Duration::from_secs(1),
            },
            Failure::Timeout,
        ),
        (
            ServiceError::McpError(McpError::invalid_params("x", None)),
            Failure::Rejected,
        ),
        (
            http_error(StreamableHttpError::UnexpectedServerResponse(
                "HTTP 400 Bad Request: nope".into(),
            )),
            status(400, None),
        ),
        (
            http_error(HttpStatusError::new(503, Some("2".into())).into()),
            status(503, Some(Duration::from_secs(2))),
        ),
        (
            http_error(HttpStatusError::new(429, Some("a date".into())).into()),
            status(429, None),
        ),
        (
            http_error(StreamableHttpError::TransportChannelClosed),
            Failure::Network,
        ),
        (
            ServiceError::TransportSend(DynamicTransportError::from_parts(
                "stdio",
                std::any::TypeId::of::<()>(),
                Box::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
            )),
            Failure::Network,
        ),
    ];
    let legacy = |e: crate::legacy_sse::LegacySseError| {
        ServiceError::TransportSend(DynamicTransportError::from_parts(
            "legacy HTTP+SSE",
            std::any::TypeId::of::<()>(),
            Box::new(e),
        ))
    };
    use crate::legacy_sse::LegacySseError as L;
    let cases = cases.into_iter().chain([
        (legacy(L::SessionGone), Failure::NotSent),
        (legacy(L::Closed), Failure::NotSent),
        (
            legacy(L::Status {
                status: 503,
                retry_after: Some("1".into()),
                body: String::new(),
            }),
            status(503, Some(Duration::from_secs(1))),
        ),
        (
            legacy(L::TimedOut(Duration::from_secs(30))),
            Failure::Network,
        ),
    ]);
    for (error, want) in cases {
        assert_eq!(classify(&error), want, "{error}");
    }
    assert_eq!(status_of("HTTP 404 Not Found: x"), Some(404));
    assert_eq!(status_of("HTTP oops"), None);
}

/// A backend with one tool, `charge` (with `annotations`), that counts the `tools/call`s
/// it gets and dies in the middle of each.
async fn crashing_backend(annotations: serde_json::Value) -> (Arc<Upstream>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let up = connected(move |method, _| match method {
        "tools/list" => Reply::Result(serde_json::json!({"tools": [{
            "name": "charge", "inputSchema": {"type": "object"},
            "annotations": annotations}]})),
        "tools/call" => {
            counted.fetch_add(1, Ordering::SeqCst);
            Reply::Crash
        }
        _ => Reply::Result(serde_json::json!({})),
    })
    .await;
    let peer = up.peer.read().clone().expect("connected");
    crate::lists::refresh_lists(&up, &peer)
        .await
        .expect("tools/list");
    (up, calls)
}

#[tokio::test]
async fn a_backend_that_dies_mid_call_ran_it_once_and_the_caller_hears_at_once() {
    let (up, calls) = crashing_backend(serde_json::json!({"destructiveHint": true})).await;
    let params = CallToolRequestParams::new("charge");
    let failure = call_tool(&up, RetryPolicy::default(), params, CallContext::default())
        .await
        .expect_err("the backend died");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "executed exactly once");
    assert_eq!(failure.attempts, 1);
    assert_eq!(failure.not_retried, Some(GiveUp::MayHaveExecuted));
    let text = failure.error.to_string();
    assert!(
        text.contains("\"pay\"") && text.contains("not retried"),
        "{text}"
    );
    // Not a timeout: the error came from the closed connection, not the 30 s deadline.
    assert!(
        matches!(failure.error, CallError::Transport { .. }),
        "{text}"
    );
}

#[tokio::test]
async fn retryable_comes_from_hints_and_the_operator() {
    let (up, _) = crashing_backend(serde_json::json!({"readOnlyHint": true})).await;
    assert!(up.retryable("charge"));
    assert!(!up.retryable("other"));
    let (up, _) = crashing_backend(serde_json::json!({"idempotentHint": true})).await;
    assert!(up.retryable("charge"));
    let (up, _) = crashing_backend(serde_json::json!({"idempotentHint": false})).await;
    assert!(!up.retryable("charge"));
}

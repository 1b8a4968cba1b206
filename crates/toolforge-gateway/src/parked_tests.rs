//! The parking lot against a scripted backend call that asks through its inbox.

#![allow(deprecated)] // roots requests: what a handshake-era backend may still ask

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, ListRootsRequest};
use serde_json::json;
use toolforge_mcp::{Asks, CallError};

use super::*;

/// What the scripted backend saw: each answer, or each refusal, and whether it was cancelled.
type Seen = Arc<Mutex<Vec<String>>>;

fn outcome(text: String) -> CallOutcome {
    CallOutcome {
        result: CallToolResult::success(vec![ContentBlock::text(text)]),
        attempts: 1,
        retry_reason: None,
        guarded: Vec::new(),
    }
}

fn cancelled_failure() -> CallFailure {
    CallFailure {
        error: CallError::Cancelled,
        attempts: 1,
        retry_reason: None,
        not_retried: None,
    }
}

/// A backend call that asks for roots `times` times, one after the other, then returns the
/// answers it got; with `hang`, it waits (until cancelled) after its last answer instead.
fn scripted(times: usize, hang: bool, seen: &Seen) -> Running {
    let (asks, inbox): (Asks, _) = toolforge_mcp::asks::inbox();
    let stop = CancellationToken::new();
    let (seen, cancel) = (seen.clone(), stop.clone());
    let call = async move {
        let mut answers = Vec::new();
        for _ in 0..times {
            let (reply, answer) = oneshot::channel();
            let request = InputRequest::ListRoots(ListRootsRequest::default());
            if asks.send(Ask { request, reply }).await.is_err() {
                return Err(cancelled_failure());
            }
            // As the relay does: a refused request is answered, even if the call is cancelled.
            let answer = tokio::select! {
                biased;
                a = answer => a,
                () = cancel.cancelled() => {
                    seen.lock().push("cancelled".to_owned());
                    return Err(cancelled_failure());
                }
            };
            match answer {
                Ok(Ok(v)) => answers.push(v.to_string()),
                Ok(Err(e)) => {
                    seen.lock().push(format!("refused: {}", e.message));
                    return Ok(outcome(format!("refused: {}", e.message)));
                }
                Err(_) => return Err(cancelled_failure()),
            }
            seen.lock()
                .push(answers.last().cloned().unwrap_or_default());
        }
        if hang {
            cancel.cancelled().await;
            seen.lock().push("cancelled".to_owned());
            return Err(cancelled_failure());
        }
        Ok(outcome(answers.join(",")))
    };
    Running::new(Box::pin(call), inbox, stop)
}

fn text(next: &Next) -> String {
    let Next::Done(Ok(out)) = next else {
        panic!("the call ended with a result: {next:?}");
    };
    out.result.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

fn answers(n: u32) -> InputResponses {
    let mut r = InputResponses::new();
    r.insert(
        format!("roots-{n}"),
        json!({"roots": [{"uri": format!("file:///{n}")}]}),
    );
    r
}

/// Runs `running` to its first request and parks it for "alice".
async fn parked_one(lot: &Arc<ParkingLot>, mut running: Running) -> Ticket {
    let Next::Asked(requests) = running.next(&CancellationToken::new()).await else {
        panic!("the backend asks first");
    };
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["roots-1"]);
    lot.park(running, "alice").expect("room")
}

/// Polls `done` until it holds, for at most 10 s.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_parked_call_goes_on_with_its_clients_answers_round_after_round() {
    let lot = Arc::new(ParkingLot::default());
    let seen = Seen::default();
    let ticket = parked_one(&lot, scripted(2, false, &seen)).await;
    let never = CancellationToken::new();
    let (next, ticket) = lot
        .resume(&ticket, "alice", answers(1), &never)
        .await
        .unwrap();
    let Next::Asked(requests) = next else {
        panic!("a second round: {next:?}");
    };
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["roots-2"]);
    assert_eq!(ticket.round, 1);
    let (next, _) = lot
        .resume(&ticket, "alice", answers(2), &never)
        .await
        .unwrap();
    assert!(text(&next).contains("file:///2"), "{next:?}");
    assert!(lot.is_empty(), "an ended call leaves the lot");
}

#[tokio::test]
async fn another_caller_a_stale_round_or_another_replica_is_refused() {
    let lot = Arc::new(ParkingLot::default());
    let seen = Seen::default();
    let ticket = parked_one(&lot, scripted(1, false, &seen)).await;
    let never = CancellationToken::new();
    let err = lot
        .resume(&ticket, "mallory", answers(1), &never)
        .await
        .unwrap_err();
    assert!(err.message.contains("another caller"), "{err:?}");
    let foreign = Ticket {
        replica: "another".into(),
        ..ticket.clone()
    };
    let err = lot
        .resume(&foreign, "alice", answers(1), &never)
        .await
        .unwrap_err();
    assert!(err.message.contains("another toolforge replica"), "{err:?}");
    assert!(err.message.contains("never sent twice"), "{err:?}");
    let stale = Ticket {
        round: 3,
        ..ticket.clone()
    };
    let err = lot
        .resume(&stale, "alice", answers(1), &never)
        .await
        .unwrap_err();
    assert!(err.message.contains("already answered"), "{err:?}");
    // None of those touched the call: its own caller still goes on with it.
    let (next, _) = lot
        .resume(&ticket, "alice", answers(1), &never)
        .await
        .unwrap();
    assert!(text(&next).contains("file:///1"), "{next:?}");
    // Once it has ended, the same state is refused, and the call is not run again.
    let err = lot
        .resume(&ticket, "alice", answers(1), &never)
        .await
        .unwrap_err();
    assert!(err.message.contains("no longer waiting"), "{err:?}");
    assert_eq!(seen.lock().len(), 1, "{:?}", seen.lock());
}

#[tokio::test]
async fn an_idle_parked_call_is_cancelled_and_a_late_retry_is_told_to_call_again() {
    let lot = Arc::new(ParkingLot::new(MAX_PARKED, Duration::from_millis(20)));
    let seen = Seen::default();
    let ticket = parked_one(&lot, scripted(1, false, &seen)).await;
    eventually("the idle call expires", || lot.is_empty()).await;
    eventually("the backend hears", || !seen.lock().is_empty()).await;
    let heard = seen.lock().clone();
    assert!(heard[0].contains("did not answer within"), "{heard:?}");
    let err = lot
        .resume(&ticket, "alice", answers(1), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.message.contains("call the tool again"), "{err:?}");
    assert!(
        err.message.contains("does not send a call again"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_full_lot_refuses_to_park_and_a_retry_that_goes_away_cancels_the_call() {
    let lot = Arc::new(ParkingLot::new(1, PARK_IDLE));
    let seen = Seen::default();
    let ticket = parked_one(&lot, scripted(1, true, &seen)).await;
    let mut second = scripted(1, false, &Seen::default());
    assert!(matches!(
        second.next(&CancellationToken::new()).await,
        Next::Asked(_)
    ));
    let (second, why) = lot.park(second, "bob").unwrap_err();
    assert!(why.contains("1 calls are already waiting"), "{why}");
    // The refused call still ends: its backend hears why.
    let out = second.finish(&why).await.expect("the backend answers");
    assert!(
        out.result.content[0]
            .as_text()
            .is_some_and(|t| t.text.contains("already waiting")),
        "{out:?}"
    );
    // The first call's retry goes away while the call runs on: the call is cancelled.
    let gone = CancellationToken::new();
    gone.cancel();
    let err = lot
        .resume(&ticket, "alice", answers(1), &gone)
        .await
        .unwrap_err();
    assert!(err.message.contains("cancelled"), "{err:?}");
    eventually("the backend is cancelled", || {
        seen.lock().iter().any(|s| s == "cancelled")
    })
    .await;
    eventually("the lot is empty", || lot.is_empty()).await;
}

#[tokio::test]
async fn rounds_are_bounded() {
    let lot = Arc::new(ParkingLot::default());
    let seen = Seen::default();
    let mut ticket = parked_one(&lot, scripted(MAX_ROUNDS + 5, false, &seen)).await;
    let never = CancellationToken::new();
    let mut rounds = 1;
    let last = loop {
        let n = u32::try_from(rounds).unwrap();
        let (next, t) = lot
            .resume(&ticket, "alice", answers(n), &never)
            .await
            .unwrap();
        match next {
            Next::Asked(_) => {
                rounds += 1;
                ticket = t;
            }
            done @ Next::Done(_) => break done,
        }
    };
    assert_eq!(rounds, MAX_ROUNDS, "{:?}", seen.lock());
    assert!(
        text(&last).contains(&format!("after {MAX_ROUNDS} rounds")),
        "{last:?}"
    );
}

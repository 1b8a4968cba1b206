//! The local session manager: a request sent into a session opens its own stream (primed,
//! then answered on it), with or without an event store; a stream dropped before its answer
//! does not stop the session; a closed session takes no request; and a session ends after its
//! idle limit without events, not while it is in use.
#![cfg(all(feature = "transport-streamable-http-server", not(feature = "local")))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use rmcp::ServiceExt as _;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, EventStoreError, EventStream, ServerSseMessage, SessionId,
};
use serde_json::{Value, json};

/// A server with rmcp's default answers (a `ping` is answered with an empty result).
struct Quiet;
impl rmcp::ServerHandler for Quiet {}

fn client_message(value: Value) -> ClientJsonRpcMessage {
    serde_json::from_value(value).expect("a valid client message")
}

fn ping(id: u64) -> ClientJsonRpcMessage {
    client_message(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
}

/// Opens a session on `manager`, serves it with [`Quiet`] and completes the handshake.
async fn open(manager: &LocalSessionManager) -> SessionId {
    open_served(manager).await.0
}

/// [`open`], with the task serving the session: it ends when the session's worker does.
async fn open_served(manager: &LocalSessionManager) -> (SessionId, tokio::task::JoinHandle<()>) {
    let (id, transport) = manager.create_session().await.expect("session created");
    let served = tokio::spawn(async move {
        if let Ok(running) = Quiet.serve(transport).await {
            let _ = running.waiting().await;
        }
    });
    let init = client_message(json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "session-streams", "version": "0"}
        }
    }));
    let answer = manager
        .initialize_session(&id, init)
        .await
        .expect("initialized");
    assert!(
        matches!(answer, ServerJsonRpcMessage::Response(_)),
        "{answer:?}"
    );
    let initialized =
        client_message(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    manager
        .accept_message(&id, initialized)
        .await
        .expect("initialized accepted");
    (id, served)
}

/// The events of `stream` up to and including the first that carries a message, within a
/// deadline: a request's answer that went elsewhere fails here instead of hanging.
async fn until_answer(stream: impl Stream<Item = ServerSseMessage>) -> Vec<ServerSseMessage> {
    let mut stream = std::pin::pin!(stream);
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = stream.next().await {
            let answered = event.message.is_some();
            events.push(event);
            if answered {
                return;
            }
        }
    })
    .await
    .expect("an answer on the request's own stream");
    events
}

fn answered_id(event: &ServerSseMessage) -> Value {
    let message = event.message.as_deref().expect("a message");
    let ServerJsonRpcMessage::Response(response) = message else {
        panic!("not a response: {message:?}");
    };
    serde_json::to_value(&response.id).unwrap()
}

#[tokio::test]
async fn each_request_is_primed_then_answered_on_its_own_stream() {
    let manager = LocalSessionManager::default();
    let id = open(&manager).await;
    // Several in flight at once, so that an answer routed to another request's stream, or to
    // none, would show.
    let mut streams = Vec::new();
    for n in 1..=8 {
        streams.push(manager.create_stream(&id, ping(n)).await.expect("stream"));
    }
    let answers = futures::future::join_all(streams.into_iter().map(until_answer)).await;
    let mut stream_ids = Vec::new();
    for (n, events) in (1..=8).zip(answers) {
        let [priming, answer] = events.as_slice() else {
            panic!("request {n}: expected a priming event and the answer, got {events:?}");
        };
        assert!(priming.message.is_none(), "{priming:?}");
        assert!(priming.retry.is_some(), "{priming:?}");
        assert_eq!(answered_id(answer), json!(n));
        // Event ids are "index/stream": the priming event first, the answer next, on one
        // stream that no other request shares.
        let priming_id = priming.event_id.as_deref().expect("priming event id");
        let answer_id = answer.event_id.as_deref().expect("answer event id");
        let (first, stream) = priming_id.split_once('/').expect("index/stream");
        assert_eq!(first, "0", "{priming_id}");
        assert_eq!(answer_id, format!("1/{stream}"));
        stream_ids.push(stream.to_owned());
    }
    stream_ids.sort();
    stream_ids.dedup();
    assert_eq!(stream_ids.len(), 8, "each request has a stream of its own");
}

#[tokio::test]
async fn a_stream_dropped_before_its_answer_leaves_the_session_serving() {
    let manager = LocalSessionManager::default();
    let id = open(&manager).await;
    drop(manager.create_stream(&id, ping(1)).await.expect("stream"));
    let events = until_answer(manager.create_stream(&id, ping(2)).await.expect("stream")).await;
    assert_eq!(answered_id(events.last().unwrap()), json!(2));
    assert!(manager.has_session(&id).await.unwrap());
}

#[tokio::test]
async fn a_request_in_a_closed_session_is_refused() {
    let manager = LocalSessionManager::default();
    let id = open(&manager).await;
    manager.close_session(&id).await.expect("closed");
    let refused = manager.create_stream(&id, ping(1)).await;
    assert!(refused.is_err(), "a closed session took a request");
}

/// Keeps every event it is given, numbered in arrival order.
#[derive(Default)]
struct Recorded(Mutex<Vec<(String, ServerSseMessage)>>);

#[async_trait::async_trait]
impl EventStore for Recorded {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<String, EventStoreError> {
        let mut events = self.0.lock().unwrap();
        events.push((stream_id.to_owned(), event.clone()));
        Ok(format!("stored-{}", events.len()))
    }

    async fn replay_events_after(&self, _: &str) -> Result<EventStream, EventStoreError> {
        Ok(Box::pin(futures::stream::empty()))
    }
}

#[tokio::test]
async fn with_an_event_store_each_event_is_stored_before_it_is_sent() {
    let store = Arc::new(Recorded::default());
    let manager = LocalSessionManager::default().with_event_store(store.clone());
    let id = open(&manager).await;
    let events = until_answer(manager.create_stream(&id, ping(7)).await.expect("stream")).await;
    let [priming, answer] = events.as_slice() else {
        panic!("expected a priming event and the answer, got {events:?}");
    };
    assert_eq!(answered_id(answer), json!(7));
    let stored = store.0.lock().unwrap();
    let sent: Vec<_> = [priming, answer]
        .iter()
        .map(|event| event.event_id.clone().expect("event id"))
        .collect();
    // The ids sent are the store's, for the two events it stored last, on one stream.
    let n = stored.len();
    assert!(n >= 2, "{n} events stored");
    assert_eq!(sent, [format!("stored-{}", n - 1), format!("stored-{n}")]);
    assert_eq!(stored[n - 2].0, stored[n - 1].0);
    assert!(stored[n - 2].1.message.is_none());
    assert!(stored[n - 1].1.message.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_session_in_use_outlives_its_idle_limit_and_an_idle_one_ends() {
    let idle_limit = Duration::from_secs(60);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(idle_limit);
    let (id, served) = open_served(&manager).await;
    // Busy for five idle limits, never idle for one.
    for n in 1..=10 {
        tokio::time::advance(idle_limit / 2).await;
        let events = until_answer(manager.create_stream(&id, ping(n)).await.expect("stream")).await;
        assert_eq!(
            answered_id(events.last().unwrap()),
            json!(n),
            "after {n} half-limits"
        );
    }
    // Idle for a limit: the session's worker ends, and with it the task serving the session.
    tokio::time::advance(idle_limit + Duration::from_secs(1)).await;
    tokio::time::timeout(Duration::from_secs(1), served)
        .await
        .expect("the idle session ended")
        .unwrap();
    assert!(manager.create_stream(&id, ping(99)).await.is_err());
}

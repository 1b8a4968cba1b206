//! A handshake-era backend asking a 2026-07-28 client mid-call.
//!
//! On 2026-07-28 a server cannot ask its client mid-call; it answers `input_required` and the
//! client retries. A handshake-era backend does ask mid-call (sampling, elicitation, roots), so
//! when the call it asks during was made by a 2026-07-28 client, the relay hands each request
//! to that call's [`Asks`] inbox instead: the gateway answers its client with an
//! `input_required` result carrying the request, keeps the backend's call running, and puts the
//! client's answer (from its retry's `inputResponses`) into the [`Ask`]'s reply. The backend
//! waits for it as for any client's answer.

use rmcp::ErrorData as McpError;
use rmcp::model::InputRequest;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// Most requests of one call waiting in its inbox at once (a backend asks one at a time, or a
/// few at once; more is refused to the backend).
pub const ASKS_PER_CALL: usize = 8;

/// One request a backend made during a call, for the call's 2026-07-28 client.
#[derive(Debug)]
pub struct Ask {
    /// The request, as the client reads it in `inputRequests`.
    pub request: InputRequest,
    /// Where the client's answer goes (its `inputResponses` entry), or why there is none.
    pub reply: oneshot::Sender<Result<Value, McpError>>,
}

/// The inbox of one call's backend requests (the sending half, kept by the relay).
pub type Asks = mpsc::Sender<Ask>;

/// A call's inbox: the relay sends into the first half, the gateway reads the second.
#[must_use]
pub fn inbox() -> (Asks, mpsc::Receiver<Ask>) {
    mpsc::channel(ASKS_PER_CALL)
}

/// Hands `request` to the call's client through `asks` and waits for its answer, as `T`.
///
/// # Errors
/// The inbox is full or gone (the call ended), the gateway failed the request (the client did
/// not answer in time, the call was cancelled), or the client's answer is not a `T`.
pub(crate) async fn ask<T: DeserializeOwned>(
    server: &str,
    asks: &Asks,
    request: InputRequest,
    what: &str,
) -> Result<T, McpError> {
    let (reply, answer) = oneshot::channel();
    asks.try_send(Ask { request, reply }).map_err(|e| {
        let why = match e {
            mpsc::error::TrySendError::Full(_) => {
                format!("it already has {ASKS_PER_CALL} requests waiting for the client")
            }
            mpsc::error::TrySendError::Closed(_) => "the call has ended".to_owned(),
        };
        McpError::invalid_request(
            format!("server \"{server}\" asked for {what}, but toolforge cannot relay it: {why}"),
            None,
        )
    })?;
    let value = answer.await.map_err(|_| {
        McpError::internal_error(
            format!(
                "server \"{server}\" asked for {what}, but the call ended before the client \
                 answered"
            ),
            None,
        )
    })??;
    serde_json::from_value(value).map_err(|e| {
        McpError::invalid_params(
            format!("the client answered {what} with something that is not its result: {e}"),
            None,
        )
    })
}

#[cfg(test)]
#[allow(deprecated)] // roots: what a handshake-era backend may still ask
mod tests {
    use rmcp::model::{ListRootsRequest, ListRootsResult};

    use super::*;

    #[tokio::test]
    async fn a_request_waits_for_the_answer_put_in_its_reply() {
        let (asks, mut inbox) = inbox();
        let answering = tokio::spawn(async move {
            let ask = inbox.recv().await.expect("asked");
            assert!(matches!(ask.request, InputRequest::ListRoots(_)));
            let _ = ask
                .reply
                .send(Ok(serde_json::json!({"roots": [{"uri": "file:///a"}]})));
        });
        let roots: ListRootsResult = ask(
            "s",
            &asks,
            InputRequest::ListRoots(ListRootsRequest::default()),
            "roots",
        )
        .await
        .expect("answered");
        assert_eq!(roots.roots.len(), 1);
        answering.await.unwrap();
    }

    #[tokio::test]
    async fn an_ended_call_or_a_dropped_reply_is_a_clear_error() {
        let (asks, inbox) = inbox();
        let (kept, mut kept_inbox) = super::inbox();
        drop(inbox);
        let request = || InputRequest::ListRoots(ListRootsRequest::default());
        let gone = ask::<ListRootsResult>("s", &asks, request(), "roots")
            .await
            .unwrap_err();
        assert!(gone.message.contains("the call has ended"), "{gone:?}");
        let dropping = tokio::spawn(async move { drop(kept_inbox.recv().await) });
        let dropped = ask::<ListRootsResult>("s", &kept, request(), "roots")
            .await
            .unwrap_err();
        assert!(
            dropped.message.contains("ended before the client answered"),
            "{dropped:?}"
        );
        dropping.await.unwrap();
    }
}

//! Graceful drain: when a replica is told to stop (SIGTERM), it answers `GET /health` with 503
//! and `"draining": true` (so a load balancer moves away), stops accepting connections after a
//! short grace (so that no request is sent to a socket about to close), lets the requests in
//! flight finish up to a deadline, and only then ends its sessions and returns.
//!
//! [`Drain`] is the shared state: the draining flag and the count of requests in flight. The
//! HTTP layer holds an [`InFlight`] guard per request until its response body has been sent
//! (an SSE answer to a `tools/call` counts until its last event); listening streams (`GET /mcp`)
//! are not counted, they end with their session.

use std::sync::Arc;

use tokio::sync::watch;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct State {
    draining: bool,
    in_flight: u64,
}

/// The drain state of one replica.
#[derive(Debug)]
pub struct Drain {
    state: watch::Sender<State>,
}

impl Default for Drain {
    fn default() -> Self {
        Self::new()
    }
}

impl Drain {
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: watch::Sender::new(State::default()),
        }
    }

    /// Starts draining (idempotent).
    pub fn begin(&self) {
        self.state
            .send_if_modified(|s| !std::mem::replace(&mut s.draining, true));
    }

    #[must_use]
    pub fn is_draining(&self) -> bool {
        self.state.borrow().draining
    }

    /// Requests in flight now.
    #[must_use]
    pub fn in_flight(&self) -> u64 {
        self.state.borrow().in_flight
    }

    /// Counts one request in flight until the guard drops.
    #[must_use]
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.state.send_modify(|s| s.in_flight += 1);
        InFlight(self.clone())
    }

    /// Resolves once draining has begun.
    pub async fn begun(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.draining).await;
    }

    /// Resolves once no request is in flight.
    pub async fn idle(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.in_flight == 0).await;
    }
}

/// One request in flight; dropping it ends the count.
#[derive(Debug)]
pub struct InFlight(Arc<Drain>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .state
            .send_modify(|s| s.in_flight = s.in_flight.saturating_sub(1));
    }
}

impl InFlight {
    /// `body`, holding this request in flight until it has been sent or dropped. Frames,
    /// trailers and the size hint pass through unchanged.
    pub(crate) fn hold(self, body: axum::body::Body) -> axum::body::Body {
        axum::body::Body::new(Held {
            body,
            _in_flight: self,
        })
    }
}

/// A response body and the [`InFlight`] guard it keeps.
struct Held {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for Held {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_waits_for_the_last_request_in_flight() {
        let drain = Arc::new(Drain::new());
        let a = drain.enter();
        let b = drain.enter();
        drain.begin();
        drain.begun().await;
        assert!(drain.is_draining());
        assert_eq!(drain.in_flight(), 2);
        let idle = tokio::spawn({
            let drain = drain.clone();
            async move { drain.idle().await }
        });
        drop(a);
        tokio::task::yield_now().await;
        assert!(!idle.is_finished(), "one request is still in flight");
        drop(b);
        idle.await.unwrap();
        assert_eq!(drain.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_held_body_counts_until_it_is_sent_and_keeps_its_length() {
        use http_body::Body as _;
        use http_body_util::BodyExt as _;
        let drain = Arc::new(Drain::new());
        let body = drain.enter().hold(axum::body::Body::from("twelve bytes"));
        assert_eq!(
            body.size_hint().exact(),
            Some(12),
            "the length passes through"
        );
        assert_eq!(drain.in_flight(), 1);
        let sent = body.collect().await.unwrap().to_bytes();
        assert_eq!(&sent[..], b"twelve bytes");
        assert_eq!(drain.in_flight(), 0, "sent, so no longer in flight");
        let dropped = drain.enter().hold(axum::body::Body::from("never sent"));
        assert_eq!(drain.in_flight(), 1);
        drop(dropped);
        assert_eq!(drain.in_flight(), 0, "a dropped body ends the count");
    }
}

//! One legacy SSE session as an rmcp server [`Transport`]: what the client POSTs arrives in
//! `inbox`, what the server sends goes to the session's event stream through `outbox`.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::session::InFlight;

/// How long a message may wait for room on a stream its client does not read: then the client
/// is gone or stuck, and its session ends.
pub(crate) const STALLED_STREAM: Duration = Duration::from_secs(30);

/// Why a message could not go to the client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamError {
    #[error("the client's event stream is closed")]
    Closed,
    #[error("the client has not read its event stream for {0:?}; the session ends")]
    Stalled(Duration),
}

/// The server side of one session.
pub(crate) struct SessionTransport {
    pub(crate) inbox: mpsc::Receiver<ClientJsonRpcMessage>,
    pub(crate) outbox: mpsc::Sender<ServerJsonRpcMessage>,
    /// The client's requests not answered yet; an answer going out frees its id.
    pub(crate) in_flight: Arc<InFlight>,
    /// Ends the session (the stream closed, it idled out, the gateway stops).
    pub(crate) end: CancellationToken,
}

impl Transport<RoleServer> for SessionTransport {
    type Error = StreamError;

    fn name() -> Cow<'static, str> {
        "legacy HTTP+SSE".into()
    }

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            ServerJsonRpcMessage::Response(r) => Some(r.id.clone()),
            ServerJsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let outbox = self.outbox.clone();
        let in_flight = self.in_flight.clone();
        let end = self.end.clone();
        async move {
            let sent = outbox.send_timeout(item, STALLED_STREAM).await;
            if let Some(id) = answered {
                in_flight.answered(&id);
            }
            match sent {
                Ok(()) => Ok(()),
                Err(mpsc::error::SendTimeoutError::Closed(_)) => Err(StreamError::Closed),
                Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                    tracing::info!(
                        "a legacy SSE client stopped reading its stream; its session ends"
                    );
                    end.cancel();
                    Err(StreamError::Stalled(STALLED_STREAM))
                }
            }
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        tokio::select! {
            message = self.inbox.recv() => message,
            () = self.end.cancelled() => None,
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.end.cancel();
        Ok(())
    }
}

//! A client connection's ordered delivery: the notifications its peer sends are handled one at
//! a time in the order they arrived, on one task per connection, and a response that arrives
//! behind notifications reaches its caller after their handlers.
//!
//! A server that sends a tool's log messages and progress and then its result relies on that
//! order: a proxy relaying them to the caller of the call must see every notification before
//! the result ends the call, and a progress bar must not run backwards. A task per
//! notification gave no order between two notifications, and no bound on how many ran.

use std::sync::{
    Arc,
    atomic::{AtomicU64, AtomicUsize, Ordering},
};

use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use super::{
    NotificationContext, Responder, Service, ServiceError, ServiceRole, spawn_service_task,
};

/// Messages a connection's delivery queue holds for its notification handler. When it is full
/// the connection reads nothing more from its peer until the handler has taken one (the peer's
/// messages wait in the transport), so a peer cannot queue without bound behind a slow handler.
pub(crate) const DELIVERY_QUEUE_CAPACITY: usize = 256;

tokio::task_local! {
    /// The connection whose notification handler this task is running.
    static HANDLING_NOTIFICATION_OF: u64;
}

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// In a request's non-serialized extensions: sent by a notification handler of this connection,
/// which the queue waits for, so its response is handed over at once instead of behind it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SentByNotificationHandler(u64);

/// The marker for a request sent from the current task, when it runs a notification handler.
pub(crate) fn sent_by_notification_handler() -> Option<SentByNotificationHandler> {
    HANDLING_NOTIFICATION_OF
        .try_with(|connection| SentByNotificationHandler(*connection))
        .ok()
}

/// One message in arrival order.
pub(crate) enum Delivery<R: ServiceRole> {
    Notification {
        notification: R::PeerNot,
        context: NotificationContext<R>,
        span: tracing::Span,
    },
    Response {
        responder: Responder<Result<R::PeerResp, ServiceError>>,
        result: Result<R::PeerResp, ServiceError>,
    },
}

impl<R: ServiceRole> std::fmt::Debug for Delivery<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Notification { .. } => "Delivery::Notification",
            Self::Response { .. } => "Delivery::Response",
        })
    }
}

/// The service loop's end of a connection's delivery.
pub(crate) struct OrderedDelivery<R: ServiceRole> {
    connection: u64,
    queue: mpsc::Sender<Box<Delivery<R>>>,
    /// Messages queued or being handled.
    pending: Arc<AtomicUsize>,
    /// A message the full queue has no room for yet; nothing more is read from the peer until
    /// it is queued.
    held: Option<Box<Delivery<R>>>,
}

impl<R: ServiceRole> OrderedDelivery<R> {
    /// Starts the connection's handler task for `service`; it ends when this is dropped and
    /// what was queued is handled.
    pub(crate) fn start<S: Service<R>>(service: Arc<S>) -> Self {
        let connection = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
        let (queue, mut next) = mpsc::channel::<Box<Delivery<R>>>(DELIVERY_QUEUE_CAPACITY);
        let pending = Arc::new(AtomicUsize::new(0));
        let handled = pending.clone();
        spawn_service_task(async move {
            while let Some(delivery) = next.recv().await {
                match *delivery {
                    Delivery::Notification {
                        notification,
                        context,
                        span,
                    } => {
                        // Boxed: a handler's future can be large, and this task lives as
                        // long as the connection.
                        let handle = Box::pin(service.handle_notification(notification, context));
                        // A handler that panics loses its own notification, not the
                        // connection's later ones.
                        let result = AssertUnwindSafe(
                            HANDLING_NOTIFICATION_OF
                                .scope(connection, handle)
                                .instrument(span),
                        )
                        .catch_unwind()
                        .await;
                        match result {
                            Ok(Ok(())) => {}
                            Ok(Err(error)) => tracing::warn!(%error, "Error sending notification"),
                            Err(_) => tracing::error!("a notification handler panicked"),
                        }
                    }
                    Delivery::Response { responder, result } => {
                        let _ = responder.send(result);
                    }
                }
                handled.fetch_sub(1, Ordering::AcqRel);
            }
        });
        Self {
            connection,
            queue,
            pending,
            held: None,
        }
    }

    /// Queues `delivery` behind what came before it.
    pub(crate) fn push(&mut self, delivery: Delivery<R>) {
        debug_assert!(
            self.held.is_none(),
            "read from the peer while holding a message"
        );
        self.pending.fetch_add(1, Ordering::AcqRel);
        match self.queue.try_send(Box::new(delivery)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(delivery)) => self.held = Some(delivery),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Hands `result` to its caller after the notifications that arrived before it: at once when
    /// none is queued or being handled, or when a notification handler of this connection sent
    /// the request (the queue waits for that handler, which waits for this response).
    pub(crate) fn respond(
        &mut self,
        responder: Responder<Result<R::PeerResp, ServiceError>>,
        result: Result<R::PeerResp, ServiceError>,
        sent_by: Option<SentByNotificationHandler>,
    ) {
        let by_our_handler = sent_by.is_some_and(|sent_by| sent_by.0 == self.connection);
        if by_our_handler || (self.held.is_none() && self.pending.load(Ordering::Acquire) == 0) {
            let _ = responder.send(result);
        } else {
            self.push(Delivery::Response { responder, result });
        }
    }

    /// Whether a message waits for room: the loop then reads nothing more from the peer.
    pub(crate) fn holding(&self) -> bool {
        self.held.is_some()
    }

    /// A sender to wait for room on, while a message is held.
    pub(crate) fn queue_while_holding(&self) -> Option<mpsc::Sender<Box<Delivery<R>>>> {
        self.held.as_ref().map(|_| self.queue.clone())
    }

    /// Queues the held message in the room `permit` reserved (without one, the handler task is
    /// gone and the message is dropped).
    pub(crate) fn queue_held(&mut self, permit: Option<mpsc::OwnedPermit<Box<Delivery<R>>>>) {
        match (self.held.take(), permit) {
            (Some(delivery), Some(permit)) => {
                permit.send(delivery);
            }
            (Some(_), None) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
            }
            (None, _) => {}
        }
    }
}

/// Room reserved in a delivery queue.
pub(crate) type Room<R> = mpsc::OwnedPermit<Box<Delivery<R>>>;

/// Room for one message in `queue` (`None` when its handler task is gone); never ready without
/// a queue.
pub(crate) async fn room<R: ServiceRole>(
    queue: Option<mpsc::Sender<Box<Delivery<R>>>>,
) -> Option<mpsc::OwnedPermit<Box<Delivery<R>>>> {
    match queue {
        Some(queue) => queue.reserve_owned().await.ok(),
        None => std::future::pending().await,
    }
}

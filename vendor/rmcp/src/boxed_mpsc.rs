//! Bounded channels whose messages travel boxed.
//!
//! A tokio channel allocates its slots 32 at a time, the first block when it is made: a
//! channel of 500-byte MCP messages holds 16 KB from its creation, idle or not. A session
//! keeps several of them (the session worker's events, the transport's three queues, the
//! service's response sink and its peer's requests), so an idle session cost about 60 KiB,
//! most of it empty slots. Boxed, a slot is a pointer and each message costs what it is, while
//! it is in flight. The API is tokio's, less what rmcp does not use; errors hand the message
//! back unboxed, as tokio's do.

use tokio::sync::mpsc::{self, error::SendError, error::TrySendError};

/// A bounded channel of `capacity` messages, each boxed while it waits.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel(capacity);
    (Sender(tx), Receiver(rx))
}

/// The sending half of [`channel`].
pub struct Sender<T>(mpsc::Sender<Box<T>>);

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> Sender<T> {
    /// Waits for room, then sends `value`; gives it back when the receiver is gone.
    pub async fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.0
            .send(Box::new(value))
            .await
            .map_err(|SendError(value)| SendError(*value))
    }

    /// Sends `value` if there is room now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.0.try_send(Box::new(value)).map_err(|e| match e {
            TrySendError::Full(value) => TrySendError::Full(*value),
            TrySendError::Closed(value) => TrySendError::Closed(*value),
        })
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// The receiving half of [`channel`].
pub struct Receiver<T>(mpsc::Receiver<Box<T>>);

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> Receiver<T> {
    /// The next message, or `None` once every sender is gone and the queue is empty.
    pub async fn recv(&mut self) -> Option<T> {
        self.0.recv().await.map(|value| *value)
    }

    /// Whether every sender is gone.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_arrive_in_order_up_to_the_capacity() {
        let (tx, mut rx) = channel::<String>(2);
        tx.send("a".to_owned()).await.unwrap();
        tx.try_send("b".to_owned()).unwrap();
        match tx.try_send("c".to_owned()) {
            Err(TrySendError::Full(refused)) => assert_eq!(refused, "c"),
            other => panic!("a full channel took a message: {other:?}"),
        }
        assert_eq!(rx.recv().await.as_deref(), Some("a"));
        assert_eq!(rx.recv().await.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn a_closed_channel_hands_the_message_back() {
        let (tx, rx) = channel::<String>(1);
        drop(rx);
        assert!(tx.is_closed());
        let SendError(refused) = tx.send("a".to_owned()).await.unwrap_err();
        assert_eq!(refused, "a");
        match tx.try_send("b".to_owned()) {
            Err(TrySendError::Closed(refused)) => assert_eq!(refused, "b"),
            other => panic!("a closed channel took a message: {other:?}"),
        }

        let (tx, mut rx) = channel::<u8>(1);
        tx.send(1).await.unwrap();
        drop(tx);
        assert!(rx.is_closed());
        assert_eq!(rx.recv().await, Some(1), "what was sent is still received");
        assert_eq!(rx.recv().await, None);
    }
}

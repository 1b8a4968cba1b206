//! The trace's live side: every emitted record broadcast to subscribers (the console's live
//! trace), and the most recent ones kept for a subscriber that arrives later.
//!
//! Both are bounded. The broadcast holds [`LIVE_CAPACITY`] records for its slowest subscriber;
//! one further behind skips the oldest (and is told how many), so emitting never waits on one.
//! The sink keeps the last [`RECENT_CAPACITY`] records (the same allocation the writer writes
//! from, not a copy), so a page opened now starts with what happened just before.
//! [`Live::subscribe_with_recent`] takes the kept records and the subscription under one lock,
//! so every record is in exactly one of them: none twice, none missed in between.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::broadcast;

/// Records the live broadcast keeps for its slowest subscriber; one further behind skips the
/// oldest.
pub const LIVE_CAPACITY: usize = 1024;

/// Records kept for a subscriber that arrives later, most recent last.
pub const RECENT_CAPACITY: usize = 200;

/// The broadcast and the recent records (of `T`, the trace's records); shared by every clone
/// of a sink.
#[derive(Debug)]
pub(crate) struct Live<T> {
    sender: broadcast::Sender<Arc<T>>,
    recent: Mutex<VecDeque<Arc<T>>>,
}

impl<T> Default for Live<T> {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(LIVE_CAPACITY).0,
            recent: Mutex::new(VecDeque::with_capacity(RECENT_CAPACITY)),
        }
    }
}

impl<T> Live<T> {
    /// Keeps `record` among the recent ones (the oldest goes past [`RECENT_CAPACITY`]) and
    /// sends it to the subscribers, if any.
    pub(crate) fn publish(&self, record: &Arc<T>) {
        let evicted = {
            let mut recent = self.recent.lock();
            let evicted = (recent.len() >= RECENT_CAPACITY)
                .then(|| recent.pop_front())
                .flatten();
            recent.push_back(record.clone());
            if self.sender.receiver_count() > 0 {
                let _ = self.sender.send(record.clone());
            }
            evicted
        };
        // Freed outside the lock.
        drop(evicted);
    }

    /// Every record emitted from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<T>> {
        self.sender.subscribe()
    }

    /// The kept records (oldest first), and every record emitted after them.
    pub(crate) fn subscribe_with_recent(&self) -> (Vec<Arc<T>>, broadcast::Receiver<Arc<T>>) {
        let recent = self.recent.lock();
        let subscription = self.sender.subscribe();
        (recent.iter().cloned().collect(), subscription)
    }
}

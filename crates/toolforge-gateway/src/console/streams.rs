//! How many live trace streams are open, capped at [`MAX_LIVE_STREAMS`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Live trace streams open at once.
pub const MAX_LIVE_STREAMS: usize = 16;

/// The open streams' count.
#[derive(Debug, Default)]
pub(super) struct Streams {
    open: AtomicUsize,
}

/// One open stream; frees its place when dropped.
#[derive(Debug)]
pub(super) struct Slot(Arc<Streams>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Streams {
    /// A place for one more stream, unless [`MAX_LIVE_STREAMS`] are open.
    pub(super) fn enter(self: &Arc<Self>) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_LIVE_STREAMS).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_capped_and_a_closed_one_frees_its_place() {
        let streams = Arc::new(Streams::default());
        let open: Vec<Slot> = (0..MAX_LIVE_STREAMS)
            .map(|_| streams.enter().expect("below the cap"))
            .collect();
        assert!(streams.enter().is_none());
        drop(open);
        assert!(streams.enter().is_some());
    }
}

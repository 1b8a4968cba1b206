//! When free heap goes back to the operating system: after the gateway's big one-off builds (a
//! new catalog generation, a large `tools/list` answer), through the hook the binary hands over
//! ([`Shared::set_memory_release`](crate::Shared::set_memory_release)). How it goes back is
//! the allocator's business, which only the binary knows.
//!
//! Allocators keep the memory they got for a peak and reuse it, so a process's resident memory
//! follows its peak heap rather than what is live. A gateway's peaks are catalog builds: with
//! 10,000 tools, start-up and the first `tools/list` each hold much more than stays live
//! (`benchmarks/proxy/README.md`).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Gives the heap's free memory back to the operating system (blocking; run off the workers).
pub type ReleaseMemory = fn();

/// An answer at least this large is a build worth releasing memory after.
pub(crate) const LARGE_BUILD_BYTES: usize = 1 << 20;

/// How long a requested release waits for the builds around it: many requests, one release.
const COALESCE: Duration = Duration::from_secs(1);

/// The hook, and whether a release is already waiting.
#[derive(Debug, Default)]
pub(crate) struct MemoryRelease {
    hook: OnceLock<ReleaseMemory>,
    pending: Arc<AtomicBool>,
}

impl MemoryRelease {
    /// Releases with `hook` from now on; false when one was set already (it stays).
    pub(crate) fn set(&self, hook: ReleaseMemory) -> bool {
        self.hook.set(hook).is_ok()
    }

    /// Runs the hook a moment from now, off the async workers. Requests made while one is
    /// waiting join it, so a burst of builds (or a client that provokes them) costs one release
    /// a second at most. Returns whether this call scheduled the release (never without a hook
    /// or outside a runtime).
    ///
    /// Start-up does not release: the first `tools/list` reuses what start-up freed, where a
    /// release would have it fault the same memory back in (a slower first answer, no smaller
    /// resident set after).
    pub(crate) fn release_soon(&self) -> bool {
        let Some(&hook) = self.hook.get() else {
            return false;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return false;
        }
        if self.pending.swap(true, Ordering::AcqRel) {
            return false;
        }
        let pending = self.pending.clone();
        tokio::spawn(async move {
            tokio::time::sleep(COALESCE).await;
            pending.store(false, Ordering::Release);
            drop(tokio::task::spawn_blocking(hook));
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static RELEASES: AtomicUsize = AtomicUsize::new(0);

    fn count_release() {
        RELEASES.fetch_add(1, Ordering::SeqCst);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_requests_runs_the_hook_once_then_a_later_build_schedules_again() {
        let release = MemoryRelease::default();
        assert!(release.set(count_release));
        let before = RELEASES.load(Ordering::SeqCst);
        let scheduled: Vec<bool> = (0..100).map(|_| release.release_soon()).collect();
        assert_eq!(scheduled.iter().filter(|s| **s).count(), 1, "{scheduled:?}");
        // The paused clock runs on to the coalescing deadline; the hook runs on a blocking
        // thread (polled, bounded).
        for _ in 0..1000 {
            if RELEASES.load(Ordering::SeqCst) > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(RELEASES.load(Ordering::SeqCst), before + 1);
        assert!(
            release.release_soon(),
            "no release could be scheduled after the first ran"
        );
    }

    #[tokio::test]
    async fn without_a_hook_nothing_is_scheduled() {
        assert!(!MemoryRelease::default().release_soon());
    }

    #[test]
    fn without_a_runtime_nothing_is_scheduled() {
        let release = MemoryRelease::default();
        assert!(release.set(count_release));
        assert!(!release.release_soon());
    }

    #[test]
    fn the_first_hook_stays() {
        let release = MemoryRelease::default();
        assert!(release.set(count_release));
        assert!(!release.set(|| {}));
    }
}

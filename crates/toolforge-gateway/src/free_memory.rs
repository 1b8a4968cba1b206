//! Gives the heap's free memory back to the operating system after the gateway's big
//! one-off builds: a new catalog generation, a large `tools/list` answer.
//!
//! glibc's allocator keeps the memory it got for a peak and reuses it, so a process's RSS
//! follows its peak heap rather than what is live. A gateway's peaks are catalog builds: with
//! 10,000 tools, start-up and the first `tools/list` each hold much more than stays live
//! (`benchmarks/proxy/README.md`). A trim hands the free pages of every arena back: jemalloc's
//! (feature `jemalloc`, the binary's default allocator, whose own decay would return them a
//! second later) and glibc's (`malloc_trim`). Elsewhere (musl, other systems) glibc's does
//! nothing. [`limit_arenas`] caps glibc's arenas,
//! each of which keeps the pages its live allocations are on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// An answer at least this large is a build worth trimming after.
pub(crate) const LARGE_BUILD_BYTES: usize = 1 << 20;

/// How long a requested trim waits for the builds around it: many requests, one trim.
const COALESCE: Duration = Duration::from_secs(1);

static PENDING: AtomicBool = AtomicBool::new(false);

/// Returns free heap memory to the operating system a moment from now, off the async workers
/// (a trim walks every arena: a few milliseconds with a large heap). Requests made while one
/// is waiting join it, so a burst of builds (or a client that provokes them) costs one trim a
/// second at most. Returns whether this call scheduled the trim.
///
/// Start-up does not trim: the first `tools/list` reuses what start-up freed, where a trim
/// would have it fault the same memory back in (a slower first answer, no smaller RSS after).
pub(crate) fn release_soon() -> bool {
    if tokio::runtime::Handle::try_current().is_err() {
        return false;
    }
    if PENDING.swap(true, Ordering::AcqRel) {
        return false;
    }
    tokio::spawn(async {
        tokio::time::sleep(COALESCE).await;
        PENDING.store(false, Ordering::Release);
        drop(tokio::task::spawn_blocking(trim));
    });
    true
}

fn trim() {
    let _ = trim_jemalloc();
    trim_glibc();
}

/// The binary's allocator when it is built with jemalloc (its default): every arena's unused
/// dirty pages go back now instead of after their decay time. Returns whether jemalloc took the
/// request.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
fn trim_jemalloc() -> bool {
    // `MALLCTL_ARENAS_ALL`: the purge applies to every arena.
    const PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";
    // SAFETY: `arena.<i>.purge` reads and writes nothing (null pointers, zero length) and runs
    // under jemalloc's own locks.
    #[allow(unsafe_code)]
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        tracing::debug!(rc, "jemalloc refused to purge its arenas");
    }
    rc == 0
}

#[cfg(not(all(feature = "jemalloc", not(target_env = "msvc"))))]
fn trim_jemalloc() -> bool {
    false
}

/// glibc's heap: all of it without jemalloc, else what C libraries (SQLite) allocate.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_glibc() {
    // SAFETY: `malloc_trim` takes no pointers and works on the allocator's own state under
    // its own locks; 0 keeps no spare room at the top of the heap.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_glibc() {}

/// Caps glibc's heap arenas at one per async worker thread plus one, for a gateway running
/// `worker_threads` workers. Call it once each worker has allocated (a thread takes its arena
/// at its first allocation) and before anything else has: a worker left without an arena of
/// its own would share the main thread's. Returns whether the allocator took the cap (false
/// elsewhere than glibc).
///
/// glibc gives a thread that allocates while the others hold their arenas one of its own (up
/// to 8 per core), and an arena outlives its thread (the next new thread takes it over). So the
/// blocking pool's short-lived threads (SQLite, files, these trims) keep an arena beside the
/// main thread's and the workers', and what a catalog build leaves live there keeps its pages.
/// With 10,000 tools, after `benchmarks/visibility/list_load.py --requests 10 --rounds 2
/// --cases unfiltered`: uncapped, three arenas with 5.0 (main), 37.4 (the worker) and 4.9 MB
/// resident; capped, two with 3.6 and 37.9 MB, and RSS 62 -> 56 MiB (`benchmarks/proxy/
/// README.md`, 2026-11-27). `MALLOC_ARENA_MAX` gave the same at workers + 1, nothing at more,
/// and worse below (one arena for one worker: 91 MiB): a worker must not share its arena.
/// Latency did not move.
pub fn limit_arenas(worker_threads: usize) -> bool {
    set_arena_max(worker_threads.saturating_add(1))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: usize) -> bool {
    let arenas = libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` takes no pointers and sets one allocator parameter under glibc's own
    // lock; `M_ARENA_MAX` only bounds the arenas made from now on.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_of_requests_schedules_one_trim() {
        // Another test may have a trim waiting: wait for it to go (bounded).
        for _ in 0..300 {
            if !PENDING.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            !PENDING.load(Ordering::Acquire),
            "a scheduled trim never ran"
        );
        let scheduled: Vec<bool> = (0..100).map(|_| release_soon()).collect();
        assert_eq!(scheduled.iter().filter(|s| **s).count(), 1, "{scheduled:?}");
        assert!(PENDING.load(Ordering::Acquire));
        // The trim runs and a later build can schedule the next (polled, bounded).
        let mut waited = 0;
        while PENDING.load(Ordering::Acquire) && waited < 300 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited += 1;
        }
        assert!(
            release_soon(),
            "no trim could be scheduled after the first ran"
        );
    }

    #[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
    #[test]
    fn jemalloc_takes_the_purge_of_every_arena() {
        assert!(trim_jemalloc(), "mallctl refused arena.<all>.purge");
    }

    #[test]
    fn without_a_runtime_nothing_is_scheduled() {
        assert!(!release_soon());
    }
}

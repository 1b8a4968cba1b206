//! The async runtime every command runs on, and how many threads it gets.
//!
//! A call through the gateway is a chain of small steps on different tasks (the client's
//! connection, the MCP session, the handler, the backend's client), each waking the next. With
//! a worker thread per core those wakes cross threads, and each crossing costs a futex wake and
//! a context switch that the step itself does not. The gateway also shares its machine with its
//! stdio backends (child processes) and often with their clients. So the default is half the
//! cores, at least one: on 2 cores, one worker thread took CPU per `tools/call` from 0.49 to
//! 0.35 ms at c = 1 and from 0.26 to 0.20 ms at c = 32, with more throughput at all three
//! (`benchmarks/proxy/README.md`). Blocking work (SQLite, files) has its own pool either way.

use std::num::NonZeroUsize;

/// Worker threads when none are asked for: half the cores the process may use, at least one.
pub fn default_worker_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    (cores / 2).max(1)
}

/// The multi-threaded runtime with `worker_threads` (else the default) workers.
pub fn build(worker_threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    builder(worker_threads.unwrap_or_else(default_worker_threads)).build()
}

/// The settings every runtime here shares: `workers` worker threads, I/O and timers on.
fn builder(workers: usize) -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(workers).enable_all();
    builder
}

/// [`build`], then glibc's heap arenas capped at one per worker plus one
/// (`toolforge_gateway::limit_arenas`) once every worker has taken an arena of its own: capped
/// before, a blocking thread that allocates before a worker does takes the last new arena and
/// the worker shares the main thread's (with 10,000 tools, 3 runs in 23 had 65 MiB of RSS after
/// `list_load.py` instead of 56-59; `benchmarks/proxy/README.md`).
pub fn build_with_arenas_capped(
    worker_threads: Option<usize>,
) -> std::io::Result<tokio::runtime::Runtime> {
    use std::sync::{Arc, Condvar, Mutex};
    let workers = worker_threads.unwrap_or_else(default_worker_threads);
    let started = Arc::new((Mutex::new(0_usize), Condvar::new()));
    let counter = started.clone();
    let runtime = builder(workers)
        .on_thread_start(move || {
            // glibc gives a thread its arena at its first allocation: this one.
            drop(std::hint::black_box(Box::new(0_u64)));
            let (count, woken) = &*counter;
            *count
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
            woken.notify_all();
        })
        .build()?;
    // The workers start with the runtime; blocking threads only once something runs on it.
    let (count, woken) = &*started;
    let count = count
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (count, _) = woken
        .wait_timeout_while(count, std::time::Duration::from_secs(10), |n| *n < workers)
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *count >= workers {
        toolforge_gateway::limit_arenas(workers);
    }
    Ok(runtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_leaves_half_the_cores_and_never_none() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let threads = default_worker_threads();
        assert!(threads >= 1);
        assert!(
            threads * 2 <= cores.max(2),
            "{threads} threads on {cores} cores"
        );
    }

    #[test]
    fn an_explicit_count_is_what_the_runtime_gets() {
        let runtime = build(Some(3)).expect("a runtime");
        assert_eq!(runtime.metrics().num_workers(), 3);
    }

    #[test]
    fn capping_the_arenas_waits_for_the_workers_and_keeps_their_count() {
        let runtime = build_with_arenas_capped(Some(2)).expect("a runtime");
        assert_eq!(runtime.metrics().num_workers(), 2);
        assert_eq!(runtime.block_on(async { 1 + 1 }), 2);
    }
}

//! The async runtime every command runs on, how many threads it gets, the TLS provider every
//! HTTPS client uses, and the signal that ends a server.
//!
//! Worker threads: `--worker-threads N` (`TOOLFORGE_WORKER_THREADS`), else tokio's own choice
//! (`TOKIO_WORKER_THREADS`, else one per CPU the process may use). Fewer workers than cores can
//! lower the CPU a gateway spends per call when it shares a small machine with its stdio backends
//! and clients (a call's steps wake each other across fewer threads): on 2 cores, one worker took
//! CPU per `tools/call` from 0.49 to 0.35 ms at c = 1 (`benchmarks/proxy/README.md`,
//! `docs/deploy.md`), so that is a deployment's choice to measure, not a default. Blocking work
//! (SQLite, files) has its own pool either way.

/// The multi-threaded runtime with `worker_threads` workers, else tokio's default count.
pub fn build(worker_threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    builder(worker_threads).build()
}

/// The settings every runtime here shares: the worker count asked for, I/O and timers on.
fn builder(worker_threads: Option<usize>) -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = worker_threads {
        builder.worker_threads(workers);
    }
    builder.enable_all();
    builder
}

/// [`build`], then glibc's heap arenas capped at one per worker plus one
/// (`crate::allocator::limit_glibc_arenas`) once every worker has taken an arena of its own:
/// capped before, a blocking thread that allocates before a worker does takes the last new
/// arena and the worker shares the main thread's (with 10,000 tools, 3 runs in 23 had 65 MiB of
/// RSS after `list_load.py` instead of 56-59; `benchmarks/proxy/README.md`).
pub fn build_with_arenas_capped(
    worker_threads: Option<usize>,
) -> std::io::Result<tokio::runtime::Runtime> {
    use std::sync::{Arc, Condvar, Mutex};
    let started = Arc::new((Mutex::new(0_usize), Condvar::new()));
    let counter = started.clone();
    let runtime = builder(worker_threads)
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
    let workers = runtime.metrics().num_workers();
    let (count, woken) = &*started;
    let count = count
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (count, _) = woken
        .wait_timeout_while(count, std::time::Duration::from_secs(10), |n| *n < workers)
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *count >= workers {
        crate::allocator::limit_glibc_arenas(workers);
    }
    Ok(runtime)
}

/// reqwest is built without a bundled crypto provider (ring is much cheaper to build than
/// aws-lc); install ring once, before any HTTPS client exists.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_count_is_what_the_runtime_gets() {
        let runtime = build(Some(3)).expect("a runtime");
        assert_eq!(runtime.metrics().num_workers(), 3);
    }

    #[test]
    fn without_a_count_tokio_chooses() {
        // tokio's default: `TOKIO_WORKER_THREADS`, else one worker per CPU the process may use.
        if crate::config::process_env_sets("TOKIO_WORKER_THREADS") {
            return;
        }
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let runtime = build(None).expect("a runtime");
        assert_eq!(runtime.metrics().num_workers(), cpus);
    }

    #[test]
    fn capping_the_arenas_waits_for_the_workers_and_keeps_their_count() {
        let runtime = build_with_arenas_capped(Some(2)).expect("a runtime");
        assert_eq!(runtime.metrics().num_workers(), 2);
        assert_eq!(runtime.block_on(async { 1 + 1 }), 2);
        let default = build_with_arenas_capped(None).expect("a runtime");
        assert_eq!(default.block_on(async { 2 + 2 }), 4);
    }
}

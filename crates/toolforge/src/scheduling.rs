//! How the kernel schedules the gateway's threads against the processes beside it.
//!
//! By default nothing changes: `serve` and `gateway` run under the policy they were started
//! with (normally `SCHED_OTHER`, the kernel's default). `--scheduling batch` (or
//! `TOOLFORGE_SCHEDULING=batch`) opts in to `SCHED_BATCH` for every thread of the process.
//!
//! What it trades. A gateway's work comes in short bursts, each started by a socket becoming
//! readable. Under `SCHED_OTHER` a thread that such a wake-up makes runnable may preempt the
//! thread running on the CPU it is put on; where the gateway shares few cores with its backends
//! and its clients, that is often a backend in the middle of a request. `SCHED_BATCH` is the same
//! fair share of the CPU without that preemption: a woken gateway thread runs at once on an idle
//! CPU, else when the running thread's turn ends. Measured on 2 cores with a node backend and the
//! load generator on the same machine, it took `tools/call` at 8 concurrent clients from about
//! 5,900 to about 7,900 calls per second; the cost is latency whenever the CPUs are busy with
//! other work, since a woken gateway thread waits for the running one's slice
//! (`docs/deploy.md`, `benchmarks/proxy/README.md`). On a machine with cores to spare, or where
//! the gateway's latency matters more than its neighbours' throughput, the default is right.
//!
//! Child processes inherit the policy of the thread that starts them. Stdio backends do not: the
//! pool starts them under `SCHED_OTHER` whenever the gateway runs as `SCHED_BATCH`
//! ([`runs_as_batch`], `toolforge_mcp::PoolOptions::stdio_default_scheduling`).

/// The scheduling policy of the gateway's threads (`--scheduling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheduling {
    /// The policy the process was started with (normally the kernel's default, `SCHED_OTHER`).
    Normal,
    /// `SCHED_BATCH`: the gateway's wake-ups do not preempt the thread running on a CPU.
    Batch,
}

/// Puts the calling thread, and every thread it starts from now on, under `scheduling`. Call it
/// before the async runtime starts its threads. Where the policy does not exist (other systems),
/// asking for [`Scheduling::Batch`] changes nothing.
pub fn apply(scheduling: Scheduling) -> std::io::Result<()> {
    match scheduling {
        Scheduling::Normal => Ok(()),
        Scheduling::Batch => set_batch(),
    }
}

/// Whether the calling thread runs as `SCHED_BATCH` (asked for with `--scheduling batch`, or
/// inherited from whatever started the process, such as `chrt -b`).
pub fn runs_as_batch() -> bool {
    is_batch()
}

#[cfg(target_os = "linux")]
fn is_batch() -> bool {
    // SAFETY: `sched_getscheduler` only reads the calling thread's policy (pid 0).
    #[allow(unsafe_code)]
    let policy = unsafe { libc::sched_getscheduler(0) };
    policy == libc::SCHED_BATCH
}

#[cfg(not(target_os = "linux"))]
fn is_batch() -> bool {
    false
}

#[cfg(target_os = "linux")]
fn set_batch() -> std::io::Result<()> {
    set_policy(libc::SCHED_BATCH)
}

/// Sets the calling thread's policy to `policy`, one of the kernel's fair ones (priority 0).
#[cfg(target_os = "linux")]
fn set_policy(policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` reads `param` and changes only the calling thread's policy
    // (pid 0); a fair policy (`SCHED_OTHER`, `SCHED_BATCH`) with priority 0 needs no privilege.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::sched_setscheduler(0, policy, &raw const param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn set_batch() -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's policy, as the kernel reports it.
    fn policy() -> i32 {
        // SAFETY: `sched_getscheduler` only reads the calling thread's policy.
        #[allow(unsafe_code)]
        unsafe {
            libc::sched_getscheduler(0)
        }
    }

    #[test]
    fn batch_is_the_policy_of_the_thread_and_of_the_threads_it_starts() {
        // On a thread of its own, so that the test harness's threads keep theirs.
        let (own, started, seen) = std::thread::spawn(|| {
            set_policy(libc::SCHED_OTHER).expect("SCHED_OTHER needs no privilege");
            assert!(!runs_as_batch());
            apply(Scheduling::Batch).expect("SCHED_BATCH needs no privilege");
            let started = std::thread::spawn(policy)
                .join()
                .expect("the inner thread ran");
            (policy(), started, runs_as_batch())
        })
        .join()
        .expect("the thread ran");
        assert_eq!(own, libc::SCHED_BATCH);
        assert_eq!(started, libc::SCHED_BATCH);
        assert!(seen);
    }

    #[test]
    fn normal_keeps_the_policy_the_thread_has() {
        let after = std::thread::spawn(|| {
            // From the default policy, whatever the test runner was started under.
            set_policy(libc::SCHED_OTHER).expect("SCHED_OTHER needs no privilege");
            apply(Scheduling::Normal).expect("nothing to change");
            policy()
        })
        .join()
        .expect("the thread ran");
        assert_eq!(after, libc::SCHED_OTHER);
    }
}

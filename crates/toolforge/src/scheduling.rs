//! How the kernel schedules the gateway's threads against the processes beside it.
//!
//! A gateway's work comes in short bursts, each started by a socket becoming readable: a client's
//! request, a backend's answer. On Linux a thread of the default policy (`SCHED_OTHER`) that
//! such a wake-up makes runnable may preempt the thread running on the CPU it is put on, and on
//! a machine the gateway shares with its backends (stdio children, local servers) and its
//! clients, that is often a backend in the middle of a request: the backend answers later and
//! starts again with cold caches. `SCHED_BATCH` is the same fair share of the CPU without that
//! preemption: a woken gateway thread runs at once on an idle CPU, else when the running
//! thread's turn ends. On 2 cores, with a node backend and the load generator on the same
//! machine, it took `tools/call` at 8 concurrent clients from about 7,000 to about 9,000 calls
//! per second, the backend preempted 0.07-0.09 times per call instead of 0.26-0.34
//! (`benchmarks/proxy/README.md`, 2026-11-29, last). Child processes inherit the policy of the
//! thread that starts them, so stdio backends the gateway starts run as `SCHED_BATCH` too.

/// The scheduling policy of the gateway's threads (`--scheduling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheduling {
    /// `SCHED_BATCH`: the gateway's wake-ups do not preempt the thread running on a CPU.
    Batch,
    /// The kernel's default policy, `SCHED_OTHER`.
    Normal,
}

/// Puts the calling thread, and every thread and process it starts from now on, under
/// `scheduling`. Call it before the async runtime starts its threads. Where the policy does not
/// exist (other systems), asking for [`Scheduling::Batch`] changes nothing.
pub fn apply(scheduling: Scheduling) -> std::io::Result<()> {
    match scheduling {
        Scheduling::Normal => Ok(()),
        Scheduling::Batch => set_batch(),
    }
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
        let (own, started) = std::thread::spawn(|| {
            apply(Scheduling::Batch).expect("SCHED_BATCH needs no privilege");
            let started = std::thread::spawn(policy)
                .join()
                .expect("the inner thread ran");
            (policy(), started)
        })
        .join()
        .expect("the thread ran");
        assert_eq!(own, libc::SCHED_BATCH);
        assert_eq!(started, libc::SCHED_BATCH);
    }

    #[test]
    fn normal_keeps_the_default_policy() {
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

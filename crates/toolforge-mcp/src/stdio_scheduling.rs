//! The scheduling policy a stdio server starts under.
//!
//! A child process inherits the scheduling policy of the thread that starts it. When the gateway
//! runs as `SCHED_BATCH` (an operator's opt-in for the gateway's own threads), its stdio servers
//! would run so too, and nobody asked for that: with
//! [`PoolOptions::stdio_default_scheduling`](crate::options::PoolOptions) the child sets the
//! kernel's default policy, `SCHED_OTHER`, before it runs the server's program. A server that
//! should run as `SCHED_BATCH` anyway says so in its own command (`chrt -b 0 node server.js`).

/// Makes the child `cmd` starts switch to `SCHED_OTHER` (priority 0) before it runs its program.
/// Nothing changes where that policy does not exist (other systems than Linux).
#[cfg(target_os = "linux")]
pub(crate) fn start_under_default_policy(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec; it makes one system call
    // (async-signal-safe) on a value on its own stack, and reads errno on failure. Lowering a
    // thread's own policy to `SCHED_OTHER` at priority 0 needs no privilege.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            let param = libc::sched_param { sched_priority: 0 };
            if libc::sched_setscheduler(0, libc::SCHED_OTHER, &raw const param) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn start_under_default_policy(_cmd: &mut tokio::process::Command) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::Stdio;

    /// The scheduling policy of process `pid` (`/proc/PID/stat`, field 41).
    fn policy_of(pid: u32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the child's stat");
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let after_name = &stat[stat.rfind(')').expect("a command name") + 1..];
        after_name
            .split_whitespace()
            .nth(41 - 3)
            .and_then(|f| f.parse().ok())
            .expect("a policy field")
    }

    /// Starts `cat` (waiting on its stdin) from a thread running as `SCHED_BATCH`, the child
    /// set up by `setup`; the child's policy while it runs.
    fn child_policy_from_a_batch_thread(setup: fn(&mut tokio::process::Command)) -> i32 {
        std::thread::spawn(move || {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sets only this thread's policy (pid 0) from a parameter on its stack.
            #[allow(unsafe_code)]
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &raw const param) };
            assert_eq!(rc, 0, "SCHED_BATCH needs no privilege");
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let mut cmd = tokio::process::Command::new("cat");
                cmd.stdin(Stdio::piped()).stdout(Stdio::null());
                setup(&mut cmd);
                let mut child = cmd.spawn().expect("cat starts");
                let policy = policy_of(child.id().expect("cat is running"));
                drop(child.stdin.take());
                child.wait().await.expect("cat ends");
                policy
            })
        })
        .join()
        .expect("the thread ran")
    }

    #[test]
    fn a_child_of_a_batch_thread_inherits_batch_unless_told_otherwise() {
        assert_eq!(child_policy_from_a_batch_thread(|_| {}), libc::SCHED_BATCH);
    }

    #[test]
    fn a_stdio_server_started_under_the_default_policy_does_not_inherit_batch() {
        assert_eq!(
            child_policy_from_a_batch_thread(start_under_default_policy),
            libc::SCHED_OTHER
        );
    }
}

//! The scheduling policy `serve` runs under, and the one its stdio backends start under (Linux):
//! the kernel's default unless `--scheduling batch`, and backends never inherit `SCHED_BATCH`.

use serde_json::json;

use crate::{Served, server_state};

/// `/proc/PID/task/TID/stat`'s policy field (41) for every thread of `pid`.
fn thread_policies(pid: u32) -> Vec<i32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            // The command name (field 2) is in parentheses and may hold spaces.
            let after_name = &stat[stat.rfind(')')? + 1..];
            after_name.split_whitespace().nth(41 - 3)?.parse().ok()
        })
        .collect()
}

/// The child processes of `pid`, over all its threads.
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

const SCHED_OTHER: i32 = 0;
const SCHED_BATCH: i32 = 3;

/// `serve` with the built-in toolkit over stdio, `args` added, once the toolkit is ready;
/// the policies of the gateway's threads and of its backend's.
async fn policies_of_serve_and_backend(args: &[&str]) -> (Vec<i32>, Vec<i32>) {
    let config = json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}});
    let served = Served::start_full(&config, &[], args).await;
    let health = served
        .wait_health(60, |h| server_state(h, "toolkit")["state"] == "ready")
        .await;
    assert_eq!(
        server_state(&health, "toolkit")["state"],
        "ready",
        "{health}"
    );
    let backends = children(served.pid());
    assert_eq!(backends.len(), 1, "one stdio backend: {backends:?}");
    (thread_policies(served.pid()), thread_policies(backends[0]))
}

#[tokio::test]
async fn a_plain_serve_and_its_stdio_backend_run_under_the_default_policy() {
    let (gateway, backend) = policies_of_serve_and_backend(&[]).await;
    assert!(!gateway.is_empty() && !backend.is_empty());
    assert!(gateway.iter().all(|p| *p == SCHED_OTHER), "{gateway:?}");
    assert!(backend.iter().all(|p| *p == SCHED_OTHER), "{backend:?}");
}

#[tokio::test]
async fn serve_as_batch_leaves_its_stdio_backend_under_the_default_policy() {
    let (gateway, backend) = policies_of_serve_and_backend(&["--scheduling", "batch"]).await;
    assert!(!gateway.is_empty() && !backend.is_empty());
    assert!(gateway.iter().all(|p| *p == SCHED_BATCH), "{gateway:?}");
    assert!(backend.iter().all(|p| *p == SCHED_OTHER), "{backend:?}");
}

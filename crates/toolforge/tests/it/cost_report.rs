//! Black-box tests of `toolforge cost-report`: a trace file written to a temp dir, the built
//! binary run over it.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::bin;

/// One schema-"1" trace record, as the agent writes it.
fn record(
    timestamp: &str,
    session: &str,
    executed: bool,
    success: bool,
    tokens: (u64, u64),
    cost: f64,
) -> String {
    json!({
        "schema_version": "1",
        "timestamp": timestamp,
        "session_id": session,
        "step": 1,
        "server": "toolkit",
        "tool": "echo",
        "arguments_hash": "0123456789abcdef",
        "latency_ms": 3.5,
        "success": success,
        "executed": executed,
        "dry_run": !executed && success,
        "tokens_in": tokens.0,
        "tokens_out": tokens.1,
        "cost_usd": cost,
        "selection_rule": "only_candidate",
        "alternatives": [],
        "attempt": 1,
        "retries": 0,
        "retry_reason": null,
        "error": if success { Value::Null } else { json!("boom") },
        "corrective_retry": false,
    })
    .to_string()
}

/// Two days, three sessions, one dry run, one failure, a malformed line, a newer-schema line and
/// a partial last line.
fn write_trace(dir: &Path) -> std::path::PathBuf {
    let lines = [
        record(
            "2026-05-14T09:15:04.382Z",
            "s1",
            true,
            true,
            (1000, 200),
            0.0123,
        ),
        record(
            "2026-05-14T09:16:00.000Z",
            "s1",
            false,
            true,
            (500, 50),
            0.0040,
        ),
        "{this is not json".to_owned(),
        record(
            "2026-05-14T23:59:59.999Z",
            "s2",
            true,
            false,
            (300, 0),
            0.0010,
        ),
        record(
            "2026-05-15T00:00:00.000Z",
            "s2",
            true,
            true,
            (2000, 400),
            0.0250,
        ),
        r#"{"schema_version":"9","at":"2026-05-15T01:00:00Z"}"#.to_owned(),
        record(
            "2026-05-15T10:00:00.000Z",
            "s3",
            true,
            true,
            (100, 10),
            0.0007,
        ),
    ];
    let mut text = lines.join("\n");
    text.push('\n');
    text.push_str(r#"{"schema_version":"1","timestamp":"2026-05-15T11:"#);
    let path = dir.join("traces.jsonl");
    std::fs::write(&path, text).expect("write trace");
    path
}

fn cost_report(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("cost-report")
        .args(args)
        .current_dir(dir)
        .env_remove("TRACE_SINK")
        .output()
        .expect("run toolforge cost-report")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fields(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn table_rows_and_total() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path());
    let out = cost_report(dir.path(), &["--trace", trace.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert_eq!(
        fields(rows[0]),
        [
            "date",
            "sessions",
            "calls",
            "model-only",
            "executed",
            "dry-run",
            "failed",
            "tokens",
            "in",
            "tokens",
            "out",
            "cost",
            "USD"
        ]
    );
    assert_eq!(
        fields(rows[1]),
        [
            "2026-05-14",
            "2",
            "3",
            "0",
            "2",
            "1",
            "1",
            "1800",
            "250",
            "$0.0173"
        ]
    );
    assert_eq!(
        fields(rows[2]),
        [
            "2026-05-15",
            "2",
            "2",
            "0",
            "2",
            "0",
            "0",
            "2100",
            "410",
            "$0.0257"
        ]
    );
    assert_eq!(
        fields(rows[3]),
        [
            "TOTAL", "3", "5", "0", "4", "1", "1", "3900", "660", "$0.0430"
        ]
    );
    assert!(
        rows.iter().all(|r| r.len() == rows[0].len()),
        "columns are aligned:\n{text}"
    );
    let err = stderr(&out);
    assert!(err.contains("skipped 2 malformed line(s)"), "{err}");
    assert!(err.contains("(line 3, 8)"), "{err}");
    assert!(err.contains("unknown schema_version"), "{err}");
}

#[test]
fn json_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path());
    let out = cost_report(dir.path(), &["--trace", trace.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(
        report,
        json!({
            "days": [
                {
                    "date": "2026-05-14", "sessions": 2, "calls": 3, "model_calls": 0, "executed": 2,
                    "dry_run": 1, "failed": 1, "tokens_in": 1800, "tokens_out": 250,
                    "cost_usd": 0.0173,
                },
                {
                    "date": "2026-05-15", "sessions": 2, "calls": 2, "model_calls": 0, "executed": 2,
                    "dry_run": 0, "failed": 0, "tokens_in": 2100, "tokens_out": 410,
                    "cost_usd": 0.0257,
                },
            ],
            "total": {
                "sessions": 3, "calls": 5, "model_calls": 0, "executed": 4, "dry_run": 1, "failed": 1,
                "tokens_in": 3900, "tokens_out": 660, "cost_usd": 0.043,
            },
            "skipped_lines": 2,
            "skipped_line_numbers": [3, 8],
            "unknown_schema_lines": 1,
        })
    );
}

#[test]
fn since_and_executed_only_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path());
    let trace = trace.to_str().unwrap();

    let out = cost_report(
        dir.path(),
        &["--trace", trace, "--json", "--since", "2026-05-15"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["days"].as_array().unwrap().len(), 1);
    assert_eq!(report["days"][0]["date"], "2026-05-15");
    assert_eq!(report["total"]["calls"], 2);

    let out = cost_report(dir.path(), &["--trace", trace, "--json", "--executed-only"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["days"][0]["calls"], 2);
    assert_eq!(report["days"][0]["dry_run"], 0);
    assert_eq!(report["days"][0]["sessions"], 2);
    assert_eq!(report["total"]["calls"], 4);
    assert_eq!(report["total"]["cost_usd"], 0.039);
}

#[test]
fn trace_sink_env_then_default_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path());

    let out = Command::new(bin())
        .args(["cost-report", "--json"])
        .current_dir(dir.path())
        .env("TRACE_SINK", &trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["total"]["calls"], 5);

    std::fs::create_dir(dir.path().join("logs")).unwrap();
    std::fs::write(
        dir.path().join("logs/traces.jsonl"),
        record("2026-06-01T12:00:00.000Z", "d", true, true, (1, 1), 0.5) + "\n",
    )
    .unwrap();
    let out = cost_report(dir.path(), &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["days"][0]["date"], "2026-06-01");
    assert_eq!(report["total"]["calls"], 1);
}

#[test]
fn missing_file_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = cost_report(dir.path(), &["--trace", "nowhere.jsonl"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no trace file at nowhere.jsonl (set TRACE_SINK or pass --trace)"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());

    // The default path, when nothing is configured.
    let out = cost_report(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no trace file at logs/traces.jsonl"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn invalid_since_names_the_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path());
    let out = cost_report(
        dir.path(),
        &["--trace", trace.to_str().unwrap(), "--since", "15/05/2026"],
    );
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(stderr(&out).contains("YYYY-MM-DD"), "{}", stderr(&out));
}

#[test]
fn empty_selection_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(dir.path());
    let out = cost_report(
        dir.path(),
        &["--trace", trace.to_str().unwrap(), "--since", "2027-01-01"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("no trace records ("), "{text}");
    assert!(text.contains("traces.jsonl"), "{text}");
    assert!(text.contains("since 2027-01-01"), "{text}");
}

/// The accounting promise end to end: runs that answer, halt and dry-run, and the report's total
/// equals the sum of the responses' `cost_usd`.
#[test]
fn the_report_total_is_what_the_runs_billed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}});
    std::fs::write(dir.path().join("mcp.servers.json"), config.to_string()).unwrap();
    let task =
        "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500.";
    let mut billed = 0.0;
    for (args, ceiling) in [
        (vec![task], "0.10"),
        (vec![task, "--dry-run", "--allow-listing"], "0.10"),
        (vec!["say hello"], "0.10"),
        // Halts at the ceiling after its first call.
        (vec![task], "0.0075"),
    ] {
        let out = Command::new(bin())
            .arg("chat")
            .args(&args)
            .arg("--json")
            .current_dir(dir.path())
            .env_remove("TRACE_SINK")
            .env_remove("LLM_PROVIDER")
            .env_remove("CATALOG_CACHE_BACKEND")
            .env("XDG_CACHE_HOME", dir.path().join(".cache"))
            .env("COST_CEILING_USD", ceiling)
            .output()
            .unwrap();
        let r: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        billed += r["cost_usd"].as_f64().unwrap();
    }
    assert!(billed > 0.0);
    let out = cost_report(dir.path(), &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let total = report["total"]["cost_usd"].as_f64().unwrap();
    assert!(
        (total - billed).abs() < 0.000_005,
        "the report says ${total}, the runs billed ${billed}"
    );
    assert!(
        report["total"]["model_calls"].as_u64().unwrap() >= 3,
        "{report}"
    );
}

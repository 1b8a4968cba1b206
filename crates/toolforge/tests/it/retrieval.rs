//! `toolforge tools search` and `toolforge eval retrieval` as a user runs them: BM25 alone, and
//! hybrid with the local MiniLM model compiled into the default binary (`EMBEDDER_BACKEND=local`).

use std::process::Command;

use serde_json::{Value, json};

use crate::{bin, tool};

fn snapshot(dir: &std::path::Path) -> std::path::PathBuf {
    let tool = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": {"type": "object"}});
    let snap = json!({"servers": [
        {"name": "fs", "tools": [
            tool("read_file", "Read the contents of a file on disk"),
            tool("list_directory", "List the entries of a directory"),
        ]},
        {"name": "meteo", "tools": [
            tool("get_conditions", "Current conditions and the outlook for a location"),
        ]},
        {"name": "mail", "tools": [tool("send_email", "Send an email message")]},
    ]});
    let path = dir.join("snapshot.json");
    std::fs::write(&path, snap.to_string()).unwrap();
    path
}

fn search(catalog: &std::path::Path, query: &str, backend: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new(bin());
    cmd.args([
        "tools",
        "search",
        query,
        "--json",
        "--limit",
        "2",
        "--catalog",
    ])
    .arg(catalog)
    .env_remove("EMBEDDER_BACKEND");
    if let Some(b) = backend {
        cmd.env("EMBEDDER_BACKEND", b)
            .env("EMBED_MODEL_DIR", tool("models/all-MiniLM-L6-v2"));
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    rows.iter()
        .map(|r| r["tool"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn tools_search_bm25_and_hybrid_with_the_local_model() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = snapshot(dir.path());
    assert_eq!(search(&catalog, "read a file", None)[0], "fs/read_file");
    // No word in common with any tool: BM25 finds nothing, the model finds the weather tool.
    let query = "will it rain in Paris tomorrow?";
    assert!(search(&catalog, query, None).is_empty());
    assert_eq!(
        search(&catalog, query, Some("local"))[0],
        "meteo/get_conditions"
    );
}

/// `EMBED_MODEL_DIR` listing two folders (`:`-separated, like `PATH`) runs their ensemble; a
/// folder of the list that is missing is named in the error.
#[test]
fn several_model_folders_make_an_ensemble() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = snapshot(dir.path());
    let model = tool("models/all-MiniLM-L6-v2");
    let run = |dirs: std::ffi::OsString| {
        Command::new(bin())
            .args([
                "tools",
                "search",
                "will it rain in Paris tomorrow?",
                "--json",
            ])
            .args(["--limit", "1", "--catalog"])
            .arg(&catalog)
            .env("EMBEDDER_BACKEND", "local")
            .env("EMBED_MODEL_DIR", dirs)
            .output()
            .unwrap()
    };
    let both = std::env::join_paths([&model, &model]).unwrap();
    let out = run(both);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["tool"], "meteo/get_conditions");

    let missing = dir.path().join("no-such-model");
    let out = run(std::env::join_paths([&model, &missing]).unwrap());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-model"), "{err}");
}

#[test]
fn unknown_embedder_backend_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["tools", "search", "x", "--catalog"])
        .arg(snapshot(dir.path()))
        .env("EMBEDDER_BACKEND", "bogus")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("EMBEDDER_BACKEND") && err.contains("local"),
        "{err}"
    );
}

#[test]
fn eval_retrieval_writes_rankings_and_metrics_per_ranker() {
    let dir = tempfile::tempdir().unwrap();
    let tools = [
        json!({"server": "fs", "name": "read_file", "description": "Read a file", "input_schema": {"properties": {"path": {}}}}),
        json!({"server": "mail", "name": "send_email", "description": "Send an email", "input_schema": null}),
    ];
    let queries = [
        json!({"id": "q1", "query": "read the file", "gold": ["fs/read_file"], "gold_groups": [["fs/read_file"]]}),
        json!({"id": "q2", "query": "email my boss", "gold": ["mail/send_email"], "gold_groups": [["mail/send_email"]]}),
    ];
    let jsonl = |v: &[Value]| v.iter().map(|x| format!("{x}\n")).collect::<String>();
    std::fs::write(dir.path().join("tools.jsonl"), jsonl(&tools)).unwrap();
    std::fs::write(dir.path().join("queries.jsonl"), jsonl(&queries)).unwrap();
    let out = Command::new(bin())
        .args(["eval", "retrieval", "--ranker", "bm25,local"])
        .arg("--tools")
        .arg(dir.path().join("tools.jsonl"))
        .arg("--queries")
        .arg(dir.path().join("queries.jsonl"))
        .arg("--out")
        .arg(dir.path().join("out.jsonl"))
        .env("EMBED_MODEL_DIR", tool("models/all-MiniLM-L6-v2"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for ranker in ["bm25", "local"] {
        assert!(
            stdout.contains(&format!(
                "ranker={ranker} queries=2 recall@1=1.000 recall@5=1.000 ndcg@10=1.000 mrr=1.000"
            )),
            "{stdout}"
        );
        let lines =
            std::fs::read_to_string(dir.path().join(format!("out-{ranker}.jsonl"))).unwrap();
        let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
        assert_eq!(
            first,
            json!({"id": "q1", "ranked": ["fs/read_file", "mail/send_email"]})
        );
    }
}

#[test]
fn eval_retrieval_rejects_bad_lines_with_their_location() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("t.jsonl"),
        "{\"server\":\"a\",\"name\":\"b\"}\n{oops\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("q.jsonl"), "").unwrap();
    let out = Command::new(bin())
        .args(["eval", "retrieval", "--ranker", "bm25", "--tools"])
        .arg(dir.path().join("t.jsonl"))
        .arg("--queries")
        .arg(dir.path().join("q.jsonl"))
        .arg("--out")
        .arg(dir.path().join("o.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("t.jsonl:2: bad JSON line"), "{err}");
}

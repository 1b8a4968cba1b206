//! The web console at `/ui`, driven in real headless Chromium (Debian's `chromium`, installed by
//! `scripts/setup`) by `tests/console/drive.py` over the DevTools protocol: every page loads
//! with no console error, the catalog shows the bundled toolkit's tools, a visibility preview
//! with `?tools=sql_query` shows one tool, and the live trace shows a `/chat` made before it
//! opened and one made meanwhile.
//!
//! Each page is saved as a PNG in [`screenshots`] (under the build's temporary directory; the
//! ones in `docs/console/` are copies).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Served, root, tool};

const PAGES: [&str; 6] = [
    "catalog",
    "visibility",
    "routing",
    "trace",
    "spend",
    "governance",
];

fn toolkit() -> Value {
    json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}})
}

fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup (it installs Debian's chromium for the console tests)",
        path.display()
    );
    path
}

/// Where the browser script saves a screenshot of each page.
fn screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
}

async fn drive(base: &str) -> Value {
    let mut command = tokio::process::Command::new(tool("venv/bin/python"));
    command
        .arg(root().join("crates/toolforge/tests/console/drive.py"))
        .args(["--base", base, "--chromium"])
        .arg(chromium())
        .kill_on_drop(true);
    std::fs::create_dir_all(screenshots()).expect("a directory for the screenshots");
    command.arg("--screenshots").arg(screenshots());
    let out = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the browser script finished within 300 s")
        .expect("the browser script ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the browser script's output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn every_console_page_works_in_headless_chromium() {
    let served = Served::start(&toolkit()).await;
    let health = served.wait_health(60, |h| h["status"] == "ok").await;
    assert_eq!(health["status"], "ok", "{health}");

    let report = drive(&served.base).await;
    assert!(report["failure"].is_null(), "{report:#}");
    let pages = &report["pages"];
    for page in PAGES {
        let p = &pages[page];
        assert_eq!(p["ready"], "true", "{page} did not load: {p:#}");
        assert_eq!(p["errors"], json!([]), "{page} reported errors: {p:#}");
    }

    // Catalog: every tool of the bundled toolkit, as GET /tools lists them.
    let rows = served.get("/tools").await;
    let mut expected: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["server"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect();
    expected.sort();
    let mut shown = strings(&pages["catalog"]["tools"]);
    shown.sort();
    assert!(
        expected.contains(&"toolkit/sql_query".to_owned()),
        "{expected:?}"
    );
    assert_eq!(shown, expected);
    assert_eq!(strings(&pages["catalog"]["servers"]), ["toolkit"]);

    // Visibility preview of ?tools=sql_query: exactly that tool, the others out with a reason.
    let vis = &pages["visibility"];
    assert_eq!(strings(&vis["visible"]), ["sql_query"], "{vis:#}");
    assert_eq!(strings(&vis["hidden"]).len(), expected.len() - 1, "{vis:#}");
    assert!(
        vis["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("1 of {} tools visible", expected.len())),
        "{vis:#}"
    );

    // Routing: the selector's decision (one candidate: no rule needed) and the broker's offer.
    let routing = &pages["routing"];
    assert_eq!(
        routing["decision"], "toolkit/sql_query by single-candidate (alternatives: none)",
        "{routing:#}"
    );
    assert_eq!(
        strings(&routing["rules"]),
        Vec::<String>::new(),
        "{routing:#}"
    );
    let mut offered = strings(&routing["offered"]);
    offered.sort();
    assert_eq!(offered, expected, "no rules: every tool is offered");

    // Live trace: the /chat made before the page opened, then the one made while it was open,
    // with its steps.
    let trace = &pages["trace"];
    assert_eq!(trace["earlier_seen"], true, "{trace:#}");
    assert_eq!(trace["seen"], true, "{trace:#}");
    assert_eq!(trace["chat_session"], trace["session"], "{trace:#}");
    assert_eq!(trace["status"], "live", "{trace:#}");
    assert!(
        strings(&trace["steps"]).contains(&"toolkit/sql_query".to_owned()),
        "{trace:#}"
    );

    // Spend: that run's cost is in the daily chart.
    let spend = &pages["spend"];
    assert!(spend["chart"].as_u64().unwrap_or(0) >= 1, "{spend:#}");
    assert!(
        spend["total"]
            .as_str()
            .unwrap_or_default()
            .contains("2 sessions"),
        "{spend:#}"
    );

    assert!(
        report["csp"]
            .as_str()
            .is_some_and(|p| p.contains("script-src 'self'") && !p.contains("unsafe")),
        "{report:#}"
    );
}

#[tokio::test]
async fn the_console_is_read_only_bounded_and_explains_bad_requests() {
    let served = Served::start(&toolkit()).await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", served.base);

    let page = client.get(url("/ui/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.headers().contains_key("content-security-policy"));

    let post = client.post(url("/ui/api/catalog")).send().await.unwrap();
    assert_eq!(post.status(), 405, "the console changes nothing");

    let cases = [
        (
            "/ui/api/trace/stream?colour=red",
            400,
            "session, server, tool or rule",
        ),
        ("/ui/api/route?tool=nope/nothing", 404, "no tool"),
        ("/ui/api/route?args=%5B1%5D", 400, "JSON object"),
        ("/ui/nowhere", 404, "open /ui/"),
    ];
    for (path, status, says) in cases {
        let r = client.get(url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert!(
            r.headers().contains_key("content-security-policy"),
            "{path}"
        );
        let body: Value = r.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{path}: {body}");
    }
    let long = format!("/ui/api/route?prompt={}", "a".repeat(20_000));
    let r = client.get(url(&long)).send().await.unwrap();
    assert!(
        r.status().is_client_error(),
        "a query string past the bound is refused, not read: {}",
        r.status()
    );

    // A foreign page cannot read the console (DNS-rebinding protection on every route).
    let foreign = client
        .get(url("/ui/api/catalog"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
}

/// The live trace's events until `ready` (and the records among them), then up to the first
/// `record` after it; from `GET /ui/api/trace/stream`.
struct LiveTrace {
    response: reqwest::Response,
    buffer: String,
}

impl LiveTrace {
    async fn open(served: &Served) -> Self {
        let response = reqwest::get(format!("{}/ui/api/trace/stream", served.base))
            .await
            .expect("the live trace answers");
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event: its name and data.
    async fn next(&mut self) -> (String, String) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .filter_map(|l| l.strip_prefix(name))
                        .map(str::trim_start)
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let event = field("event:");
                if event.is_empty() {
                    continue; // a keep-alive comment
                }
                return (event, field("data:"));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.response.chunk())
                .await
                .expect("an event within 60 s")
                .expect("the stream reads")
                .expect("the stream stays open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The records sent before `ready`.
    async fn until_ready(&mut self) -> Vec<Value> {
        let mut records = Vec::new();
        loop {
            match self.next().await {
                (event, data) if event == "record" => {
                    records.push(serde_json::from_str(&data).expect("a record is JSON"));
                }
                (event, _) if event == "ready" => return records,
                (event, data) => panic!("unexpected {event} before ready: {data}"),
            }
        }
    }
}

async fn chat(served: &Served, session: &str) {
    let answer = reqwest::Client::new()
        .post(format!("{}/chat", served.base))
        .json(&json!({
            "message": "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500.",
            "session_id": session,
        }))
        .send()
        .await
        .expect("/chat answers");
    assert_eq!(answer.status(), 200);
}

#[tokio::test]
async fn the_live_trace_opens_with_the_recent_records_then_streams_each_once() {
    let served = Served::start(&toolkit()).await;
    let health = served.wait_health(60, |h| h["status"] == "ok").await;
    assert_eq!(health["status"], "ok", "{health}");

    let before = LiveTrace::open(&served).await.until_ready().await;
    assert!(before.is_empty(), "nothing ran yet: {before:?}");

    chat(&served, "earlier").await;
    let mut live = LiveTrace::open(&served).await;
    let earlier = live.until_ready().await;
    assert!(!earlier.is_empty());
    assert!(
        earlier.iter().all(|r| r["session_id"] == "earlier"),
        "{earlier:?}"
    );
    assert!(
        earlier
            .iter()
            .any(|r| r["tool"] == "sql_query" && r["server"] == "toolkit"),
        "the run's tool call is among them: {earlier:?}"
    );

    // Then what happens next, and none of the earlier records again.
    chat(&served, "later").await;
    let (event, data) = live.next().await;
    assert_eq!(event, "record", "{data}");
    let first_new: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(first_new["session_id"], "later", "{first_new}");

    // A page opened now starts with both runs, oldest first.
    let both = LiveTrace::open(&served).await.until_ready().await;
    let sessions: Vec<&str> = both
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    let cut = sessions
        .iter()
        .position(|s| *s == "later")
        .expect("later is there");
    assert!(
        sessions[..cut].iter().all(|s| *s == "earlier"),
        "{sessions:?}"
    );
    assert!(
        sessions[cut..].iter().all(|s| *s == "later"),
        "{sessions:?}"
    );
    assert_eq!(cut, earlier.len(), "{sessions:?}");
}

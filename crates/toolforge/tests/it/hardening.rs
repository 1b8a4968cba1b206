//! What a hostile client found, each as the request that found it: a long resource URI (its
//! template matching was quadratic and held an async worker), and the load balancer's probes
//! with identity on (`/health` answered 401 to them). Against `toolforge serve` over the
//! conformance fixture, whose template is `test://template/{id}/data`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Served, bin};

const KEY: &str = "alice-key-0123456789";

fn fixture() -> Value {
    json!({"mcpServers": {"conf": {"command": bin(), "args": ["server", "conformance", "--stdio"]}}})
}

/// `toolforge serve --stateless` over the fixture, with an API key when `keyed`.
async fn serve(keyed: bool) -> Served {
    let mut args = vec!["--stateless".to_owned()];
    let dir = tempfile::tempdir().unwrap();
    if keyed {
        let keys = dir.path().join("keys.txt");
        std::fs::write(&keys, format!("{KEY} alice\n")).unwrap();
        args.extend(["--api-keys".to_owned(), keys.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let served = Served::start_full(&fixture(), &[], &args).await;
    std::mem::forget(dir);
    served
}

/// One JSON-RPC request to `/mcp` (2025-06-18, stateless); the answer's JSON.
async fn rpc(served: &Served, key: Option<&str>, method: &str, params: Value) -> Value {
    let mut req = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let text = req.send().await.unwrap().text().await.unwrap();
    let body = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text)
        .trim()
        .to_owned();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method}: {e}: {text}"))
}

/// Waits (at most a minute) until the fixture's template is listed.
async fn template_listed(served: &Served, key: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = rpc(served, key, "resources/templates/list", json!({})).await;
        if list["result"]["resourceTemplates"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
        {
            return;
        }
        assert!(Instant::now() < deadline, "no template listed: {list}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The regression: a `resources/read` of a 1 MiB URI ran the quadratic template matcher for
/// half a minute on the async worker. Now every URI-taking request refuses a URI over the
/// bound before any lookup, with an error that names the bound, and a URI under it that the
/// template matches is still read.
#[tokio::test]
async fn a_long_resource_uri_is_refused_before_matching() {
    let served = serve(false).await;
    template_listed(&served, None).await;
    let long = format!("test://template/{}/data", "1".repeat(1024 * 1024));
    let asks = [
        ("resources/read", json!({"uri": long})),
        ("resources/subscribe", json!({"uri": long})),
        ("resources/unsubscribe", json!({"uri": long})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": long}, "argument": {"name": "id", "value": "1"}}),
        ),
    ];
    for (method, params) in asks {
        let answer = rpc(&served, None, method, params).await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("the limit is 8192"), "{method}: {message}");
        assert!(message.len() < 200, "{method}: the URI is not echoed back");
    }
    // A URI of the template just under the bound still reaches the fixture.
    let id = "7".repeat(8 * 1024 - "test://template//data".len());
    let read = rpc(
        &served,
        None,
        "resources/read",
        json!({"uri": format!("test://template/{id}/data")}),
    )
    .await;
    let text = read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains(&id), "{read}");
}

/// The regression: with identity on, `GET /health` answered 401 to the load balancer's
/// checks (which send no token), so every replica was marked down. `/livez` and `/readyz`
/// answer anyone, with any `Host` (a Kubernetes probe names the pod's address), and tell the
/// status only; `/health`, with server names and errors, still needs a token.
#[tokio::test]
async fn the_probes_answer_without_a_token_and_say_nothing_else() {
    let served = serve(true).await;
    let client = reqwest::Client::new();
    for (path, status) in [("/livez", "alive"), ("/readyz", "ready")] {
        let r = client
            .get(format!("{}{path}", served.base))
            .header("host", "10.1.2.3:8000")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body, json!({"status": status}), "{path}");
    }
    let health = client
        .get(format!("{}/health", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 401);
    let health = client
        .get(format!("{}/health", served.base))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let body: Value = health.json().await.unwrap();
    assert!(body["servers"].is_array(), "{body}");
    // Only the probes are open: a foreign Host is still refused elsewhere.
    let tools = client
        .get(format!("{}/tools", served.base))
        .header("host", "10.1.2.3:8000")
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(tools.status().as_u16(), 403);
}

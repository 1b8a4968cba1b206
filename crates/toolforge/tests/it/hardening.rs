//! What a hostile client found, each as the request that found it: a long resource URI (its
//! template matching was quadratic and held an async worker), and the load balancer's probes
//! with identity on (`/health` answered 401 to them). Against `toolforge serve` over the
//! conformance fixture, whose template is `test://template/{id}/data`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Served, bin, stateless_rpc as rpc};

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

/// Waits (at most a minute) until the fixture's template is listed.
async fn template_listed(served: &Served, key: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = rpc(&served.mcp(), key, "resources/templates/list", json!({})).await;
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
        let answer = rpc(&served.mcp(), None, method, params).await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("the limit is 8192"), "{method}: {message}");
        assert!(message.len() < 200, "{method}: the URI is not echoed back");
    }
    // A URI of the template just under the bound still reaches the fixture.
    let id = "7".repeat(8 * 1024 - "test://template//data".len());
    let read = rpc(
        &served.mcp(),
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

const ADMIN: &str = "admin-key-0123456789";
const BOB: &str = "bob-key-0123456789abc";

/// The regression: with identity on, the console told any principal about the tools the
/// policy hides from them (the catalog's schemas, a visibility preview and the routing
/// explainer evaluated as `anonymous`), and showed the bill, the quarantine's diffs and
/// `/metrics` to anyone. Now a principal sees what the gateway would show them; the operator
/// views are for `--console-admin`s (and `/metrics` for `--metrics-reader`s too).
#[tokio::test]
async fn the_console_shows_a_principal_only_what_they_may_see() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("{ADMIN} admin\n{BOB} bob\n")).unwrap();
    let policy = dir.path().join("policy.cedar");
    std::fs::write(
        &policy,
        r#"@id("everyone") permit(principal, action, resource);
@id("no-error-tool-for-bob")
forbid(principal == User::"bob", action, resource == Tool::"conf/test_error_handling");
"#,
    )
    .unwrap();
    let args = [
        "--stateless",
        "--api-keys",
        keys.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--console-admin",
        "admin",
    ];
    let served = Served::start_full(&fixture(), &[], &args).await;
    let client = reqwest::Client::new();
    let get = |path: &str, key: &str| {
        client
            .get(format!("{}{path}", served.base))
            .bearer_auth(key)
            .send()
    };
    // Both see the fixture once it is listed.
    let deadline = Instant::now() + Duration::from_secs(60);
    let tools_of = |catalog: &Value| -> Vec<String> {
        catalog["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let admin_catalog = loop {
        let catalog: Value = get("/ui/api/catalog", ADMIN)
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if tools_of(&catalog).len() > 1 {
            break catalog;
        }
        assert!(Instant::now() < deadline, "{catalog}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let hidden = "conf/test_error_handling".to_owned();
    assert!(tools_of(&admin_catalog).contains(&hidden));
    assert!(admin_catalog["cache"].is_object());
    let bob_catalog: Value = get("/ui/api/catalog", BOB)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!tools_of(&bob_catalog).contains(&hidden), "{bob_catalog}");
    assert_eq!(
        tools_of(&bob_catalog).len(),
        tools_of(&admin_catalog).len() - 1
    );
    assert!(bob_catalog["cache"].is_null());
    // The visibility preview runs as bob and lists nothing he may not see.
    let preview: Value = get("/ui/api/visibility", BOB)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(preview["request"]["principal"], "bob");
    assert!(
        !preview.to_string().contains("test_error_handling"),
        "{preview}"
    );
    // The routing explainer does not route bob to it, nor offer it.
    let route = get("/ui/api/route?prompt=errors&tool=test_error_handling", BOB)
        .await
        .unwrap();
    assert_eq!(route.status().as_u16(), 404);
    let offer: Value = get("/ui/api/route?prompt=error%20handling", BOB)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        !offer.to_string().contains("test_error_handling"),
        "{offer}"
    );
    let route = get(
        "/ui/api/route?prompt=errors&tool=test_error_handling",
        ADMIN,
    )
    .await
    .unwrap();
    assert_eq!(route.status().as_u16(), 200);
    // Operator views.
    for path in ["/ui/api/spend", "/ui/api/governance", "/metrics"] {
        assert_eq!(
            get(path, BOB).await.unwrap().status().as_u16(),
            403,
            "{path}"
        );
        assert_eq!(
            get(path, ADMIN).await.unwrap().status().as_u16(),
            200,
            "{path}"
        );
    }
}

/// The regressions of the console's front door: a 401 of `/ui` carried no Content-Security-
/// Policy, and a cross-site request without an `Origin` passed. Now the 401 has the console's
/// headers, and such a request is refused before identity or any route sees it.
#[tokio::test]
async fn the_consoles_front_door_refuses_cross_site_and_keeps_its_policy() {
    let served = serve(true).await;
    let client = reqwest::Client::new();
    let ui = client
        .get(format!("{}/ui/", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ui.status().as_u16(), 401);
    let csp = ui
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(csp.contains("default-src 'none'"), "{csp:?}");
    let approve = client
        .post(format!("{}/ui/api/governance/approve", served.base))
        .bearer_auth(KEY)
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "no-cors")
        .json(&json!({"server": "conf", "tool": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(approve.status().as_u16(), 403);
    assert!(approve.text().await.unwrap().contains("another site"));
    for origin in [
        "http://[::1].evil.example",
        "http://localhost:1@evil.example",
    ] {
        let r = client
            .post(format!("{}/ui/api/governance/approve", served.base))
            .bearer_auth(KEY)
            .header("origin", origin)
            .json(&json!({"server": "conf", "tool": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{origin}");
    }
}

/// The regression: a policy on a resource matched its URI string exactly, so other spellings
/// of the same URI (`?`, `#x`, case, `./`, `%2D`) reached the backend. Every spelling is now
/// decided as one URI, and one that cannot be normalised is refused.
#[tokio::test]
async fn a_resource_policy_holds_for_every_spelling_of_the_uri() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("{KEY} alice\n")).unwrap();
    let policy = dir.path().join("policy.cedar");
    std::fs::write(
        &policy,
        r#"@id("everyone") permit(principal, action, resource);
@id("no-static-text")
forbid(principal, action == Action::"read", resource == Resource::"test://static-text");
"#,
    )
    .unwrap();
    let args = [
        "--stateless",
        "--api-keys",
        keys.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ];
    let served = Served::start_full(&fixture(), &[], &args).await;
    template_listed(&served, Some(KEY)).await;
    let mcp = served.mcp();
    let read = |uri: &'static str| rpc(&mcp, Some(KEY), "resources/read", json!({"uri": uri}));
    for spelling in [
        "test://static-text",
        "test://static-text?",
        "test://static-text#x",
        "TEST://STATIC-TEXT",
        "test://./static-text",
        "test://static%2Dtext",
        "test://static%2dtext?#y",
    ] {
        let answer = read(spelling).await;
        assert!(answer.get("result").is_none(), "{spelling}: {answer}");
        assert_eq!(answer["error"]["code"], -32602, "{spelling}: {answer}");
    }
    let refused = read("test://static%zz").await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("percent-encoding")),
        "{refused}"
    );
    // Another resource of the fixture, in another spelling, is read as that resource.
    let binary = read("test://static%2Dbinary#x").await;
    assert_eq!(
        binary["result"]["contents"][0]["uri"], "test://static-binary",
        "{binary}"
    );
}

/// The keyed trace chain end to end: with `TRACE_CHAIN_KEY` the binary links its records by
/// HMAC, `trace verify` checks them with the key, and refuses to vouch for them without it.
#[tokio::test]
async fn trace_records_are_chained_with_the_operators_key() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("traces.jsonl");
    let key = "k".repeat(40);
    let run = |args: Vec<&str>, key: Option<&str>| {
        let mut cmd = tokio::process::Command::new(bin());
        cmd.args(args)
            .current_dir(dir.path())
            .env("TRACE_SINK", &trace)
            .env_remove("TRACE_CHAIN_KEY")
            .env_remove("TRACE_CHAIN_KEY_FILE")
            .env_remove("LLM_PROVIDER")
            .env("MCP_SERVERS_CONFIG", crate::root().join("mcp.servers.json"))
            .kill_on_drop(true);
        if let Some(key) = key {
            cmd.env("TRACE_CHAIN_KEY", key);
        }
        cmd.output()
    };
    let chat = run(
        vec!["chat", "Run this Python: print(sum(range(10)))"],
        Some(&key),
    )
    .await
    .unwrap();
    assert!(
        chat.status.success(),
        "{}",
        String::from_utf8_lossy(&chat.stderr)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.contains("\"prev_hash\":\"hmac-sha256:"), "{text}");
    let keyed = run(vec!["trace", "verify"], Some(&key)).await.unwrap();
    assert!(
        keyed.status.success(),
        "{}",
        String::from_utf8_lossy(&keyed.stderr)
    );
    let unkeyed = run(vec!["trace", "verify"], None).await.unwrap();
    assert!(!unkeyed.status.success());
    assert!(String::from_utf8_lossy(&unkeyed.stderr).contains("chain key"));
    let short = run(vec!["trace", "verify"], Some("short")).await.unwrap();
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 32 bytes"));
}

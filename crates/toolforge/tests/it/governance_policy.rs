//! Identity, Cedar policy and rate limits on every surface of `toolforge serve`: API keys
//! (401 without one), `tools/list`, `tools/call`, overlap groups, `server__tool` names,
//! resources, prompts, search mode (`search_tools`, `call_tool`) and `/chat`, each asked as
//! different principals of one policy file. Plain JSON-RPC over HTTP (stateless mode).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Served, bin};

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789abc";
const CAROL: &str = "carol-key-0123456789ab";

/// Bob may not see the `mirror` server at all, call `test_error_handling`, read the binary
/// resource, get the image prompt (of either server), or pass a `secret` argument; Carol is rate-limited.
const POLICY: &str = r#"
@id("everyone") permit(principal, action, resource);

@id("mirror-hidden-from-bob")
forbid(principal == User::"bob", action, resource is Tool) when { resource.server == "mirror" };

@id("no-error-tool-for-bob")
forbid(principal == User::"bob", action == Action::"call", resource == Tool::"conf/test_error_handling");

@id("bob-no-binary")
forbid(principal == User::"bob", action == Action::"read", resource == Resource::"test://static-binary");

@id("bob-no-image-prompt")
forbid(principal == User::"bob", action == Action::"prompt", resource is Prompt)
when { resource.name == "test_prompt_with_image" };

@id("no-secrets-in-arguments")
forbid(principal, action == Action::"call", resource) when { context.arguments has secret };
"#;

/// Two copies of the conformance fixture: every tool name is an overlap group of two members.
fn config() -> Value {
    json!({
        "mcpServers": {
            "conf": {"command": bin(), "args": ["server", "conformance", "--stdio"]},
            "mirror": {"command": bin(), "args": ["server", "conformance", "--stdio"]},
        },
        "toolforge": {"limits": [
            {"principal": "carol", "tool": "*", "capacity": 2, "refillPerSecond": 0.001}
        ]}
    })
}

async fn serve(extra: &[&str]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.cedar");
    std::fs::write(&policy, POLICY).unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("{ALICE} alice\n{BOB} bob\n{CAROL} carol\n")).unwrap();
    let mut args = vec![
        "--stateless",
        "--policy",
        policy.to_str().unwrap(),
        "--api-keys",
        keys.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let served = Served::start_full(&config(), &[], &args).await;
    // Both servers ready (asked with a key: every route needs one).
    let start = Instant::now();
    loop {
        let health = get(&served, "/health", Some(ALICE)).await.1;
        if health["status"] == "ok" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{health}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Keep the files alive as long as the server.
    std::mem::forget(dir);
    served
}

async fn get(served: &Served, path: &str, key: Option<&str>) -> (u16, Value, Option<String>) {
    let mut req = reqwest::Client::new().get(format!("{}{path}", served.base));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, r.json().await.unwrap_or(Value::Null), challenge)
}

/// One JSON-RPC request to `/mcp` as the holder of `key`.
async fn rpc(served: &Served, key: &str, method: &str, params: Value) -> Value {
    let r = reqwest::Client::new()
        .post(served.mcp())
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{method}");
    let text = r.text().await.unwrap();
    let body = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text)
        .trim()
        .to_owned();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method}: {e}: {text}"))
}

fn names(list: &Value, key: &str, field: &str) -> BTreeSet<String> {
    list["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t[field].as_str().map(str::to_owned))
        .collect()
}

async fn call(served: &Served, key: &str, name: &str, arguments: Value) -> Value {
    rpc(
        served,
        key,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

fn text_of(call: &Value) -> String {
    call["result"]["content"][0]["text"]
        .as_str()
        .map_or_else(|| call.to_string(), str::to_owned)
}

#[tokio::test]
async fn identity_policy_and_limits_hold_on_every_direct_surface() {
    let served = serve(&["--namespace", "always"]).await;

    // Identity: no key or a wrong one is 401 with a Bearer challenge, on every route.
    for path in ["/tools", "/health"] {
        let (status, body, challenge) = get(&served, path, None).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert!(
            challenge.unwrap_or_default().starts_with("Bearer"),
            "{path}"
        );
        assert_eq!(
            get(&served, path, Some("wrong-key-0123456789")).await.0,
            401
        );
    }
    let r = reqwest::Client::new()
        .post(served.mcp())
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // tools/list: alice sees both servers, bob none of mirror's tools.
    let alice = names(
        &rpc(&served, ALICE, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    let bob = names(
        &rpc(&served, BOB, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    assert!(alice.contains("mirror__test_simple_text"), "{alice:?}");
    assert!(bob.contains("conf__test_simple_text"), "{bob:?}");
    assert!(!bob.iter().any(|n| n.starts_with("mirror__")), "{bob:?}");
    // GET /tools agrees.
    let rows = get(&served, "/tools", Some(BOB)).await.1;
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r["server"] != "mirror"),
        "{rows}"
    );

    // A `server__tool` name of a tool bob may not list is unknown to him, as if absent.
    let hidden = call(&served, BOB, "mirror__test_simple_text", json!({})).await;
    assert!(
        hidden["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{hidden}"
    );
    assert_eq!(
        call(&served, ALICE, "mirror__test_simple_text", json!({})).await["result"]["isError"],
        false
    );

    // A listed tool bob may not call: refused before the server, naming the policy.
    let denied = call(&served, BOB, "conf__test_error_handling", json!({})).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        text_of(&denied).contains("\"no-error-tool-for-bob\""),
        "{denied}"
    );
    assert_eq!(
        denied["result"]["structuredContent"]["policy"],
        "no-error-tool-for-bob"
    );

    // The arguments are in the context: a `secret` argument is refused for everyone.
    let secret = call(
        &served,
        ALICE,
        "conf__test_simple_text",
        json!({"secret": "x"}),
    )
    .await;
    assert!(
        text_of(&secret).contains("no-secrets-in-arguments"),
        "{secret}"
    );

    // Resources: bob neither lists nor reads the binary one; alice does.
    let bob_resources = names(
        &rpc(&served, BOB, "resources/list", json!({})).await,
        "resources",
        "uri",
    );
    assert!(
        bob_resources.contains("test://static-text"),
        "{bob_resources:?}"
    );
    assert!(
        !bob_resources.contains("test://static-binary"),
        "{bob_resources:?}"
    );
    let read = rpc(
        &served,
        BOB,
        "resources/read",
        json!({"uri": "test://static-binary"}),
    )
    .await;
    assert!(read["error"].is_object(), "{read}");
    let read = rpc(
        &served,
        ALICE,
        "resources/read",
        json!({"uri": "test://static-binary"}),
    )
    .await;
    assert!(read["result"]["contents"].is_array(), "{read}");

    // Prompts: the same for the image prompt.
    let bob_prompts = names(
        &rpc(&served, BOB, "prompts/list", json!({})).await,
        "prompts",
        "name",
    );
    assert!(
        !bob_prompts
            .iter()
            .any(|p| p.contains("test_prompt_with_image")),
        "{bob_prompts:?}"
    );
    assert!(
        bob_prompts.iter().any(|p| p.contains("test_simple_prompt")),
        "{bob_prompts:?}"
    );
    let alice_prompts = names(
        &rpc(&served, ALICE, "prompts/list", json!({})).await,
        "prompts",
        "name",
    );
    let image = alice_prompts
        .iter()
        .find(|p| p.contains("test_prompt_with_image"))
        .cloned()
        .unwrap_or_else(|| panic!("{alice_prompts:?}"));
    let got = rpc(
        &served,
        BOB,
        "prompts/get",
        json!({"name": image, "arguments": {}}),
    )
    .await;
    assert!(got["error"].is_object(), "{got}");

    // Limits: carol's bucket holds two calls; the third never reaches the server and says
    // when to retry.
    for _ in 0..2 {
        let ok = call(&served, CAROL, "conf__test_simple_text", json!({})).await;
        assert_eq!(ok["result"]["isError"], false, "{ok}");
    }
    let limited = call(&served, CAROL, "conf__test_simple_text", json!({})).await;
    assert_eq!(limited["result"]["isError"], true, "{limited}");
    let retry = limited["result"]["structuredContent"]["retryAfterMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("{limited}"));
    assert!(retry > 0, "{limited}");
    assert!(text_of(&limited).contains("retryAfterMs"), "{limited}");
    // Alice is not limited by carol's bucket.
    assert_eq!(
        call(&served, ALICE, "conf__test_simple_text", json!({})).await["result"]["isError"],
        false
    );
}

#[tokio::test]
async fn overlap_groups_never_reach_a_denied_member() {
    let served = serve(&[]).await;
    // `test_simple_text` is a group of conf's and mirror's; bob's calls only go to conf.
    for _ in 0..4 {
        let out = call(&served, BOB, "test_simple_text", json!({})).await;
        assert_eq!(out["result"]["isError"], false, "{out}");
        assert_eq!(
            out["result"]["_meta"]["toolforge/selection"]["server"], "conf",
            "{out}"
        );
    }
    // `test_error_handling`: conf's member is denied to bob and mirror's hidden from him, so
    // the group call is refused by the policy, never sent.
    let out = call(&served, BOB, "test_error_handling", json!({})).await;
    assert!(text_of(&out).contains("no-error-tool-for-bob"), "{out}");
}

#[tokio::test]
async fn search_mode_finds_and_calls_only_what_the_policy_allows() {
    let served = serve(&["--tool-mode", "search", "--namespace", "always"]).await;
    let search = |key: &'static str| {
        let served = &served;
        async move {
            let out = call(
                served,
                key,
                "search_tools",
                json!({"query": "simple text error handling", "limit": 50}),
            )
            .await;
            out["result"]["structuredContent"]["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{out}"))
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect::<BTreeSet<String>>()
        }
    };
    let alice = search(ALICE).await;
    let bob = search(BOB).await;
    assert!(alice.contains("mirror__test_simple_text"), "{alice:?}");
    assert!(bob.contains("conf__test_simple_text"), "{bob:?}");
    assert!(!bob.iter().any(|n| n.starts_with("mirror__")), "{bob:?}");

    let via = |name: &str| json!({"name": name, "arguments": {}});
    let out = call(&served, BOB, "call_tool", via("mirror__test_simple_text")).await;
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{out}"
    );
    let out = call(&served, BOB, "call_tool", via("conf__test_error_handling")).await;
    assert!(text_of(&out).contains("no-error-tool-for-bob"), "{out}");
    let out = call(&served, ALICE, "call_tool", via("mirror__test_simple_text")).await;
    assert_eq!(out["result"]["isError"], false, "{out}");
}

#[tokio::test]
async fn chat_offers_and_calls_under_the_policy_and_traces_the_principal() {
    let served = serve(&["--namespace", "always"]).await;
    let chat = |key: &'static str| {
        let served = &served;
        async move {
            reqwest::Client::new()
                .post(format!("{}/chat", served.base))
                .bearer_auth(key)
                .json(&json!({"message": "run the error handling test tool"}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let bob = chat(BOB).await;
    let steps = bob["steps"].as_array().unwrap_or_else(|| panic!("{bob}"));
    assert!(!steps.is_empty(), "{bob}");
    // Bob is never offered mirror's tools, and his call of the denied tool is refused.
    assert!(steps.iter().all(|s| s["server"] != "mirror"), "{bob}");
    let refused = steps
        .iter()
        .find(|s| s["server_tool"] == "test_error_handling")
        .unwrap_or_else(|| panic!("{bob}"));
    assert_eq!(refused["executed"], false, "{bob}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no-error-tool-for-bob"),
        "{bob}"
    );

    // The trace names the principal and the deciding policy.
    let trace = served.dir.path().join("logs/traces.jsonl");
    let start = Instant::now();
    let records: Vec<Value> = loop {
        let text = std::fs::read_to_string(&trace).unwrap_or_default();
        let records: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|r: &Value| r["kind"] == "tool_call")
            .collect();
        if !records.is_empty() || start.elapsed() > Duration::from_secs(10) {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let denied = records
        .iter()
        .find(|r| r["tool"] == "test_error_handling")
        .unwrap_or_else(|| panic!("{records:?}"));
    assert_eq!(denied["principal"], "bob", "{denied}");
    assert_eq!(denied["policy"], "no-error-tool-for-bob", "{denied}");
    assert_eq!(denied["executed"], false, "{denied}");
}

#[tokio::test]
async fn a_public_bind_without_identity_is_refused_at_start() {
    let out = tokio::process::Command::new(bin())
        .args(["serve", "--host", "0.0.0.0", "--port", "0", "--config"])
        .arg(crate::root().join("mcp.servers.json"))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-anonymous"), "{stderr}");
    assert!(stderr.contains("--api-keys"), "{stderr}");
}

//! The gateway as an OAuth protected resource (`serve --oauth-issuer`) in front of the real
//! provider: the official Python and TypeScript SDKs' OAuth clients log in from discovery alone
//! (the 401, the protected-resource metadata, the provider's metadata, dynamic registration, the
//! code flow with PKCE and `resource`) and list and call tools as the user who signed in;
//! an opaque token is checked by introspection; requests without a token get the 401 that
//! starts that discovery; tokens for another
//! audience, expired or not valid yet are refused; and a key the provider rotated to is used
//! without a restart.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Provider, minted, node, now, run_json, token_for, wait_listed};
use crate::{Served, root, tool};

/// The gateway trusting `issuer`, with the fastmcp server as its one backend `fm`; opaque tokens
/// are checked by introspection, as the provider's `toolforge-gateway` client. Configured by
/// flags, or (`in_file`) by the servers configuration's `"toolforge": {"identity": {"oauth"}}`.
async fn gateway(issuer: &str, in_file: bool) -> Served {
    let mut config = json!({"mcpServers": {"fm": {
        "command": tool("fastmcp-venv/bin/python"),
        "args": [root().join("crates/toolforge/tests/python/fastmcp_server.py")],
    }}});
    if in_file {
        config["toolforge"] = json!({"identity": {"oauth": {
            "issuers": [issuer], "scopes": ["tools"],
            "introspection": {"clientId": "toolforge-gateway", "clientSecret": "gateway-secret"},
        }}});
        return Served::start(&config).await;
    }
    Served::start_full(
        &config,
        &[("TOOLFORGE_INTROSPECTION_SECRET", "gateway-secret")],
        &[
            "--oauth-issuer",
            issuer,
            "--oauth-scope",
            "tools",
            "--oauth-introspection-client-id",
            "toolforge-gateway",
        ],
    )
    .await
}

/// The Python SDK's OAuth client signing in as `login`, then calling `divide`.
async fn python_sdk(mcp: &str, login: &str) -> Value {
    python_sdk_as(mcp, login, "python sdk oauth client").await
}

/// [`python_sdk`] registering as `client_name` (with "opaque" in it, the provider issues opaque
/// tokens).
async fn python_sdk_as(mcp: &str, login: &str, client_name: &str) -> Value {
    let script = root().join("crates/toolforge/tests/python/oauth_sdk_client.py");
    let args = [
        script.display().to_string(),
        mcp.to_owned(),
        login.to_owned(),
        "--call".to_owned(),
        "divide".to_owned(),
        r#"{"a": 7, "b": 2}"#.to_owned(),
    ];
    let name = std::path::PathBuf::from(client_name);
    run_json(
        &tool("venv/bin/python"),
        &args,
        &[("OAUTH_CLIENT_NAME", name)],
    )
    .await
}

/// The TypeScript SDK's OAuth client signing in as `login`, then calling `divide`.
async fn typescript_sdk(mcp: &str, login: &str) -> Value {
    let script = root().join("crates/toolforge/tests/node/oauth_sdk_client.cjs");
    let args = [
        script.display().to_string(),
        mcp.to_owned(),
        login.to_owned(),
        "divide".to_owned(),
        r#"{"a": 9, "b": 3}"#.to_owned(),
    ];
    let modules = tool("npm/node_modules");
    run_json(&node(), &args, &[("NODE_PATH", modules)]).await
}

/// The principals of the trace's `divide` calls, in order, once there are `count` of them (the
/// trace is written behind the answer; polled for at most 30 s).
async fn traced_principals(served: &Served, count: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let trace = std::fs::read_to_string(served.dir.path().join("logs/traces.jsonl"))
            .unwrap_or_default();
        let principals: Vec<String> = trace
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "tool_call" && r["tool"] == "divide")
            .map(|r| r["principal"].as_str().unwrap_or_default().to_owned())
            .collect();
        if principals.len() >= count || tokio::time::Instant::now() > deadline {
            return principals;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// POSTs `body` to `/mcp` with `token` (if any); the status, `WWW-Authenticate` and body.
async fn post_mcp(
    served: &Served,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, String) {
    let mut request = reqwest::Client::new()
        .post(served.mcp())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    let response = request.send().await.expect("POST /mcp");
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, challenge, response.text().await.unwrap_or_default())
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
}

#[tokio::test]
async fn the_sdks_oauth_clients_sign_in_from_discovery_alone() {
    let keys = tempfile::tempdir().unwrap();
    let keys = keys.path().join("keys.json");
    let provider = Provider::start(&keys, 0).await;
    let served = gateway(&provider.issuer, true).await;
    let operator = token_for(&keys, &provider, &served, "operator").await;
    wait_listed(&served, &operator, "divide").await;

    let python = python_sdk(&served.mcp(), "alice").await;
    assert_eq!(python["authorized"], true, "{python}");
    assert!(
        python["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("divide"))),
        "{python}"
    );
    assert_eq!(
        python["calls"][0]["text"], r#"{"quotient":3.5}"#,
        "{python}"
    );
    // The token the provider issued names the gateway's own MCP URL as its audience (RFC 8707).
    assert_eq!(python["token_audience"], served.mcp(), "{python}");

    let typescript = typescript_sdk(&served.mcp(), "bob").await;
    assert_eq!(typescript["authorized"], true, "{typescript}");
    assert_eq!(
        typescript["call"]["text"], r#"{"quotient":3.0}"#,
        "{typescript}"
    );
    assert_eq!(typescript["token_audience"], served.mcp(), "{typescript}");

    // An opaque token is checked by introspection at the provider.
    let opaque = python_sdk_as(&served.mcp(), "gina", "opaque python client").await;
    assert_eq!(opaque["token_format"], "opaque", "{opaque}");
    assert_eq!(
        opaque["calls"][0]["text"], r#"{"quotient":3.5}"#,
        "{opaque}"
    );

    // Each call ran as the user who signed in: the token's subject is the principal.
    assert_eq!(
        traced_principals(&served, 3).await,
        ["alice", "bob", "gina"]
    );
}

#[tokio::test]
async fn tokens_are_refused_for_what_they_are_and_a_rotated_key_is_used_without_a_restart() {
    let keys = tempfile::tempdir().unwrap();
    let first_keys = keys.path().join("first.json");
    let provider = Provider::start(&first_keys, 0).await;
    let served = gateway(&provider.issuer, false).await;
    let operator = token_for(&first_keys, &provider, &served, "operator").await;
    wait_listed(&served, &operator, "divide").await;
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", served.base);

    // No token: an `initialize`, and a 2026-07-28 request, each get the 401 naming the metadata.
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
    for (body, headers) in [
        (initialize(), vec![]),
        (discover, vec![("mcp-protocol-version", "2026-07-28")]),
    ] {
        let (status, challenge, _) = post_mcp(&served, None, &headers, &body).await;
        assert_eq!(status, 401, "{body}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
            "{challenge}"
        );
    }
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], served.mcp());
    assert_eq!(metadata["authorization_servers"], json!([provider.issuer]));

    // Signed with the provider's key; only the claim under test differs from an accepted token.
    let claims = |overrides: Value| {
        let mut c = json!({"iss": provider.issuer, "sub": "carol", "aud": served.mcp(),
            "scope": "tools", "iat": now(), "exp": now() + 600});
        for (k, v) in overrides.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let accepted = minted(&first_keys, claims(json!({}))).await;
    let (status, _, body) = post_mcp(&served, Some(&accepted), &[], &initialize()).await;
    assert_eq!(status, 200, "the control token is accepted: {body}");
    for (overrides, named) in [
        (json!({"aud": "http://127.0.0.1:1/mcp"}), "audience"),
        (json!({"iat": now() - 7200, "exp": now() - 3600}), "expired"),
        (json!({"nbf": now() + 3600}), "not valid yet"),
    ] {
        let token = minted(&first_keys, claims(overrides.clone())).await;
        let (status, challenge, body) = post_mcp(&served, Some(&token), &[], &initialize()).await;
        assert_eq!(status, 401, "{overrides}: {body}");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(
            body.contains(named) || challenge.contains(named),
            "{overrides}: {challenge} {body}"
        );
    }

    // The provider rotates to a new key (same issuer, same port); the gateway is not restarted.
    let port = provider.port();
    provider.stop().await;
    let second_keys = keys.path().join("second.json");
    let provider = Provider::start(&second_keys, port).await;
    let second_kid = serde_json::from_str::<Value>(&std::fs::read_to_string(&second_keys).unwrap())
        .unwrap()["keys"][0]["kid"]
        .clone();
    let after = python_sdk(&served.mcp(), "dave").await;
    assert_eq!(
        after["token_kid"], second_kid,
        "signed with the new key: {after}"
    );
    assert_eq!(after["calls"][0]["text"], r#"{"quotient":3.5}"#, "{after}");
    assert_eq!(traced_principals(&served, 1).await, ["dave"]);
    drop(provider);
}

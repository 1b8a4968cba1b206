//! Identity on stdio: `gateway --stdio` takes its principal from the operator's token in
//! `TOOLFORGE_TOKEN` (checked against the provider like any request's bearer token) or from
//! `--principal`, and that principal is who calls run as, down to the upstream token exchange.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use super::upstream::Backend;
use super::{Provider, minted, now};
use crate::bin;

const RESOURCE: &str = "http://gateway.test/mcp";

/// `gateway --stdio --oauth-issuer` in front of the token-exchange backend, with `envs` and
/// `args`; the child with piped stdin and stdout.
fn stdio_gateway(
    dir: &Path,
    provider: &Provider,
    backend: &Backend,
    envs: &[(&str, &str)],
    args: &[&str],
) -> tokio::process::Child {
    let config = dir.join("mcp.servers.json");
    let auth = json!({"type": "token-exchange", "tokenEndpoint": format!("{}/token", provider.issuer),
        "clientId": "toolforge-gateway", "clientSecret": "gateway-secret"});
    std::fs::write(
        &config,
        json!({"mcpServers": {"who": {"url": backend.url, "auth": auth}}}).to_string(),
    )
    .unwrap();
    tokio::process::Command::new(bin())
        .args(["gateway", "--stdio", "--config"])
        .arg(&config)
        .args([
            "--oauth-issuer",
            &provider.issuer,
            "--oauth-resource",
            RESOURCE,
        ])
        .args(args)
        .current_dir(dir)
        .env("TRACE_SINK", dir.join("trace.jsonl"))
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .env_remove("TOOLFORGE_TOKEN")
        .env_remove("REDIS_URL")
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start gateway --stdio")
}

/// A JSON-RPC client on the child's stdio: one request, its answer.
struct Stdio2 {
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Stdio2 {
    async fn open(child: &mut tokio::process::Child) -> Self {
        let mut client = Self {
            stdin: child.stdin.take().unwrap(),
            lines: tokio::io::BufReader::new(child.stdout.take().unwrap()).lines(),
            next_id: 1,
        };
        client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "stdio-test", "version": "1"}}),
            )
            .await;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = self.lines.next_line().await.unwrap().expect("an answer");
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["id"] == id {
                    return message;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{method} answered within 60 s"))
    }

    /// `whoami`'s answer once it is listed (polled for at most 90 s).
    async fn whoami(&mut self) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        while !self
            .request("tools/list", json!({}))
            .await
            .to_string()
            .contains("whoami")
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "whoami never listed"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let answer = self
            .request("tools/call", json!({"name": "whoami", "arguments": {}}))
            .await;
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {answer}"))
    }
}

#[tokio::test]
async fn a_stdio_gateway_runs_as_the_principal_of_the_operators_token() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.json");
    let provider = Provider::start(&keys, 0).await;
    let backend = Backend::start(&provider.issuer).await;
    let claims = |overrides: Value| {
        let mut c = json!({"iss": provider.issuer, "sub": "erin", "aud": RESOURCE,
            "scope": "tools", "iat": now(), "exp": now() + 600});
        for (k, v) in overrides.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };

    // Erin's token: her calls run as erin, and the upstream token is exchanged from hers.
    let token = minted(&keys, claims(json!({}))).await;
    let mut child = stdio_gateway(
        dir.path(),
        &provider,
        &backend,
        &[("TOOLFORGE_TOKEN", &token)],
        &[],
    );
    let mut client = Stdio2::open(&mut child).await;
    let answer = client.whoami().await;
    assert_eq!(answer["sub"], "erin", "{answer}");
    assert_eq!(answer["act"]["sub"], "toolforge-gateway", "{answer}");
    // The trace is written behind the answer: polled for at most 30 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let trace = loop {
        let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap_or_default();
        if trace.lines().any(|l| l.contains(r#""tool":"whoami""#)) {
            break trace;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no whoami record: {trace}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        trace
            .lines()
            .any(|l| l.contains(r#""tool":"whoami""#) && l.contains(r#""principal":"erin""#)),
        "{trace}"
    );
    drop(client);
    let _ = child.kill().await;
    assert!(!trace.contains("eyJ"), "a token in the trace");

    // A token that is not valid (expired) stops the gateway before it serves, saying why.
    let expired = minted(
        &keys,
        claims(json!({"iat": now() - 7200, "exp": now() - 3600})),
    )
    .await;
    for (envs, args, said) in [
        (
            vec![("TOOLFORGE_TOKEN", expired.as_str())],
            vec![],
            "TOOLFORGE_TOKEN was refused",
        ),
        (
            vec![("TOOLFORGE_TOKEN", token.as_str())],
            vec!["--principal", "mallory"],
            "not both",
        ),
    ] {
        let child = stdio_gateway(dir.path(), &provider, &backend, &envs, &args);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("the gateway stopped")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
        assert!(!stderr.contains("eyJ"), "the token printed: {stderr}");
    }

    // `--principal` is the operator's say-so: calls run as frank, who has no token to exchange,
    // so the exchanging server's call fails saying so (nothing is sent without a token).
    let mut child = stdio_gateway(
        dir.path(),
        &provider,
        &backend,
        &[],
        &["--principal", "frank"],
    );
    let mut client = Stdio2::open(&mut child).await;
    let answer = client
        .request("tools/call", json!({"name": "whoami", "arguments": {}}))
        .await;
    assert!(
        answer.to_string().contains("this request came without one"),
        "{answer}"
    );
    drop(client);
    let _ = child.kill().await;
}

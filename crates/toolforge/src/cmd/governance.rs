//! The governance flags of `serve`, `gateway` and `chat`: the Cedar policy (`--policy`), rate
//! limits (`--limits`, else `"toolforge": {"limits": [...]}` in the servers configuration;
//! shared through Redis when `REDIS_URL` is set), and, for `serve`, identity (`--api-keys`,
//! `--jwt-jwks` with `--jwt-issuer` and `--jwt-audience`, `--allow-anonymous`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;
use toolforge_agent::{Governance, Limiter};
use toolforge_gateway::identity::Identity;
use toolforge_policy::Policies;
use toolforge_policy::limits::LimitRules;

#[derive(Debug, Default, clap::Args)]
pub struct GovernanceArgs {
    /// Cedar policy file: who may list, call, search, read and prompt what (see
    /// docs/governance.md). Without it, everything visible is allowed.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Rate limits file (JSON: {"limits": [{"principal", "tool", "capacity",
    /// "refillPerSecond"}]}; default: the configuration's "toolforge": {"limits": [...]}).
    #[arg(long, value_name = "FILE")]
    pub limits: Option<PathBuf>,
}

impl GovernanceArgs {
    /// The policy and limits, read and checked (a bad file stops the process here).
    pub async fn build(
        &self,
        settings: &serde_json::Map<String, Value>,
        config_path: &Path,
    ) -> anyhow::Result<Arc<Governance>> {
        let policies = match &self.policy {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the policy file {}", path.display()))?;
                let policies = Policies::parse(&text)
                    .with_context(|| format!("policy file {}", path.display()))?;
                tracing::info!(policies = policies.ids().len(), "policy loaded");
                Some(policies)
            }
            None => None,
        };
        let rules = match &self.limits {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the limits file {}", path.display()))?;
                let value: Value = serde_json::from_str(&text)
                    .with_context(|| format!("limits file {} is not JSON", path.display()))?;
                Some(
                    LimitRules::from_json(&value)
                        .with_context(|| format!("limits file {}", path.display()))?,
                )
            }
            None => match settings.get("limits") {
                Some(value) => Some(LimitRules::from_json(value).with_context(|| {
                    format!("{}: \"toolforge\".\"limits\"", config_path.display())
                })?),
                None => None,
            },
        };
        let limiter = match rules.filter(|r| !r.is_empty()) {
            None => None,
            Some(rules) => Some(limiter(rules).await),
        };
        Ok(Arc::new(Governance { policies, limiter }))
    }
}

/// Buckets in Redis when `REDIS_URL` is set and answers, else in this process.
async fn limiter(rules: LimitRules) -> Limiter {
    let Some(url) = crate::config::env("REDIS_URL") else {
        return Limiter::memory(rules);
    };
    match tokio::time::timeout(Duration::from_secs(4), Limiter::redis(rules.clone(), &url)).await {
        Ok(Ok(limiter)) => limiter,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Redis at REDIS_URL is unavailable: rate limits are kept in this process");
            Limiter::memory(rules)
        }
        Err(_) => {
            tracing::warn!(
                "Redis at REDIS_URL did not answer within 4 s: rate limits are kept in this process"
            );
            Limiter::memory(rules)
        }
    }
}

#[derive(Debug, Default, clap::Args)]
pub struct IdentityArgs {
    /// API keys file: one `KEY PRINCIPAL` per line; clients send `Authorization: Bearer KEY`.
    #[arg(long, value_name = "FILE")]
    pub api_keys: Option<PathBuf>,
    /// JWKS file (RSA keys for RS256, P-256 keys for ES256): bearer JWTs signed by its keys are
    /// accepted, their `sub` is the principal. Needs --jwt-issuer and --jwt-audience.
    #[arg(long, value_name = "FILE", requires_all = ["jwt_issuer", "jwt_audience"])]
    pub jwt_jwks: Option<PathBuf>,
    /// The `iss` every JWT must carry.
    #[arg(long, value_name = "ISSUER", requires = "jwt_jwks")]
    pub jwt_issuer: Option<String>,
    /// The `aud` every JWT must carry.
    #[arg(long, value_name = "AUDIENCE", requires = "jwt_jwks")]
    pub jwt_audience: Option<String>,
    /// Serve without identity on a non-loopback address (everyone is `anonymous`).
    #[arg(long)]
    pub allow_anonymous: bool,
}

impl IdentityArgs {
    /// The identity to check requests against (`None`: everyone is `anonymous`). Refuses to
    /// serve a non-loopback `host` without one unless --allow-anonymous.
    pub fn build(&self, host: IpAddr) -> anyhow::Result<Option<Arc<Identity>>> {
        let mut identity = Identity::default();
        if let Some(path) = &self.api_keys {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the API keys file {}", path.display()))?;
            identity = identity
                .with_api_keys(&text)
                .with_context(|| format!("API keys file {}", path.display()))?;
        }
        if let Some(path) = &self.jwt_jwks {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the JWKS file {}", path.display()))?;
            identity = identity
                .with_jwks(
                    &text,
                    self.jwt_issuer.as_deref().unwrap_or_default(),
                    self.jwt_audience.as_deref().unwrap_or_default(),
                )
                .with_context(|| format!("JWKS file {}", path.display()))?;
        }
        if identity.is_configured() {
            return Ok(Some(Arc::new(identity)));
        }
        if !host.is_loopback() && !self.allow_anonymous {
            anyhow::bail!(
                "refusing to serve {host} without identity: anyone who can reach it could use every tool. \
                 Give --api-keys FILE or --jwt-jwks FILE (with --jwt-issuer and --jwt-audience), \
                 or --allow-anonymous to serve it open on purpose"
            );
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_bind_without_identity_is_refused_unless_allowed() {
        let public: IpAddr = "0.0.0.0".parse().unwrap();
        let err = IdentityArgs::default()
            .build(public)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--allow-anonymous"), "{err}");
        let open = IdentityArgs {
            allow_anonymous: true,
            ..IdentityArgs::default()
        };
        assert!(open.build(public).unwrap().is_none());
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(IdentityArgs::default().build(loopback).unwrap().is_none());
    }
}

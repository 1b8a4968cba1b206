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
        process: &crate::config::Config,
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
            Some(rules) => Some(limiter(rules, process.stores.redis_url.as_deref()).await),
        };
        Ok(Arc::new(Governance { policies, limiter }))
    }
}

/// Buckets in Redis when `REDIS_URL` is set and answers, else in this process.
async fn limiter(rules: LimitRules, redis_url: Option<&str>) -> Limiter {
    let Some(url) = redis_url else {
        return Limiter::memory(rules);
    };
    match tokio::time::timeout(Duration::from_secs(4), Limiter::redis(rules.clone(), url)).await {
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
    /// An OAuth authorization server whose access tokens are accepted (repeatable): its
    /// metadata and signing keys are discovered and kept fresh; the gateway publishes
    /// protected-resource metadata naming it (docs/oauth-gateway.md).
    #[arg(long = "oauth-issuer", value_name = "URL")]
    pub oauth_issuers: Vec<String>,
    /// The gateway's canonical MCP URL, the audience its tokens must name (default:
    /// --public-url with /mcp, else the bind address with /mcp).
    #[arg(long, value_name = "URL")]
    pub oauth_resource: Option<String>,
    /// Another `aud` accepted besides the resource (repeatable; for identity providers that
    /// name an API instead).
    #[arg(long = "oauth-audience", value_name = "AUD")]
    pub oauth_audiences: Vec<String>,
    /// A scope every token must carry (repeatable; a shortfall is a 403 insufficient_scope).
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    pub oauth_scopes: Vec<String>,
    /// A token claim handed to policies as `context.claims.NAME` (repeatable).
    #[arg(long = "oauth-claim", value_name = "NAME")]
    pub oauth_claims: Vec<String>,
    /// Check opaque (non-JWT) tokens by introspection (RFC 7662) as this client.
    #[arg(long, value_name = "ID")]
    pub oauth_introspection_client_id: Option<String>,
    /// The introspection client's secret (or TOOLFORGE_INTROSPECTION_SECRET).
    #[arg(
        long,
        value_name = "SECRET",
        env = "TOOLFORGE_INTROSPECTION_SECRET",
        hide_env_values = true
    )]
    pub oauth_introspection_client_secret: Option<String>,
    /// The introspection endpoint (default: the issuer's metadata's).
    #[arg(long, value_name = "URL")]
    pub oauth_introspection_endpoint: Option<String>,
}

/// `"toolforge": {"identity": {"oauth": {...}}}` of the servers configuration.
fn file_oauth(settings: &serde_json::Map<String, Value>) -> anyhow::Result<Value> {
    let oauth = settings
        .get("identity")
        .and_then(|i| i.get("oauth"))
        .cloned()
        .unwrap_or(Value::Null);
    anyhow::ensure!(
        oauth.is_null() || oauth.is_object(),
        "\"toolforge\".\"identity\".\"oauth\" must be an object"
    );
    Ok(oauth)
}

fn strings(v: &Value, key: &str) -> anyhow::Result<Vec<String>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("\"identity.oauth.{key}\" must list strings"))
            })
            .collect(),
        Some(_) => anyhow::bail!("\"identity.oauth.{key}\" must be a list of strings"),
    }
}

impl IdentityArgs {
    /// The OAuth protected resource the flags (over the configuration file's
    /// `"toolforge": {"identity": {"oauth": ...}}`) describe, when they name an issuer; its
    /// resource defaults to `default_resource`.
    pub fn oauth(
        &self,
        settings: &serde_json::Map<String, Value>,
        default_resource: &str,
    ) -> anyhow::Result<Option<toolforge_gateway::oauth::ResourceSettings>> {
        let file = file_oauth(settings)?;
        let pick = |flag: &Vec<String>, key: &str| -> anyhow::Result<Vec<String>> {
            if flag.is_empty() {
                strings(&file, key)
            } else {
                Ok(flag.clone())
            }
        };
        let issuers = pick(&self.oauth_issuers, "issuers")?;
        if issuers.is_empty() {
            return Ok(None);
        }
        let text = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_owned);
        let introspection = file.get("introspection").cloned().unwrap_or(Value::Null);
        let intro_text = |key: &str| {
            introspection
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let introspection = match (
            self.oauth_introspection_client_id
                .clone()
                .or_else(|| intro_text("clientId")),
            self.oauth_introspection_client_secret
                .clone()
                .or_else(|| intro_text("clientSecret")),
        ) {
            (Some(client_id), Some(client_secret)) => {
                Some(toolforge_gateway::oauth::IntrospectionClient {
                    endpoint: self
                        .oauth_introspection_endpoint
                        .clone()
                        .or_else(|| intro_text("endpoint")),
                    client_id,
                    client_secret,
                })
            }
            (None, None) => None,
            _ => anyhow::bail!(
                "token introspection needs both --oauth-introspection-client-id and its secret"
            ),
        };
        let required_scopes = pick(&self.oauth_scopes, "scopes")?;
        Ok(Some(toolforge_gateway::oauth::ResourceSettings {
            resource: self
                .oauth_resource
                .clone()
                .or_else(|| text("resource"))
                .unwrap_or_else(|| default_resource.to_owned()),
            issuers,
            audiences: pick(&self.oauth_audiences, "audiences")?,
            scopes_supported: strings(&file, "scopesSupported")?,
            required_scopes,
            claims: pick(&self.oauth_claims, "claims")?,
            introspection,
            resource_name: text("resourceName"),
        }))
    }

    /// The identity to check requests against (`None`: everyone is `anonymous`). Refuses to
    /// serve a non-loopback `host` without one unless --allow-anonymous.
    pub fn build(&self, host: IpAddr) -> anyhow::Result<Option<Arc<Identity>>> {
        self.build_with(host, None)
    }

    /// [`IdentityArgs::build`], with the OAuth protected resource `oauth` (made and started by
    /// the caller) among the ways to authenticate.
    pub fn build_with(
        &self,
        host: IpAddr,
        oauth: Option<Arc<toolforge_gateway::oauth::OAuthResource>>,
    ) -> anyhow::Result<Option<Arc<Identity>>> {
        let mut identity = Identity::default();
        if let Some(oauth) = oauth {
            identity = identity.with_oauth(oauth);
        }
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
                 Give --api-keys FILE, --jwt-jwks FILE (with --jwt-issuer and --jwt-audience) \
                 or --oauth-issuer URL, or --allow-anonymous to serve it open on purpose"
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

/// Who a stdio gateway or a `chat` run is: `--principal NAME` (the operator's say-so), or the
/// principal of the bearer token in `TOOLFORGE_TOKEN`, checked like any request's against the
/// identity flags (`--api-keys`, `--jwt-jwks`, `--oauth-issuer`).
#[derive(Debug, Default, clap::Args)]
pub struct StdioIdentityArgs {
    /// Run as this principal (policies, limits, traces and upstream grants see it); instead
    /// of a token in TOOLFORGE_TOKEN.
    #[arg(long, value_name = "NAME")]
    pub principal: Option<String>,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

impl StdioIdentityArgs {
    /// The principal to run as (and the token, when it was a JWT or an OAuth token), or none
    /// (`anonymous`).
    pub async fn resolve(
        &self,
        process: &crate::config::Config,
        settings: &serde_json::Map<String, Value>,
    ) -> anyhow::Result<Option<toolforge_mcp::OnBehalf>> {
        let token = process.token.clone();
        match (&self.principal, token) {
            (Some(_), Some(_)) => {
                anyhow::bail!("give either --principal or TOOLFORGE_TOKEN, not both")
            }
            (Some(name), None) => Ok(Some(toolforge_mcp::OnBehalf {
                principal: toolforge_policy::Principal::new(name.trim()).to_string(),
                token: None,
            })),
            (None, None) => Ok(None),
            (None, Some(token)) => {
                let oauth = match self.identity.oauth(settings, "http://127.0.0.1/mcp")? {
                    Some(resource) => {
                        let http =
                            toolforge_gateway::oauth::http_client().map_err(anyhow::Error::msg)?;
                        let resource = Arc::new(
                            toolforge_gateway::oauth::OAuthResource::new(resource, http)
                                .map_err(anyhow::Error::msg)?,
                        );
                        resource
                            .start(
                                Duration::from_secs(10),
                                tokio_util::sync::CancellationToken::new(),
                            )
                            .await;
                        Some(resource)
                    }
                    None => None,
                };
                let identity = self
                    .identity
                    .build_with("127.0.0.1".parse()?, oauth)?
                    .filter(|i| i.is_configured())
                    .context(
                        "TOOLFORGE_TOKEN is checked like any bearer token: give --api-keys, \
                         --jwt-jwks (with --jwt-issuer and --jwt-audience) or --oauth-issuer",
                    )?;
                let mut headers = reqwest::header::HeaderMap::new();
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                        .context("TOOLFORGE_TOKEN is not a valid header value")?,
                );
                let authenticated = identity
                    .authenticate_request(&headers)
                    .await
                    .map_err(|denied| anyhow::anyhow!("TOOLFORGE_TOKEN was refused: {denied:?}"))?;
                Ok(Some(toolforge_mcp::OnBehalf {
                    principal: authenticated.principal.to_string(),
                    token: authenticated.token.map(|t| t.0),
                }))
            }
        }
    }
}

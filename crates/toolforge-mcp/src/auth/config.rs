//! A server's `"auth"` in `mcp.servers.json`: how the pool gets the tokens it sends that
//! server.
//!
//! ```json
//! "auth": {"type": "oauth", "clientId": "...", "clientSecret": "${SECRET}", "scopes": ["repo"],
//!          "clientMetadataUrl": "https://gw.example.com/client.json", "listAs": "ops"}
//! "auth": {"type": "token-exchange", "tokenEndpoint": "https://id.example.com/token",
//!          "audience": "tickets", "clientId": "gateway", "clientSecret": "${SECRET}", "scope": "read"}
//! "auth": {"type": "client-credentials", "tokenEndpoint": "...", "clientId": "...",
//!          "clientSecret": "...", "scope": "...", "audience": "..."}
//! ```

use serde_json::Value;

use super::endpoint::{ClientAuth, Target, TokenEndpoint};
use super::flow::ClientIdentity;

/// How the pool authenticates to one server.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamAuth {
    /// `"oauth"`: each principal's own grant, from their consent (authorization code).
    OAuth(OAuthSettings),
    /// `"token-exchange"`: each caller's access token exchanged (RFC 8693) for one meant for
    /// this server.
    TokenExchange(ServiceSettings),
    /// `"client-credentials"`: one service identity for everyone.
    ClientCredentials(ServiceSettings),
}

impl UpstreamAuth {
    /// Whether each principal has a token (and a connection) of its own.
    #[must_use]
    pub fn per_principal(&self) -> bool {
        !matches!(self, Self::ClientCredentials(_))
    }

    /// The `type` as written.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::OAuth(_) => "oauth",
            Self::TokenExchange(_) => "token-exchange",
            Self::ClientCredentials(_) => "client-credentials",
        }
    }
}

/// `"type": "oauth"`.
#[derive(Debug, Clone, Default)]
pub struct OAuthSettings {
    pub identity: ClientIdentity,
    /// Scopes to ask for (empty: what the server's challenge and metadata say).
    pub scopes: Vec<String>,
    /// Whose grant reads the server's lists (tools, resources, prompts), which every principal
    /// then sees; unset: the first principal (by name) that has one.
    pub list_as: Option<String>,
}

impl PartialEq for OAuthSettings {
    fn eq(&self, other: &Self) -> bool {
        self.identity.client_id == other.identity.client_id
            && self.identity.client_metadata_url == other.identity.client_metadata_url
            && self.scopes == other.scopes
            && self.list_as == other.list_as
    }
}

/// `"type": "token-exchange"` and `"type": "client-credentials"`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSettings {
    pub endpoint: TokenEndpoint,
    pub target: Target,
}

impl PartialEq for TokenEndpoint {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.client_id == other.client_id && self.auth == other.auth
    }
}

impl PartialEq for Target {
    fn eq(&self, other: &Self) -> bool {
        self.audience == other.audience
            && self.resource == other.resource
            && self.scope == other.scope
    }
}

const OAUTH_KEYS: &[&str] = &[
    "type",
    "clientId",
    "clientSecret",
    "clientMetadataUrl",
    "clientName",
    "scopes",
    "listAs",
];
const SERVICE_KEYS: &[&str] = &[
    "type",
    "tokenEndpoint",
    "clientId",
    "clientSecret",
    "clientAuth",
    "audience",
    "resource",
    "scope",
];

/// Parses a server's `"auth"`; `url` is the server's, `text` expands a string's variables.
///
/// # Errors
/// What is wrong, naming the key.
pub fn parse(
    v: &Value,
    url: &str,
    text: &dyn Fn(&str) -> Result<String, String>,
    warnings: &mut Vec<String>,
) -> Result<UpstreamAuth, String> {
    let Value::Object(obj) = v else {
        return Err("\"auth\" must be an object with a \"type\"".to_owned());
    };
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or_default();
    let known: &[&str] = if kind == "oauth" {
        OAUTH_KEYS
    } else {
        SERVICE_KEYS
    };
    for key in obj.keys() {
        if !known.contains(&key.as_str()) {
            warnings.push(format!("\"auth\": unknown key \"{key}\" ignored"));
        }
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => text(s).map(|s| Some(s).filter(|s| !s.is_empty())),
            Some(_) => Err(format!("\"auth.{key}\" must be a string")),
        }
    };
    let required = |key: &str| -> Result<String, String> {
        string(key)?.ok_or_else(|| format!("\"auth.{key}\" is required for \"{kind}\""))
    };
    match kind {
        "oauth" => {
            let scopes = match obj.get("scopes") {
                None => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| "\"auth.scopes\" must list strings".to_owned())
                    })
                    .collect::<Result<_, _>>()?,
                Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
                Some(_) => return Err("\"auth.scopes\" must be a list of strings".to_owned()),
            };
            let client_id = string("clientId")?;
            let client_secret = string("clientSecret")?;
            if client_secret.is_some() && client_id.is_none() {
                return Err("\"auth.clientSecret\" needs \"auth.clientId\"".to_owned());
            }
            let client_metadata_url = string("clientMetadataUrl")?;
            if let Some(u) = &client_metadata_url
                && !u.starts_with("https://")
            {
                return Err("\"auth.clientMetadataUrl\" must be an https URL".to_owned());
            }
            Ok(UpstreamAuth::OAuth(OAuthSettings {
                identity: ClientIdentity {
                    client_id,
                    client_secret,
                    client_metadata_url,
                    client_name: string("clientName")?.unwrap_or_else(|| "toolforge".to_owned()),
                },
                scopes,
                list_as: string("listAs")?,
            }))
        }
        "token-exchange" | "client-credentials" => {
            let url_of_endpoint = required("tokenEndpoint")?;
            if !(url_of_endpoint.starts_with("https://") || url_of_endpoint.starts_with("http://"))
            {
                return Err("\"auth.tokenEndpoint\" must be an http(s) URL".to_owned());
            }
            let client_secret = string("clientSecret")?;
            let auth = match string("clientAuth")?.as_deref() {
                None if client_secret.is_none() => ClientAuth::None,
                None | Some("client_secret_basic") => ClientAuth::ClientSecretBasic,
                Some("client_secret_post") => ClientAuth::ClientSecretPost,
                Some("none") => ClientAuth::None,
                Some(other) => {
                    return Err(format!(
                        "\"auth.clientAuth\" must be \"client_secret_basic\", \
                         \"client_secret_post\" or \"none\", not {other:?}"
                    ));
                }
            };
            let audience = string("audience")?;
            let resource = string("resource")?;
            let target = Target {
                resource: if audience.is_none() && resource.is_none() {
                    Some(url.to_owned())
                } else {
                    resource
                },
                audience,
                scope: string("scope")?,
            };
            let settings = ServiceSettings {
                endpoint: TokenEndpoint {
                    url: url_of_endpoint,
                    client_id: required("clientId")?,
                    client_secret,
                    auth,
                },
                target,
            };
            Ok(if kind == "token-exchange" {
                UpstreamAuth::TokenExchange(settings)
            } else {
                UpstreamAuth::ClientCredentials(settings)
            })
        }
        "" => Err(
            "\"auth\" needs a \"type\": \"oauth\", \"token-exchange\" or \"client-credentials\""
                .to_owned(),
        ),
        other => Err(format!(
            "\"auth.type\" must be \"oauth\", \"token-exchange\" or \"client-credentials\", not {other:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Result<UpstreamAuth, String> {
        let expand = |s: &str| Ok(s.replace("${SECRET}", "s3cret"));
        parse(&v, "https://mcp.example.com/mcp", &expand, &mut Vec::new())
    }

    #[test]
    fn each_type_parses_with_its_defaults() {
        let UpstreamAuth::OAuth(o) =
            check(json!({"type": "oauth", "scopes": "a b", "listAs": "ops"})).unwrap()
        else {
            panic!("oauth")
        };
        assert_eq!(o.scopes, ["a", "b"]);
        assert_eq!(o.list_as.as_deref(), Some("ops"));
        assert!(o.identity.client_id.is_none());
        let UpstreamAuth::TokenExchange(t) = check(json!({"type": "token-exchange",
            "tokenEndpoint": "https://id/token", "clientId": "gw", "clientSecret": "${SECRET}"}))
        .unwrap() else {
            panic!("exchange")
        };
        assert_eq!(t.endpoint.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(t.endpoint.auth, ClientAuth::ClientSecretBasic);
        assert_eq!(
            t.target.resource.as_deref(),
            Some("https://mcp.example.com/mcp")
        );
        let UpstreamAuth::ClientCredentials(c) = check(json!({"type": "client-credentials",
            "tokenEndpoint": "https://id/token", "clientId": "gw", "audience": "api"}))
        .unwrap() else {
            panic!("cc")
        };
        assert_eq!(c.endpoint.auth, ClientAuth::None);
        assert_eq!(c.target.resource, None);
        assert_eq!(c.target.audience.as_deref(), Some("api"));
    }

    #[test]
    fn mistakes_are_named() {
        for (v, says) in [
            (json!("oauth"), "must be an object"),
            (json!({}), "needs a \"type\""),
            (json!({"type": "magic"}), "not \"magic\""),
            (
                json!({"type": "token-exchange", "clientId": "x"}),
                "tokenEndpoint\" is required",
            ),
            (
                json!({"type": "oauth", "clientSecret": "x"}),
                "needs \"auth.clientId\"",
            ),
            (
                json!({"type": "oauth", "clientMetadataUrl": "http://x/c.json"}),
                "https URL",
            ),
            (
                json!({"type": "client-credentials", "tokenEndpoint": "https://t", "clientId": "x", "clientAuth": "jwt"}),
                "clientAuth",
            ),
        ] {
            let err = check(v.clone()).unwrap_err();
            assert!(err.contains(says), "{v}: {err}");
        }
    }
}

//! The protected-resource metadata (RFC 9728) and the challenges that point at it.
//!
//! `GET /.well-known/oauth-protected-resource/mcp` (the resource's path appended, as RFC 9728
//! section 3.1 builds it) and `GET /.well-known/oauth-protected-resource` answer the same
//! document, open to everyone: `resource`, `authorization_servers`, `scopes_supported`,
//! `bearer_methods_supported`. Every 401 carries `WWW-Authenticate: Bearer
//! resource_metadata="..."` (with `scope` when scopes are required), a bad token adds
//! `error="invalid_token"`, and a scope shortfall is a 403 with `error="insufficient_scope"`
//! and the scopes to ask for (step-up).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::OAuthResource;

/// The well-known path prefix of RFC 9728.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata URL of `resource`: its origin, the well-known prefix, then its path.
#[must_use]
pub fn metadata_url(resource: &str) -> String {
    let Ok(url) = reqwest::Url::parse(resource) else {
        return format!("{resource}{WELL_KNOWN}");
    };
    let path = url.path().trim_end_matches('/');
    format!("{}{WELL_KNOWN}{path}", url.origin().ascii_serialization())
}

/// The metadata document.
#[must_use]
pub fn document(resource: &OAuthResource) -> serde_json::Value {
    let settings = &resource.settings;
    let mut scopes = settings.required_scopes.clone();
    for s in &settings.scopes_supported {
        if !scopes.contains(s) {
            scopes.push(s.clone());
        }
    }
    let mut doc = json!({
        "resource": settings.resource,
        "authorization_servers": settings.issuers,
        "bearer_methods_supported": ["header"],
    });
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    if let Some(name) = &settings.resource_name {
        doc["resource_name"] = json!(name);
    }
    doc
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`.
pub async fn route(State(resource): State<Arc<OAuthResource>>) -> Response {
    (
        [(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=300"),
        )],
        axum::Json(document(&resource)),
    )
        .into_response()
}

/// The metadata routes of `resource` (open to everyone).
pub fn routes(resource: Arc<OAuthResource>) -> axum::Router {
    let mut router = axum::Router::new();
    for path in paths(&resource.settings.resource) {
        router = router.route(&path, axum::routing::get(route));
    }
    router.with_state(resource)
}

/// The paths the document is served at, for `resource`.
#[must_use]
pub fn paths(resource: &str) -> Vec<String> {
    let mut paths = vec![WELL_KNOWN.to_owned()];
    if let Ok(url) = reqwest::Url::parse(resource) {
        let path = url.path().trim_end_matches('/');
        if !path.is_empty() {
            paths.push(format!("{WELL_KNOWN}{path}"));
        }
    }
    paths
}

/// Text fit for a quoted-string of a challenge: printable ASCII, no quotes or backslashes.
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '"' || c == '\\' || !(' '..='~').contains(&c) {
                '\''
            } else {
                c
            }
        })
        .collect()
}

/// What a challenge says.
#[derive(Debug, Clone, Copy)]
pub enum Challenge<'a> {
    /// No token.
    Missing,
    /// A token that was refused, and why.
    Invalid(&'a str),
    /// A valid token without these scopes.
    InsufficientScope(&'a [String]),
}

/// The `WWW-Authenticate` value for `challenge`.
#[must_use]
pub fn challenge(resource: &OAuthResource, challenge: Challenge<'_>) -> HeaderValue {
    let url = quoted(&resource.metadata_url());
    let required = &resource.settings.required_scopes;
    let text = match challenge {
        Challenge::Missing if required.is_empty() => {
            format!("Bearer resource_metadata=\"{url}\"")
        }
        Challenge::Missing => format!(
            "Bearer resource_metadata=\"{url}\", scope=\"{}\"",
            quoted(&required.join(" "))
        ),
        Challenge::Invalid(why) => format!(
            "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{url}\"",
            quoted(why)
        ),
        Challenge::InsufficientScope(missing) => {
            let mut scopes = required.clone();
            for s in missing {
                if !scopes.contains(s) {
                    scopes.push(s.clone());
                }
            }
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{url}\"",
                quoted(&scopes.join(" "))
            )
        }
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

impl OAuthResource {
    /// The URL of the protected-resource metadata for the resource: RFC 9728's well-known
    /// path with the resource's path appended.
    #[must_use]
    pub fn metadata_url(&self) -> String {
        metadata_url(&self.settings.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_prefix() {
        assert_eq!(
            metadata_url("https://gw.example.com/mcp"),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8000/"),
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            paths("https://gw.example.com/tenant/mcp"),
            [
                WELL_KNOWN,
                "/.well-known/oauth-protected-resource/tenant/mcp"
            ]
        );
        assert_eq!(quoted("a \"b\"\n"), "a 'b''");
    }
}

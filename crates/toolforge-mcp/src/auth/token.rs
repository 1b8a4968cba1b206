//! What an authorized HTTP connection asks of its credentials: the token to send, and what to
//! do when the server refuses it.
//!
//! An [`AccessToken`] never prints: its `Debug` is `AccessToken(..)` and it has no `Display`,
//! so a token cannot reach a log line, a trace record or an error message by accident.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A bearer token. Cheap to clone; only [`AccessToken::expose`] shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(Arc<str>);

impl AccessToken {
    #[must_use]
    pub fn new(token: impl Into<Arc<str>>) -> Self {
        Self(token.into())
    }

    /// The token itself, for the `Authorization` header and nothing else.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// Why the server refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no token, or one the server does not accept (expired, revoked, another audience).
    Unauthorized,
    /// 403 with `error="insufficient_scope"`: the token lacks a scope this request needs.
    InsufficientScope,
}

/// A refused request: why, the server's `WWW-Authenticate` challenge, and the token it carried.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub refusal: Refusal,
    pub www_authenticate: String,
    pub sent: Option<AccessToken>,
}

impl Challenge {
    /// The `scope` the challenge names, when it names one.
    #[must_use]
    pub fn scope(&self) -> Option<String> {
        param(&self.www_authenticate, "scope")
    }
}

/// The value of `name` in a `WWW-Authenticate: Bearer k="v", ...` challenge (quoted or not).
#[must_use]
pub fn param(challenge: &str, name: &str) -> Option<String> {
    let mut rest = challenge.trim();
    if let Some((scheme, tail)) = rest.split_once(char::is_whitespace)
        && scheme.eq_ignore_ascii_case("bearer")
    {
        rest = tail;
    }
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    other => value.push(other),
                }
            }
            (value, &quoted[end.min(quoted.len())..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        if key.trim().eq_ignore_ascii_case(name) {
            return Some(value);
        }
        rest = tail;
    }
    None
}

/// A boxed future of the credentials' answers.
pub type AuthFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why no token could be had. Never carries a token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthFailure {
    /// Nobody has authorized this connection yet (or the grant was revoked or cannot be
    /// refreshed): the user must consent first.
    #[error("authorization required")]
    AuthorizationRequired,
    /// The authorization flow, a refresh or an exchange failed.
    #[error("{0}")]
    Failed(String),
}

/// The credentials of one connection.
pub trait TokenSource: Send + Sync {
    /// The token to send now; none sends the request without one (the server's challenge then
    /// decides what happens).
    fn token(&self) -> AuthFuture<'_, Result<Option<AccessToken>, AuthFailure>>;

    /// The server refused a request: a token to send it again with (the server did not run
    /// it), or none to give up and report the refusal.
    fn refused<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> AuthFuture<'a, Result<Option<AccessToken>, AuthFailure>>;
}

/// Credentials as a trait object, shared by a connection's requests.
pub type Credentials = Arc<dyn TokenSource>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters() {
        let header = r#"Bearer error="insufficient_scope", scope="mcp:read mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", realm=x"#;
        assert_eq!(
            param(header, "scope").as_deref(),
            Some("mcp:read mcp:write")
        );
        assert_eq!(
            param(header, "error").as_deref(),
            Some("insufficient_scope")
        );
        assert_eq!(param(header, "realm").as_deref(), Some("x"));
        assert_eq!(
            param(header, "resource_metadata").as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(param(header, "nope"), None);
        assert_eq!(
            param(r#"Bearer a="q\"uote""#, "a").as_deref(),
            Some("q\"uote")
        );
        assert_eq!(param("Bearer", "scope"), None);
    }

    #[test]
    fn tokens_never_print() {
        let token = AccessToken::new("s3cret-token");
        assert_eq!(format!("{token:?}"), "AccessToken(..)");
        let challenge = Challenge {
            refusal: Refusal::Unauthorized,
            www_authenticate: "Bearer".into(),
            sent: Some(token),
        };
        assert!(!format!("{challenge:?}").contains("s3cret"));
    }
}

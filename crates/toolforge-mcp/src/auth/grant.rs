//! What a stored record holds: one principal's tokens for one server, when they expire, and
//! how to refresh them (the token endpoint and the client that got them).

use serde::{Deserialize, Serialize};

use super::endpoint::TokenEndpoint;

/// One principal's grant for one server. `Debug` shows no token.
#[derive(Clone, Serialize, Deserialize)]
pub struct Grant {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the epoch), when known.
    #[serde(default)]
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The authorization server that issued it.
    #[serde(default)]
    pub issuer: Option<String>,
    /// Where to refresh it, and as which client.
    pub endpoint: TokenEndpoint,
    /// The `resource` it was asked for (RFC 8707), sent again on refresh.
    #[serde(default)]
    pub resource: Option<String>,
    /// When it was obtained (seconds since the epoch).
    pub obtained_at: u64,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("issuer", &self.issuer)
            .field("endpoint", &self.endpoint)
            .field("refreshable", &self.refresh_token.is_some())
            .finish_non_exhaustive()
    }
}

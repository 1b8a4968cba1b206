//! Whom a request is made for, carried from the caller to the connection that serves it.

/// Whom a request is made for: the principal, and the access token it came with (for a
/// token exchange; never an API key).
#[derive(Debug, Clone)]
pub struct OnBehalf {
    pub principal: String,
    pub token: Option<crate::auth::token::AccessToken>,
}

//! OAuth 2.1 on the client side: how the pool (and `toolforge client`) reaches MCP servers
//! that answer `401` with `WWW-Authenticate: Bearer resource_metadata=...`.
//!
//! Leaves first: `token` (the token type that never prints, and what a connection asks of
//! its credentials), `seal` (records encrypted at rest), `endpoint` (refresh, token exchange
//! and client credentials: one form POST each), `store` (grants per (server, principal)),
//! `config` (a server's `"auth"`), `flow` (the authorization-code flow, on rmcp's `auth`
//! module), `source` (the pool's credentials per principal), `headless` (credentials of a
//! client without a user, which follows the authorization redirect itself) and `bearer` (the
//! Streamable HTTP client that sends the token and resends a refused request with a new one).
//!
//! Written here rather than taken from rmcp: the token sources and their store (rmcp keeps one
//! credential per `AuthorizationManager`; the pool needs one per principal, sealed, shared by
//! replicas), token exchange (RFC 8693; rmcp has none), and the refresh and client-credentials
//! requests (one form POST each, without rmcp's discovery round trips per principal).

pub mod bearer;
pub mod config;
pub mod endpoint;
pub mod flow;
pub mod grant;
pub mod headless;
pub mod pool;
pub(crate) mod refusal;
pub mod seal;
pub mod source;
pub mod store;
pub mod token;

pub use bearer::{Bearer, MAX_RESENDS};
pub use config::{OAuthSettings, ServiceSettings, UpstreamAuth};
pub use endpoint::{ClientAuth, Target, TokenEndpoint};
pub use flow::{Authorized, ClientIdentity, FlowRequest, Pending};
pub use grant::Grant;
pub use headless::{HEADLESS_REDIRECT_URI, Headless, MAX_FLOWS};
pub use seal::{SealError, SealKey};
pub use source::{ExchangeSource, Exchanges, GrantSource, ServiceSource};
pub use store::{StoreError, TokenStore};
pub use token::{
    AccessToken, AuthFailure, AuthFuture, Challenge, Credentials, Refusal, TokenSource, param,
};

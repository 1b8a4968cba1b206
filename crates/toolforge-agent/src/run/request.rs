//! One request to the agent, and the visibility that narrows what it may see.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolforge_llm::Message;
use toolforge_select::Catalog;

/// Narrows the catalog a request may see (the visibility layer plugs in here).
pub type Visibility = Arc<dyn Fn(&Catalog) -> Catalog + Send + Sync>;

/// One request.
#[derive(Clone, Default)]
pub struct RunRequest {
    pub message: String,
    /// Earlier turns of the conversation, oldest first (text only), sent before `message`.
    pub prior: Vec<Message>,
    /// Continues a session (recency), or a new one is made.
    pub session_id: Option<String>,
    pub dry_run: bool,
    pub visibility: Option<Visibility>,
    /// Who asks (`anonymous` without identity): policies and limits decide for it, and every
    /// trace record names it.
    pub principal: toolforge_policy::Principal,
    /// The access token the caller came with (a JWT or OAuth token, never an API key), for
    /// servers that exchange it for one of their own.
    pub caller_token: Option<toolforge_mcp::auth::AccessToken>,
    /// Cancelled when the caller goes away; in-flight tool calls are cancelled with it.
    pub cancel: Option<CancellationToken>,
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("message", &self.message)
            .field("prior_turns", &self.prior.len())
            .field("session_id", &self.session_id)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

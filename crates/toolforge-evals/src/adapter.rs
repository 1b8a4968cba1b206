//! The backends (LM Studio servers, Together, the Hugging Face router) composed into one
//! router: a model id goes to a server that lists it.
//!
//! Why one `Server` type for three adapters: all three speak the OpenAI API (`/models`,
//! `/chat/completions`, `/embeddings`); they differ only in data ([`AdapterKind`]): where the
//! version path is, whether a key is sent, the name of the repetition-penalty field, how many
//! requests may run at once, and whether JIT-swap protection applies.
//!
//! Routing (the seed's "server selection, slot management and JIT-swap protection"):
//! - each server's `/models` manifest is cached for `manifest_ttl`; a model that no fresh
//!   manifest lists triggers a refresh of every server before the call fails;
//! - when several servers list the model, a free one that already runs that model is preferred,
//!   then the first free one in registration order (LM Studio servers in `LM_STUDIO_SERVERS`
//!   order, then Together, then Hugging Face);
//! - every server has a number of slots (concurrent requests); when none is free the call waits
//!   for one, inside its own timeout;
//! - on LM Studio servers a request for another model than the one in flight waits until the
//!   server is idle: LM Studio loads models on demand (JIT), and two models requested at once
//!   make it unload one mid-answer or load both into one GPU. Hosted APIs need no such guard.
//!
//! A server whose manifest cannot be fetched is reported as unreachable, never fatal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde::Serialize;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::config::EvalsConfig;
use crate::error::EvalError;

/// Which adapter a server belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    LmStudio,
    Together,
    HuggingFace,
}

impl AdapterKind {
    /// The adapter's name in logs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::LmStudio => "LMStudioAdapter",
            Self::Together => "TogetherAdapter",
            Self::HuggingFace => "HuggingFaceAdapter",
        }
    }

    /// LM Studio calls it `repeat_penalty`; Together and TGI-style routers
    /// `repetition_penalty`.
    #[must_use]
    pub fn repeat_penalty_field(self) -> &'static str {
        match self {
            Self::LmStudio => "repeat_penalty",
            Self::Together | Self::HuggingFace => "repetition_penalty",
        }
    }

    fn swap_guard(self) -> bool {
        self == Self::LmStudio
    }
}

/// A model list as one fetch left it.
#[derive(Debug, Clone)]
struct Manifest {
    fetched: Instant,
    models: Result<Vec<String>, String>,
}

#[derive(Debug, Default)]
struct SlotState {
    in_flight: usize,
    /// The model of the requests in flight, or of the last one (what LM Studio has loaded).
    model: Option<String>,
}

/// One OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct Server {
    kind: AdapterKind,
    url: String,
    api_base: String,
    api_key: Option<String>,
    static_models: Option<Vec<String>>,
    capacity: usize,
    slots: std::sync::Mutex<SlotState>,
    manifest: tokio::sync::Mutex<Option<Manifest>>,
}

impl Server {
    fn new(
        kind: AdapterKind,
        url: &str,
        api_key: Option<String>,
        static_models: Option<Vec<String>>,
        capacity: usize,
    ) -> Self {
        let url = url.trim().trim_end_matches('/').to_owned();
        // LM Studio servers are named by their root (`http://host:1234`, as its UI shows);
        // hosted APIs by their base URL with the version path, as their SDKs do.
        let api_base = match kind {
            AdapterKind::LmStudio if !url.ends_with("/v1") => format!("{url}/v1"),
            _ => url.clone(),
        };
        Self {
            kind,
            url,
            api_base,
            api_key,
            static_models,
            capacity: capacity.max(1),
            slots: std::sync::Mutex::new(SlotState::default()),
            manifest: tokio::sync::Mutex::new(None),
        }
    }

    /// The server as `list_models` names it.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Which adapter it belongs to.
    #[must_use]
    pub fn kind(&self) -> AdapterKind {
        self.kind
    }

    /// The URL of an API path such as `chat/completions`.
    #[must_use]
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.api_base)
    }

    /// The API base (version path included), for clients built elsewhere (embeddings).
    #[must_use]
    pub fn api_base(&self) -> &str {
        &self.api_base
    }

    /// The bearer key, if this backend needs one.
    #[must_use]
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    fn try_acquire(&self, model: &str) -> bool {
        let mut s = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let same_model = s.model.as_deref() == Some(model);
        let swap_ok = !self.kind.swap_guard() || s.in_flight == 0 || same_model;
        if s.in_flight < self.capacity && swap_ok {
            s.in_flight += 1;
            s.model = Some(model.to_owned());
            true
        } else {
            false
        }
    }

    fn runs(&self, model: &str) -> bool {
        let s = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.model.as_deref() == Some(model)
    }

    fn release(&self) {
        let mut s = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.in_flight = s.in_flight.saturating_sub(1);
    }

    /// Requests in flight (for tests and logs).
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .in_flight
    }
}

/// A held slot on a server; dropping it frees the slot and wakes waiting calls.
#[derive(Debug)]
pub struct Slot {
    server: Arc<Server>,
    released: Arc<Notify>,
}

impl Slot {
    /// The server this slot is on.
    #[must_use]
    pub fn server(&self) -> &Server {
        &self.server
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.server.release();
        self.released.notify_waiters();
    }
}

/// What `list_models` returns.
#[derive(Debug, Clone, Serialize)]
pub struct ModelListing {
    /// Every model of every reachable server, deduplicated and sorted.
    pub models: Vec<String>,
    /// Reachable server URL → its models (sorted), in registration order.
    pub servers: IndexMap<String, Vec<String>>,
    /// Servers whose manifest could not be fetched.
    pub unreachable: Vec<String>,
}

/// Every registered backend behind one router (the seed's `CompositeAdapter`).
#[derive(Debug)]
pub struct Composite {
    servers: Vec<Arc<Server>>,
    http: reqwest::Client,
    released: Arc<Notify>,
    manifest_ttl: Duration,
    manifest_timeout: Duration,
}

#[derive(serde::Deserialize)]
struct ModelEntry {
    id: String,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum ModelsBody {
    /// OpenAI, LM Studio, the HF router: `{"object": "list", "data": [{"id"}]}`.
    Wrapped { data: Vec<ModelEntry> },
    /// Together: a bare array.
    Bare(Vec<ModelEntry>),
}

impl Composite {
    /// Registers the adapters `config` names (none is allowed: tools then fail with
    /// `RuntimeError: no adapter registered`).
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(config: &EvalsConfig) -> Result<Self, EvalError> {
        let mut servers = Vec::new();
        for url in &config.lm_studio_servers {
            servers.push(Arc::new(Server::new(
                AdapterKind::LmStudio,
                url,
                None,
                None,
                config.lm_studio_slots,
            )));
        }
        if !config.lm_studio_servers.is_empty() {
            info!(
                adapter = AdapterKind::LmStudio.name(),
                servers = ?config.lm_studio_servers,
                slots = config.lm_studio_slots,
                "Registered adapter."
            );
        }
        for (kind, backend) in [
            (AdapterKind::Together, &config.together),
            (AdapterKind::HuggingFace, &config.huggingface),
        ] {
            if let Some(b) = backend {
                servers.push(Arc::new(Server::new(
                    kind,
                    &b.base_url,
                    Some(b.api_key.clone()),
                    b.models.clone(),
                    b.slots,
                )));
                info!(adapter = kind.name(), base_url = %b.base_url, slots = b.slots, "Registered adapter.");
            }
        }
        if servers.is_empty() {
            warn!(
                "No adapter registered: set LM_STUDIO_SERVERS, TOGETHER_API_KEY or HF_TOKEN; the model tools will fail until then."
            );
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| EvalError::Transport {
                url: String::new(),
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self {
            servers,
            http,
            released: Arc::new(Notify::new()),
            manifest_ttl: config.manifest_ttl,
            manifest_timeout: config.manifest_timeout,
        })
    }

    /// The registered servers, in priority order.
    #[must_use]
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// The shared HTTP client.
    #[must_use]
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    async fn fetch_manifest(&self, server: &Server) -> Result<Vec<String>, String> {
        if let Some(models) = &server.static_models {
            return Ok(models.clone());
        }
        let url = server.endpoint("models");
        let mut req = self.http.get(&url).timeout(self.manifest_timeout);
        if let Some(key) = server.api_key() {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| crate::error::describe(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| crate::error::describe(&e))?;
        if !status.is_success() {
            return Err(format!(
                "HTTP {}: {}",
                status.as_u16(),
                crate::error::quote(&text)
            ));
        }
        let body: ModelsBody = serde_json::from_str(&text).map_err(|e| {
            format!(
                "unreadable model list ({e}): {}",
                crate::error::quote(&text)
            )
        })?;
        let entries = match body {
            ModelsBody::Wrapped { data } | ModelsBody::Bare(data) => data,
        };
        let mut ids: Vec<String> = entries.into_iter().map(|m| m.id).collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// The server's manifest, fetched again when `force` or older than the TTL.
    async fn manifest(&self, server: &Server, force: bool) -> Manifest {
        let mut slot = server.manifest.lock().await;
        if let Some(m) = slot.as_ref()
            && !force
            && m.fetched.elapsed() < self.manifest_ttl
        {
            return m.clone();
        }
        let models = self.fetch_manifest(server).await;
        match &models {
            Ok(m) => debug!(server = %server.url, models = m.len(), "Fetched the model list."),
            Err(e) => {
                warn!(server = %server.url, error = %e, "Server unreachable: its model list could not be fetched.")
            }
        }
        let m = Manifest {
            fetched: Instant::now(),
            models,
        };
        *slot = Some(m.clone());
        m
    }

    async fn manifests(&self, force: bool) -> Vec<Manifest> {
        futures::future::join_all(self.servers.iter().map(|s| self.manifest(s, force))).await
    }

    /// Fetches every server's model list now (`list_models`).
    ///
    /// # Errors
    /// [`EvalError::NoAdapter`] when nothing is registered; unreachable servers are reported in
    /// the listing instead.
    pub async fn list_models(&self) -> Result<ModelListing, EvalError> {
        if self.servers.is_empty() {
            return Err(EvalError::NoAdapter);
        }
        let manifests = self.manifests(true).await;
        let mut listing = ModelListing {
            models: Vec::new(),
            servers: IndexMap::new(),
            unreachable: Vec::new(),
        };
        for (server, m) in self.servers.iter().zip(manifests) {
            match m.models {
                Ok(models) => {
                    listing.models.extend(models.iter().cloned());
                    // Two entries naming one URL (a duplicate in the config) merge.
                    let entry = listing.servers.entry(server.url.clone()).or_default();
                    entry.extend(models);
                    entry.sort();
                    entry.dedup();
                }
                Err(_) => {
                    if !listing.unreachable.contains(&server.url) {
                        listing.unreachable.push(server.url.clone());
                    }
                }
            }
        }
        listing.models.sort();
        listing.models.dedup();
        Ok(listing)
    }

    /// Servers whose manifest lists `model`, in priority order; refreshes every manifest when
    /// the cached ones do not list it.
    ///
    /// # Errors
    /// [`EvalError::NoAdapter`], or [`EvalError::ModelUnavailable`] naming unreachable servers.
    pub async fn locate(&self, model: &str) -> Result<Vec<Arc<Server>>, EvalError> {
        if self.servers.is_empty() {
            return Err(EvalError::NoAdapter);
        }
        let listing = |manifests: &[Manifest]| -> Vec<Arc<Server>> {
            self.servers
                .iter()
                .zip(manifests)
                .filter(|(_, m)| {
                    m.models
                        .as_ref()
                        .is_ok_and(|list| list.iter().any(|id| id == model))
                })
                .map(|(s, _)| Arc::clone(s))
                .collect()
        };
        let cached = listing(&self.manifests(false).await);
        if !cached.is_empty() {
            return Ok(cached);
        }
        let fresh = self.manifests(true).await;
        let found = listing(&fresh);
        if !found.is_empty() {
            return Ok(found);
        }
        let unreachable: Vec<&str> = self
            .servers
            .iter()
            .zip(&fresh)
            .filter(|(_, m)| m.models.is_err())
            .map(|(s, _)| s.url.as_str())
            .collect();
        let hint = if unreachable.is_empty() {
            " (no registered server lists it; see list_models)".to_owned()
        } else {
            format!(
                " (no reachable server lists it; unreachable: {})",
                unreachable.join(", ")
            )
        };
        Err(EvalError::ModelUnavailable {
            model: model.to_owned(),
            hint,
        })
    }

    /// A slot on a server that lists `model`, waiting for one to free up if needed.
    ///
    /// # Errors
    /// As [`Composite::locate`].
    pub async fn acquire(&self, model: &str) -> Result<Slot, EvalError> {
        let candidates = self.locate(model).await?;
        let mut waited = false;
        loop {
            // Registered before looking, so a release between the look and the wait is not lost.
            let notified = self.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let warm = candidates.iter().filter(|s| s.runs(model));
            let cold = candidates.iter().filter(|s| !s.runs(model));
            for server in warm.chain(cold) {
                if server.try_acquire(model) {
                    if waited {
                        debug!(server = %server.url, model, "Got a slot after waiting.");
                    }
                    return Ok(Slot {
                        server: Arc::clone(server),
                        released: Arc::clone(&self.released),
                    });
                }
            }
            if !waited {
                debug!(
                    model,
                    "Every server for the model is busy; waiting for a slot."
                );
                waited = true;
            }
            notified.await;
        }
    }

    /// Fetches every manifest once and logs the unreachable servers (start-up check).
    pub async fn probe(&self) {
        if let Ok(listing) = self.list_models().await {
            info!(
                models = listing.models.len(),
                unreachable = ?listing.unreachable,
                "Initial model discovery finished."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lm_studio_urls_get_the_version_path_once() {
        let s = Server::new(AdapterKind::LmStudio, "http://h:1234/", None, None, 1);
        assert_eq!(s.url(), "http://h:1234");
        assert_eq!(s.endpoint("models"), "http://h:1234/v1/models");
        let s = Server::new(AdapterKind::LmStudio, "http://h:1234/v1", None, None, 1);
        assert_eq!(s.endpoint("models"), "http://h:1234/v1/models");
        let s = Server::new(AdapterKind::Together, "https://x/v1", None, None, 1);
        assert_eq!(
            s.endpoint("chat/completions"),
            "https://x/v1/chat/completions"
        );
    }

    #[test]
    fn lm_studio_slots_refuse_a_second_model_while_busy() {
        let s = Server::new(AdapterKind::LmStudio, "http://h", None, None, 2);
        assert!(s.try_acquire("a"));
        assert!(!s.try_acquire("b"), "JIT-swap guard");
        assert!(s.try_acquire("a"));
        assert!(!s.try_acquire("a"), "capacity");
        s.release();
        s.release();
        assert!(s.try_acquire("b"), "idle server may swap");
    }

    #[test]
    fn hosted_slots_only_count() {
        let s = Server::new(AdapterKind::Together, "http://h", None, None, 2);
        assert!(s.try_acquire("a"));
        assert!(s.try_acquire("b"));
        assert!(!s.try_acquire("c"));
    }
}

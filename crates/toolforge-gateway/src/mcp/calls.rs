//! `tools/call`: where a call goes (the selector decides group calls), its execution by the
//! pool, and the rounds of a backend asking for input (MRTR) in both protocol eras; a call the
//! backend runs as a task is answered with its sealed ticket (`super::tasks`).

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use toolforge_agent::trace::decision::Decision;
use toolforge_mcp::CallContext;
use toolforge_select::ToolId;
use tracing::Instrument as _;

use crate::error::not_found;
use crate::mrtr::{self};
use crate::visible::Scope;
use toolforge_select::Call;
use toolforge_select::presentation::Resolved;

use super::parking::{Resuming, Round, Sealing};
use super::trail::{self, Trail};
use super::{
    CALL_TOOL, Gateway, PROMPT_META_KEY, SEARCH_TOOLS, SELECTION_META_KEY, START_WAIT_FOR_CALL,
    Shared, ToolMode, complete,
};

/// What follows a backend's `input_required`.
pub(super) enum NextRound {
    /// Answer the client with this (2026-07-28 clients).
    Relay(InputRequiredResult),
    /// Retry the backend with the client's answers and the backend's state.
    Retry {
        responses: rmcp::model::InputResponses,
        state: Option<String>,
    },
}

/// Why a call was not routed: its tool is held in quarantine (and this caller may be told so),
/// or no tool this caller may see has the name (or its sealed state does not open).
enum Unrouted {
    Quarantined(McpError),
    NotFound(McpError),
}

impl Unrouted {
    fn into_error(self) -> McpError {
        match self {
            Self::Quarantined(e) | Self::NotFound(e) => e,
        }
    }
}

/// Where a call goes, and the selector's reason.
struct Routed {
    id: ToolId,
    rule: &'static str,
    alternatives: Vec<String>,
}

impl Shared {
    /// Which server and tool a call reaches, and why: a group call is decided by the selector
    /// (DESIGN §2) with the prompt the client put in `_meta["toolforge/prompt"]` (rules 1 and 4
    /// abstain without one) and this session's earlier calls.
    fn route_tool(
        &self,
        scope: &Scope,
        name: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
        prompt: &str,
        history: &Mutex<Vec<ToolId>>,
    ) -> Option<Routed> {
        let presentation = self.presentation();
        match presentation.resolve(name)? {
            Resolved::Direct(id) => scope.allows(&id).then_some(Routed {
                id,
                rule: "single-candidate",
                alternatives: Vec::new(),
            }),
            Resolved::Group(group) => {
                // The members this request may see are the candidates; the selection decides.
                let mut candidates: Vec<ToolId> = group
                    .members
                    .iter()
                    .filter(|m| scope.allows(m))
                    .cloned()
                    .collect();
                if candidates.is_empty() {
                    return None;
                }
                // Members the policy lets this principal call; when it allows none, the call
                // is routed as before and refused, naming the policy, before it is sent.
                let callable: Vec<ToolId> = candidates
                    .iter()
                    .filter(|m| scope.permits_call(m, arguments))
                    .cloned()
                    .collect();
                if !callable.is_empty() {
                    candidates = callable;
                }
                let selection = self.selection();
                let session: Vec<ToolId> = history.lock().clone();
                let arguments = Value::Object(arguments.cloned().unwrap_or_default());
                let prompt_vector = (!prompt.is_empty()).then(|| self.embedder.embed_one(prompt));
                let decision = selection.route(&Call {
                    candidates: &candidates,
                    prompt,
                    arguments: &arguments,
                    session: &session,
                    prompt_vector: prompt_vector.as_deref(),
                })?;
                Some(Routed {
                    id: decision.chosen,
                    rule: decision.rule,
                    alternatives: decision.alternatives,
                })
            }
        }
    }
}

/// What a `tools/call` comes to before it is routed (`Gateway::search_mode_call`).
enum SearchModeCall {
    /// The call of an exposed tool.
    Exposed(CallToolRequestParams),
    /// Answered by the gateway itself (`search_tools`).
    Answered(CallToolResponse),
}

impl Gateway {
    pub(super) async fn serve_call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let req = match self.search_mode_call(req, &ctx)? {
            SearchModeCall::Exposed(req) => req,
            SearchModeCall::Answered(response) => return Ok(response),
        };
        // One await of a call: each await point would hold a call's future (about 10 KB) in
        // this future, and the whole of it is copied when rmcp boxes the handler's future.
        self.call_exposed(req, ctx).await
    }

    /// In search mode, what a `tools/call` comes to: `search_tools` answered here, `call_tool`
    /// unwrapped into the call of the tool it names, a pinned tool called as it is. Every
    /// call outside search mode is the exposed tool's.
    fn search_mode_call(
        &self,
        req: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<SearchModeCall, McpError> {
        let ToolMode::Search { pinned } = &self.shared.tool_mode else {
            return Ok(SearchModeCall::Exposed(req));
        };
        let args = req.arguments.clone().unwrap_or_default();
        match req.name.as_ref() {
            SEARCH_TOOLS => Ok(SearchModeCall::Answered(CallToolResponse::Complete(
                self.search_tools(&args, ctx)?,
            ))),
            CALL_TOOL => {
                let Some(name) = args.get("name").and_then(Value::as_str) else {
                    return Err(McpError::invalid_params(
                        "call_tool needs `name` (a tool name from search_tools) and `arguments`",
                        None,
                    ));
                };
                let arguments = match args.get("arguments") {
                    None | Some(Value::Null) => serde_json::Map::new(),
                    Some(Value::Object(m)) => m.clone(),
                    Some(_) => {
                        return Err(McpError::invalid_params(
                            "call_tool: `arguments` must be an object",
                            None,
                        ));
                    }
                };
                let mut inner = req;
                inner.name = name.to_owned().into();
                inner.arguments = Some(arguments);
                Ok(SearchModeCall::Exposed(inner))
            }
            name if pinned.iter().any(|p| p == name) => Ok(SearchModeCall::Exposed(req)),
            name => Err(not_found("tool", name)),
        }
    }

    /// Calls an exposed tool (by the name clients see): routed by the selector within what this
    /// request may see, executed by the pool, the decision added to the result's `_meta`. Every
    /// call, whatever its outcome, leaves one trace record (`super::trail`).
    pub(super) async fn call_exposed(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = std::time::Instant::now();
        let name = req.name.to_string();
        // Hashed now: the arguments as the client sent them, read in place.
        let arguments_hash = toolforge_agent::trace::object_arguments_hash(req.arguments.as_ref());
        let mut trail = Trail::default();
        let span = crate::spans::mcp_span(&ctx, &name);
        let outcome = self
            .call_traced(req, ctx, &mut trail)
            .instrument(span)
            .await;
        let step = self
            .steps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .saturating_add(1);
        let record = trail::record(
            self.session,
            step,
            &name,
            arguments_hash,
            started,
            trail,
            &outcome,
        );
        self.shared.trail().emit(record);
        outcome
    }

    async fn call_traced(
        &self,
        mut req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
        trail: &mut Trail,
    ) -> Result<CallToolResponse, McpError> {
        let name = req.name.to_string();
        // A retry of a call parked on this replica (its backend asked mid-call).
        let mut parked = None;
        let mut nonce = None;
        let span = toolforge_agent::spans::route();
        let routed = match req.request_state.take() {
            // A retry after `input_required`: the same server and tool, from the sealed state.
            Some(sealed) => {
                let resumed = span.in_scope(|| {
                    self.resumed(&ctx, &name, &sealed, &mut req, &mut parked, &mut nonce)
                });
                // Spent before anything is sent: a state replayed is refused, not run again.
                match resumed {
                    Ok(routed) if parked.is_none() => self
                        .shared
                        .spend_state(nonce.as_deref())
                        .await
                        .map(|()| routed),
                    other => other,
                }
                .map_err(Unrouted::NotFound)
            }
            None => {
                self.routed(&ctx, &name, &req)
                    .instrument(span.clone())
                    .await
            }
        };
        let chosen = routed.as_ref().ok().map(|(r, _)| (&r.id, r.rule));
        toolforge_agent::spans::record_route(&span, chosen);
        drop(span);
        // The scope the call was routed in also decides its admission.
        let (routed, scope) = match routed {
            Ok(r) => r,
            Err(e) => {
                trail.decision = Some(match e {
                    Unrouted::Quarantined(_) => Decision::Quarantined,
                    Unrouted::NotFound(_) => Decision::NotFound,
                });
                return Err(e.into_error());
            }
        };
        let id = routed.id.clone();
        trail.server = Some(id.server.clone());
        trail.tool = Some(id.name.clone());
        trail.rule = Some(routed.rule.to_owned());
        trail.alternatives.clone_from(&routed.alternatives);
        // Policy, then limits: a refused call never reaches the server.
        trail.principal = scope.principal.to_string();
        // A parked call's retry is not a new call: it was admitted when it was made.
        let admitted = match parked {
            Some(_) => Ok(()),
            None => scope.admit_call(&id, req.arguments.as_ref()).await,
        };
        if let Err(refusal) = admitted {
            trail.decision = Some(match &refusal {
                toolforge_agent::Refusal::Denied { policy, .. } => {
                    trail.policy = Some(policy.clone());
                    Decision::Deny {
                        policy: policy.clone(),
                    }
                }
                toolforge_agent::Refusal::Limited { retry_after_ms, .. } => Decision::Limited {
                    retry_after_ms: *retry_after_ms,
                },
            });
            return Ok(CallToolResponse::Complete(crate::visible::refused_result(
                &refusal,
            )));
        }
        trail.decision = Some(Decision::allow());
        req.name = id.name.clone().into();
        let call = CallContext {
            on_behalf: Some(self.shared.on_behalf(&ctx)),
            caller: Some(self.caller(&ctx)),
            progress: ctx.meta.get_progress_token(),
            cancel: Some(ctx.ct.clone()),
            follows_tasks: false,
        };
        let selection = json!({
            "server": id.server,
            "tool": id.name,
            "selection_rule": routed.rule,
            "alternatives": routed.alternatives,
        });
        let mut rounds = 0;
        let key = format!("tools/call:{name}");
        let principal = trail.principal.clone();
        let metrics = crate::metrics::of_request(ctx.extensions.get::<http::request::Parts>());
        loop {
            let started = std::time::Instant::now();
            let resuming = parked.take().map(|p: mrtr::ParkedState| Resuming {
                ticket: p.into(),
                responses: req.input_responses.take().unwrap_or_default(),
            });
            let sealing = Sealing {
                key: &key,
                id: &id,
                caller: &principal,
            };
            // Boxed: a round's future is most of a call's, and inline it would be copied with
            // every future above it (the handler's is moved whole into its task).
            let round =
                Box::pin(self.call_round(&ctx, req.clone(), call.clone(), resuming, &sealing));
            let called = match round.await? {
                Round::Called(called) => called,
                Round::Parked(asked) => {
                    trail.executed = true;
                    return Ok(CallToolResponse::InputRequired(asked));
                }
            };
            if let Some(m) = &metrics {
                // A call the backend runs as a task is a success so far.
                let ok = match &called {
                    Ok(o) => o.result.is_error != Some(true),
                    Err(f) => matches!(f.error, toolforge_mcp::CallError::TaskCreated { .. }),
                };
                m.tool_call(&id.server, &id.name, ok, started.elapsed());
            }
            let failure = match called {
                Ok(mut outcome) => {
                    trail.executed = true;
                    trail.attempts = outcome.attempts;
                    trail.retry_reason.clone_from(&outcome.retry_reason);
                    trail.guarded = std::mem::take(&mut outcome.guarded);
                    {
                        let mut history = self.history.lock();
                        history.push(id);
                        let excess = history.len().saturating_sub(100);
                        history.drain(..excess);
                    }
                    outcome
                        .result
                        .meta
                        .get_or_insert_with(Default::default)
                        .insert(SELECTION_META_KEY.to_owned(), selection);
                    return Ok(CallToolResponse::Complete(complete(outcome.result)));
                }
                Err(failure) => failure,
            };
            trail.attempts = failure.attempts;
            trail.executed = failure.attempts > 0;
            trail.retry_reason.clone_from(&failure.retry_reason);
            match &failure.error {
                toolforge_mcp::CallError::Quarantined { .. } => {
                    trail.decision = Some(Decision::Quarantined);
                }
                toolforge_mcp::CallError::Blocked { reason, .. } => {
                    trail.decision = Some(Decision::Blocked {
                        reason: reason.clone(),
                    });
                }
                _ => {}
            }
            match failure.error {
                toolforge_mcp::CallError::InputRequired { result, .. } => {
                    // Boxed: rare, and its future is most of this one's size inline.
                    let asked = Box::pin(self.input_required(
                        &ctx,
                        &key,
                        (&id.server, &id.name),
                        *result,
                        &mut rounds,
                    ));
                    match asked.await? {
                        NextRound::Relay(r) => return Ok(CallToolResponse::InputRequired(r)),
                        NextRound::Retry { responses, state } => {
                            req.input_responses = Some(responses);
                            req.request_state = state;
                        }
                    }
                }
                toolforge_mcp::CallError::TaskCreated { result, .. } => {
                    // The call runs on as a task: its ticket is the client's to follow.
                    let mut created = self.relayed_task(&id, &principal, *result);
                    created
                        .meta
                        .get_or_insert_with(Default::default)
                        .insert(SELECTION_META_KEY.to_owned(), selection);
                    return Ok(CallToolResponse::Task(created));
                }
                toolforge_mcp::CallError::Rpc(e) => return Err(e),
                toolforge_mcp::CallError::AuthorizationRequired {
                    server,
                    principal,
                    scope,
                } => {
                    trail.decision = Some(Decision::AuthorizationRequired);
                    let target = (server.as_str(), id.name.as_str());
                    return super::consent::needed(
                        self,
                        &ctx,
                        &key,
                        target,
                        &principal,
                        scope.as_deref(),
                    );
                }
                other => {
                    return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                        ContentBlock::text(format!("toolforge: {other}")),
                    ])));
                }
            }
        }
    }

    /// A backend's `input_required` for the client call `ctx` of `key` (method and exposed
    /// name): relayed sealed to a 2026-07-28 client, or asked of a handshake-era client on its
    /// own call's stream, giving the backend's retry inputs.
    pub(super) async fn input_required(
        &self,
        ctx: &RequestContext<RoleServer>,
        key: &str,
        target: (&str, &str),
        result: InputRequiredResult,
        rounds: &mut usize,
    ) -> Result<NextRound, McpError> {
        let (server, name) = target;
        if mrtr::client_is_modern(ctx) {
            let envelope = mrtr::Envelope {
                server: server.to_owned(),
                tool: name.to_owned(),
                backend_state: result.request_state.clone(),
                caller: Some(self.scope(ctx).principal.to_string()),
                nonce: Some(uuid::Uuid::new_v4().simple().to_string()),
                parked: None,
            };
            let sealed = self.shared.seal().seal(key, &envelope);
            return Ok(NextRound::Relay(mrtr::relayed(result, sealed)));
        }
        *rounds += 1;
        if *rounds > mrtr::MAX_ROUNDS {
            return Err(McpError::internal_error(
                format!(
                    "server \"{server}\" still asked for input after {} rounds",
                    mrtr::MAX_ROUNDS
                ),
                None,
            ));
        }
        let requests = result.input_requests.unwrap_or_default();
        Ok(NextRound::Retry {
            responses: mrtr::ask_client(ctx, requests).await?,
            state: result.request_state,
        })
    }

    /// Opens a retry's sealed state for `key`, checking it names `server` and spending it (a
    /// second retry with it is refused); the backend's state.
    pub(super) async fn reopened(
        &self,
        ctx: &RequestContext<RoleServer>,
        key: &str,
        sealed: &str,
        server: &str,
    ) -> Result<Option<String>, McpError> {
        let envelope = self.shared.seal().open(key, sealed)?;
        envelope.check_caller(&self.scope(ctx).principal.to_string())?;
        if envelope.server != server || envelope.parked.is_some() {
            return Err(McpError::invalid_params(
                "requestState belongs to another server's request",
                None,
            ));
        }
        self.shared.spend_state(envelope.nonce.as_deref()).await?;
        Ok(envelope.backend_state)
    }

    /// Where a new call goes, and the scope it was routed in: the selector's decision within
    /// what this request may see, waiting for servers still starting when no ready one offers
    /// the name.
    async fn routed(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        req: &CallToolRequestParams,
    ) -> Result<(Routed, Scope), Unrouted> {
        let prompt = ctx
            .meta
            .get(PROMPT_META_KEY)
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The scope follows the catalog: taken again after each wait for a new one.
        let route = || {
            let scope = self.scope(ctx);
            let route =
                self.shared
                    .route_tool(&scope, name, req.arguments.as_ref(), prompt, &self.history);
            (route, scope)
        };
        let (mut routed, mut scope) = route();
        if routed.is_none() && self.shared.pool.starting() {
            // The tool may belong to a server that is still starting.
            self.shared.pool.settled(START_WAIT_FOR_CALL).await;
            (routed, scope) = route();
        }
        if routed.is_none() && self.shared.pool.refresh_for_unknown_tool(name).await {
            // A server added the tool without `list_changed`: route over its new list (the
            // presentation follows the pool's catalog at once; sessions hear list_changed).
            (routed, scope) = route();
        }
        if routed.is_none()
            && let Some(e) = self.shared.pool.quarantine_error(name)
        {
            // Held back until approved: say so (and how to approve), unless the request's
            // visibility is narrowed (then the tool stays as unknown as any hidden one).
            if scope.unrestricted() {
                return Err(Unrouted::Quarantined(McpError::invalid_params(
                    e.to_string(),
                    None,
                )));
            }
        }
        match routed {
            Some(routed) => Ok((routed, scope)),
            None => Err(Unrouted::NotFound(not_found("tool", name))),
        }
    }

    /// Where a retry after `input_required` goes: the server and tool sealed in its state
    /// (still visible to this request, and made by this caller), with the backend's own state
    /// restored, or the call parked for it (`parked`).
    fn resumed(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        sealed: &str,
        req: &mut CallToolRequestParams,
        parked: &mut Option<mrtr::ParkedState>,
        nonce: &mut Option<String>,
    ) -> Result<(Routed, Scope), McpError> {
        let envelope = self
            .shared
            .seal()
            .open(&format!("tools/call:{name}"), sealed)?;
        let id = ToolId::new(&envelope.server, &envelope.tool);
        let scope = self.scope(ctx);
        if !scope.allows(&id) {
            return Err(not_found("tool", name));
        }
        envelope.check_caller(&scope.principal.to_string())?;
        *parked = envelope.parked;
        *nonce = envelope.nonce;
        req.request_state = envelope.backend_state;
        // The answer to a consent request is the gateway's, not the backend's.
        if let Some(responses) = req.input_responses.as_mut() {
            responses.remove(super::consent::CONSENT_INPUT);
            if responses.is_empty() {
                req.input_responses = None;
            }
        }
        Ok((
            Routed {
                id,
                rule: "resumed",
                alternatives: Vec::new(),
            },
            scope,
        ))
    }
}

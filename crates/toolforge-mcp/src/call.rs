//! The call path: a `tools/call` with the retry policy (`toolforge-retry`) and at-most-once
//! execution, and the single-attempt requests (resources, prompts, completion, subscriptions).
//!
//! A call that may have reached the backend is sent again only when the tool is idempotent
//! (its `readOnlyHint` or `idempotentHint`, or `retryable` in `mcp.servers.json`); what
//! provably never left (the connection was gone before the send, the connection was refused)
//! is retried whatever the tool. When a backend dies mid-call the caller hears at once, and the
//! error says why it was not sent again. One deadline (the server's `timeout`) bounds every
//! attempt and wait of a call together.

use std::future::Future;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientJsonRpcMessage, ClientRequest, CreateTaskResult, InputRequiredResult, ProgressToken,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestHandle, ServiceError};
use rmcp::transport::streamable_http_client::{DirectOutcome, DirectRequests, StreamableHttpError};
use rmcp::{ErrorData as McpError, Peer, RoleClient};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use toolforge_retry::{Attempted, Decision, Failure, GiveUp, Jitter, RetryPolicy, SystemJitter};
use tracing::Instrument as _;

use crate::relay::{CallGuard, Caller};
use crate::trace_context;
use crate::upstream::{ServerState, Upstream};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown server \"{0}\"")]
    UnknownServer(String),
    #[error("server \"{server}\" is {state:?}{}", last_error.as_deref().map(|e| format!(": {e}")).unwrap_or_default())]
    Unavailable {
        server: String,
        state: ServerState,
        last_error: Option<String>,
    },
    #[error("server \"{server}\" did not answer within {after:?}")]
    Timeout {
        server: String,
        after: std::time::Duration,
    },
    /// A JSON-RPC error from the server (terminal).
    #[error("{0}")]
    Rpc(McpError),
    /// The connection or the transport failed; `not_retried` says why the call was not sent
    /// again, once the retry policy gave up.
    #[error("server \"{server}\": {message}{}", not_retried.as_ref().map(|r| format!(" (not retried: {r})")).unwrap_or_default())]
    Transport {
        server: String,
        message: String,
        not_retried: Option<GiveUp>,
    },
    #[error("the call was cancelled")]
    Cancelled,
    /// The tool is held back until approved (`crate::pins`).
    #[error(
        "tool \"{server}/{tool}\" is quarantined: {reason}. Review the change with `toolforge tools diff {server}/{tool}` and accept it with `toolforge tools approve {server}/{tool} FINGERPRINT`, naming the fingerprint the diff shows"
    )]
    Quarantined {
        server: String,
        tool: String,
        reason: String,
    },
    /// A content guard refused the call or withheld its answer (`crate::guard`); `tool` is the
    /// tool, or the resource URI or prompt name a withheld read or prompt asked for.
    #[error("the call to \"{server}/{tool}\" was blocked: {reason}")]
    Blocked {
        server: String,
        tool: String,
        reason: String,
    },
    /// The server (on protocol 2026-07-28) needs input from the caller's user before it can go
    /// on: a gateway relays it to its client; callers that cannot ask anyone fail with this.
    #[error(
        "server \"{server}\" needs input from the user (sampling, elicitation or roots) to go on, which this caller cannot give"
    )]
    InputRequired {
        server: String,
        result: Box<InputRequiredResult>,
    },
    /// The server (Tasks extension, SEP-2663) runs the call as a task and answered with its
    /// handle: a gateway relays it to a client that declared the extension; the result is read
    /// later with `tasks/get`. The call ran (or runs): it is never sent again.
    #[error(
        "server \"{server}\" runs the call as a task (Tasks extension), which this caller cannot follow"
    )]
    TaskCreated {
        server: String,
        result: Box<CreateTaskResult>,
    },
    /// The server needs this principal's authorization first (no grant yet, one that was
    /// revoked, or one without the scope it asks for): the gateway points the caller at its
    /// consent page.
    #[error("server \"{server}\" needs {principal}'s authorization first{}", scope.as_deref().map(|s| format!(" (scope {s})")).unwrap_or_default())]
    AuthorizationRequired {
        server: String,
        principal: String,
        /// The scope the server asked for (step-up), when it named one.
        scope: Option<String>,
    },
    /// The server's credentials could not be had (a token endpoint refused or failed).
    #[error("server \"{server}\": {reason}")]
    CredentialsFailed { server: String, reason: String },
}

impl CallError {
    /// The error as a JSON-RPC error for a client.
    #[must_use]
    pub fn to_mcp(&self) -> McpError {
        match self {
            Self::Rpc(e) => e.clone(),
            Self::UnknownServer(_) => McpError::invalid_params(self.to_string(), None),
            Self::Transport {
                not_retried: Some(why),
                ..
            } => McpError::internal_error(
                self.to_string(),
                Some(serde_json::json!({"notRetried": why.to_string()})),
            ),
            _ => McpError::internal_error(self.to_string(), None),
        }
    }

    fn with_not_retried(self, why: GiveUp) -> Self {
        match self {
            Self::Transport {
                server, message, ..
            } => Self::Transport {
                server,
                message,
                not_retried: Some(why),
            },
            other => other,
        }
    }
}

/// A tool call's result and how it was obtained (traces record both).
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub result: CallToolResult,
    pub attempts: u32,
    pub retry_reason: Option<String>,
    /// What the content guards changed (`redacted from the result: github_token`).
    pub guarded: Vec<String>,
}

/// A failed call, with the attempts made.
#[derive(Debug)]
pub struct CallFailure {
    pub error: CallError,
    pub attempts: u32,
    /// Why the call was retried (the failure before the last attempt), when it was.
    pub retry_reason: Option<String>,
    /// Why the last failure was not retried, when the retry policy decided it.
    pub not_retried: Option<GiveUp>,
}

pub use crate::on_behalf::OnBehalf;

/// Who is calling, for relaying what the backend sends back during the call.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// Whom the call is for: a server with per-principal `"auth"` is reached over this
    /// principal's own connection, with its own token.
    pub on_behalf: Option<OnBehalf>,
    /// The client call this call serves (sampling, elicitation, roots and logging go there).
    pub caller: Option<Caller>,
    /// The caller's progress token.
    pub progress: Option<ProgressToken>,
    /// Cancelled when the caller goes away; the backend then gets `notifications/cancelled`.
    pub cancel: Option<CancellationToken>,
    /// The caller follows tasks itself (the agent, with [`crate::Pool::follow_task`]): on a
    /// 2026-07-28 connection the call declares the Tasks extension, so the server may run it
    /// as a task (and a tool that needs one is not refused). A gateway's calls declare what
    /// their client declared instead.
    pub follows_tasks: bool,
}

/// A failed attempt: the error for the caller, and what it means to the retry policy (none:
/// final whatever the policy says, e.g. cancelled or past the deadline).
type AttemptError = (CallError, Option<Failure>);

/// What [`with_retries`] needs to decide.
pub(crate) struct Retrying<'a> {
    pub policy: RetryPolicy,
    pub idempotent: bool,
    pub deadline: Instant,
    pub cancel: &'a CancellationToken,
}

/// Runs `attempt` until it succeeds or the policy gives up, waiting between attempts (the
/// wait ends early when the caller cancels). Returns the value, the attempts made and why the
/// call was retried.
pub(crate) async fn with_retries<T, F, Fut>(
    retrying: Retrying<'_>,
    jitter: &mut (dyn Jitter + Send),
    server: &str,
    mut attempt: F,
) -> Result<(T, u32, Option<String>), CallFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let mut retry_reason: Option<String> = None;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (error, failure) = match attempt().await {
            Ok(value) => return Ok((value, attempts, retry_reason)),
            Err(e) => e,
        };
        let Some(failure) = failure else {
            return Err(CallFailure {
                error,
                attempts,
                retry_reason,
                not_retried: None,
            });
        };
        let call = Attempted {
            attempts,
            idempotent: retrying.idempotent,
            now: Instant::now().into_std(),
            deadline: retrying.deadline.into_std(),
        };
        match retrying.policy.decide(failure, call, jitter) {
            Decision::GiveUp(why) => {
                tracing::debug!(server, attempts, "not retried ({why}): {error}");
                return Err(CallFailure {
                    error: error.with_not_retried(why),
                    attempts,
                    retry_reason,
                    not_retried: Some(why),
                });
            }
            Decision::Retry { after } => {
                tracing::info!(
                    server,
                    attempts,
                    "transient failure, retrying in {after:?}: {error}"
                );
                retry_reason = Some(error.to_string());
                tokio::select! {
                    () = tokio::time::sleep(after) => {}
                    () = retrying.cancel.cancelled() => {
                        return Err(CallFailure {
                            error: CallError::Cancelled,
                            attempts,
                            retry_reason,
                            not_retried: None,
                        });
                    }
                }
            }
        }
    }
}

/// Calls a tool on `up` with the retry policy, within the server's timeout.
pub(crate) async fn call_tool(
    up: &Upstream,
    policy: RetryPolicy,
    params: CallToolRequestParams,
    ctx: CallContext,
) -> Result<CallOutcome, CallFailure> {
    let deadline = Instant::now() + up.cfg.call_timeout;
    let cancel = ctx.cancel.clone().unwrap_or_default();
    let retrying = Retrying {
        policy,
        idempotent: up.retryable(&params.name),
        deadline,
        cancel: &cancel,
    };
    let (params, ctx, stop) = (&params, &ctx, &cancel);
    let mut attempt = 0;
    let (result, attempts, retry_reason) =
        with_retries(retrying, &mut SystemJitter, &up.cfg.name, move || {
            attempt += 1;
            traced_attempt(up, params, ctx, (deadline, stop), attempt)
        })
        .await?;
    Ok(CallOutcome {
        result,
        attempts,
        retry_reason,
        guarded: Vec::new(),
    })
}

/// One attempt in its `backend call` span, whose `traceparent` the request's `_meta` carries
/// (`crate::trace_context`); just the attempt when no trace is exported.
async fn traced_attempt(
    up: &Upstream,
    params: &CallToolRequestParams,
    ctx: &CallContext,
    (deadline, cancel): (Instant, &CancellationToken),
    attempt: u32,
) -> Result<CallToolResult, AttemptError> {
    let span = trace_context::backend_call_span(&up.cfg.name, &params.name, attempt);
    // Boxed, and one future either way: the untraced call's future does not grow.
    let traced: Option<Box<CallToolRequestParams>> = (!span.is_disabled()).then(|| {
        let mut with_context = Box::new(params.clone());
        trace_context::inject(&span, &mut with_context.meta);
        with_context
    });
    let params = traced.as_deref().unwrap_or(params);
    let result = attempt_call(up, params, ctx, deadline, cancel)
        .instrument(span.clone())
        .await;
    if !span.is_disabled() {
        trace_context::record_outcome(&span, outcome(&result));
    }
    result
}

/// A backend call's outcome, for its span: `ok`, `tool_error` (an answer with `isError`), or
/// what went wrong.
fn outcome(result: &Result<CallToolResult, AttemptError>) -> &'static str {
    use CallError as E;
    match result {
        Ok(r) if r.is_error == Some(true) => "tool_error",
        Ok(_) => "ok",
        Err((e, _)) => match e {
            E::InputRequired { .. } => "input_required",
            E::TaskCreated { .. } => "task_created",
            E::Timeout { .. } => "timeout",
            E::Cancelled => "cancelled",
            E::Rpc(_) => "rpc_error",
            E::Transport { .. } => "transport_error",
            E::Unavailable { .. } | E::UnknownServer(_) => "unavailable",
            E::Quarantined { .. } | E::Blocked { .. } => "refused",
            E::AuthorizationRequired { .. } => "authorization_required",
            E::CredentialsFailed { .. } => "credentials_failed",
        },
    }
}

/// One `tools/call`, from waiting for a ready connection to the answer.
async fn attempt_call(
    up: &Upstream,
    params: &CallToolRequestParams,
    ctx: &CallContext,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<CallToolResult, AttemptError> {
    let server = up.cfg.name.as_str();
    let peer = ready_peer(up, deadline).await.map_err(|e| (e, None))?;
    // Without a progress token to map, the call needs nothing of the peer until the server
    // sends something besides its answer.
    if ctx.progress.is_none()
        && let Some(direct) = &up.direct
        && let Some(result) =
            direct_attempt(up, &peer, direct, params, ctx, (deadline, cancel)).await
    {
        return result;
    }
    let mut guard = up.relay.register(ctx.caller.as_ref());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
    let sent = tokio::time::timeout_at(
        deadline,
        peer.send_request_with_option(request, call_options(&peer, ctx)),
    )
    .await;
    let handle = match sent {
        Err(_) => return Err(timed_out(up)),
        // The connection's task was gone: the request never left this process.
        Ok(Err(ServiceError::TransportClosed)) => {
            let error = transport_error(server, "the connection was closed before the send");
            return Err((error, Some(Failure::NotSent)));
        }
        Ok(Err(e)) => return Err((upstream_error(up, e), Some(Failure::Rejected))),
        Ok(Ok(handle)) => handle,
    };
    guard.sent(handle.id.clone());
    if let (Some(caller), Some(original)) = (&ctx.caller, &ctx.progress) {
        up.relay
            .map_progress(&mut guard, caller, &handle.progress_token, original.clone());
    }
    let mut cancel_guard = CancelOnDrop {
        peer: Some(peer.clone()),
        id: handle.id.clone(),
    };
    let answer = await_answer(up, handle, (deadline, cancel)).await?;
    cancel_guard.peer = None;
    drop(guard);
    call_result(up, answer)
}

/// One `tools/call` posted on the server's HTTP session from this task
/// ([`DirectRequests`]), its answer read from the POST's response; none when it was not sent
/// (no session to post on, as many such calls in flight as the transport allows, or the session
/// had expired), for the peer to send. When the server sends something before its answer, the
/// peer takes the request and the rest of the stream, as if it had sent it.
async fn direct_attempt(
    up: &Upstream,
    peer: &Peer<RoleClient>,
    direct: &DirectRequests<crate::auth::bearer::BackendHttp>,
    params: &CallToolRequestParams,
    ctx: &CallContext,
    (deadline, cancel): (Instant, &CancellationToken),
) -> Option<Result<CallToolResult, AttemptError>> {
    let server = up.cfg.name.as_str();
    let id = peer.next_request_id();
    let guard = up.relay.register(ctx.caller.as_ref());
    guard.sent(id.clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
    let mut cancel_guard = CancelOnDrop {
        peer: Some(peer.clone()),
        id: id.clone(),
    };
    let sent = tokio::select! {
        r = tokio::time::timeout_at(deadline, direct.send(ClientJsonRpcMessage::request(request, id.clone()))) => r,
        () = cancel.cancelled() => return Some(Err((CallError::Cancelled, None))),
    };
    let Ok(outcome) = sent else {
        return Some(Err(timed_out(up)));
    };
    let answer = match outcome {
        DirectOutcome::NotSent => {
            cancel_guard.peer = None;
            return None;
        }
        DirectOutcome::Failed(e) => {
            cancel_guard.peer = None;
            if let Some((_, challenge)) = crate::auth::refusal::auth_refusal(&e) {
                return Some(Err((authorization_required(up, &challenge), None)));
            }
            if let Some(reason) = crate::auth::refusal::credentials_failure(&e) {
                let error = CallError::CredentialsFailed {
                    server: server.to_owned(),
                    reason,
                };
                return Some(Err((error, None)));
            }
            let failure = classify_transport(&e);
            return Some(Err((transport_error(server, e.to_string()), Some(failure))));
        }
        DirectOutcome::Answered(message) => answer_of(message),
        // Boxed, as this branch is rare: inline, its futures would make this function's, and
        // every one that awaits it, several kilobytes larger, copied with each of their moves.
        DirectOutcome::Streaming(stream) => {
            let Ok(handle) =
                Box::pin(peer.expect_response(id, PeerRequestOptions::no_options())).await
            else {
                let error =
                    transport_error(server, "the connection closed before the server answered");
                return Some(Err((error, Some(Failure::Network))));
            };
            // Read until the answer, or until this call gives up on it.
            let _reading = stream.start();
            match Box::pin(await_answer(up, handle, (deadline, cancel))).await {
                Ok(answer) => answer,
                Err(e) => return Some(Err(e)),
            }
        }
    };
    cancel_guard.peer = None;
    drop(guard);
    Some(call_result(up, answer))
}

/// Waits for the peer to hand over the answer of `handle`'s request, until `deadline` or the
/// caller's cancellation.
async fn await_answer(
    up: &Upstream,
    handle: RequestHandle<RoleClient>,
    (deadline, cancel): (Instant, &CancellationToken),
) -> Result<Result<ServerResult, ServiceError>, AttemptError> {
    tokio::select! {
        r = tokio::time::timeout_at(deadline, handle.await_response()) => r.map_err(|_| timed_out(up)),
        () = cancel.cancelled() => Err((CallError::Cancelled, None)),
    }
}

/// The answer a server posted back, as the peer hands answers over.
fn answer_of(message: ServerJsonRpcMessage) -> Result<ServerResult, ServiceError> {
    match message {
        ServerJsonRpcMessage::Response(response) => Ok(response.result),
        ServerJsonRpcMessage::Error(error) => Err(ServiceError::McpError(error.error)),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

fn timed_out(up: &Upstream) -> AttemptError {
    let error = CallError::Timeout {
        server: up.cfg.name.clone(),
        after: up.cfg.call_timeout,
    };
    (error, None)
}

/// A `tools/call`'s answer as the call's result, or the error and what it means to the retry
/// policy.
fn call_result(
    up: &Upstream,
    answer: Result<ServerResult, ServiceError>,
) -> Result<CallToolResult, AttemptError> {
    let server = up.cfg.name.as_str();
    match answer {
        Ok(ServerResult::CallToolResult(result)) => Ok(result),
        Ok(ServerResult::InputRequiredResult(result)) => {
            let error = CallError::InputRequired {
                server: server.to_owned(),
                result: Box::new(result),
            };
            Err((error, None))
        }
        Ok(ServerResult::CreateTaskResult(result)) => {
            let error = CallError::TaskCreated {
                server: server.to_owned(),
                result: Box::new(result),
            };
            Err((error, None))
        }
        Ok(_) => Err((
            service_error(server, ServiceError::UnexpectedResponse),
            Some(Failure::Rejected),
        )),
        Err(e) => Err(failed_answer(up, e)),
    }
}

/// A failed answer: the error, and what it means to the retry policy (an auth refusal is
/// final: the server ran nothing, and the same credentials would be refused again).
fn failed_answer(up: &Upstream, e: ServiceError) -> AttemptError {
    if let ServiceError::TransportSend(t) = &e
        && (crate::auth::refusal::auth_refusal(t.error.as_ref()).is_some()
            || crate::auth::refusal::credentials_failure(t.error.as_ref()).is_some())
    {
        return (upstream_error(up, e), None);
    }
    let failure = classify(&e);
    (service_error(&up.cfg.name, e), Some(failure))
}

/// A call's request options: on a 2026-07-28 connection, where every request says what its
/// client can do, the calling client's capabilities replace the pool's own (which offer
/// everything), so the server asks only for input this client can give.
pub(crate) fn caller_options(
    peer: &Peer<RoleClient>,
    caller: Option<&Caller>,
) -> PeerRequestOptions {
    let mut options = PeerRequestOptions::no_options();
    let modern = peer
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    if let (true, Some(capabilities)) = (modern, caller.and_then(|c| c.capabilities.clone())) {
        let mut meta = rmcp::model::RequestMetaObject::default();
        meta.set_client_capabilities(capabilities);
        options.meta = Some(meta);
    }
    options
}

/// A `tools/call`'s request options: the caller's ([`caller_options`]), declaring the Tasks
/// extension too when the caller follows tasks.
fn call_options(peer: &Peer<RoleClient>, ctx: &CallContext) -> PeerRequestOptions {
    let mut options = caller_options(peer, ctx.caller.as_ref());
    let modern = peer
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    if ctx.follows_tasks && modern {
        let meta = options.meta.get_or_insert_with(Default::default);
        let mut capabilities = meta
            .client_capabilities()
            .unwrap_or_else(crate::relay::offered_capabilities);
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .entry(rmcp::model::TASKS_EXTENSION_ID.to_owned())
            .or_default();
        meta.set_client_capabilities(capabilities);
    }
    options
}

fn transport_error(server: &str, message: impl Into<String>) -> CallError {
    CallError::Transport {
        server: server.to_owned(),
        message: message.into(),
        not_retried: None,
    }
}

/// A failed request on `up` as the caller's error: an auth refusal is a consent request.
fn upstream_error(up: &Upstream, e: ServiceError) -> CallError {
    if let ServiceError::TransportSend(t) = &e {
        if let Some((_, challenge)) = crate::auth::refusal::auth_refusal(t.error.as_ref()) {
            return authorization_required(up, &challenge);
        }
        if let Some(reason) = crate::auth::refusal::credentials_failure(t.error.as_ref()) {
            return CallError::CredentialsFailed {
                server: up.cfg.name.clone(),
                reason,
            };
        }
    }
    service_error(&up.cfg.name, e)
}

/// A failed request as the caller's error.
fn service_error(server: &str, e: ServiceError) -> CallError {
    match e {
        ServiceError::McpError(e) => CallError::Rpc(e),
        ServiceError::TransportClosed => {
            transport_error(server, "the connection closed before the server answered")
        }
        ServiceError::TransportSend(e) => transport_error(server, e.error.to_string()),
        other => transport_error(server, other.to_string()),
    }
}

/// What a failed request means to the retry policy.
pub(crate) fn classify(e: &ServiceError) -> Failure {
    match e {
        // The connection ended with the request in flight: it may have run.
        ServiceError::TransportClosed => Failure::Network,
        ServiceError::Timeout { .. } => Failure::Timeout,
        ServiceError::TransportSend(e) => classify_transport(e.error.as_ref()),
        _ => Failure::Rejected,
    }
}

/// A transport's send error. Only a refused connection proves the request never left.
fn classify_transport(e: &(dyn std::error::Error + Send + Sync + 'static)) -> Failure {
    if let Some(sse) = e.downcast_ref::<crate::legacy_sse::LegacySseError>() {
        return classify_legacy_sse(sse);
    }
    let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() else {
        return Failure::Network; // a stdio write that failed part-way may have been read
    };
    match http {
        StreamableHttpError::Client(e) if e.is_connect() => Failure::NotSent,
        StreamableHttpError::HttpStatus(s) => Failure::Status {
            status: s.status,
            retry_after: s.retry_after.as_deref().and_then(retry_after_seconds),
        },
        StreamableHttpError::UnexpectedServerResponse(text) => {
            status_of(text).map_or(Failure::Network, |status| Failure::Status {
                status,
                retry_after: None,
            })
        }
        StreamableHttpError::Deserialize(_) | StreamableHttpError::UnexpectedContentType(_) => {
            Failure::Rejected
        }
        _ => Failure::Network,
    }
}

/// A legacy HTTP+SSE POST's failure: only what provably never reached the server (a refused
/// connection, a closed one, a 404 for a session the server no longer knows) may be sent again
/// whatever the tool.
fn classify_legacy_sse(e: &crate::legacy_sse::LegacySseError) -> Failure {
    use crate::legacy_sse::LegacySseError as E;
    match e {
        _ if e.never_sent() => Failure::NotSent,
        E::Status {
            status,
            retry_after,
            ..
        } => Failure::Status {
            status: *status,
            retry_after: retry_after.as_deref().and_then(retry_after_seconds),
        },
        E::Encode(_) => Failure::Rejected,
        _ => Failure::Network,
    }
}

/// The status of rmcp's `HTTP 400 Bad Request: body` message.
fn status_of(text: &str) -> Option<u16> {
    let code = text.strip_prefix("HTTP ")?.get(..3)?;
    code.parse().ok().filter(|c| (100..=599).contains(c))
}

/// `Retry-After` in seconds (HTTP dates are not honoured: the call is then not throttled-retried).
fn retry_after_seconds(value: &str) -> Option<std::time::Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    std::time::Duration::try_from_secs_f64(secs).ok()
}

/// Sends `notifications/cancelled` for a request abandoned before its answer (the caller went
/// away, or the deadline passed), unless disarmed by clearing `peer`.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let param = CancelledNotificationParam::new(
                Some(self.id.clone()),
                Some("the caller went away".into()),
            );
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = peer.notify_cancelled(param).await;
                });
            }
        }
    }
}

/// Waits (until `deadline`) for `up` to be ready and returns its peer.
pub(crate) async fn ready_peer(
    up: &Upstream,
    deadline: Instant,
) -> Result<Peer<RoleClient>, CallError> {
    let mut rx = up.changed.subscribe();
    loop {
        if let Some(peer) = up.peer.read().clone()
            && !peer.is_transport_closed()
        {
            return Ok(peer);
        }
        if up.state() == ServerState::Failed
            && let Some(challenge) = up.refused.lock().clone()
        {
            return Err(authorization_required(up, &challenge));
        }
        if up.state() == ServerState::Disabled
            || tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
        {
            return Err(unavailable(up));
        }
    }
}

/// The consent error for a refusal with `challenge` on `up` (a principal's own connection,
/// or the shared one).
pub(crate) fn authorization_required(up: &Upstream, challenge: &str) -> CallError {
    let scope = crate::auth::param(challenge, "error")
        .filter(|e| e == "insufficient_scope")
        .and_then(|_| crate::auth::param(challenge, "scope"));
    CallError::AuthorizationRequired {
        server: up.cfg.name.clone(),
        principal: up.principal.clone().unwrap_or_default(),
        scope,
    }
}

fn unavailable(up: &Upstream) -> CallError {
    let s = up.status.read();
    CallError::Unavailable {
        server: up.cfg.name.clone(),
        state: s.state,
        last_error: s.last_error.clone(),
    }
}

/// One request without retries (`resources/read`, `prompts/get`, ...), within the server's
/// timeout.
pub(crate) async fn once<T, F, Fut>(
    up: &Upstream,
    caller: Option<&Caller>,
    f: F,
) -> Result<T, CallError>
where
    F: FnOnce(Peer<RoleClient>) -> Fut,
    Fut: Future<Output = Result<T, ServiceError>>,
{
    let deadline = Instant::now() + up.cfg.call_timeout;
    let peer = ready_peer(up, deadline).await?;
    let _guard: CallGuard = up.relay.register(caller);
    match tokio::time::timeout_at(deadline, f(peer)).await {
        Err(_) => Err(CallError::Timeout {
            server: up.cfg.name.clone(),
            after: up.cfg.call_timeout,
        }),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(upstream_error(up, e)),
    }
}

#[cfg(test)]
mod tests;

//! The agent's HTTP API, beside `/mcp`: `POST /chat`, `POST /chat/stream` (SSE) and
//! `POST /agent/run`.
//!
//! Every run goes in its own task, so a client that goes away cancels the run cleanly (its
//! in-flight tool calls get `notifications/cancelled`) instead of dropping it half-traced.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolforge_agent::answer::AgentAnswer;
use toolforge_agent::halt::HaltReason;
use toolforge_agent::{Agent, RunEvent, RunRequest, RunResult, Visibility};
use toolforge_llm::{Content, Message, Role};

use crate::error::ApiError;
use crate::visible::{RequestChannels, VisibilityConfig};

/// What the agent's routes share.
#[derive(Debug, Clone)]
struct ChatState {
    agent: Arc<Agent>,
    visibility: Arc<VisibilityConfig>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl ChatState {
    /// The request's visibility: the operator's channels narrowed by its query and headers.
    fn visibility(
        &self,
        uri: &axum::http::Uri,
        headers: &axum::http::HeaderMap,
        principal: &toolforge_policy::Principal,
    ) -> Visibility {
        let config = self.visibility.clone();
        let request = RequestChannels {
            principal: principal.clone(),
            ..RequestChannels::from_http(uri, headers)
        };
        Arc::new(move |catalog: &toolforge_select::Catalog| {
            config.resolve(catalog, &request).catalog(catalog)
        })
    }
}

/// Largest `message` (and each earlier turn) accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Most earlier turns a request may carry.
pub const MAX_TURNS: usize = 100;
/// Largest total of the earlier turns' text, in bytes.
pub const MAX_HISTORY_BYTES: usize = 256 * 1024;
/// Longest `session_id`, in characters (letters, digits, `-`, `_`, `.`, `:`).
pub const MAX_SESSION_ID_CHARS: usize = 128;

/// One earlier turn of the conversation.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// `user` or `assistant`.
    #[schemars(extend("enum" = ["user", "assistant"]))]
    pub role: String,
    pub content: String,
}

/// The body of `POST /chat` and `POST /chat/stream`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    /// What the user asks for.
    #[schemars(length(min = 1))]
    pub message: String,
    /// Plan without executing: every stage decides, no tool is called.
    #[serde(default)]
    pub dry_run: bool,
    /// Continues a session (session recency for the selector); a new one is made if absent.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Earlier turns, oldest first: the only conversation context a request carries.
    #[serde(default)]
    pub messages: Vec<Turn>,
}

/// The body of `POST /agent/run`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRunRequest {
    /// What the agent should do.
    #[schemars(length(min = 1))]
    pub task: String,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub session_id: Option<String>,
}

/// A JSON body whose rejections speak the API's error shape: 413 past the body limit, 415 for
/// a declared non-JSON type, 400 for text that is not JSON, 422 for JSON of the wrong shape.
struct Body<T>(T);

impl<S, T> FromRequest<S> for Body<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            });
        if let Some(kind) = declared
            && kind != "application/json"
            && !kind.ends_with("+json")
        {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "the body is declared as {kind}; send JSON with `Content-Type: application/json`"
                ),
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rejection| {
                let status = rejection.status();
                let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    "the request body is larger than the server accepts (--max-body-bytes)"
                        .to_owned()
                } else {
                    format!(
                        "the request body could not be read: {}",
                        rejection.body_text()
                    )
                };
                ApiError::new(status, message)
            })?;
        serde_json::from_slice::<T>(&bytes).map(Self).map_err(|e| {
            use serde_json::error::Category;
            match e.classify() {
                Category::Data => ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("invalid request body: {e}"),
                ),
                Category::Syntax | Category::Eof | Category::Io => ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("invalid request body: not valid JSON ({e})"),
                ),
            }
        })
    }
}

/// A `session_id` is at most [`MAX_SESSION_ID_CHARS`] letters, digits, `-`, `_`, `.` or `:`.
fn check_session_id(id: Option<&str>) -> Result<(), ApiError> {
    let Some(id) = id else { return Ok(()) };
    let safe = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if id.is_empty() || id.len() > MAX_SESSION_ID_CHARS || !safe {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "`session_id` must be 1 to {MAX_SESSION_ID_CHARS} characters, each a letter, a digit, `-`, `_`, `.` or `:`"
            ),
        ));
    }
    Ok(())
}

fn check_message(message: &str, field: &str) -> Result<(), ApiError> {
    if message.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{field}` must not be empty"),
        ));
    }
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("`{field}` is longer than {MAX_MESSAGE_BYTES} bytes"),
        ));
    }
    Ok(())
}

impl ChatRequest {
    fn into_run(self) -> Result<RunRequest, ApiError> {
        check_message(&self.message, "message")?;
        check_session_id(self.session_id.as_deref())?;
        if self.messages.len() > MAX_TURNS {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "`messages` has {} turns; at most {MAX_TURNS} are accepted",
                    self.messages.len()
                ),
            ));
        }
        let mut history_bytes = 0usize;
        for (i, turn) in self.messages.iter().enumerate() {
            if turn.content.len() > MAX_MESSAGE_BYTES {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("`messages[{i}].content` is longer than {MAX_MESSAGE_BYTES} bytes"),
                ));
            }
            history_bytes += turn.content.len();
        }
        if history_bytes > MAX_HISTORY_BYTES {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "`messages` hold {history_bytes} bytes of text; at most {MAX_HISTORY_BYTES} are accepted"
                ),
            ));
        }
        let mut prior = Vec::with_capacity(self.messages.len());
        for (i, turn) in self.messages.into_iter().enumerate() {
            let role = match turn.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!("messages[{i}].role is \"{other}\"; use \"user\" or \"assistant\""),
                    ));
                }
            };
            prior.push(Message {
                role,
                content: vec![Content::text(turn.content)],
            });
        }
        Ok(RunRequest {
            message: self.message,
            prior,
            session_id: self.session_id,
            dry_run: self.dry_run,
            ..RunRequest::default()
        })
    }
}

/// Runs `request` in its own task; the run is cancelled if the returned guard drops first
/// (the client went away).
fn spawn_run(
    state: &ChatState,
    mut request: RunRequest,
    events: Option<mpsc::UnboundedSender<RunEvent>>,
) -> (
    tokio::task::JoinHandle<RunResult>,
    tokio_util::sync::DropGuard,
) {
    let cancel = CancellationToken::new();
    request.cancel = Some(cancel.clone());
    let agent = state.agent.clone();
    let metrics = state.metrics.clone();
    // The run's spans belong to this request's (the run goes on in a task of its own).
    let run = async move {
        let result = agent.run(request, events).await;
        metrics.agent_run(&result);
        result
    };
    let handle = tokio::spawn(tracing::Instrument::in_current_span(run));
    (handle, cancel.drop_guard())
}

/// The HTTP status a finished run answers with, and the message when it is an error.
fn failure(result: &RunResult) -> Option<(StatusCode, String)> {
    let message = || {
        result
            .error
            .clone()
            .unwrap_or_else(|| "the run failed".to_owned())
    };
    match result.halt_reason {
        Some(HaltReason::ServersUnavailable) => Some((StatusCode::SERVICE_UNAVAILABLE, message())),
        // Fail-closed tracing refused the run before anything ran.
        Some(HaltReason::TraceUnavailable) if result.steps.is_empty() => {
            Some((StatusCode::SERVICE_UNAVAILABLE, message()))
        }
        Some(HaltReason::ModelError) if result.steps.is_empty() => {
            Some((StatusCode::BAD_GATEWAY, message()))
        }
        _ => None,
    }
}

fn failure_response(status: StatusCode, message: &str, result: &RunResult) -> Response {
    (
        status,
        Json(json!({
            "error": {
                "status": status.as_u16(),
                "message": message,
                "halt_reason": result.halt_reason,
                "session_id": result.session_id,
            }
        })),
    )
        .into_response()
}

async fn join(handle: tokio::task::JoinHandle<RunResult>) -> Result<RunResult, ApiError> {
    handle.await.map_err(|e| {
        tracing::error!(error = %e, "agent run task failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the agent run failed unexpectedly; see the server log",
        )
    })
}

async fn chat_route(
    State(state): State<ChatState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    extensions: axum::http::Extensions,
    Body(body): Body<ChatRequest>,
) -> Result<Response, ApiError> {
    let mut request = body.into_run()?;
    request.principal = crate::identity::principal_of(&extensions);
    request.caller_token = extensions
        .get::<crate::identity::CallerToken>()
        .map(|t| t.0.clone());
    request.visibility = Some(state.visibility(&uri, &headers, &request.principal));
    let (handle, _guard) = spawn_run(&state, request, None);
    let result = join(handle).await?;
    if let Some((status, message)) = failure(&result) {
        return Ok(failure_response(status, &message, &result));
    }
    Ok(Json(result).into_response())
}

fn sse_event(name: &str, data: &impl serde::Serialize) -> Event {
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|e| Event::default().event("error").data(e.to_string()))
}

async fn chat_stream_route(
    State(state): State<ChatState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    extensions: axum::http::Extensions,
    Body(body): Body<ChatRequest>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let mut request = body.into_run()?;
    request.principal = crate::identity::principal_of(&extensions);
    request.caller_token = extensions
        .get::<crate::identity::CallerToken>()
        .map(|t| t.0.clone());
    request.visibility = Some(state.visibility(&uri, &headers, &request.principal));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (handle, guard) = spawn_run(&state, request, Some(tx));
    let stream = async_stream(move |out| async move {
        // Keeps the run alive exactly as long as the client reads: when it leaves, the stream
        // is dropped, `out` closes and the guard cancels the run at once (the in-flight tool
        // call is cancelled upstream), without waiting for the run's next event.
        let _guard = guard;
        loop {
            let event = tokio::select! {
                event = rx.recv() => event,
                () = out.closed() => return,
            };
            let Some(event) = event else { break };
            let sse = match &event {
                RunEvent::SessionStart {
                    session_id,
                    dry_run,
                    offered_tools,
                } => sse_event(
                    "session.start",
                    &json!({"session_id": session_id, "dry_run": dry_run, "offered_tools": offered_tools}),
                ),
                RunEvent::ToolResult(step) => sse_event("tool.result", step.as_ref()),
                RunEvent::Final(result) => match failure(result) {
                    Some((status, message)) => sse_event(
                        "error",
                        &json!({
                            "status": status.as_u16(),
                            "message": message,
                            "halt_reason": result.halt_reason,
                            "session_id": result.session_id,
                        }),
                    ),
                    None => sse_event("final.response", result.as_ref()),
                },
            };
            if out.send(sse).await.is_err() {
                return;
            }
        }
        if let Err(e) = handle.await {
            tracing::error!(error = %e, "agent run task failed");
            let _ = out
                .send(sse_event(
                    "error",
                    &json!({"status": 500, "message": "the agent run failed unexpectedly; see the server log"}),
                ))
                .await;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A stream fed by a producer task through a small channel.
fn async_stream<F, Fut>(producer: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(producer(tx));
    futures::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), Ok)
}

async fn agent_run_route(
    State(state): State<ChatState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    extensions: axum::http::Extensions,
    Body(body): Body<AgentRunRequest>,
) -> Result<Response, ApiError> {
    check_message(&body.task, "task")?;
    check_session_id(body.session_id.as_deref())?;
    let principal = crate::identity::principal_of(&extensions);
    let request = RunRequest {
        message: body.task.clone(),
        session_id: body.session_id,
        dry_run: body.dry_run,
        visibility: Some(state.visibility(&uri, &headers, &principal)),
        principal,
        ..RunRequest::default()
    };
    let (handle, _guard) = spawn_run(&state, request, None);
    let result = join(handle).await?;
    if let Some((status, message)) = failure(&result) {
        return Ok(failure_response(status, &message, &result));
    }
    let answer = AgentAnswer::from_run(&body.task, &result);
    if let Err(e) = answer.validate() {
        tracing::error!(error = %e, "answer failed its schema");
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string(),
        ));
    }
    Ok(Json(json!({"result": answer, "available_tools": result.available_tools})).into_response())
}

/// The agent's routes (state applied), merged into the gateway's router. `visibility` is the
/// operator's; each request narrows it with its query and `x-mcp-*` headers.
pub fn routes(
    agent: Arc<Agent>,
    visibility: Arc<VisibilityConfig>,
    metrics: Arc<crate::metrics::Metrics>,
) -> axum::Router {
    axum::Router::new()
        .route("/chat", post(chat_route))
        .route("/chat/stream", post(chat_stream_route))
        .route("/agent/run", post(agent_run_route))
        .with_state(ChatState {
            agent,
            visibility,
            metrics,
        })
}

//! The Tasks extension (SEP-2663) on the pool's side: `tasks/get`, `tasks/update` and
//! `tasks/cancel` on the server that runs a task, over the connection the call that started it
//! went over (the caller's principal's or session's, else the shared one).
//!
//! Each request says the caller declared the extension (its client capabilities in the
//! request's `_meta` on 2026-07-28 connections), as the call that made the task did: a server
//! gates the three methods on it. A completed task's inlined result goes through the content
//! guards as a call's result does; a result they withhold is refused as the call would be.

use rmcp::model::{
    CallToolResult, CancelTaskParams, CancelTaskRequest, ClientCapabilities, ClientRequest,
    GetTaskParams, GetTaskRequest, GetTaskResult, InputResponses, ServerResult, TaskPayload,
    UpdateTaskParams, UpdateTaskRequest,
};
use std::time::Duration;

use rmcp::model::CreateTaskResult;
use rmcp::service::PeerRequestOptions;
use tokio_util::sync::CancellationToken;

use super::Pool;
use crate::call::{self, CallError};
use crate::relay::Caller;

/// The most often [`Pool::follow_task`] polls, whatever the server suggests.
pub const MIN_POLL: Duration = Duration::from_millis(50);
/// The least often.
pub const MAX_POLL: Duration = Duration::from_secs(5);

impl Pool {
    /// `tasks/get` for the server's task `task_id`; a completed task's result guarded.
    ///
    /// # Errors
    /// As [`Pool::read_resource`]; the server's `-32602` for a task it does not know; a
    /// result the content guards withhold.
    pub async fn get_task(
        &self,
        server: &str,
        task_id: String,
        caller: Option<&Caller>,
    ) -> Result<GetTaskResult, CallError> {
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(task_id)));
        let mut got = match self.task_request(server, request, caller).await? {
            ServerResult::GetTaskResult(got) => got,
            _ => return Err(unexpected(server, "tasks/get")),
        };
        if let TaskPayload::Completed { result } = &mut got.task.payload {
            self.guard_task_result(server, result)?;
        }
        Ok(got)
    }

    /// `tasks/update`: the caller's answers to the task's input requests.
    ///
    /// # Errors
    /// As [`Pool::get_task`].
    pub async fn update_task(
        &self,
        server: &str,
        task_id: String,
        responses: InputResponses,
        caller: Option<&Caller>,
    ) -> Result<(), CallError> {
        let params = UpdateTaskParams::new(task_id, responses);
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
        match self.task_request(server, request, caller).await? {
            ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_) => Ok(()),
            _ => Err(unexpected(server, "tasks/update")),
        }
    }

    /// `tasks/cancel`: asks the server to stop the task (it may still finish).
    ///
    /// # Errors
    /// As [`Pool::get_task`].
    pub async fn cancel_task(
        &self,
        server: &str,
        task_id: String,
        caller: Option<&Caller>,
    ) -> Result<(), CallError> {
        let params = CancelTaskParams::new(task_id);
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
        match self.task_request(server, request, caller).await? {
            ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_) => Ok(()),
            _ => Err(unexpected(server, "tasks/cancel")),
        }
    }

    /// Follows the task `server` runs (`created`, from a call made with
    /// [`crate::CallContext::follows_tasks`]) to its end, for a caller that cannot answer input
    /// requests (the agent): `tasks/get` at the interval the server suggests (between
    /// [`MIN_POLL`] and [`MAX_POLL`]) until the task completes (its result, guarded as a
    /// call's), fails (its error) or is cancelled. The task is cancelled when `cancel` fires,
    /// when it asks for input, and after `within`.
    ///
    /// # Errors
    /// The task failed or was cancelled, asked for input, outlived `within`, or a `tasks/get`
    /// failed.
    pub async fn follow_task(
        &self,
        server: &str,
        created: &CreateTaskResult,
        cancel: Option<&CancellationToken>,
        within: Duration,
    ) -> Result<CallToolResult, CallError> {
        let task_id = created.task.task_id.clone();
        let interval = Duration::from_millis(created.task.poll_interval_ms.unwrap_or(1_000))
            .clamp(MIN_POLL, MAX_POLL);
        let deadline = tokio::time::Instant::now() + within;
        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        loop {
            let got = self.get_task(server, task_id.clone(), None).await?;
            let stop = match got.task.payload {
                TaskPayload::Completed { result } => {
                    return serde_json::from_value(serde_json::Value::Object(result)).map_err(|e| {
                        CallError::Rpc(rmcp::ErrorData::internal_error(
                            format!("server \"{server}\" completed a task with a result that is not a tool result: {e}"),
                            None,
                        ))
                    });
                }
                TaskPayload::Failed { error } => {
                    let error = serde_json::from_value(serde_json::Value::Object(error))
                        .unwrap_or_else(|_| {
                            rmcp::ErrorData::internal_error(
                                format!("server \"{server}\": the task failed"),
                                None,
                            )
                        });
                    return Err(CallError::Rpc(error));
                }
                TaskPayload::Cancelled => return Err(CallError::Cancelled),
                TaskPayload::InputRequired { .. } => {
                    Some(CallError::Rpc(rmcp::ErrorData::internal_error(
                        format!(
                            "server \"{server}\": the task asks for the user's input, which this caller cannot give; it was cancelled"
                        ),
                        None,
                    )))
                }
                _ => None,
            };
            let stop = match stop {
                Some(stop) => Some(stop),
                None => tokio::select! {
                    () = tokio::time::sleep(interval) => None,
                    () = tokio::time::sleep_until(deadline) => Some(CallError::Timeout {
                        server: server.to_owned(),
                        after: within,
                    }),
                    () = cancel.cancelled() => Some(CallError::Cancelled),
                },
            };
            if let Some(stop) = stop {
                // Best effort: the task may have ended meanwhile, or the server may be gone.
                if let Err(e) = self.cancel_task(server, task_id.clone(), None).await {
                    tracing::debug!(server, "tasks/cancel after giving up on a task: {e}");
                }
                return Err(stop);
            }
        }
    }

    /// One `tasks/*` request on the caller's connection to `server`, declaring the extension.
    async fn task_request(
        &self,
        server: &str,
        request: ClientRequest,
        caller: Option<&Caller>,
    ) -> Result<ServerResult, CallError> {
        let up = self.known(server)?;
        let on_behalf = caller.and_then(|c| c.on_behalf.as_ref());
        let up = self.connection_for(&up, on_behalf, caller).await?;
        call::once(&up, caller, |peer| async move {
            let options = declaring_tasks(&peer, caller);
            peer.send_request_with_option(request, options)
                .await?
                .await_response()
                .await
        })
        .await
        .map_err(|e| self.guarded_error(server, e))
    }

    /// Runs the content guards over a completed task's result, as over a call's.
    fn guard_task_result(
        &self,
        server: &str,
        result: &mut rmcp::model::JsonObject,
    ) -> Result<(), CallError> {
        let Ok(mut parsed) =
            serde_json::from_value::<CallToolResult>(serde_json::Value::Object(result.clone()))
        else {
            // Not a tool result (a task of another kind of request): passed as it came.
            return Ok(());
        };
        let guarded = crate::guard::result(self.pinning.guards(), &mut parsed);
        let changed = matches!(guarded, Ok(Some(_)));
        self.settle_guarded(server, "a task's result", guarded)?;
        if changed && let Ok(serde_json::Value::Object(map)) = serde_json::to_value(&parsed) {
            *result = map;
        }
        Ok(())
    }
}

/// The caller's request options, its capabilities declaring the Tasks extension (the gateway
/// only relays `tasks/*` for clients that declared it).
fn declaring_tasks(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    caller: Option<&Caller>,
) -> PeerRequestOptions {
    let mut options = call::caller_options(peer, caller);
    let meta = options.meta.get_or_insert_with(Default::default);
    let mut capabilities: ClientCapabilities = meta.client_capabilities().unwrap_or_default();
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .entry(rmcp::model::TASKS_EXTENSION_ID.to_owned())
        .or_default();
    meta.set_client_capabilities(capabilities);
    options
}

fn unexpected(server: &str, method: &str) -> CallError {
    CallError::Rpc(rmcp::ErrorData::internal_error(
        format!("server \"{server}\" answered {method} with another kind of result"),
        None,
    ))
}

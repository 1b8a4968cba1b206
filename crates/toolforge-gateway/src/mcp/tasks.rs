//! The Tasks extension (SEP-2663) through the gateway.
//!
//! A backend that runs a call as a task answers `tools/call` with a `CreateTaskResult`; the
//! client gets it with the task id replaced by a sealed ticket (`crate::task_ids`: server,
//! tool, backend id, principal, expiry), so `tasks/get`, `tasks/update` and `tasks/cancel` go
//! back to the server that runs the task, from any replica with the same state key, and only
//! for the principal who made the call. A ticket that does not open for this request (changed,
//! expired, another principal's, or its tool no longer visible to the request) is an unknown
//! task: `-32602`, as the spec asks, saying nothing of whose it is.
//!
//! The gateway declares the extension when a backend does. rmcp answers the methods the
//! extension removed (`tasks/result`, `tasks/list`) with `-32601`, and refuses `tasks/*` from a
//! request that did not declare the extension with `-32021`; a backend never sees either.

use rmcp::model::{
    CancelTaskParams, CreateTaskResult, GetTaskParams, GetTaskResult, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use toolforge_select::ToolId;

use super::Gateway;
use crate::task_ids::{TaskTicket, ticket_ttl};

/// The error for a task id this request cannot use.
fn unknown_task() -> McpError {
    McpError::invalid_params(
        "unknown task: this task id was not issued to this caller by this gateway, or it has expired",
        None,
    )
}

impl Gateway {
    /// The client's `CreateTaskResult` for a backend's: the task id sealed for the caller, and
    /// as TTL the ticket's lifetime (the backend's TTL, within one minute and 24 hours).
    pub(super) fn relayed_task(
        &self,
        id: &ToolId,
        caller: &str,
        mut created: CreateTaskResult,
    ) -> CreateTaskResult {
        let ttl = ticket_ttl(created.task.ttl_ms);
        let ticket = TaskTicket {
            server: id.server.clone(),
            tool: id.name.clone(),
            task_id: std::mem::take(&mut created.task.task_id),
            caller: caller.to_owned(),
        };
        created.task.task_id = ticket.seal(&self.shared.seal(), ttl);
        created.task.ttl_ms = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        created
    }

    /// The ticket behind a client's task id, if this request may use it.
    fn ticket(
        &self,
        ctx: &RequestContext<RoleServer>,
        task_id: &str,
    ) -> Result<TaskTicket, McpError> {
        let scope = self.scope(ctx);
        let ticket = TaskTicket::open(&self.shared.seal(), task_id, &scope.principal.to_string())
            .ok_or_else(unknown_task)?;
        if !scope.allows(&ToolId::new(&ticket.server, &ticket.tool)) {
            return Err(unknown_task());
        }
        Ok(ticket)
    }

    pub(super) async fn serve_get_task(
        &self,
        req: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let ticket = self.ticket(&ctx, &req.task_id)?;
        let caller = self.caller(&ctx);
        let mut got = self
            .shared
            .pool
            .get_task(&ticket.server, ticket.task_id, Some(&caller))
            .await
            .map_err(|e| e.to_mcp())?;
        got.task.task.task_id = req.task_id;
        // The ticket's lifetime, as the client was told when the task was made.
        got.task.task.ttl_ms =
            Some(u64::try_from(ticket_ttl(got.task.task.ttl_ms).as_millis()).unwrap_or(u64::MAX));
        Ok(got)
    }

    pub(super) async fn serve_update_task(
        &self,
        req: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let ticket = self.ticket(&ctx, &req.task_id)?;
        let caller = self.caller(&ctx);
        self.shared
            .pool
            .update_task(
                &ticket.server,
                ticket.task_id,
                req.input_responses,
                Some(&caller),
            )
            .await
            .map_err(|e| e.to_mcp())
    }

    pub(super) async fn serve_cancel_task(
        &self,
        req: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let ticket = self.ticket(&ctx, &req.task_id)?;
        let caller = self.caller(&ctx);
        self.shared
            .pool
            .cancel_task(&ticket.server, ticket.task_id, Some(&caller))
            .await
            .map_err(|e| e.to_mcp())
    }
}

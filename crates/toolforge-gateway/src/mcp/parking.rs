//! One round of a `tools/call` at the pool, for `calls`: for a 2026-07-28 client, a
//! handshake-era backend's mid-call request parks the call (`crate::parked`) and becomes an
//! `input_required` result; the client's retry resumes the parked call instead of calling again.

use rmcp::model::{CallToolRequestParams, InputRequests, InputRequiredResult, InputResponses};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;
use toolforge_mcp::{CallContext, CallFailure, CallOutcome};
use toolforge_select::ToolId;

use crate::mrtr::{self, Envelope};
use crate::parked::{Next, Running, Ticket};

use super::Gateway;

/// What one round at the pool gave.
pub(super) enum Round {
    /// The call ended.
    Called(Result<CallOutcome, CallFailure>),
    /// The backend asked the (2026-07-28) client: the call is parked, the client gets this.
    Parked(InputRequiredResult),
}

/// A retry of a parked call: where it waits, and the client's answers.
pub(super) struct Resuming {
    pub ticket: Ticket,
    pub responses: InputResponses,
}

/// What seals a parked round into the client's `requestState`.
pub(super) struct Sealing<'a> {
    /// The method and exposed name the state is bound to.
    pub key: &'a str,
    pub id: &'a ToolId,
    /// Who made the call.
    pub caller: &'a str,
}

impl Gateway {
    /// One round of a call of `id`: a parked call resumed with the client's answers, or the
    /// call made (parked when its backend asks a 2026-07-28 client mid-call).
    ///
    /// # Errors
    /// A retry whose parked call is gone, elsewhere, or not this caller's.
    pub(super) async fn call_round(
        &self,
        ctx: &RequestContext<RoleServer>,
        req: CallToolRequestParams,
        mut call: CallContext,
        resuming: Option<Resuming>,
        sealing: &Sealing<'_>,
    ) -> Result<Round, McpError> {
        let lot = self.shared.parked();
        if let Some(Resuming { ticket, responses }) = resuming {
            let (next, ticket) = lot
                .resume(&ticket, sealing.caller, responses, &ctx.ct)
                .await?;
            return Ok(self.after(next, ticket, sealing));
        }
        let caller = match call.caller.take() {
            Some(caller) if mrtr::client_is_modern(ctx) => caller,
            other => {
                call.caller = other;
                let called = self
                    .shared
                    .pool
                    .call_tool(&sealing.id.server, req, call)
                    .await;
                return Ok(Round::Called(called));
            }
        };
        // A handshake-era backend cannot be told this client's era: whatever it asks mid-call
        // comes to the inbox, and the call gets a cancellation of its own, as it may outlive
        // this request.
        let (asks, inbox) = toolforge_mcp::asks::inbox();
        let stop = CancellationToken::new();
        call.caller = Some(caller.with_asks(asks));
        call.cancel = Some(stop.clone());
        let pool = self.shared.pool.clone();
        let server = sealing.id.server.clone();
        let future = Box::pin(async move { pool.call_tool(&server, req, call).await });
        let mut running = Running::new(future, inbox, stop);
        match running.next(&ctx.ct).await {
            Next::Done(out) => Ok(Round::Called(out)),
            Next::Asked(requests) => match lot.park(running, sealing.caller) {
                Ok(ticket) => Ok(Round::Parked(self.sealed(requests, ticket, sealing))),
                Err((running, why)) => Ok(Round::Called(running.finish(&why).await)),
            },
        }
    }

    fn after(&self, next: Next, ticket: Ticket, sealing: &Sealing<'_>) -> Round {
        match next {
            Next::Done(out) => Round::Called(out),
            Next::Asked(requests) => Round::Parked(self.sealed(requests, ticket, sealing)),
        }
    }

    /// The `input_required` result of a parked round, its state sealed.
    fn sealed(
        &self,
        requests: InputRequests,
        ticket: Ticket,
        sealing: &Sealing<'_>,
    ) -> InputRequiredResult {
        let envelope = Envelope {
            server: sealing.id.server.clone(),
            tool: sealing.id.name.clone(),
            backend_state: None,
            caller: Some(sealing.caller.to_owned()),
            nonce: None,
            parked: Some(ticket.into()),
        };
        let state = self.shared.seal().seal(sealing.key, &envelope);
        InputRequiredResult::new(Some(requests), Some(state))
    }
}

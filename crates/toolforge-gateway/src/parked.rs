//! Calls parked between the rounds of a 2026-07-28 client, while a handshake-era backend waits
//! for that client's answer.
//!
//! A handshake-era backend asks mid-call (sampling, elicitation, roots); a 2026-07-28 client
//! cannot be asked mid-call. So when the backend asks during such a client's call, the gateway
//! answers the client with `input_required` carrying the request, and **parks** the call: the
//! backend's request stays pending and the call keeps its place on this replica, in a task of
//! its own ([`ParkingLot`]). The client's retry (its `inputResponses`, with the sealed
//! `requestState` naming the parked call) answers the backend's request and waits for what the
//! backend does next: the call's result, or another request (another round, at most
//! [`MAX_ROUNDS`]).
//!
//! Bounds: at most [`MAX_PARKED`] calls are parked at once (a backend asking beyond that is
//! refused, clearly); a parked call whose client does not come back within the idle deadline
//! is cancelled (the backend's request fails, the backend gets `notifications/cancelled`) and
//! a late retry is told so. A call is never sent to its backend again: it may have run.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::model::{InputRequest, InputRequests, InputResponses};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolforge_mcp::{Ask, CallFailure, CallOutcome};

pub use crate::mrtr::MAX_ROUNDS;
use crate::mrtr::ParkedState;

/// Most calls parked at once on one gateway.
pub const MAX_PARKED: usize = 256;
/// How long a parked call waits for its client's retry before it is cancelled.
pub const PARK_IDLE: Duration = Duration::from_secs(120);

/// A call to a backend, as the pool runs it.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<CallOutcome, CallFailure>> + Send>>;

/// What a call did next.
#[derive(Debug)]
pub enum Next {
    /// It ended.
    Done(Result<CallOutcome, CallFailure>),
    /// Its backend asked: these requests wait for the client's answers.
    Asked(InputRequests),
}

type Reply = oneshot::Sender<Result<Value, McpError>>;

/// A running call whose backend may ask its client during the call.
pub struct Running {
    call: CallFuture,
    inbox: mpsc::Receiver<Ask>,
    /// The backend's requests the client has been given, by their `inputRequests` key.
    pending: Vec<(String, Reply)>,
    stop: CancellationToken,
    asked: u64,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Running {
    /// `call` (whose caller's asks go to `inbox`), cancelled through `stop`.
    #[must_use]
    pub fn new(call: CallFuture, inbox: mpsc::Receiver<Ask>, stop: CancellationToken) -> Self {
        Self {
            call,
            inbox,
            pending: Vec::new(),
            stop,
            asked: 0,
        }
    }

    /// Runs the call until it ends or its backend asks. When `gone` fires (the client's
    /// request went away) the call is cancelled and its end awaited.
    pub async fn next(&mut self, gone: &CancellationToken) -> Next {
        loop {
            tokio::select! {
                out = &mut self.call => return Next::Done(out),
                Some(ask) = self.inbox.recv() => {
                    if self.stop.is_cancelled() {
                        let _ = ask.reply.send(Err(cancelled()));
                        continue;
                    }
                    let mut requests = BTreeMap::new();
                    self.keep(ask, &mut requests);
                    // Requests the backend made together go in one round.
                    while let Ok(ask) = self.inbox.try_recv() {
                        self.keep(ask, &mut requests);
                    }
                    return Next::Asked(requests);
                }
                () = gone.cancelled(), if !self.stop.is_cancelled() => self.stop.cancel(),
            }
        }
    }

    fn keep(&mut self, ask: Ask, requests: &mut InputRequests) {
        self.asked += 1;
        let kind = match &ask.request {
            InputRequest::CreateMessage(_) => "sampling",
            InputRequest::Elicitation(_) => "elicitation",
            InputRequest::ListRoots(_) => "roots",
            _ => "input",
        };
        let key = format!("{kind}-{}", self.asked);
        requests.insert(key.clone(), ask.request);
        self.pending.push((key, ask.reply));
    }

    /// Gives each pending request the client's answer from `responses`.
    pub fn answer(&mut self, responses: &InputResponses) {
        for (key, reply) in self.pending.drain(..) {
            let answer = responses.get(&key).cloned().ok_or_else(|| {
                McpError::invalid_request(
                    format!("the client's retry did not answer the request \"{key}\""),
                    None,
                )
            });
            let _ = reply.send(answer);
        }
    }

    /// Fails each pending request with `why`.
    pub fn fail_pending(&mut self, why: &str) {
        for (_, reply) in self.pending.drain(..) {
            let _ = reply.send(Err(McpError::invalid_request(why.to_owned(), None)));
        }
    }

    /// Runs the call to its end, failing every request its backend makes with `why`.
    pub async fn finish(mut self, why: &str) -> Result<CallOutcome, CallFailure> {
        self.fail_pending(why);
        let never = CancellationToken::new();
        loop {
            match self.next(&never).await {
                Next::Done(out) => return out,
                Next::Asked(_) => self.fail_pending(why),
            }
        }
    }

    /// Cancels the call (its backend gets `notifications/cancelled`) and waits for its end.
    async fn cancel(mut self, why: &str) {
        self.fail_pending(why);
        self.stop.cancel();
        let _ = self.finish(why).await;
    }
}

fn cancelled() -> McpError {
    McpError::invalid_request("the call was cancelled".to_owned(), None)
}

/// Where a parked call is: what the client's sealed `requestState` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// The parked call.
    pub id: String,
    /// The replica it is parked on.
    pub replica: String,
    /// Which round of input the client answers (a retry answers each round once).
    pub round: u32,
}

/// The sealed form of a ticket (`requestState`) and back.
impl From<Ticket> for ParkedState {
    fn from(t: Ticket) -> Self {
        Self {
            id: t.id,
            replica: t.replica,
            round: t.round,
        }
    }
}

impl From<ParkedState> for Ticket {
    fn from(p: ParkedState) -> Self {
        Self {
            id: p.id,
            replica: p.replica,
            round: p.round,
        }
    }
}

/// A client's retry for its parked call.
struct Resume {
    responses: InputResponses,
    reply: oneshot::Sender<Next>,
}

struct Slot {
    /// Who made the call; only they may answer.
    owner: String,
    round: u32,
    resume: mpsc::Sender<Resume>,
}

/// The calls parked on this replica, each in a task of its own.
pub struct ParkingLot {
    replica: String,
    cap: usize,
    idle: Duration,
    calls: Mutex<HashMap<String, Slot>>,
}

impl std::fmt::Debug for ParkingLot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkingLot")
            .field("replica", &self.replica)
            .field("parked", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for ParkingLot {
    fn default() -> Self {
        Self::new(MAX_PARKED, PARK_IDLE)
    }
}

impl ParkingLot {
    /// A lot of at most `cap` calls, each cancelled after `idle` without its client's retry.
    #[must_use]
    pub fn new(cap: usize, idle: Duration) -> Self {
        Self {
            replica: uuid::Uuid::new_v4().simple().to_string(),
            cap,
            idle,
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// How many calls are parked.
    #[must_use]
    pub fn len(&self) -> usize {
        self.calls.lock().len()
    }

    /// Whether no call is parked.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parks `running` (its backend's requests are pending) for `owner`; the ticket the
    /// client's state carries.
    ///
    /// # Errors
    /// The lot is full: `running` comes back, with the message for the backend.
    pub fn park(
        self: &Arc<Self>,
        running: Running,
        owner: &str,
    ) -> Result<Ticket, (Running, String)> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (resume, resumes) = mpsc::channel(1);
        {
            let mut calls = self.calls.lock();
            if calls.len() >= self.cap {
                let why = format!(
                    "toolforge cannot relay this request to its client: {} calls are already \
                     waiting for their clients' input on this gateway",
                    self.cap
                );
                return Err((running, why));
            }
            calls.insert(
                id.clone(),
                Slot {
                    owner: owner.to_owned(),
                    round: 0,
                    resume,
                },
            );
        }
        let lot = Arc::downgrade(self);
        tokio::spawn(parked(lot, id.clone(), running, resumes, self.idle));
        Ok(Ticket {
            id,
            replica: self.replica.clone(),
            round: 0,
        })
    }

    /// Answers the parked call of `ticket` with the client's `responses` and waits for what it
    /// does next (abandoned, and the call cancelled, when `gone` fires); the next round's ticket.
    ///
    /// # Errors
    /// The call is parked on another replica, is no longer parked (it expired, or ended), was
    /// made by another caller, or this round was already answered. None of these sends the
    /// call again.
    pub async fn resume(
        &self,
        ticket: &Ticket,
        owner: &str,
        responses: InputResponses,
        gone: &CancellationToken,
    ) -> Result<(Next, Ticket), McpError> {
        if ticket.replica != self.replica {
            return Err(McpError::invalid_params(
                "this call is waiting for input on another toolforge replica, and only that \
                 replica can go on with it (a call is never sent twice: it may have reached \
                 the server); send a call's retries to the replica that started it, or call \
                 the tool again",
                None,
            ));
        }
        let resume = {
            let mut calls = self.calls.lock();
            let Some(slot) = calls.get_mut(&ticket.id) else {
                return Err(self.expired());
            };
            if slot.owner != owner {
                return Err(McpError::invalid_params(
                    "this call is waiting for another caller's input; only the caller who made \
                     it can answer",
                    None,
                ));
            }
            if slot.round != ticket.round {
                return Err(McpError::invalid_params(
                    "this round of input was already answered; retry with the requestState \
                     of the latest input_required result",
                    None,
                ));
            }
            slot.round += 1;
            slot.resume.clone()
        };
        let (reply, next) = oneshot::channel();
        resume
            .try_send(Resume { responses, reply })
            .map_err(|_| self.expired())?;
        let next = tokio::select! {
            n = next => n.map_err(|_| self.expired())?,
            () = gone.cancelled() => return Err(cancelled()),
        };
        let ticket = Ticket {
            round: ticket.round + 1,
            ..ticket.clone()
        };
        Ok((next, ticket))
    }

    fn expired(&self) -> McpError {
        McpError::invalid_params(
            format!(
                "this call is no longer waiting for input: it was cancelled after {} s without \
                 its client's answer, or it has ended. toolforge does not send a call again (it \
                 may have reached the server); call the tool again",
                self.idle.as_secs()
            ),
            None,
        )
    }
}

/// Lets the lot forget `id`.
fn unpark(lot: &Weak<ParkingLot>, id: &str) {
    if let Some(lot) = lot.upgrade() {
        lot.calls.lock().remove(id);
    }
}

/// The task of one parked call: waits for its client's retry (at most `idle`), answers the
/// backend's requests with it, and hands the retry what the call does next.
async fn parked(
    lot: Weak<ParkingLot>,
    id: String,
    mut running: Running,
    mut resumes: mpsc::Receiver<Resume>,
    idle: Duration,
) {
    let mut rounds = 1;
    loop {
        let resume = tokio::select! {
            r = resumes.recv() => r,
            () = tokio::time::sleep(idle) => None,
        };
        let Some(Resume {
            responses,
            mut reply,
        }) = resume
        else {
            unpark(&lot, &id);
            let why = format!(
                "the client did not answer within {} s; toolforge cancelled the call",
                idle.as_secs()
            );
            running.cancel(&why).await;
            return;
        };
        running.answer(&responses);
        let never = CancellationToken::new();
        let next = tokio::select! {
            n = running.next(&never) => Some(n),
            () = reply.closed() => None,
        };
        let next = match next {
            Some(Next::Asked(_)) if rounds >= MAX_ROUNDS => {
                unpark(&lot, &id);
                let why = format!("the server still asked for input after {MAX_ROUNDS} rounds");
                let _ = reply.send(Next::Done(running.finish(&why).await));
                return;
            }
            Some(next) => next,
            None => {
                unpark(&lot, &id);
                running.cancel("the client went away").await;
                return;
            }
        };
        rounds += 1;
        let done = matches!(next, Next::Done(_));
        if done {
            unpark(&lot, &id);
        }
        if reply.send(next).is_err() && !done {
            unpark(&lot, &id);
            running.cancel("the client went away").await;
            return;
        }
        if done {
            return;
        }
    }
}

#[cfg(test)]
#[path = "parked_tests.rs"]
mod tests;

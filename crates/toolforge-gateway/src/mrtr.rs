//! Multi round-trip requests (2026-07-28, SEP-2322) through the gateway.
//!
//! A backend on 2026-07-28 that needs input from the user (sampling, elicitation, roots)
//! answers `tools/call` with an `input_required` result instead of asking mid-call. The gateway
//! relays it to the client that made the call, and only to it:
//! - a client on 2026-07-28 gets the `input_required` result itself. The backend's own
//!   `requestState` travels inside the gateway's **sealed envelope** (HMAC-SHA256 with the
//!   gateway's state key, bound to the tool name the client called, with an expiry). The
//!   client's retry carries the envelope back; the gateway opens it, refuses it if it was
//!   tampered with, expired or sealed by another key, and sends the retry to the same server
//!   and tool with the backend's state and the client's `inputResponses`. Nothing is kept in
//!   memory, so any replica with the same key can resume a call another replica started.
//! - a client on an earlier revision cannot read `input_required`: the gateway asks it each
//!   input request the handshake-era way (a server-to-client request on that call's own
//!   response stream), collects the answers, and retries the backend itself, up to
//!   [`MAX_ROUNDS`].

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    ClientResult, InputRequest, InputRequiredResult, InputResponses, ProtocolVersion,
    RequestStateCodec, SealOptions, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::{Deserialize, Serialize};

/// Most rounds the gateway drives for a handshake-era client before it gives up.
pub const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;
/// How long a sealed envelope stays valid.
pub const STATE_TTL: Duration = Duration::from_secs(600);

/// What the gateway keeps in a client's `requestState`: where the retry goes, and the backend's
/// own state. Signed, not encrypted (the backend's state is opaque to us, not secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The server that asked.
    #[serde(rename = "s")]
    pub server: String,
    /// The server's own tool name.
    #[serde(rename = "t")]
    pub tool: String,
    /// The backend's `requestState`, echoed to it on the retry.
    #[serde(rename = "b", default, skip_serializing_if = "Option::is_none")]
    pub backend_state: Option<String>,
    /// Who made the call (the request's principal); a retry by anyone else is refused.
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// A random id, spent by the first retry (`crate::state_ledger`): a second retry with the
    /// same state is refused. Parked calls have their own (`parked`).
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// A call parked on a replica while a handshake-era backend waits for this client's
    /// answer (`crate::parked`): its id, the replica and the round.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<ParkedState>,
}

/// Where a parked call waits, in the sealed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkedState {
    #[serde(rename = "i")]
    pub id: String,
    #[serde(rename = "r")]
    pub replica: String,
    #[serde(rename = "n")]
    pub round: u32,
}

impl Envelope {
    /// Refuses a retry by another caller than the one who made the call.
    ///
    /// # Errors
    /// `caller` is not the one sealed in.
    pub fn check_caller(&self, caller: &str) -> Result<(), McpError> {
        match &self.caller {
            Some(sealed) if sealed != caller => Err(McpError::invalid_params(
                "requestState belongs to another caller's request",
                None,
            )),
            _ => Ok(()),
        }
    }
}

/// Seals and opens envelopes with the gateway's state key.
pub struct StateSeal {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal")
    }
}

/// A state key is too short to seal with.
#[derive(Debug, thiserror::Error)]
#[error("the request-state key must be at least {minimum} bytes")]
pub struct KeyTooShort {
    pub minimum: usize,
}

impl StateSeal {
    /// A seal with `key` (at least 32 bytes; give every replica the same key).
    ///
    /// # Errors
    /// The key is too short.
    pub fn new(key: &[u8]) -> Result<Self, KeyTooShort> {
        RequestStateCodec::try_new(key.to_vec())
            .map(|codec| Self { codec })
            .map_err(|_| KeyTooShort {
                minimum: RequestStateCodec::MIN_KEY_LENGTH,
            })
    }

    /// A seal with a random key of this process (retries must come back to this process).
    #[must_use]
    pub fn random() -> Self {
        // Three v4 UUIDs: 366 random bits, past the codec's 32-byte minimum.
        let key: Vec<u8> = (0..3)
            .flat_map(|_| uuid::Uuid::new_v4().into_bytes())
            .collect();
        Self::new(&key).unwrap_or_else(|_| unreachable!("48 bytes is past the minimum"))
    }

    /// The client-facing `requestState` for `envelope`, bound to the tool name the client
    /// called (`exposed`).
    #[must_use]
    pub fn seal(&self, exposed: &str, envelope: &Envelope) -> String {
        self.seal_payload(exposed, envelope, STATE_TTL)
    }

    /// Seals any `payload` bound to `context` (the tool name, or another kind of token's
    /// name), valid for `ttl`.
    #[must_use]
    pub fn seal_payload<T: Serialize>(&self, context: &str, payload: &T, ttl: Duration) -> String {
        let payload = serde_json::to_vec(payload).unwrap_or_default();
        self.codec.seal_with(
            &payload,
            &SealOptions::new()
                .associated_data(context.as_bytes())
                .ttl(ttl),
        )
    }

    /// Opens what [`StateSeal::seal_payload`] sealed for `context`; `None` when it was
    /// changed, has expired, was sealed by another key or for another context.
    #[must_use]
    pub fn open_payload<T: serde::de::DeserializeOwned>(
        &self,
        context: &str,
        sealed: &str,
    ) -> Option<T> {
        self.codec
            .open_json_with(sealed, context.as_bytes())
            .inspect_err(|e| tracing::debug!(context, "sealed token refused: {e}"))
            .ok()
    }

    /// Opens a client's `requestState` for a call of `exposed`.
    ///
    /// # Errors
    /// One error for every failure (tampered, expired, another key, another tool), as the
    /// spec asks.
    pub fn open(&self, exposed: &str, sealed: &str) -> Result<Envelope, McpError> {
        self.codec
            .open_json_with(sealed, exposed.as_bytes())
            .map_err(|e| {
                tracing::debug!(tool = exposed, "requestState refused: {e}");
                McpError::invalid_params(
                    "requestState is not valid: it was changed, has expired, or was not issued \
                     by this gateway for this tool",
                    None,
                )
            })
    }
}

/// Whether the client of this request speaks 2026-07-28 or later (it reads `input_required`).
#[must_use]
pub fn client_is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    let version = ctx.meta.protocol_version().or_else(|| {
        ctx.peer
            .peer_info()
            .map(|info| info.protocol_version.clone())
    });
    version.is_some_and(|v| !v.has_initialize())
}

/// The `input_required` result a 2026-07-28 client gets: the backend's input requests, and
/// the sealed envelope as its state.
#[must_use]
pub fn relayed(result: InputRequiredResult, state: String) -> InputRequiredResult {
    let mut out = InputRequiredResult::new(result.input_requests, Some(state));
    out.meta = result.meta;
    out
}

/// Asks a handshake-era client each of `requests` on the call's own stream (this runs inside
/// the client's request handler, so rmcp routes each request there) and gathers the answers.
///
/// # Errors
/// The client refused or failed to answer one of them.
pub async fn ask_client(
    ctx: &RequestContext<RoleServer>,
    requests: BTreeMap<String, InputRequest>,
) -> Result<InputResponses, McpError> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let (what, request) = match request {
            InputRequest::CreateMessage(r) => (
                "sampling/createMessage",
                ServerRequest::CreateMessageRequest(r),
            ),
            InputRequest::Elicitation(r) => ("elicitation/create", ServerRequest::ElicitRequest(r)),
            InputRequest::ListRoots(r) => ("roots/list", ServerRequest::ListRootsRequest(r)),
            other => {
                return Err(McpError::internal_error(
                    format!("a server asked for input of a kind toolforge cannot relay: {other:?}"),
                    None,
                ));
            }
        };
        let answer = ctx.peer.send_request(request).await.map_err(|e| match e {
            rmcp::service::ServiceError::McpError(e) => e,
            other => McpError::internal_error(
                format!("asking the client for {what} failed: {other}"),
                None,
            ),
        })?;
        let value = match answer {
            ClientResult::CreateMessageResult(r) => serde_json::to_value(r),
            ClientResult::ElicitResult(r) => serde_json::to_value(r),
            ClientResult::ListRootsResult(r) => serde_json::to_value(r),
            _ => {
                return Err(McpError::internal_error(
                    format!("the client answered {what} with another kind of result"),
                    None,
                ));
            }
        }
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        responses.insert(key, value);
    }
    Ok(responses)
}

/// The protocol revision a handshake-era session negotiated, for messages.
#[must_use]
pub fn revision(ctx: &RequestContext<RoleServer>) -> Option<ProtocolVersion> {
    ctx.peer
        .peer_info()
        .map(|info| info.protocol_version.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> Envelope {
        Envelope {
            server: "weather".into(),
            tool: "forecast".into(),
            backend_state: Some("opaque-backend-state".into()),
            caller: Some("alice".into()),
            nonce: Some("n1".into()),
            parked: None,
        }
    }

    #[test]
    fn a_parked_call_and_its_caller_travel_sealed() {
        let seal = StateSeal::random();
        let mut parked = envelope();
        parked.parked = Some(ParkedState {
            id: "p1".into(),
            replica: "r1".into(),
            round: 2,
        });
        let opened = seal
            .open("forecast", &seal.seal("forecast", &parked))
            .unwrap();
        assert_eq!(opened, parked);
        assert!(opened.check_caller("alice").is_ok());
        let err = opened.check_caller("mallory").unwrap_err();
        assert!(err.message.contains("another caller"), "{err:?}");
    }

    #[test]
    fn an_envelope_opens_for_the_tool_it_was_sealed_for() {
        let seal = StateSeal::random();
        let sealed = seal.seal("forecast", &envelope());
        assert_eq!(seal.open("forecast", &sealed).unwrap(), envelope());
    }

    #[test]
    fn a_changed_envelope_is_refused() {
        let seal = StateSeal::random();
        let sealed = seal.seal("forecast", &envelope());
        // Flip one character of the payload section.
        let mut bytes = sealed.into_bytes();
        let i = bytes.len() / 2;
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        let err = seal.open("forecast", &tampered).unwrap_err();
        assert!(err.message.contains("requestState is not valid"), "{err:?}");
    }

    #[test]
    fn an_envelope_for_another_tool_or_key_is_refused() {
        let seal = StateSeal::random();
        let sealed = seal.seal("forecast", &envelope());
        assert!(seal.open("charge_card", &sealed).is_err());
        assert!(StateSeal::random().open("forecast", &sealed).is_err());
    }

    #[test]
    fn a_shared_key_lets_another_replica_open_it() {
        let key = [7u8; 32];
        let sealed = StateSeal::new(&key).unwrap().seal("forecast", &envelope());
        assert_eq!(
            StateSeal::new(&key)
                .unwrap()
                .open("forecast", &sealed)
                .unwrap(),
            envelope()
        );
        assert!(StateSeal::new(&[1u8; 8]).is_err());
    }
}

//! The console's governance page: the tools in quarantine with what changed in their
//! definitions and the fingerprint of each pending one (what `toolforge tools diff` prints),
//! and approval by an admin principal of the definition shown, named by that fingerprint (what
//! `toolforge tools approve` does): a definition the server changed since the page showed it
//! is not approved. Who is an admin is the operator's choice
//! (`serve --console-admin PRINCIPAL`); nobody is by default, so the console stays read-only.

use axum::Json;
use axum::extract::State;
use axum::http::{Extensions, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Console;
use crate::error::ApiError;

/// Longest server or tool name an approval may carry, in characters.
const MAX_NAME_CHARS: usize = 256;

fn may_approve(console: &Console, extensions: &Extensions) -> (String, bool) {
    let principal = crate::identity::principal_of(extensions).to_string();
    let admin = console.admins.contains(&principal);
    (principal, admin)
}

fn store_error(e: &impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the tool pins cannot be read: {e}"),
    )
}

/// `GET /ui/api/governance`: the quarantined tools with their field-level changes, and whether
/// this request's principal may approve them.
pub(super) async fn quarantine(
    State(console): State<Console>,
    extensions: Extensions,
) -> Result<Json<Value>, ApiError> {
    // The diffs hold the definitions of tools the policy may hide from this principal.
    super::operators_only(&console.viewer(&extensions), "the quarantine")?;
    let report = console
        .shared
        .pool
        .pin_store()
        .quarantine_report(None, None)
        .map_err(|e| store_error(&e))?;
    let (principal, admin) = may_approve(&console, &extensions);
    Ok(Json(json!({
        "quarantined": report,
        "principal": principal,
        "can_approve": admin,
    })))
}

/// The body of `POST /ui/api/governance/approve`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Approval {
    server: String,
    tool: String,
    /// The fingerprint of the pending definition the admin reviewed.
    fingerprint: String,
}

/// `POST /ui/api/governance/approve`: accepts the quarantined definition whose fingerprint the
/// body names, for an admin principal only (403 otherwise); 409 when another definition is
/// pending by then. The pool offers the tool again within seconds.
pub(super) async fn approve(
    State(console): State<Console>,
    extensions: Extensions,
    body: Result<Json<Approval>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let (principal, admin) = may_approve(&console, &extensions);
    if !admin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "\"{principal}\" may not approve tools from the console; the operator names \
                 admins with `serve --console-admin PRINCIPAL`, or approves with `toolforge tools \
                 approve server/tool FINGERPRINT`"
            ),
        ));
    }
    let Json(Approval {
        server,
        tool,
        fingerprint,
    }) = body.map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "the body must be {{\"server\": \"...\", \"tool\": \"...\", \"fingerprint\": \"...\"}} \
                 (the fingerprint of the definition reviewed): {e}"
            ),
        )
    })?;
    if server.chars().count() > MAX_NAME_CHARS || tool.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("server and tool names are at most {MAX_NAME_CHARS} characters"),
        ));
    }
    if fingerprint.len() != 64 || !fingerprint.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the fingerprint is the 64 hex digits the quarantine report gives for the definition \
             reviewed",
        ));
    }
    let approval = console
        .shared
        .pool
        .pin_store()
        .approve_by_name(&server, &tool, &fingerprint)
        .map_err(|e| store_error(&e))?;
    match approval {
        toolforge_mcp::Approval::Approved => {}
        toolforge_mcp::Approval::NothingPending => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("{server}/{tool} is not quarantined (nothing to approve)"),
            ));
        }
        toolforge_mcp::Approval::Differs { pending } => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "{server}/{tool} was not approved: the definition pending now (fingerprint \
                     {pending}) is not the one reviewed; the server changed it since. Reload and \
                     review it again."
                ),
            ));
        }
    }
    let fingerprint = fingerprint.to_ascii_lowercase();
    tracing::info!(%principal, %server, %tool, %fingerprint, "a quarantined tool was approved from the console");
    Ok(Json(
        json!({"approved": {"server": server, "tool": tool, "fingerprint": fingerprint}, "by": principal}),
    ))
}

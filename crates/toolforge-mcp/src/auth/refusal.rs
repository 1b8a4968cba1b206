//! A refused request told from a transport error: the server's 401 or 403 `insufficient_scope`
//! and its challenge, or the credentials' own failure (a token endpoint's refusal).

use rmcp::transport::streamable_http_client::StreamableHttpError;

/// The server's auth refusal behind a transport error: whether it was a 401 or a 403
/// `insufficient_scope`, and its challenge (empty when the credentials had no token at all).
pub(crate) fn auth_refusal(
    e: &(dyn std::error::Error + 'static),
) -> Option<(crate::auth::token::Refusal, String)> {
    use crate::auth::token::Refusal;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(http) = c.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match http {
                StreamableHttpError::AuthRequired(a) => {
                    Some((Refusal::Unauthorized, a.www_authenticate_header.clone()))
                }
                StreamableHttpError::InsufficientScope(i) => Some((
                    Refusal::InsufficientScope,
                    i.www_authenticate_header.clone(),
                )),
                StreamableHttpError::Auth(
                    rmcp::transport::auth::AuthError::AuthorizationRequired,
                ) => Some((Refusal::Unauthorized, String::new())),
                _ => None,
            };
        }
        cause = c.source();
    }
    None
}

/// [`auth_refusal`] of a failed connection attempt.
pub(crate) fn auth_refusal_of(
    e: &rmcp::service::ClientInitializeError,
) -> Option<(crate::auth::token::Refusal, String)> {
    match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            auth_refusal(error.error.as_ref())
        }
        _ => None,
    }
}

/// The credentials' own failure behind a transport error (a token endpoint's refusal).
pub(crate) fn credentials_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(StreamableHttpError::Auth(
            rmcp::transport::auth::AuthError::AuthorizationFailed(m),
        )) = c.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return Some(m.clone());
        }
        cause = c.source();
    }
    None
}
